//! The providers against in-process fake servers that speak the OpenAI and
//! Anthropic streaming wire formats byte for byte, and the scripted mock.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::{
    ContentPart, MediaContent, ModelMessage, ModelProvider, ModelReply, ModelRequest,
    ModelToolCall, PartKind, ProviderError, ProviderErrorKind, TextSink, ToolSpec, Usage,
};
use agentwire_providers::{ApiKey, MockScenario, MockTurn, ProviderKind, ProviderSettings, build};
use async_trait::async_trait;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use parking_lot::Mutex;
use serde_json::{Value, json};

// ---------------------------------------------------------------- fake server

/// What the fake server answers to one request.
#[derive(Clone)]
enum Reply {
    /// A plain response.
    Status {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: &'static str,
    },
    /// `200 text/event-stream`, each piece after its delay, then the end of
    /// the body, or silence forever when `hang`.
    Stream {
        pieces: Vec<(Duration, Vec<u8>)>,
        hang: bool,
    },
}

impl Reply {
    fn status(status: u16, body: &'static str) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body,
        }
    }

    fn sse(transcript: impl Into<Vec<u8>>) -> Reply {
        Reply::Stream {
            pieces: vec![(Duration::ZERO, transcript.into())],
            hang: false,
        }
    }

    /// The transcript cut every `every` bytes, so that events, lines and
    /// JSON strings split across writes.
    fn sse_in_pieces(transcript: impl Into<Vec<u8>>, every: usize) -> Reply {
        let bytes = transcript.into();
        Reply::Stream {
            pieces: bytes
                .chunks(every)
                .enumerate()
                .map(|(i, c)| {
                    // A pause now and then, so that the pieces really
                    // travel as separate writes.
                    let pause = if i % 8 == 7 { 1 } else { 0 };
                    (Duration::from_millis(pause), c.to_vec())
                })
                .collect(),
            hang: false,
        }
    }
}

struct Recorded {
    /// The client's address: the same port means a reused connection.
    peer: SocketAddr,
    path: String,
    headers: HeaderMap,
    body: Value,
}

struct FakeState {
    /// The replies in order; the last one repeats.
    script: Vec<Reply>,
    requests: Mutex<Vec<Recorded>>,
}

struct Fake {
    addr: SocketAddr,
    state: Arc<FakeState>,
}

impl Fake {
    async fn start(script: Vec<Reply>) -> Fake {
        let state = Arc::new(FakeState {
            script,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap();
        });
        Fake { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn count(&self) -> usize {
        self.state.requests.lock().len()
    }

    fn peer(&self, i: usize) -> SocketAddr {
        self.state.requests.lock()[i].peer
    }

    fn request(&self, i: usize) -> (String, HeaderMap, Value) {
        let requests = self.state.requests.lock();
        let r = &requests[i];
        (r.path.clone(), r.headers.clone(), r.body.clone())
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>>;

async fn handle(
    State(state): State<Arc<FakeState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let index = {
        let mut requests = state.requests.lock();
        requests.push(Recorded {
            peer,
            path: uri.path().to_owned(),
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        requests.len() - 1
    };
    let reply = state.script[index.min(state.script.len() - 1)].clone();
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut response = Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json");
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
        Reply::Stream { pieces, hang } => {
            let stream = futures_util::stream::iter(pieces).then(|(delay, bytes)| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok::<_, Infallible>(Bytes::from(bytes))
            });
            let stream: BodyStream = if hang {
                Box::pin(stream.chain(futures_util::stream::pending()))
            } else {
                Box::pin(stream)
            };
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream; charset=utf-8")
                .header("cache-control", "no-cache")
                .body(Body::from_stream(stream))
                .unwrap()
        }
    }
}

// ------------------------------------------------------------------- helpers

/// Records every delta and when it arrived.
#[derive(Default)]
struct Recorder {
    deltas: Mutex<Vec<(Instant, String)>>,
}

impl Recorder {
    fn texts(&self) -> Vec<String> {
        self.deltas.lock().iter().map(|(_, t)| t.clone()).collect()
    }
}

#[async_trait]
impl TextSink for Recorder {
    async fn text(&self, delta: &str) {
        self.deltas.lock().push((Instant::now(), delta.to_owned()));
    }
}

fn short(mut settings: ProviderSettings) -> ProviderSettings {
    settings.first_token_timeout = Duration::from_millis(400);
    settings.idle_timeout = Duration::from_millis(300);
    settings.max_retries = 2;
    settings.retry_backoff = Duration::from_millis(10);
    settings.max_retry_delay = Duration::from_millis(100);
    settings
}

fn openai(base_url: &str, key: Option<&str>) -> Arc<dyn ModelProvider> {
    build(short(ProviderSettings::new(
        "main",
        "gpt-4o-mini",
        ProviderKind::OpenAi {
            base_url: base_url.to_owned(),
            api_key: key.map(ApiKey::from),
        },
    )))
    .unwrap()
}

fn anthropic(base_url: &str, key: Option<&str>) -> Arc<dyn ModelProvider> {
    build(short(ProviderSettings::new(
        "claude",
        "claude-sonnet-4-5",
        ProviderKind::Anthropic {
            base_url: base_url.to_owned(),
            api_key: key.map(ApiKey::from),
        },
    )))
    .unwrap()
}

fn user(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![ModelMessage::User {
            text: text.to_owned(),
            parts: Vec::new(),
        }],
        ..ModelRequest::default()
    }
}

async fn complete(
    provider: &Arc<dyn ModelProvider>,
    request: &ModelRequest,
) -> (Result<ModelReply, ProviderError>, Recorder) {
    let sink = Recorder::default();
    let result = provider.complete(request, &sink).await;
    (result, sink)
}

// ----------------------------------------------------------- wire transcripts

/// One `chat.completion.chunk` event as OpenAI sends it.
fn oa(choices: &str, usage: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\
\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\
\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{choices}],\"usage\":{usage}}}\n\n"
    )
}

fn oa_delta(delta: &str, finish: &str) -> String {
    oa(
        &format!("{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}"),
        "null",
    )
}

fn oa_text(text: &str) -> String {
    oa_delta(&format!("{{\"content\":{}}}", json!(text)), "null")
}

const OA_USAGE: &str = "{\"prompt_tokens\":19,\"completion_tokens\":10,\"total_tokens\":29,\
\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":\
{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}";

fn oa_text_transcript(texts: &[&str]) -> String {
    let mut t = oa_delta(
        "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}",
        "null",
    );
    for text in texts {
        t.push_str(&oa_text(text));
    }
    t.push_str(&oa_delta("{}", "\"stop\""));
    t.push_str(&oa("", OA_USAGE));
    t.push_str("data: [DONE]\n\n");
    t
}

fn oa_tool_delta(index: u32, head: Option<(&str, &str)>, arguments: &str) -> String {
    let call = match head {
        Some((id, name)) => format!(
            "{{\"index\":{index},\"id\":\"{id}\",\"type\":\"function\",\"function\":{{\"name\":\"{name}\",\"arguments\":{}}}}}",
            json!(arguments)
        ),
        None => format!(
            "{{\"index\":{index},\"function\":{{\"arguments\":{}}}}}",
            json!(arguments)
        ),
    };
    oa_delta(&format!("{{\"tool_calls\":[{call}]}}"), "null")
}

/// One Anthropic event: `event: <type>\ndata: <json>\n\n`.
fn an(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn an_start() -> String {
    an(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
            "type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929",
            "stop_reason":null,"stop_sequence":null,
            "usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}),
    )
}

fn an_text_block(index: u32, texts: &[&str]) -> String {
    let mut t = an(
        "content_block_start",
        json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
    );
    for text in texts {
        t.push_str(&an(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":text}}),
        ));
    }
    t.push_str(&an(
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    ));
    t
}

fn an_tool_block(index: u32, id: &str, name: &str, fragments: &[&str]) -> String {
    let mut t = an(
        "content_block_start",
        json!({"type":"content_block_start","index":index,
            "content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}),
    );
    for fragment in fragments {
        t.push_str(&an(
            "content_block_delta",
            json!({"type":"content_block_delta","index":index,
                "delta":{"type":"input_json_delta","partial_json":fragment}}),
        ));
    }
    t.push_str(&an(
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    ));
    t
}

fn an_end(stop_reason: &str, output_tokens: u64) -> String {
    let mut t = an(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":stop_reason,"stop_sequence":null},
            "usage":{"output_tokens":output_tokens}}),
    );
    t.push_str(&an("message_stop", json!({"type":"message_stop"})));
    t
}

const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

// -------------------------------------------------------------------- openai

#[tokio::test]
async fn openai_streams_text_deltas_in_order_with_usage() {
    let fake = Fake::start(vec![Reply::sse(oa_text_transcript(&[
        "Hello",
        " there",
        ", how",
        " can I help?",
    ]))])
    .await;
    let provider = openai(&format!("{}/v1", fake.url()), Some("sk-test-key"));
    let (result, sink) = complete(&provider, &user("hi")).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Hello", " there", ", how", " can I help?"]);
    assert_eq!(reply.text, "Hello there, how can I help?");
    assert!(reply.tool_calls.is_empty());
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 19,
            output_tokens: 10
        })
    );
    let (path, headers, body) = fake.request(0);
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(headers["authorization"], "Bearer sk-test-key");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["accept"], "text/event-stream");
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[tokio::test]
async fn openai_assembles_tool_calls_from_fragmented_deltas() {
    let mut t = oa_delta(
        "{\"role\":\"assistant\",\"content\":null,\"refusal\":null}",
        "null",
    );
    t.push_str(&oa_text("Let me check."));
    t.push_str(&oa_tool_delta(
        0,
        Some(("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather")),
        "",
    ));
    for fragment in ["{\"", "city", "\":\"", "Paris", "\",\"unit\":\"c", "\"}"] {
        t.push_str(&oa_tool_delta(0, None, fragment));
    }
    t.push_str(&oa_tool_delta(
        1,
        Some(("call_kLmN0pQrStUvWxYz12345678", "get_time")),
        "{\"tz\":",
    ));
    t.push_str(&oa_tool_delta(1, None, "\"Europe/Paris\"}"));
    t.push_str(&oa_tool_delta(2, Some(("call_broken", "noisy")), "{\"a\":"));
    t.push_str(&oa_delta("{}", "\"tool_calls\""));
    t.push_str(&oa("", OA_USAGE));
    t.push_str("data: [DONE]\n\n");
    // Cut every 7 bytes: events, lines and JSON split across writes.
    let fake = Fake::start(vec![Reply::sse_in_pieces(t, 7)]).await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("weather?")).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Let me check."]);
    assert_eq!(reply.text, "Let me check.");
    assert_eq!(
        reply.tool_calls,
        vec![
            ModelToolCall {
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Paris", "unit": "c"}),
            },
            ModelToolCall {
                id: "call_kLmN0pQrStUvWxYz12345678".into(),
                name: "get_time".into(),
                arguments: json!({"tz": "Europe/Paris"}),
            },
            ModelToolCall {
                id: "call_broken".into(),
                name: "noisy".into(),
                arguments: json!({"raw": "{\"a\":"}),
            },
        ]
    );
    assert_eq!(reply.usage.unwrap().output_tokens, 10);
}

#[tokio::test]
async fn openai_sends_no_authorization_without_a_key_and_pools_connections() {
    let fake = Fake::start(vec![Reply::sse(oa_text_transcript(&["ok"]))]).await;
    let provider = openai(&format!("{}/v1/", fake.url()), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "ok");
    let (path, headers, _) = fake.request(0);
    assert_eq!(path, "/v1/chat/completions");
    assert!(headers.get("authorization").is_none());
    // The second request reuses the pooled connection.
    let (result, _) = complete(&provider, &user("again")).await;
    assert_eq!(result.unwrap().text, "ok");
    assert_eq!(fake.peer(0), fake.peer(1));
}

#[tokio::test]
async fn openai_maps_the_request_body() {
    let fake = Fake::start(vec![Reply::sse(oa_text_transcript(&["ok"]))]).await;
    let provider = openai(&fake.url(), Some("sk-x"));
    let request = ModelRequest {
        system: Some("You are terse.".into()),
        messages: vec![
            ModelMessage::User {
                text: "What is in the picture?".into(),
                parts: vec![
                    ContentPart::text("What is in the picture?"),
                    ContentPart::media(
                        PartKind::Image,
                        MediaContent {
                            data: Some("iVBORw0KGgoAAAANSUhEUg==".into()),
                            mime_type: "image/png".into(),
                            ..MediaContent::default()
                        },
                    ),
                    ContentPart::media(
                        PartKind::Video,
                        MediaContent {
                            url: Some("https://example.com/v.mp4".into()),
                            mime_type: "video/mp4".into(),
                            ..MediaContent::default()
                        },
                    ),
                ],
            },
            ModelMessage::Assistant {
                text: "Let me look it up.".into(),
                tool_calls: vec![ModelToolCall {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments: json!({"q": "cat"}),
                }],
            },
            ModelMessage::Tool {
                call_id: "call_1".into(),
                name: "lookup".into(),
                content: "{\"found\":true}".into(),
                is_error: false,
            },
        ],
        tools: vec![ToolSpec {
            name: "lookup".into(),
            description: "Looks things up".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }],
        scenario: Some("never-sent".into()),
    };
    let (result, _) = complete(&provider, &request).await;
    result.unwrap();
    let (_, _, body) = fake.request(0);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}},
                {"type": "text", "text": "[video attachment: video/mp4]"},
            ]},
            {"role": "assistant", "content": "Let me look it up.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"cat\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"found\":true}"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "lookup",
            "description": "Looks things up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }}])
    );
    assert!(!body.to_string().contains("never-sent"));
}

#[tokio::test]
async fn openai_forwards_deltas_as_they_drip_in() {
    let gap = Duration::from_millis(120);
    let mut pieces = vec![(
        Duration::ZERO,
        oa_delta("{\"role\":\"assistant\",\"content\":\"\"}", "null").into_bytes(),
    )];
    for text in ["one", " two", " three"] {
        pieces.push((gap, oa_text(text).into_bytes()));
    }
    let mut tail = oa_delta("{}", "\"stop\"");
    tail.push_str("data: [DONE]\n\n");
    pieces.push((gap, tail.into_bytes()));
    let fake = Fake::start(vec![Reply::Stream {
        pieces,
        hang: false,
    }])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("count")).await;
    let ended = Instant::now();
    assert_eq!(result.unwrap().text, "one two three");
    let deltas = sink.deltas.lock().clone();
    assert_eq!(deltas.len(), 3);
    // Each delta reached the sink when its chunk arrived, not at the end.
    assert!(ended - deltas[0].0 >= gap * 2, "{:?}", ended - deltas[0].0);
    assert!(deltas[1].0 - deltas[0].0 >= gap / 2);
    assert!(deltas[2].0 - deltas[1].0 >= gap / 2);
    assert!(ended - deltas[2].0 >= gap / 2);
}

// ----------------------------------------------------------------- anthropic

#[tokio::test]
async fn anthropic_streams_text_and_usage() {
    let mut t = an_start();
    t.push_str(PING);
    t.push_str(&an_text_block(0, &["Hello", "! How", " can I help?"]));
    t.push_str(&an_end("end_turn", 15));
    let fake = Fake::start(vec![Reply::sse(t)]).await;
    let provider = anthropic(&fake.url(), Some("sk-ant-test"));
    let request = ModelRequest {
        system: Some("Be kind.".into()),
        ..user("hi")
    };
    let (result, sink) = complete(&provider, &request).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Hello", "! How", " can I help?"]);
    assert_eq!(reply.text, "Hello! How can I help?");
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 25,
            output_tokens: 15
        })
    );
    let (path, headers, body) = fake.request(0);
    assert_eq!(path, "/v1/messages");
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert!(headers.get("authorization").is_none());
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["system"], "Be kind.");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[tokio::test]
async fn anthropic_assembles_tool_use_from_fragmented_json() {
    let mut t = an_start();
    t.push_str(&an_text_block(0, &["Checking both."]));
    t.push_str(&an_tool_block(
        1,
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "get_weather",
        &[
            "",
            "{\"location\": \"San Fra",
            "ncisco, CA\", \"unit\": \"fah",
            "renheit\"}",
        ],
    ));
    t.push_str(PING);
    t.push_str(&an_tool_block(2, "toolu_02Ab", "get_time", &[]));
    t.push_str(&an_tool_block(3, "toolu_03Cd", "bad", &["{\"x\": tru"]));
    t.push_str(&an_end("tool_use", 89));
    // \r\n line endings and cuts every 5 bytes.
    let t = t.replace('\n', "\r\n");
    let fake = Fake::start(vec![Reply::sse_in_pieces(t, 5)]).await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, sink) = complete(&provider, &user("weather and time?")).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Checking both."]);
    assert_eq!(
        reply.tool_calls,
        vec![
            ModelToolCall {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            },
            ModelToolCall {
                id: "toolu_02Ab".into(),
                name: "get_time".into(),
                arguments: json!({}),
            },
            ModelToolCall {
                id: "toolu_03Cd".into(),
                name: "bad".into(),
                arguments: json!({"raw": "{\"x\": tru"}),
            },
        ]
    );
    assert_eq!(reply.usage.unwrap().output_tokens, 89);
}

#[tokio::test]
async fn anthropic_maps_the_request_body() {
    let mut t = an_start();
    t.push_str(&an_text_block(0, &["ok"]));
    t.push_str(&an_end("end_turn", 1));
    let fake = Fake::start(vec![Reply::sse(t)]).await;
    let provider = anthropic(&fake.url(), None);
    let request = ModelRequest {
        system: Some("System here.".into()),
        messages: vec![
            ModelMessage::User {
                text: "Describe".into(),
                parts: vec![
                    ContentPart::media(
                        PartKind::Image,
                        MediaContent {
                            data: Some("/9j/4AAQSkZJRg==".into()),
                            mime_type: "image/jpeg".into(),
                            ..MediaContent::default()
                        },
                    ),
                    ContentPart::media(
                        PartKind::Image,
                        MediaContent {
                            url: Some("https://example.com/a.png".into()),
                            mime_type: "image/png".into(),
                            ..MediaContent::default()
                        },
                    ),
                ],
            },
            ModelMessage::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ModelToolCall {
                        id: "toolu_1".into(),
                        name: "one".into(),
                        arguments: json!({"a": 1}),
                    },
                    ModelToolCall {
                        id: "toolu_2".into(),
                        name: "two".into(),
                        arguments: json!({}),
                    },
                ],
            },
            ModelMessage::Tool {
                call_id: "toolu_1".into(),
                name: "one".into(),
                content: "1".into(),
                is_error: false,
            },
            ModelMessage::Tool {
                call_id: "toolu_2".into(),
                name: "two".into(),
                content: "failed".into(),
                is_error: true,
            },
        ],
        tools: vec![ToolSpec {
            name: "one".into(),
            description: "First".into(),
            parameters: json!({"type": "object"}),
        }],
        scenario: None,
    };
    let (result, _) = complete(&provider, &request).await;
    result.unwrap();
    let (_, headers, body) = fake.request(0);
    assert!(headers.get("x-api-key").is_none());
    assert_eq!(body["system"], "System here.");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Describe"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "one", "input": {"a": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "two", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "failed", "is_error": true},
            ]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "one", "description": "First", "input_schema": {"type": "object"}}])
    );
}

#[tokio::test]
async fn anthropic_overloaded_error_event_before_text_is_retried() {
    let mut overloaded = an_start();
    overloaded.push_str(&an(
        "error",
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded sk-SECRET"}}),
    ));
    let mut ok = an_start();
    ok.push_str(&an_text_block(0, &["fine"]));
    ok.push_str(&an_end("end_turn", 2));
    let fake = Fake::start(vec![Reply::sse(overloaded.clone()), Reply::sse(ok)]).await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "fine");
    assert_eq!(fake.count(), 2);

    let fake = Fake::start(vec![Reply::sse(overloaded)]).await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider anthropic model claude-sonnet-4-5: stream error (overloaded_error) after 3 attempts"
    );
    assert_eq!(fake.count(), 3);
}

#[tokio::test]
async fn anthropic_529_and_403_are_classified() {
    let fake = Fake::start(vec![Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    )])
    .await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Unavailable);
    assert_eq!(fake.count(), 3);

    let fake = Fake::start(vec![Reply::status(
        403,
        r#"{"type":"error","error":{"type":"permission_error","message":"key sk-SECRET lacks access"}}"#,
    )])
    .await;
    let provider = anthropic(&fake.url(), Some("sk-SECRET"));
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::AuthFailed);
    assert!(!error.message.contains("SECRET"), "{}", error.message);
    assert_eq!(
        error.message,
        "provider anthropic model claude-sonnet-4-5: authentication failed (HTTP 403)"
    );
    assert_eq!(fake.count(), 1);
}

// -------------------------------------------------------------------- faults

#[tokio::test]
async fn fault_429_then_success_is_retried() {
    let fake = Fake::start(vec![
        Reply::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        ),
        Reply::sse(oa_text_transcript(&["after retry"])),
    ])
    .await;
    let provider = openai(&fake.url(), Some("sk-x"));
    let (result, sink) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "after retry");
    assert_eq!(sink.texts(), ["after retry"]);
    assert_eq!(fake.count(), 2);
}

#[tokio::test]
async fn fault_429_persistent_honours_retry_after_then_rate_limited() {
    let fake = Fake::start(vec![Reply::Status {
        status: 429,
        // Capped by max_retry_delay (100 ms in these tests).
        headers: vec![("retry-after", "30")],
        body: r#"{"error":{"message":"Rate limit reached for sk-SECRET","type":"requests"}}"#,
    }])
    .await;
    let provider = openai(&fake.url(), Some("sk-SECRET"));
    let started = Instant::now();
    let (result, sink) = complete(&provider, &user("hi")).await;
    let elapsed = started.elapsed();
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::RateLimited);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: rate limited (HTTP 429) after 3 attempts"
    );
    assert_eq!(fake.count(), 3);
    assert!(sink.texts().is_empty());
    // Two waits of the capped Retry-After (100 ms), not the 10/20 ms backoff.
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
}

#[tokio::test]
async fn fault_503_persistent_is_unavailable_after_the_retries() {
    let fake = Fake::start(vec![Reply::status(503, "upstream connect error")]).await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: unavailable (HTTP 503) after 3 attempts"
    );
    assert_eq!(fake.count(), 3);

    // 502 and 504 the same way, and a recovery within the budget succeeds.
    let fake = Fake::start(vec![
        Reply::status(502, "bad gateway"),
        Reply::status(504, "timeout"),
        Reply::sse(oa_text_transcript(&["third time"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "third time");
    assert_eq!(fake.count(), 3);
}

#[tokio::test]
async fn fault_500_is_unavailable_without_a_retry() {
    let fake = Fake::start(vec![
        Reply::status(500, r#"{"error":{"message":"The server had an error"}}"#),
        Reply::sse(oa_text_transcript(&["never"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: server error (HTTP 500)"
    );
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_401_is_auth_failed_and_never_echoes_the_body() {
    let fake = Fake::start(vec![Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-SECRET. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    )])
    .await;
    let provider = openai(&fake.url(), Some("sk-SECRET"));
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::AuthFailed);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: authentication failed (HTTP 401)"
    );
    assert!(!error.message.contains("SECRET"));
    assert!(!format!("{error:?}").contains("SECRET"));
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_other_4xx_is_failed_without_a_retry() {
    let fake = Fake::start(vec![Reply::status(
        400,
        r#"{"error":{"message":"Invalid 'messages[0].content'","type":"invalid_request_error"}}"#,
    )])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Failed);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: request rejected (HTTP 400)"
    );
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_unreachable_port_is_unavailable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider = openai(&format!("http://{addr}/v1"), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: unreachable after 3 attempts"
    );
}

#[tokio::test]
async fn fault_server_that_accepts_and_never_answers_is_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(VecDeque::new()));
    let held = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            held.lock().push_back(socket);
        }
    });
    let provider = anthropic(&format!("http://{addr}"), Some("k"));
    let started = Instant::now();
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Timeout);
    assert_eq!(
        error.message,
        "provider anthropic model claude-sonnet-4-5: no response within 400ms"
    );
    assert!(started.elapsed() < Duration::from_millis(1000));
    assert_eq!(accepted.lock().len(), 1, "a timeout is not retried");
}

#[tokio::test]
async fn fault_headers_then_no_body_is_timeout() {
    let fake = Fake::start(vec![Reply::Stream {
        pieces: Vec::new(),
        hang: true,
    }])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Timeout);
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_stream_that_hangs_after_one_chunk_is_stalled() {
    let fake = Fake::start(vec![Reply::Stream {
        pieces: vec![(Duration::ZERO, oa_text("partial").into_bytes())],
        hang: true,
    }])
    .await;
    let provider = openai(&fake.url(), None);
    let started = Instant::now();
    let (result, sink) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Stalled);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: stream stalled for 300ms"
    );
    assert_eq!(sink.texts(), ["partial"]);
    assert_eq!(fake.count(), 1);
    assert!(started.elapsed() < Duration::from_millis(1000));

    // Anthropic the same, and a ping keeps nothing alive once it stops.
    let mut t = an_start();
    t.push_str(PING);
    let fake = Fake::start(vec![Reply::Stream {
        pieces: vec![(Duration::ZERO, t.into_bytes())],
        hang: true,
    }])
    .await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Stalled);
}

#[tokio::test]
async fn fault_stream_cut_after_text_is_not_retried() {
    // The body ends before `[DONE]` or a finish_reason: interrupted. Text
    // already reached the sink, so no retry (it would repeat the text).
    let fake = Fake::start(vec![
        Reply::sse(oa_text("half an ans")),
        Reply::sse(oa_text_transcript(&["never"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(sink.texts(), ["half an ans"]);
    assert_eq!(fake.count(), 1);

    // Cut before any text: retried.
    let fake = Fake::start(vec![
        Reply::sse(oa_delta(
            "{\"role\":\"assistant\",\"content\":\"\"}",
            "null",
        )),
        Reply::sse(oa_text_transcript(&["whole"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "whole");
    assert_eq!(sink.texts(), ["whole"]);
    assert_eq!(fake.count(), 2);
}

#[tokio::test]
async fn fault_garbage_stream_is_failed() {
    let fake = Fake::start(vec![Reply::sse("data: {not json}\n\n")]).await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Failed);
    assert_eq!(fake.count(), 1);
}

// ---------------------------------------------------------------------- mock

fn mock(default_response: Option<&str>) -> Arc<dyn ModelProvider> {
    let scenarios = BTreeMap::from([
        (
            "default".to_owned(),
            MockScenario {
                turns: BTreeMap::from([(1, MockTurn::Text("Default scenario, turn one.".into()))]),
            },
        ),
        (
            "tools".to_owned(),
            MockScenario {
                turns: BTreeMap::from([
                    (
                        1,
                        MockTurn::ToolCalls {
                            content: Some("Let me find where you are.".into()),
                            tool_calls: vec![
                                ("get_location".into(), json!({"accuracy": "high"})),
                                ("get_time".into(), json!({})),
                            ],
                        },
                    ),
                    (
                        2,
                        MockTurn::Text(
                            "Based on your coordinates, you are in Denver, Colorado.".into(),
                        ),
                    ),
                ]),
            },
        ),
    ]);
    build(ProviderSettings::new(
        "mock-llm",
        "mock-model",
        ProviderKind::Mock {
            default_response: default_response.map(str::to_owned),
            scenarios,
        },
    ))
    .unwrap()
}

fn scenario(id: Option<&str>, messages: Vec<ModelMessage>) -> ModelRequest {
    ModelRequest {
        messages,
        scenario: id.map(str::to_owned),
        ..ModelRequest::default()
    }
}

fn user_msg(text: &str) -> ModelMessage {
    ModelMessage::User {
        text: text.into(),
        parts: Vec::new(),
    }
}

#[tokio::test]
async fn mock_turns_advance_through_a_tool_round_trip() {
    let provider = mock(None);
    let mut messages = vec![user_msg("where am I?")];
    let (result, sink) = complete(&provider, &scenario(Some("tools"), messages.clone())).await;
    let reply = result.unwrap();
    assert_eq!(reply.text, "Let me find where you are.");
    assert_eq!(sink.texts(), ["Let me find where yo", "u are."]);
    assert_eq!(
        reply.tool_calls,
        vec![
            ModelToolCall {
                id: "call_0_get_location".into(),
                name: "get_location".into(),
                arguments: json!({"accuracy": "high"}),
            },
            ModelToolCall {
                id: "call_1_get_time".into(),
                name: "get_time".into(),
                arguments: json!({}),
            },
        ]
    );
    messages.push(ModelMessage::Assistant {
        text: reply.text,
        tool_calls: reply.tool_calls,
    });
    for (id, content) in [
        ("call_0_get_location", "39.7,-104.9"),
        ("call_1_get_time", "noon"),
    ] {
        messages.push(ModelMessage::Tool {
            call_id: id.into(),
            name: "x".into(),
            content: content.into(),
            is_error: false,
        });
    }
    let (result, sink) = complete(&provider, &scenario(Some("tools"), messages.clone())).await;
    let reply = result.unwrap();
    assert_eq!(
        reply.text,
        "Based on your coordinates, you are in Denver, Colorado."
    );
    assert!(reply.tool_calls.is_empty());
    assert_eq!(
        sink.texts(),
        [
            "Based on your coordi",
            "nates, you are in De",
            "nver, Colorado."
        ]
    );
    // Turn 3 is not scripted: the fallback text.
    messages.push(ModelMessage::Assistant {
        text: reply.text,
        tool_calls: Vec::new(),
    });
    messages.push(user_msg("thanks"));
    let (result, _) = complete(&provider, &scenario(Some("tools"), messages)).await;
    assert_eq!(
        result.unwrap().text,
        "Mock response for provider mock-llm model mock-model"
    );
}

#[tokio::test]
async fn mock_picks_the_default_scenario_without_one() {
    let provider = mock(None);
    for id in [None, Some("")] {
        let (result, sink) = complete(&provider, &scenario(id, vec![user_msg("hi")])).await;
        assert_eq!(result.unwrap().text, "Default scenario, turn one.");
        assert_eq!(sink.texts(), ["Default scenario, tu", "rn one."]);
    }
}

#[tokio::test]
async fn mock_answers_default_response_then_fallback_text() {
    let with_default = mock(Some("Canned answer from the default response."));
    let (result, sink) = complete(
        &with_default,
        &scenario(Some("unknown"), vec![user_msg("hi")]),
    )
    .await;
    let reply = result.unwrap();
    assert_eq!(reply.text, "Canned answer from the default response.");
    assert_eq!(
        sink.texts(),
        ["Canned answer from t", "he default response."]
    );
    assert_eq!(reply.usage, None);

    let without = mock(None);
    let (result, sink) = complete(&without, &scenario(Some("unknown"), vec![user_msg("hi")])).await;
    assert_eq!(
        result.unwrap().text,
        "Mock response for provider mock-llm model mock-model"
    );
    assert_eq!(
        sink.texts(),
        [
            "Mock response for pr",
            "ovider mock-llm mode",
            "l mock-model"
        ]
    );
    // Chunks count characters, not bytes.
    let provider = build(ProviderSettings::new(
        "m",
        "x",
        ProviderKind::Mock {
            default_response: Some("ü".repeat(25)),
            scenarios: BTreeMap::new(),
        },
    ))
    .unwrap();
    let (_, sink) = complete(&provider, &user("hi")).await;
    assert_eq!(sink.texts(), ["ü".repeat(20), "ü".repeat(5)]);
}

//! What the test modules share: an in-process fake server that answers
//! with scripted replies and records every request, a [`TextSink`] that
//! records deltas, the provider builders with short timeouts, and builders
//! of OpenAI and Anthropic streaming transcripts byte for byte.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::{
    ContentPart, MediaContent, ModelMessage, ModelProvider, ModelReply, ModelRequest, PartKind,
    ProviderError, TextSink,
};
use agentwire_providers::{ApiKey, ProviderKind, ProviderSettings, build};
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
pub(crate) enum Reply {
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
    pub(crate) fn status(status: u16, body: &'static str) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body,
        }
    }

    pub(crate) fn sse(transcript: impl Into<Vec<u8>>) -> Reply {
        Reply::Stream {
            pieces: vec![(Duration::ZERO, transcript.into())],
            hang: false,
        }
    }

    /// The transcript cut every `every` bytes, so that events, lines and
    /// JSON strings split across writes.
    pub(crate) fn sse_in_pieces(transcript: impl Into<Vec<u8>>, every: usize) -> Reply {
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

pub(crate) struct Fake {
    addr: SocketAddr,
    state: Arc<FakeState>,
}

impl Fake {
    pub(crate) async fn start(script: Vec<Reply>) -> Fake {
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

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn count(&self) -> usize {
        self.state.requests.lock().len()
    }

    pub(crate) fn peer(&self, i: usize) -> SocketAddr {
        self.state.requests.lock()[i].peer
    }

    pub(crate) fn request(&self, i: usize) -> (String, HeaderMap, Value) {
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
pub(crate) struct Recorder {
    pub(crate) deltas: Mutex<Vec<(Instant, String)>>,
}

impl Recorder {
    pub(crate) fn texts(&self) -> Vec<String> {
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
    // The binary's `main` installs rustls' crypto provider before any
    // provider is built (the library installs none, and reqwest needs one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    settings.first_token_timeout = Duration::from_millis(400);
    settings.idle_timeout = Duration::from_millis(300);
    settings.max_retries = 2;
    settings.retry_backoff = Duration::from_millis(10);
    settings.max_retry_delay = Duration::from_millis(100);
    settings
}

pub(crate) fn openai(base_url: &str, key: Option<&str>) -> Arc<dyn ModelProvider> {
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

pub(crate) fn anthropic(base_url: &str, key: Option<&str>) -> Arc<dyn ModelProvider> {
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

/// A media part of `kind`: at `source` when it is a URL, else with
/// `source` as its bytes, base64.
pub(crate) fn media(kind: PartKind, mime: &str, source: &str) -> ContentPart {
    let (data, url) = if source.starts_with("https://") {
        (None, Some(source.into()))
    } else {
        (Some(source.into()), None)
    };
    ContentPart::media(
        kind,
        MediaContent {
            data,
            url,
            mime_type: mime.into(),
            ..MediaContent::default()
        },
    )
}

pub(crate) fn user(text: &str) -> ModelRequest<'static> {
    ModelRequest {
        messages: vec![ModelMessage::User {
            text: text.to_owned().into(),
            parts: Default::default(),
        }],
        ..ModelRequest::default()
    }
}

pub(crate) async fn complete(
    provider: &Arc<dyn ModelProvider>,
    request: &ModelRequest<'_>,
) -> (Result<ModelReply, ProviderError>, Recorder) {
    let sink = Recorder::default();
    let result = provider.complete(request, &sink).await;
    (result, sink)
}

// ----------------------------------------------------------- wire transcripts

/// One `chat.completion.chunk` event as OpenAI sends it.
pub(crate) fn oa(choices: &str, usage: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\
\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\
\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{choices}],\"usage\":{usage}}}\n\n"
    )
}

pub(crate) fn oa_delta(delta: &str, finish: &str) -> String {
    oa(
        &format!("{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}"),
        "null",
    )
}

pub(crate) fn oa_text(text: &str) -> String {
    oa_delta(&format!("{{\"content\":{}}}", json!(text)), "null")
}

pub(crate) const OA_USAGE: &str = "{\"prompt_tokens\":19,\"completion_tokens\":10,\"total_tokens\":29,\
\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":\
{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}";

pub(crate) fn oa_text_transcript(texts: &[&str]) -> String {
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

pub(crate) fn oa_tool_delta(index: u32, head: Option<(&str, &str)>, arguments: &str) -> String {
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
pub(crate) fn an(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

pub(crate) fn an_start() -> String {
    an(
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
            "type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929",
            "stop_reason":null,"stop_sequence":null,
            "usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}),
    )
}

pub(crate) fn an_text_block(index: u32, texts: &[&str]) -> String {
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

pub(crate) fn an_tool_block(index: u32, id: &str, name: &str, fragments: &[&str]) -> String {
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

pub(crate) fn an_end(stop_reason: &str, output_tokens: u64) -> String {
    let mut t = an(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":stop_reason,"stop_sequence":null},
            "usage":{"output_tokens":output_tokens}}),
    );
    t.push_str(&an("message_stop", json!({"type":"message_stop"})));
    t
}

pub(crate) const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

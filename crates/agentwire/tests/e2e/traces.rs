//! Traces: the real binary exports its spans over OTLP/HTTP to a receiver
//! here that decodes the real protobuf (`ExportTraceServiceRequest`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::credentials::{ALICE_KEY, sha256_hex};
use crate::fake_http::{Answer, FakeHttp, openai_model, openai_text, openai_tool_call};
use crate::support::{Client, Dialect, agentwire_serve, start_child};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const PROMPT: &str = "What is the weather in Oslo, secret-prompt-words?";
const REPLY: &str = "It is 3 degrees, secret-reply-words.";
const PROVIDER_KEY: &str = "sk-provider-secret-0123456789";

/// Every export request's spans, with the resource's `service.name`.
#[derive(Default)]
struct Received {
    requests: usize,
    spans: Vec<Span>,
    service_names: Vec<String>,
}

/// An OTLP receiver on `127.0.0.1:0`: OTLP/HTTP (`POST /v1/traces`) and
/// OTLP/gRPC over cleartext HTTP/2 (the `TraceService/Export` method; a
/// gRPC message is a 5-byte prefix, uncompressed here, and the protobuf).
/// Returns the HTTP URL; the gRPC one is the same origin.
async fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    async fn export(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> Vec<u8> {
        record(
            &received,
            ExportTraceServiceRequest::decode(body).expect("OTLP protobuf"),
        )
        .await;
        // An empty ExportTraceServiceResponse.
        Vec::new()
    }
    async fn export_grpc(
        State(received): State<Arc<Mutex<Received>>>,
        body: Bytes,
    ) -> ([(&'static str, &'static str); 2], Vec<u8>) {
        assert_eq!(body[0], 0, "an uncompressed gRPC message");
        let length = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        let message = body.slice(5..5 + length);
        record(
            &received,
            ExportTraceServiceRequest::decode(message).expect("OTLP protobuf"),
        )
        .await;
        (
            [("content-type", "application/grpc"), ("grpc-status", "0")],
            vec![0, 0, 0, 0, 0],
        )
    }
    async fn record(received: &Mutex<Received>, request: ExportTraceServiceRequest) {
        let mut received = received.lock().await;
        received.requests += 1;
        for resource_spans in request.resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            for attribute in resource.attributes {
                if attribute.key == "service.name" {
                    received.service_names.push(text_of(&attribute.value));
                }
            }
            for scope in resource_spans.scope_spans {
                received.spans.extend(scope.spans);
            }
        }
    }
    let app = axum::Router::new()
        .route("/v1/traces", post(export))
        .route(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            post(export_grpc),
        )
        .with_state(received.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

fn text_of(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| text_of(&a.value))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The model asks for the weather tool, then answers.
async fn fakes() -> (FakeHttp, FakeHttp) {
    let tool = FakeHttp::start(|_, _| Answer::json(r#"{"temperature_c":3}"#)).await;
    let model = openai_model(vec![
        openai_tool_call("call_W3x", "get_weather", &json!({"city": "Oslo"})),
        openai_text(REPLY),
    ])
    .await;
    (model, tool)
}

fn config(model: &FakeHttp, tool: &FakeHttp, db: &std::path::Path, telemetry: &str) -> String {
    format!(
        r#"server:
  listen: 127.0.0.1:0
storage:
  sessions: sqlite://{db}
auth:
  pseudonym_key: "a-pseudonym-key-for-tests"
  api_keys:
    - id: alice-key
      sha256: "{key}"
      subject: alice
{telemetry}
providers:
  - name: fake-openai
    type: openai
    base_url: http://{model}/v1
    model: gpt-4o-mini
    api_key: {PROVIDER_KEY}
tools:
  - name: get_weather
    type: http
    description: Current weather for a city
    parameters: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    request:
      method: GET
      url: "http://{tool}/weather/{{{{city}}}}"
agents:
  - name: weather
    handler: runtime
    provider: fake-openai
    tools: [get_weather]
"#,
        db = db.display(),
        key = sha256_hex(ALICE_KEY),
        model = model.addr,
        tool = tool.addr,
    )
}

/// The log lines `serve` wrote after its listening line.
type Logs = Arc<Mutex<Vec<String>>>;

/// `agentwire serve` on `config`, the address it logged, and its later
/// log lines.
async fn serve(config: &str, dir: &std::path::Path, env: &[(&str, &str)]) -> (Child, String, Logs) {
    let path = dir.join("agentwire.yaml");
    std::fs::write(&path, config).unwrap();
    let mut command = agentwire_serve(&path);
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .envs(env.iter().copied());
    let (child, address, mut lines) = start_child(command).await;
    // Keep reading its logs so it never blocks on a full pipe.
    let logs = Logs::default();
    let kept = logs.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            kept.lock().await.push(line);
        }
    });
    (child, address, logs)
}

/// One weather turn with `traceparent`, to its `done`.
async fn one_turn(address: &str) {
    let mut request = format!("ws://{address}/ws?agent=weather")
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "traceparent",
        format!("00-{TRACE_ID}-{PARENT_ID}-01").parse().unwrap(),
    );
    headers.insert(
        "authorization",
        format!("Bearer {ALICE_KEY}").parse().unwrap(),
    );
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut client = Client::new(ws, Dialect::Omnia);
    assert_eq!(client.recv().await["type"], "connected");
    client.say(PROMPT).await;
    let frames = client.recv_turn().await;
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["content"], REPLY);
    let _ = client.send_message(Message::Close(None)).await;
}

/// SIGTERM, then the exit: the drain ends and the batched spans go out.
async fn stop(mut child: Child) {
    let pid = child.id().unwrap().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("agentwire exits after SIGTERM")
        .unwrap();
    assert!(exit.success(), "{exit}");
}

/// The spans of one weather turn: one of each, and the model calls and
/// store writes under the turn.
struct TurnSpans<'a> {
    upgrade: &'a Span,
    connection: &'a Span,
    turn: &'a Span,
    tool_call: &'a Span,
    model_calls: Vec<&'a Span>,
    writes: Vec<&'a Span>,
}

impl<'a> TurnSpans<'a> {
    /// Picks them out of `spans`: exactly one upgrade, connection, turn and
    /// tool call, two model calls, and at least two writes.
    fn of(spans: &'a [Span]) -> TurnSpans<'a> {
        let named =
            |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
        let one = |name: &str| -> &Span {
            let found = named(name);
            assert_eq!(found.len(), 1, "one {name} span: {:?}", names(spans));
            found[0]
        };
        let found = TurnSpans {
            upgrade: one("ws.upgrade"),
            connection: one("ws.connection"),
            turn: one("turn"),
            tool_call: one("execute_tool"),
            model_calls: named("chat"),
            writes: named("store.write"),
        };
        assert_eq!(found.model_calls.len(), 2, "the tool round and the answer");
        assert!(
            found.writes.len() >= 2,
            "the user message and the turn's records"
        );
        found
    }

    /// One trace, the caller's, with the caller's span as the root's parent.
    fn assert_one_tree_under_the_caller(&self, spans: &[Span]) {
        for span in spans {
            assert_eq!(
                hex(&span.trace_id),
                TRACE_ID,
                "{} in the caller's trace",
                span.name
            );
        }
        assert_eq!(hex(&self.upgrade.parent_span_id), PARENT_ID);
        assert_eq!(self.connection.parent_span_id, self.upgrade.span_id);
        assert_eq!(self.turn.parent_span_id, self.connection.span_id);
        for child in self
            .model_calls
            .iter()
            .chain(&self.writes)
            .chain([&self.tool_call])
        {
            assert_eq!(
                child.parent_span_id, self.turn.span_id,
                "{} under the turn",
                child.name
            );
        }
    }

    /// What each span says of the route, the turn, the model calls and the
    /// tool call.
    fn assert_attributes(&self) {
        let (upgrade, turn, tool_call) = (self.upgrade, self.turn, self.tool_call);
        assert_eq!(attribute(upgrade, "http.route").as_deref(), Some("/ws"));
        assert_eq!(
            attribute(upgrade, "http.response.status_code").as_deref(),
            Some("101")
        );
        assert_eq!(
            attribute(turn, "agentwire.agent").as_deref(),
            Some("weather")
        );
        assert_eq!(
            attribute(turn, "agentwire.outcome").as_deref(),
            Some("completed")
        );
        assert_eq!(attribute(turn, "agentwire.turn_id").as_deref(), Some("1"));
        for call in &self.model_calls {
            assert_eq!(
                attribute(call, "gen_ai.provider.name").as_deref(),
                Some("openai")
            );
            assert_eq!(
                attribute(call, "gen_ai.request.model").as_deref(),
                Some("gpt-4o-mini")
            );
            assert_eq!(
                attribute(call, "gen_ai.usage.input_tokens").as_deref(),
                Some("19")
            );
            assert_eq!(
                attribute(call, "gen_ai.usage.output_tokens").as_deref(),
                Some("10")
            );
        }
        assert!(
            self.model_calls
                .iter()
                .any(|c| attribute(c, "agentwire.time_to_first_token_ms").is_some()),
            "the streamed answer's first token is timed"
        );
        assert_eq!(
            attribute(tool_call, "gen_ai.tool.name").as_deref(),
            Some("get_weather")
        );
        assert_eq!(
            attribute(tool_call, "agentwire.tool.side").as_deref(),
            Some("http")
        );
        assert_eq!(
            attribute(tool_call, "agentwire.tool.outcome").as_deref(),
            Some("ok")
        );
    }
}

/// No content and no credential in any span's attributes.
fn assert_no_content_or_credential(spans: &[Span]) {
    for span in spans {
        for attribute in &span.attributes {
            let value = text_of(&attribute.value);
            for secret in [
                "secret-prompt-words",
                "secret-reply-words",
                ALICE_KEY,
                PROVIDER_KEY,
                "Oslo",
            ] {
                assert!(
                    !value.contains(secret),
                    "{}.{} carries {secret:?}: {value}",
                    span.name,
                    attribute.key
                );
            }
        }
    }
}

#[tokio::test]
async fn a_turn_is_one_span_tree_under_the_callers_traceparent() {
    let (url, received) = receiver().await;
    let (model, tool) = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let telemetry =
        format!("telemetry:\n  traces:\n    endpoint: {url}\n    protocol: http/protobuf");
    let (child, address, _) = serve(
        &config(&model, &tool, &dir.path().join("a.db"), &telemetry),
        dir.path(),
        &[],
    )
    .await;
    one_turn(&address).await;
    stop(child).await;

    let received = received.lock().await;
    assert!(received.requests >= 1, "spans were exported");
    assert!(
        received.service_names.iter().all(|s| s == "agentwire"),
        "{:?}",
        received.service_names
    );
    let spans = &received.spans;
    let turn = TurnSpans::of(spans);
    // One trace, the caller's, with the caller's span as the root's parent.
    turn.assert_one_tree_under_the_caller(spans);
    turn.assert_attributes();
    // No content and no credential anywhere.
    assert_no_content_or_credential(spans);
}

#[tokio::test]
async fn without_telemetry_traces_nothing_is_exported_whatever_the_environment_says() {
    let (url, received) = receiver().await;
    let (model, tool) = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
    ];
    let env = [env[0], env[1], ("AGENTWIRE_LOG_FORMAT", "json")];
    let (child, address, logs) = serve(
        &config(&model, &tool, &dir.path().join("a.db"), ""),
        dir.path(),
        &env,
    )
    .await;
    one_turn(&address).await;
    stop(child).await;
    assert_eq!(received.lock().await.requests, 0, "no exporter was built");

    // The one log line of the finished turn: who, how long, how it ended.
    let logs = logs.lock().await;
    let finished: Vec<serde_json::Value> = logs
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|line: &serde_json::Value| line["fields"]["message"] == "turn finished")
        .collect();
    assert_eq!(finished.len(), 1, "{logs:?}");
    let fields = &finished[0]["fields"];
    assert_eq!(fields["agent"], "weather");
    assert_eq!(fields["outcome"], "completed");
    assert!(
        fields["session"].is_string() && fields["duration_ms"].is_u64(),
        "{fields}"
    );
    for line in logs.iter() {
        assert!(
            !line.contains("secret-prompt-words") && !line.contains("secret-reply-words"),
            "content in a log line: {line}"
        );
    }
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

#[tokio::test]
async fn spans_travel_over_otlp_grpc_too() {
    let (url, received) = receiver().await;
    let origin = url.trim_end_matches("/v1/traces").to_owned();
    let (model, tool) = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    // The protocol from the standard variable, the endpoint from the file.
    let telemetry = format!("telemetry:\n  traces:\n    endpoint: {origin}");
    let env = [("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")];
    let config = config(&model, &tool, &dir.path().join("a.db"), &telemetry);
    let (child, address, _) = serve(&config, dir.path(), &env).await;
    one_turn(&address).await;
    stop(child).await;
    let received = received.lock().await;
    let names = names(&received.spans);
    for name in [
        "ws.upgrade",
        "ws.connection",
        "turn",
        "chat",
        "execute_tool",
        "store.write",
    ] {
        assert!(names.contains(&name), "{name} arrived over gRPC: {names:?}");
    }
}

//! REST functions (`POST /functions/{agent}`) over real HTTP: every answer
//! a caller can get, in Omnia's `{error, detail}` shape; a call spends from
//! the same turns per minute as a WebSocket message; the call's session is
//! its caller's alone; and `/openapi.json` describes what the server
//! serves, answer shapes included.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentwire_tools::ArgumentSchema;
use serde_json::{Value, json};

use crate::credentials::{ALICE_KEY, BOB_KEY, auth_yaml};
use crate::support::{HttpResponse, TestServer};

/// Agents as functions: `shout` (public, echoes), `private-fn` (needs a
/// credential), `typed` (schemas the echo cannot satisfy), `answers` (a
/// scripted model answering JSON), `broken` (a model that cannot be
/// reached). The standard `echo` is no function.
const FUNCTION_AGENTS: &str = r#"  - name: shout
    handler: echo
    access_level: public
    function: {enabled: true}
  - name: private-fn
    handler: echo
    function: {enabled: true}
  - name: typed
    handler: echo
    access_level: public
    function:
      enabled: true
      input_schema:
        type: object
        properties: {city: {type: string}, days: {type: integer, minimum: 1}}
        required: [city]
      output_schema: {type: object}
  - name: answers
    handler: runtime
    provider: scripted
    access_level: public
    function:
      enabled: true
      output_schema:
        type: object
        properties: {answer: {type: integer}}
        required: [answer]
  - name: broken
    handler: runtime
    provider: unreachable
    access_level: public
    function: {enabled: true}
"#;

/// The model providers: a script answering JSON, and an OpenAI endpoint
/// where nothing listens (no retries, so the turn fails at once).
fn providers(closed: SocketAddr) -> String {
    format!(
        r#"
providers:
  - name: scripted
    type: mock
    model: mock-1
    default_response: '{{"answer": 42}}'
  - name: unreachable
    type: openai
    base_url: http://{closed}/v1
    model: gpt-4o-mini
    max_retries: 0
"#
    )
}

/// A server with API keys, the function agents and `server_yaml` in its
/// `server:` block.
async fn server_with(server_yaml: &str) -> TestServer {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let top_level = format!("{}{}", auth_yaml(), providers(closed));
    TestServer::with_server_and_runtime(server_yaml, &top_level, FUNCTION_AGENTS).await
}

async fn server() -> TestServer {
    server_with("").await
}

/// `POST path` with a JSON content type and `headers`.
async fn post(
    server: &TestServer,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    server.http("POST", path, &all, body).await
}

/// Asserts `response` is the error `code` with `status`; its body.
fn assert_function_error(response: &HttpResponse, status: u16, code: &str) -> Value {
    let body = response.json();
    assert_eq!(response.status, status, "{body}");
    assert_eq!(body["error"], code, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    assert_eq!(response.header("content-type"), Some("application/json"));
    body
}

#[tokio::test]
async fn a_function_answers_its_output_with_an_invocation_id_and_a_duration() {
    let server = server().await;
    let response = post(&server, "/functions/shout", &[], br#"{"city": "Oslo"}"#).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("cache-control"), Some("no-store"));
    let body = response.json();
    // Without an output schema the answer is text, the input compact JSON.
    assert_eq!(body["output"], r#"Echo: {"city":"Oslo"}"#);
    assert!(
        body["invocation_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert!(body["duration_ms"].is_u64(), "{body}");
    assert!(
        body.get("usage").is_none(),
        "no token usage is known: {body}"
    );
    // A JSON string is the message's text as it is.
    let response = post(&server, "/functions/shout", &[], br#""plain words""#).await;
    assert_eq!(response.json()["output"], "Echo: plain words");
    // Each call is a session of its own.
    let again = post(&server, "/functions/shout", &[], br#"{"city": "Oslo"}"#).await;
    assert_ne!(again.json()["invocation_id"], body["invocation_id"]);
    server.stop().await;
}

#[tokio::test]
async fn an_output_schema_makes_the_answer_json_or_a_502_with_the_raw_answer() {
    let server = server().await;
    let response = post(&server, "/functions/answers", &[], br#""the answer?""#).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["output"], json!({"answer": 42}));
    let response = post(&server, "/functions/typed", &[], br#"{"city": "Oslo"}"#).await;
    let body = assert_function_error(&response, 502, "output_invalid");
    assert_eq!(body["raw_output"], r#"Echo: {"city":"Oslo"}"#);
    assert_eq!(body["detail"], "the agent's answer is not JSON");
    server.stop().await;
}

#[tokio::test]
async fn an_input_the_schema_refuses_is_400_naming_the_place_not_the_value() {
    let server = server().await;
    let response = post(
        &server,
        "/functions/typed",
        &[],
        br#"{"city": 7, "days": "sk-not-for-logs"}"#,
    )
    .await;
    let body = assert_function_error(&response, 400, "input_invalid");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("the input does not match the schema: "),
        "{detail}"
    );
    assert!(detail.contains("/city: not of type string"), "{detail}");
    assert!(detail.contains("/days: not of type integer"), "{detail}");
    assert!(
        !detail.contains("sk-not-for-logs"),
        "the value is echoed: {detail}"
    );
    let response = post(&server, "/functions/typed", &[], b"{}").await;
    let body = assert_function_error(&response, 400, "input_invalid");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("(root): missing the required property \"city\""),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_failed_turn_is_a_502_runtime_error_with_its_code_and_no_provider_detail() {
    let server = server().await;
    let response = post(&server, "/functions/broken", &[], br#""hello""#).await;
    let body = assert_function_error(&response, 502, "runtime_error");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.starts_with("PROVIDER_UNAVAILABLE: "), "{detail}");
    assert!(
        !detail.contains("127.0.0.1"),
        "the provider's URL leaks: {detail}"
    );
    server.stop().await;
}

#[tokio::test]
async fn malformed_requests_get_omnias_status_and_code() {
    let server = server().await;
    for method in ["GET", "PUT", "DELETE", "PATCH"] {
        let response = server.http(method, "/functions/shout", &[], b"").await;
        assert_function_error(&response, 405, "method_not_allowed");
        assert_eq!(response.header("allow"), Some("POST"));
    }
    for path in ["/functions", "/functions/"] {
        let response = post(&server, path, &[], b"{}").await;
        assert_function_error(&response, 400, "missing_function_name");
    }
    let response = server
        .http(
            "POST",
            "/functions/shout",
            &[("Content-Type", "text/plain")],
            b"{}",
        )
        .await;
    assert_function_error(&response, 415, "unsupported_media_type");
    let response = server.http("POST", "/functions/shout", &[], b"{}").await;
    assert_function_error(&response, 415, "unsupported_media_type");
    let too_large = format!("\"{}\"", "x".repeat(1024 * 1024));
    let response = post(&server, "/functions/shout", &[], too_large.as_bytes()).await;
    assert_function_error(&response, 413, "payload_too_large");
    let response = post(&server, "/functions/shout", &[], b"{\"city\": ").await;
    let body = assert_function_error(&response, 400, "read_body_failed");
    assert_eq!(body["detail"], "the body is not valid JSON");
    // An unknown name and an agent that is not a function look the same.
    let unknown = post(&server, "/functions/nobody", &[], b"{}").await;
    let not_a_function = post(&server, "/functions/echo", &[], b"{}").await;
    assert_function_error(&unknown, 404, "function_not_found");
    assert_eq!(unknown.json(), not_a_function.json());
    assert_eq!(not_a_function.status, 404);
    server.stop().await;
}

#[tokio::test]
async fn a_private_function_needs_a_credential_the_agent_admits() {
    let server = server().await;
    let response = post(&server, "/functions/private-fn", &[], br#""hi""#).await;
    assert_function_error(&response, 401, "unauthorized");
    let wrong = post(
        &server,
        "/functions/private-fn",
        &[("Authorization", "Bearer ak_wrong_000")],
        br#""hi""#,
    )
    .await;
    assert_function_error(&wrong, 401, "unauthorized");
    // Bob's key admits him to `echo` only.
    let bob = format!("Bearer {BOB_KEY}");
    let response = post(
        &server,
        "/functions/private-fn",
        &[("Authorization", &bob)],
        br#""hi""#,
    )
    .await;
    assert_function_error(&response, 403, "forbidden");
    let alice = format!("Bearer {ALICE_KEY}");
    let response = post(
        &server,
        "/functions/private-fn",
        &[("Authorization", &alice)],
        br#""hi""#,
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["output"], "Echo: hi");
    server.stop().await;
}

#[tokio::test]
async fn a_calls_session_is_its_callers_alone() {
    let server = server().await;
    let alice = format!("Bearer {ALICE_KEY}");
    let bob = format!("Bearer {BOB_KEY}");
    let response = post(
        &server,
        "/functions/private-fn",
        &[("Authorization", &alice)],
        br#""secret plans""#,
    )
    .await;
    let id = response.json()["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/sessions/{id}");
    let theirs = server
        .http("GET", &path, &[("Authorization", &bob)], b"")
        .await;
    assert_eq!(theirs.status, 404, "{}", theirs.text());
    let anonymous = server.http("GET", &path, &[], b"").await;
    assert!(
        matches!(anonymous.status, 401 | 404),
        "{}",
        anonymous.text()
    );
    let own = server
        .http("GET", &path, &[("Authorization", &alice)], b"")
        .await;
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.json()["agent"], "private-fn");
    let messages = server
        .http(
            "GET",
            &format!("{path}/messages"),
            &[("Authorization", &alice)],
            b"",
        )
        .await
        .json();
    let said: Vec<(&str, &str)> = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        said,
        [
            ("user", "secret plans"),
            ("assistant", "Echo: secret plans")
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn function_calls_and_websocket_turns_share_the_callers_turn_limit() {
    let server = server_with("  limits:\n    turns_per_minute_per_caller: 3\n").await;
    let alice = format!("Bearer {ALICE_KEY}");
    let mut socket = server
        .try_connect_with("agent=echo", &[("Authorization", &alice)])
        .await
        .expect("alice connects");
    assert_eq!(socket.recv().await["type"], "connected");
    socket.say("one").await;
    assert_eq!(socket.recv_turn().await.last().unwrap()["type"], "done");
    for text in ["two", "three"] {
        let body = format!("\"{text}\"");
        let response = post(
            &server,
            "/functions/private-fn",
            &[("Authorization", &alice)],
            body.as_bytes(),
        )
        .await;
        assert_eq!(response.status, 200, "{}", response.text());
    }
    // Alice's fourth turn this minute, through either door.
    let response = post(
        &server,
        "/functions/private-fn",
        &[("Authorization", &alice)],
        br#""four""#,
    )
    .await;
    let body = assert_function_error(&response, 429, "rate_limited");
    assert_eq!(body["detail"], "turn rate limit exceeded");
    let retry_after: u64 = response.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    socket.say("four").await;
    let refused = socket.recv().await;
    assert_eq!(refused["error"]["code"], "RATE_LIMITED", "{refused}");
    server.stop().await;
}

/// The OpenAPI document's paths under `/functions`, `/api/v1`, `/media`
/// and `/assets`.
fn documented_paths(document: &Value) -> Vec<&str> {
    let mut paths: Vec<&str> = document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|p| {
            ["/functions/", "/api/v1/", "/media/", "/assets"]
                .iter()
                .any(|s| p.starts_with(s))
        })
        .collect();
    paths.sort_unstable();
    paths
}

/// Validates `value` against the schema at `pointer` in `document`, its
/// `$ref`s resolved in the document.
pub(crate) fn assert_matches(document: &Value, pointer: &str, value: &Value) {
    if let Err(why) = schema_at(document, pointer).validate(value) {
        panic!("{value} does not match {pointer}: {why}");
    }
}

fn schema_at(document: &Value, pointer: &str) -> ArgumentSchema {
    let mut root = document.clone();
    root["$ref"] = json!(format!("#{pointer}"));
    ArgumentSchema::compile(&root).expect("the document's schemas compile")
}

#[tokio::test]
async fn the_openapi_document_lists_every_route_and_the_answers_match_it() {
    let server = server().await;
    let (status, text) = server.get("/openapi.json").await;
    assert_eq!(status, 200);
    let document: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(
        documented_paths(&document),
        [
            "/api/v1/agents",
            "/api/v1/memories",
            "/api/v1/memories/export",
            "/api/v1/memories/import",
            "/api/v1/memories/{id}",
            "/api/v1/sessions",
            "/api/v1/sessions/{id}",
            "/api/v1/sessions/{id}/messages",
            "/assets",
            "/functions/answers",
            "/functions/broken",
            "/functions/private-fn",
            "/functions/shout",
            "/functions/typed",
            "/media/confirm-upload/{upload_id}",
            "/media/download/{session_id}/{media_id}",
            "/media/info/{session_id}/{media_id}",
            "/media/request-upload",
            "/media/upload/{upload_id}",
        ]
    );
    let typed = &document["paths"]["/functions/typed"]["post"];
    assert_eq!(
        typed["requestBody"]["content"]["application/json"]["schema"]["required"],
        json!(["city"])
    );
    assert_every_documented_route_is_served(&server, &document).await;
    assert_answers_match(&server, &document).await;
    server.stop().await;
}

/// Every documented path and method reaches a handler: not 405, and not
/// the router's empty 404 for a path it does not serve.
async fn assert_every_documented_route_is_served(server: &TestServer, document: &Value) {
    let alice = format!("Bearer {ALICE_KEY}");
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let concrete = concrete_path(path);
            let method = method.to_ascii_uppercase();
            let headers = [
                ("Authorization", alice.as_str()),
                ("Content-Type", "application/json"),
            ];
            let response = server.http(&method, &concrete, &headers, b"\"x\"").await;
            assert_ne!(response.status, 405, "{method} {path}");
            assert!(
                response.status != 404 || !response.body.is_empty(),
                "{method} {path} is not served"
            );
        }
    }
}

/// `path` with each `{parameter}` as `no-such-id`.
fn concrete_path(path: &str) -> String {
    let mut concrete = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}').expect("a closed parameter");
        concrete.push_str(&rest[..open]);
        concrete.push_str("no-such-id");
        rest = &rest[close + 1..];
    }
    concrete.push_str(rest);
    concrete
}

/// A function's answer, an error, a session and the agents listing match
/// the document's schemas for them.
async fn assert_answers_match(server: &TestServer, document: &Value) {
    let alice = format!("Bearer {ALICE_KEY}");
    let ok = "/content/application~1json/schema";
    let called = post(server, "/functions/answers", &[], br#""?""#)
        .await
        .json();
    let answers = "/paths/~1functions~1answers/post/responses/200";
    assert_matches(document, &format!("{answers}{ok}"), &called);
    let failed = post(server, "/functions/typed", &[], b"[]").await.json();
    assert_matches(document, "/components/schemas/FunctionError", &failed);
    let response = post(
        server,
        "/functions/private-fn",
        &[("Authorization", &alice)],
        br#""hi""#,
    )
    .await;
    let id = response.json()["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = server
        .http(
            "GET",
            &format!("/api/v1/sessions/{id}"),
            &[("Authorization", &alice)],
            b"",
        )
        .await
        .json();
    assert_matches(document, "/components/schemas/Session", &session);
    // The check has teeth: a field the document does not name fails it.
    let mut grown = session.clone();
    grown["undocumented"] = json!(true);
    assert!(
        schema_at(document, "/components/schemas/Session")
            .validate(&grown)
            .is_err()
    );
    let messages = server
        .http(
            "GET",
            &format!("/api/v1/sessions/{id}/messages"),
            &[("Authorization", &alice)],
            b"",
        )
        .await
        .json();
    assert_matches(document, "/components/schemas/MessagePage", &messages);
    let (_, agents) = server.get("/api/v1/agents").await;
    let agents: Value = serde_json::from_str(&agents).unwrap();
    assert_matches(document, "/components/schemas/AgentListing", &agents);
}

#[tokio::test]
async fn facades_functions_makes_every_agent_a_function_unless_it_says_otherwise() {
    let top_level = "facades:\n  functions: true\n";
    let agents = "  - name: quiet\n    handler: echo\n    function: {enabled: false}\n";
    let server = TestServer::with_runtime(top_level, agents).await;
    let response = post(&server, "/functions/echo", &[], br#""hi""#).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["output"], "Echo: hi");
    let response = post(&server, "/functions/quiet", &[], br#""hi""#).await;
    assert_function_error(&response, 404, "function_not_found");
    server.stop().await;
}

#[tokio::test]
async fn the_drain_cancels_a_running_call_at_its_timeout_and_refuses_new_ones() {
    let (model, _closed) = crate::fake_http::openai_endless().await;
    let top_level = format!(
        "providers:\n  - name: endless\n    type: openai\n    base_url: http://{model}/v1\n    model: gpt-4o-mini\n"
    );
    let agents = "  - name: streamer\n    handler: runtime\n    provider: endless\n    function: {enabled: true}\n";
    let mut server =
        TestServer::with_server_and_runtime("  limits:\n    drain_timeout: 1s", &top_level, agents)
            .await;
    let addr = server.addr;
    let running = tokio::spawn(async move {
        let headers = [("Content-Type", "application/json")];
        crate::support::http_request(addr, "POST", "/functions/streamer", &headers, b"\"go on\"")
            .await
    });
    // The call's turn streams until the drain gives up on it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let draining = Instant::now();
    server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = post(&server, "/functions/streamer", &[], br#""another""#).await;
    assert_function_error(&refused, 503, "unavailable");
    let cancelled = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the call answers once the drain times out")
        .unwrap();
    let body = assert_function_error(&cancelled, 502, "runtime_error");
    assert!(
        body["detail"].as_str().unwrap().starts_with("CANCELLED: "),
        "{body}"
    );
    assert!(
        draining.elapsed() >= Duration::from_millis(900),
        "the drain waited for the call"
    );
    tokio::time::timeout(Duration::from_secs(5), server.wait_stopped())
        .await
        .expect("the server stops once the call is answered");
}

#[tokio::test]
async fn failed_credentials_on_functions_are_throttled_like_any_others() {
    let server = server_with("  limits:\n    auth_failures_per_address_per_minute: 2\n").await;
    for guess in ["Bearer guess-1", "Bearer guess-2"] {
        let refused = post(
            &server,
            "/functions/private-fn",
            &[("Authorization", guess)],
            br#""hi""#,
        )
        .await;
        assert_function_error(&refused, 401, "unauthorized");
    }
    // Spent: refused before the key is checked, the right one too.
    let alice = format!("Bearer {ALICE_KEY}");
    let throttled = post(
        &server,
        "/functions/private-fn",
        &[("Authorization", &alice)],
        br#""hi""#,
    )
    .await;
    let body = assert_function_error(&throttled, 429, "rate_limited");
    assert_eq!(body["detail"], "too many failed authentication attempts");
    let wait: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
    assert!(wait >= 1, "Retry-After {wait}");
    server.stop().await;
}

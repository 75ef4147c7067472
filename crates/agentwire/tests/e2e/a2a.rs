//! The A2A door (`/a2a/{agent}`) over real sockets: the official Python
//! SDK (`a2a-sdk`, in `target/clients-venv`) and JavaScript SDK
//! (`@a2a-js/sdk`, in `target/npm`), both installed by
//! `scripts/install-test-deps.sh`, in both protocol versions, the
//! JSON-RPC binding's errors byte by byte, ownership across front doors,
//! and replay after a dropped stream on another replica, and after the
//! replica running the turn is killed.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::replicas::{deployment, servers, unique_prefix};
use crate::support::{TestServer, agentwire_serve, repo_root, start_child};
use crate::turn_log::{ALICE, BOB, digest};

/// The two owners, and A2A for every agent.
fn config() -> String {
    format!(
        "auth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\n    - id: b\n      sha256: {}\n      subject: bob\nfacades:\n  a2a: true\n",
        digest(ALICE),
        digest(BOB)
    )
}

/// The Python of the protocol clients' venv; `None` skips, except under CI.
fn clients_python() -> Option<PathBuf> {
    let python = repo_root().join("target/clients-venv/bin/python");
    if python.is_file() {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and the protocol clients are missing: run scripts/install-test-deps.sh"
    );
    eprintln!("skipped: no protocol clients (run scripts/install-test-deps.sh)");
    None
}

/// Runs `tests/clients/a2a_sdk.py` with `args`; its output, which ends
/// `ok all` when every scenario passed.
async fn run_sdk(python: &PathBuf, args: &[String]) -> String {
    let script = repo_root().join("crates/agentwire/tests/clients/a2a_sdk.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.ends_with("ok all\n"),
        "a2a_sdk.py {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

#[tokio::test]
async fn the_official_python_sdk_speaks_both_versions() {
    let Some(python) = clients_python() else {
        return;
    };
    let server = TestServer::with_runtime(&config(), "").await;
    let base = format!("http://{}", server.addr);
    for version in ["1.0", "0.3"] {
        let args = [&base, version, ALICE, BOB].map(str::to_owned);
        let out = run_sdk(&python, &args).await;
        for scenario in [
            "send-and-get",
            "stream",
            "cancel",
            "input-required",
            "subscribe-replay",
            "sdk-subscribe",
            "not-found-for-another",
        ] {
            assert!(
                out.contains(&format!("ok {scenario}\n")),
                "{version}: {out}"
            );
        }
        assert_eq!(out.contains("ok list\n"), version == "1.0", "{out}");
    }
}

#[tokio::test]
async fn the_official_javascript_sdk_speaks_both_versions() {
    let modules = repo_root().join("target/npm/node_modules");
    if !modules.join("@a2a-js/sdk/package.json").is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and @a2a-js/sdk is missing: run scripts/install-test-deps.sh"
        );
        eprintln!("skipped: @a2a-js/sdk not installed (run scripts/install-test-deps.sh)");
        return;
    }
    let server = TestServer::with_runtime(&config(), "").await;
    let script = repo_root().join("crates/agentwire/tests/clients/a2a_js.mjs");
    for version in ["1.0", "0.3"] {
        let output = tokio::process::Command::new("node")
            .arg(&script)
            .args([&format!("http://{}", server.addr), version, ALICE])
            .env("NODE_PATH", &modules)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.ends_with("ok all\n"),
            "a2a_js.mjs {version} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A JSON-RPC call to `agent` with `headers`; the HTTP status and body.
async fn rpc(
    server: &TestServer,
    agent: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    let response = server
        .http("POST", &format!("/a2a/{agent}"), &all, body.as_bytes())
        .await;
    let value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, value)
}

/// Request headers, name and value.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

#[tokio::test]
async fn the_json_rpc_binding_answers_each_error_with_its_code() {
    let server = TestServer::with_runtime(&config(), "").await;
    let alice = bearer(ALICE);
    let v1 = [("A2A-Version", "1.0"), ("Authorization", alice.as_str())];
    let get = r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"nope~1"}}"#;
    let cases: [(Headers<'_>, &str, i64); 7] = [
        (&v1, get, -32001),
        (&v1, "{not json", -32700),
        (&v1, r#"{"jsonrpc":"2.0","id":1,"method":"Nope"}"#, -32601),
        (
            &v1,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}"#,
            -32602,
        ),
        (&v1, r#"{"id":1,"method":"GetTask"}"#, -32600),
        // No header is 0.3, whose methods have other names.
        (&[("Authorization", alice.as_str())], get, -32601),
        (
            &[("A2A-Version", "2.0"), ("Authorization", alice.as_str())],
            get,
            -32009,
        ),
    ];
    for (headers, body, code) in cases {
        let (status, answer) = rpc(&server, "echo", headers, body).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0");
    }
    let (_, answer) = rpc(&server, "echo", &v1, get).await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    // The same request in 0.3's words, with no header.
    let v03 = r#"{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"id":"nope~1"}}"#;
    let (_, answer) = rpc(&server, "echo", &[("Authorization", alice.as_str())], v03).await;
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let push =
        r#"{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}"#;
    let (_, answer) = rpc(&server, "echo", &v1, push).await;
    assert_eq!(
        answer["error"]["code"], -32003,
        "push is not declared: {answer}"
    );
    let text = server
        .http(
            "POST",
            "/a2a/echo",
            &[("Content-Type", "text/plain")],
            get.as_bytes(),
        )
        .await;
    let answer: Value = serde_json::from_slice(&text.body).unwrap();
    assert_eq!(answer["error"]["code"], -32005, "{answer}");
}

/// Alice sends "hi" to `echo` over A2A v1.0: the task, completed.
async fn alices_task(server: &TestServer) -> Value {
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}})
    .to_string();
    let alice = bearer(ALICE);
    let (status, answer) = rpc(
        server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &alice)],
        &send,
    )
    .await;
    assert_eq!(status, 200);
    let task = answer["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    task
}

#[tokio::test]
async fn callers_are_the_websockets_callers() {
    let server = TestServer::with_runtime(&config(), "").await;
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}})
    .to_string();
    let (status, _) = rpc(&server, "echo", &[("A2A-Version", "1.0")], &send).await;
    assert_eq!(status, 401, "no credential on a private agent");
    let wrong = bearer("ak_wrong_key_0123456789");
    let (status, _) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &wrong)],
        &send,
    )
    .await;
    assert_eq!(status, 401);
    let task = alices_task(&server).await;
    let context = task["contextId"].as_str().unwrap().to_owned();
    // Bob sees neither the task nor the session, and cannot continue it.
    let bob = bearer(BOB);
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}})
        .to_string();
    let (_, answer) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &bob)],
        &get,
    )
    .await;
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    let continued = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {
        "messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "mine?"}], "contextId": context}}})
    .to_string();
    let (_, answer) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &bob)],
        &continued,
    )
    .await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!(
        answer["error"]["data"][0]["reason"], "SESSION_EXPIRED",
        "{answer}"
    );
    let session = server
        .http(
            "GET",
            &format!("/api/v1/sessions/{context}"),
            &[("Authorization", &bob)],
            b"",
        )
        .await;
    assert_eq!(session.status, 404);
}

#[tokio::test]
async fn a_session_opened_over_a2a_is_listed_and_continues_on_the_websocket() {
    let server = TestServer::with_runtime(&config(), "").await;
    let task = alices_task(&server).await;
    let context = task["contextId"].as_str().unwrap().to_owned();
    let alice = bearer(ALICE);
    let listed = server
        .http("GET", "/api/v1/sessions", &[("Authorization", &alice)], b"")
        .await;
    assert!(
        String::from_utf8_lossy(&listed.body).contains(&context),
        "listed"
    );
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{}/ws?agent=echo",
            server.addr
        ))
        .unwrap();
    request
        .headers_mut()
        .insert("Authorization", alice.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut client = crate::support::Client::new(ws, crate::support::Dialect::Omnia);
    assert_eq!(client.recv().await["type"], "connected");
    client
        .send_json(json!({"type": "message", "content": "again", "session_id": context}))
        .await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["session_id"], context.as_str());
    // And the WebSocket's turn is a task of the context too.
    let list =
        json!({"jsonrpc": "2.0", "id": 4, "method": "ListTasks", "params": {"contextId": context}})
            .to_string();
    let (_, answer) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &alice)],
        &list,
    )
    .await;
    let tasks = answer["result"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{answer}");
    assert_eq!(answer["result"]["totalSize"], 2);
    assert_eq!(
        tasks[0]["status"]["message"]["parts"][0]["text"], "Echo: again",
        "newest first"
    );
}

#[tokio::test]
async fn cards_say_where_and_what() {
    let server = TestServer::with_runtime(&config(), "").await;
    let (status, body) = server.get("/a2a/echo/.well-known/agent-card.json").await;
    assert_eq!(status, 200);
    let card: Value = serde_json::from_str(&body).unwrap();
    let url = format!("http://{}/a2a/echo", server.addr);
    assert_eq!(card["name"], "echo");
    assert_eq!(
        card["supportedInterfaces"][0],
        json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    );
    assert!(card.get("url").is_none(), "v1.0's card has no v0.3 fields");
    let (status, body) = server
        .get("/a2a/echo/.well-known/agent-card-v0.3.json")
        .await;
    assert_eq!(status, 200);
    let legacy: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(legacy["url"], url.as_str(), "0.3 clients read url");
    assert_eq!(legacy["protocolVersion"], "0.3.0");
    assert_eq!(legacy["security"], json!([{"bearer": []}]));
    assert_eq!(card["skills"][0]["tags"], json!(["chat"]));
    assert_eq!(
        card["securityRequirements"][0]["schemes"]["bearer"],
        json!({"list": []})
    );
    assert_eq!(
        card["capabilities"]["extensions"][0]["uri"],
        agentwire_a2a_extension()
    );
    let (status, body) = server.get("/a2a").await;
    assert_eq!(status, 200);
    let names: Vec<Value> = serde_json::from_str::<Value>(&body).unwrap()["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert!(names.contains(&json!("echo")) && names.contains(&json!("test-agent")));
    let (status, _) = server.get("/.well-known/agent-card.json").await;
    assert_eq!(status, 404, "several agents: no single root card");
    let alice = bearer(ALICE);
    let listing: Value = server
        .http("GET", "/api/v1/agents", &[("Authorization", &alice)], b"")
        .await
        .json();
    let echo = listing["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "echo")
        .unwrap();
    assert_eq!(
        echo["a2a_card"], "/a2a/echo/.well-known/agent-card.json",
        "the console links it"
    );
    let (status, _) = server.get("/a2a/nobody/.well-known/agent-card.json").await;
    assert_eq!(status, 404);
}

/// Two in-process replicas of one deployment over PostgreSQL and Redis;
/// `None` without the servers.
async fn two_replicas_with(
    top_level: &str,
    test: &str,
    lease_ttl: &str,
) -> Option<(TestServer, TestServer)> {
    let (postgres, redis) = servers()?;
    let shared = deployment(&postgres, &redis, &unique_prefix(test), lease_ttl);
    let config = format!("{top_level}{shared}");
    Some((
        TestServer::with_top_level(&config).await,
        TestServer::with_top_level(&config).await,
    ))
}

/// A replica as a child process (so it can be killed), with the test
/// agent, and an in-process survivor of the same deployment.
async fn child_replica_with(
    top_level: &str,
    test: &str,
    lease_ttl: &str,
) -> Option<(tokio::process::Child, String, TestServer, tempfile::TempDir)> {
    let (postgres, redis) = servers()?;
    let shared = format!(
        "{top_level}{}",
        deployment(&postgres, &redis, &unique_prefix(test), lease_ttl)
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentwire.yaml");
    let text = format!(
        "server:\n  listen: 127.0.0.1:0\n{shared}agents:\n  - name: test-agent\n    handler: test\n"
    );
    std::fs::write(&path, text).unwrap();
    let (child, address, mut lines) = start_child(agentwire_serve(&path)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let survivor = TestServer::with_top_level(&shared).await;
    Some((child, address, survivor, dir))
}

fn agentwire_a2a_extension() -> &'static str {
    "https://agentwire.dev/a2a/stream-position/v1"
}

#[tokio::test]
async fn a_dropped_stream_is_replayed_on_another_replica() {
    let Some(python) = clients_python() else {
        return;
    };
    let Some((one, two)) = two_replicas_with(&config(), "a2a-replay", "10s").await else {
        return;
    };
    let args = [
        format!("http://{}", one.addr),
        "1.0".to_owned(),
        ALICE.to_owned(),
        BOB.to_owned(),
        format!("http://{}", two.addr),
    ];
    let out = run_sdk(&python, &args).await;
    assert!(out.contains("ok subscribe-replay\n"), "{out}");
}

#[tokio::test]
async fn a_stream_whose_replica_is_killed_is_replayed_then_ends_failed_on_the_survivor() {
    let Some(python) = clients_python() else {
        return;
    };
    let Some((mut child, address, survivor, _dir)) =
        child_replica_with(&config(), "a2a-kill", "3s").await
    else {
        return;
    };
    let args = [
        format!("http://{address}"),
        "1.0".to_owned(),
        ALICE.to_owned(),
        BOB.to_owned(),
        format!("http://{}", survivor.addr),
        child.id().unwrap().to_string(),
    ];
    let out = run_sdk(&python, &args).await;
    assert!(out.contains("ok subscribe-replay\n"), "{out}");
    let _ = child.wait().await;
}

#[tokio::test]
async fn cancel_task_closes_the_model_providers_stream() {
    let (model, closed) = crate::fake_http::openai_endless().await;
    let top_level = format!(
        "{}providers:\n  - name: endless\n    type: openai\n    base_url: http://{model}/v1\n    model: gpt-4o-mini\n",
        config()
    );
    let agents = "  - name: streamer\n    handler: runtime\n    provider: endless\n";
    let server = TestServer::with_runtime(&top_level, agents).await;
    let alice = bearer(ALICE);
    let headers = [("A2A-Version", "1.0"), ("Authorization", alice.as_str())];
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go on forever"}]},
        "configuration": {"returnImmediately": true}}})
    .to_string();
    let (_, answer) = rpc(&server, "streamer", &headers, &send).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED", "{answer}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}})
        .to_string();
    let (_, answer) = rpc(&server, "streamer", &headers, &get).await;
    let working = &answer["result"];
    assert_eq!(working["status"]["state"], "TASK_STATE_WORKING", "{answer}");
    assert!(
        working["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("word ")),
        "the reply so far: {answer}"
    );
    let cancel =
        json!({"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": task["id"]}})
            .to_string();
    let (_, answer) = rpc(&server, "streamer", &headers, &cancel).await;
    assert_eq!(
        answer["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{answer}"
    );
    tokio::time::timeout(std::time::Duration::from_secs(2), closed)
        .await
        .expect("the model's stream was closed within 2 s of the cancel")
        .unwrap();
    let (_, answer) = rpc(&server, "streamer", &headers, &cancel).await;
    assert_eq!(
        answer["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "idempotent: {answer}"
    );
    let (_, answer) = rpc(&server, "streamer", &headers, &get).await;
    assert_eq!(
        answer["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "stored: {answer}"
    );
    server.stop().await;
}

#[tokio::test]
async fn failed_credentials_and_turns_count_with_the_websockets() {
    let limits = "  limits:\n    auth_failures_per_address_per_minute: 3\n    turns_per_minute_per_caller: 2\n";
    let server = TestServer::with_server_and_runtime(limits, &config(), "").await;
    let wrong = bearer("ak_wrong_key_0123456789");
    let get = r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x~1"}}"#;
    for _ in 0..2 {
        let (status, _) = rpc(
            &server,
            "echo",
            &[("A2A-Version", "1.0"), ("Authorization", &wrong)],
            get,
        )
        .await;
        assert_eq!(status, 401);
    }
    // The third failure comes over the WebSocket, and the fourth attempt,
    // over A2A again, is throttled.
    let refused = server
        .try_connect_with("agent=echo", &[("Authorization", &wrong)])
        .await;
    assert_eq!(refused.err().map(|(status, _)| status), Some(401));
    let (status, _) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &wrong)],
        get,
    )
    .await;
    assert_eq!(status, 429, "failed attempts count across front doors");
    server.stop().await;

    // Alice's turns: one over the WebSocket, one over A2A, and the third
    // is refused, with our error code (on a server this address has not
    // spent its attempts on).
    let server = TestServer::with_server_and_runtime(limits, &config(), "").await;
    let (mut client, _) = crate::turn_log::connect_as(&server, "agent=echo", ALICE).await;
    client.say("one").await;
    assert_eq!(client.recv_turn().await.pop().unwrap()["type"], "done");
    alices_task(&server).await;
    let alice = bearer(ALICE);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "three"}]}}})
    .to_string();
    let (_, answer) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &alice)],
        &send,
    )
    .await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!(
        answer["error"]["data"][0]["reason"], "RATE_LIMITED",
        "{answer}"
    );
    assert_eq!(answer["error"]["message"], "turn rate limit exceeded");
}

/// A `tools/call` of `ask_echo` on `/mcp` (JSON answer): its result.
async fn mcp_ask(server: &TestServer, key: &str, text: &str) -> (u16, Value) {
    let auth = bearer(key);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "ask_echo", "arguments": {"message": text}}})
    .to_string();
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Authorization", auth.as_str()),
    ];
    let response = server.http("POST", "/mcp", &headers, body.as_bytes()).await;
    let value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, value)
}

#[tokio::test]
async fn every_front_door_counts_against_the_same_limits() {
    let limits = "  limits:\n    auth_failures_per_address_per_minute: 3\n    turns_per_minute_per_caller: 3\n";
    let top_level = format!("{}  mcp: true\n  functions: true\n", config());
    let server = TestServer::with_server_and_runtime(limits, &top_level, "").await;
    // Alice's turns: one on each door, then every door refuses.
    let (mut client, _) = crate::turn_log::connect_as(&server, "agent=echo", ALICE).await;
    client.say("one").await;
    assert_eq!(client.recv_turn().await.pop().unwrap()["type"], "done");
    alices_task(&server).await;
    let (status, answer) = mcp_ask(&server, ALICE, "three").await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["result"]["structuredContent"]["reply"], "Echo: three",
        "{answer}"
    );
    let (_, answer) = mcp_ask(&server, ALICE, "four").await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("RATE_LIMITED"), "{answer}");
    let alice = bearer(ALICE);
    let call = server
        .http(
            "POST",
            "/functions/echo",
            &[
                ("Content-Type", "application/json"),
                ("Authorization", &alice),
            ],
            b"\"five\"",
        )
        .await;
    assert_eq!(call.status, 429, "{}", String::from_utf8_lossy(&call.body));
    server.stop().await;

    // Failed credentials: one on each request door, then the WebSocket is
    // throttled.
    let server = TestServer::with_server_and_runtime(limits, &top_level, "").await;
    let wrong = "ak_wrong_key_0123456789";
    let get = r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x~1"}}"#;
    let wrong_bearer = bearer(wrong);
    let (status, _) = rpc(
        &server,
        "echo",
        &[("A2A-Version", "1.0"), ("Authorization", &wrong_bearer)],
        get,
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(mcp_ask(&server, wrong, "x").await.0, 401);
    let call = server
        .http(
            "POST",
            "/functions/echo",
            &[
                ("Content-Type", "application/json"),
                ("Authorization", &wrong_bearer),
            ],
            b"\"x\"",
        )
        .await;
    assert_eq!(call.status, 401);
    let refused = server
        .try_connect_with("agent=echo", &[("Authorization", &alice)])
        .await;
    assert_eq!(
        refused.err().map(|(status, _)| status),
        Some(429),
        "throttled on the WebSocket too"
    );
}

#[tokio::test]
async fn bad_facade_keys_are_named() {
    let agent = |block: &str| format!("agents:\n  - name: echo\n    handler: echo\n{block}");
    crate::config_errors::assert_rejected(
        &agent("    a2a:\n      skills:\n        - {id: s, name: S, description: D, tags: []}\n"),
        "agents[0].a2a.skills[0].tags",
        "at least one tag",
    );
    crate::config_errors::assert_rejected(
        &agent(
            "    a2a:\n      skills:\n        - {id: s, name: S, description: D, tags: [first]}\n        - {id: s, name: T, description: E, tags: [second]}\n",
        ),
        "agents[0].a2a.skills[1].id",
        "duplicate skill id",
    );
    crate::config_errors::assert_rejected(
        &agent("    a2a:\n      version: \"\"\n"),
        "agents[0].a2a.version",
        "must not be empty",
    );
    crate::config_errors::assert_rejected(
        &agent("    function:\n      input_schema: {type: 12}\n"),
        "agents[0].function.input_schema",
        "",
    );
    crate::config_errors::assert_rejected(
        &format!(
            "facades:\n  a2a: maybe\n{}",
            crate::config_errors::ONE_AGENT
        ),
        "facades.a2a",
        "",
    );
}

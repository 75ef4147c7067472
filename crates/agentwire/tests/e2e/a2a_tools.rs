//! `tools[].type: a2a`: an agent asks a remote agent over A2A as a tool.
//! The remote is another agentwire server's A2A door (itself tested with
//! the official SDKs in `a2a.rs`), reached over real sockets.

use std::time::Duration;

use serde_json::json;

use crate::support::TestServer;
use crate::turn_log::{ALICE, connect_as, digest};

/// A remote deployment with A2A on for every agent, and Alice's key.
fn remote_config(extra: &str) -> String {
    format!(
        "auth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\nfacades:\n  a2a: true\n{extra}",
        digest(ALICE)
    )
}

/// The caller's config: a mock model whose `ask` script calls the tool
/// `remote` then quotes what it answered, and the tool itself.
fn caller_config(remote_url: &str, timeout: &str) -> String {
    format!(
        r#"providers:
  - name: scripted
    type: mock
    scenarios:
      ask:
        turns:
          1: {{tool_calls: [{{name: remote, arguments: {{message: "hi there"}}}}]}}
          2: "Remote said: {{{{last_tool_result}}}}"
tools:
  - name: remote
    type: a2a
    url: {remote_url}
    headers:
      Authorization: Bearer {ALICE}
    timeout: {timeout}
"#
    )
}

const CALLER: &str =
    "  - name: caller\n    handler: runtime\n    provider: scripted\n    tools: [remote]\n";

#[tokio::test]
async fn an_agent_asks_a_remote_agent_over_a2a() {
    let remote = TestServer::with_runtime(&remote_config(""), "").await;
    let url = format!("http://{}/a2a/echo", remote.addr);
    let caller = TestServer::with_runtime(&caller_config(&url, "10s"), CALLER).await;
    let (mut client, _) = connect_as(&caller, "agent=caller", ALICE).await;
    client.script("ask", "go").await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let content = done["content"].as_str().unwrap();
    assert!(content.starts_with("Remote said: "), "{content}");
    let result: serde_json::Value =
        serde_json::from_str(&content["Remote said: ".len()..]).unwrap();
    assert_eq!(result["reply"], "Echo: hi there", "{result}");
    assert!(
        result["task_id"].as_str().unwrap().contains('~'),
        "{result}"
    );
    // The remote kept the exchange as a session of Alice's.
    let listed = remote
        .http(
            "GET",
            "/api/v1/sessions",
            &[("Authorization", &format!("Bearer {ALICE}"))],
            b"",
        )
        .await;
    let context = result["context_id"].as_str().unwrap();
    assert!(String::from_utf8_lossy(&listed.body).contains(context));
}

#[tokio::test]
async fn a_card_that_is_not_an_a2a_agent_is_a_tool_error_for_the_model() {
    let remote = TestServer::with_runtime(&remote_config(""), "").await;
    let url = format!("http://{}/a2a/nobody", remote.addr);
    let caller = TestServer::with_runtime(&caller_config(&url, "5s"), CALLER).await;
    let (mut client, _) = connect_as(&caller, "agent=caller", ALICE).await;
    client.script("ask", "go").await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(
        done["type"], "done",
        "a tool's failure is the model's to read: {done}"
    );
}

#[tokio::test]
async fn cancelling_the_turn_cancels_the_remote_task() {
    let (model, closed) = crate::fake_http::openai_endless().await;
    let remote_extra = format!(
        "providers:\n  - name: endless\n    type: openai\n    base_url: http://{model}/v1\n    model: gpt-4o-mini\n"
    );
    let remote_agents = "  - name: streamer\n    handler: runtime\n    provider: endless\n";
    let remote = TestServer::with_runtime(&remote_config(&remote_extra), remote_agents).await;
    let url = format!("http://{}/a2a/streamer", remote.addr);
    let caller = TestServer::with_runtime(&caller_config(&url, "60s"), CALLER).await;
    let (mut client, _) = connect_as(&caller, "agent=caller&stream=2", ALICE).await;
    client.script("ask", "go").await;
    assert_eq!(client.recv().await["type"], "turn_started");
    // The remote streams its endless reply into the tool call meanwhile.
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.send_json(json!({"type": "cancel"})).await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["cancelled"], true, "{done}");
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the remote task was cancelled: its model stream closed within 5 s")
        .unwrap();
}

//! Cancel on both dialects, opt-in (`stream=2`): a `cancel` ends the
//! running turn where it was with one terminal (`done` with `cancelled:
//! true`), stores what was streamed, withdraws a pending client tool call,
//! and drops what the turn was waiting on: the model provider's stream, an
//! HTTP tool call, an MCP call (the MCP session goes on).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::{Client, TestServer, metric};
use crate::turn_log::{
    ALICE, POSITIONED, connect_as, connect_gnosari_as, digest, paced_message, server_with_owners,
};

async fn until_done(client: &mut Client) -> Vec<Value> {
    client.recv_turn().await
}

#[tokio::test]
async fn a_cancel_ends_the_turn_where_it_was_and_stores_that_much() {
    let server = server_with_owners().await;
    let (mut client, connected) = connect_as(&server, POSITIONED, ALICE).await;
    assert_eq!(
        connected["connected"]["capabilities"]["cancel"], true,
        "{connected}"
    );
    client.script("paced", "go").await;
    let mut frames = vec![
        client.recv().await,
        client.recv().await,
        client.recv().await,
    ];
    client.send_json(json!({"type": "cancel"})).await;
    // Twice is the same as once.
    client.send_json(json!({"type": "cancel"})).await;
    frames.extend(until_done(&mut client).await);
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["cancelled"], true, "{done}");
    let streamed: String = frames
        .iter()
        .filter(|f| f["type"] == "chunk")
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        done["content"], streamed,
        "the partial is what was streamed"
    );
    assert!(streamed.starts_with("one two"), "{streamed}");
    assert_ne!(streamed, "one two three four five");
    assert_eq!(frames.iter().filter(|f| f["type"] == "done").count(), 1);
    client.expect_silence(Duration::from_millis(300)).await;

    // Stored as it was shown, marked; the session goes on.
    let session = frames[0]["session_id"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {ALICE}");
    let response = server
        .http(
            "GET",
            &format!("/api/v1/sessions/{session}/messages"),
            &[("Authorization", &bearer)],
            b"",
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let messages = response.json();
    let last = messages["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], streamed, "{last}");
    assert_eq!(last["metadata"]["cancelled"], "true", "{last}");
    client.script("echo", "again").await;
    assert_eq!(
        until_done(&mut client).await.last().unwrap()["content"],
        "echo: again"
    );
    // Nothing running: a cancel is a no-op.
    client.send_json(json!({"type": "cancel"})).await;
    client.expect_silence(Duration::from_millis(300)).await;
    let (_, metrics) = server.get("/metrics").await;
    let cancels = |outcome: &str| {
        metric(
            &metrics,
            &format!("agentwire_cancels_total{{outcome=\"{outcome}\"}}"),
        )
    };
    assert!(cancels("cancelled") >= 1.0, "{metrics}");
    assert_eq!(cancels("cancelled") + cancels("nothing_running"), 3.0);
    assert_eq!(cancels("not_yours"), 0.0);
    server.stop().await;
}

#[tokio::test]
async fn a_cancel_withdraws_a_pending_client_tool_call() {
    let server = server_with_owners().await;
    let (mut client, _) = connect_as(&server, POSITIONED, ALICE).await;
    client.script("client-tool", "where am I?").await;
    assert_eq!(client.recv().await["type"], "turn_started");
    let call = client.recv().await;
    assert_eq!(call["type"], "tool_call", "{call}");
    let id = call["tool_call"]["id"].as_str().unwrap().to_owned();
    client.send_json(json!({"type": "cancel"})).await;
    let rest = until_done(&mut client).await;
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0]["type"], "tool_result");
    assert_eq!(rest[0]["tool_result"]["id"], id.as_str());
    assert_eq!(rest[0]["tool_result"]["error"], "turn cancelled");
    assert_eq!(rest[1]["cancelled"], true, "{}", rest[1]);
    // An answer that comes late finds no call.
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": {"city": "Lisbon"}}}))
        .await;
    let late = client.recv().await;
    crate::support::assert_error(&late, "INVALID_MESSAGE", "no pending tool call");
    server.stop().await;
}

#[tokio::test]
async fn without_stream_2_a_cancel_is_an_unknown_type_and_on_gnosari_a_cancel_works() {
    let server = server_with_owners().await;
    let (mut plain, connected) = connect_as(&server, "agent=test-agent", ALICE).await;
    assert!(
        connected["connected"]["capabilities"]
            .get("cancel")
            .is_none()
    );
    plain.send_json(json!({"type": "cancel"})).await;
    crate::support::assert_error(
        &plain.recv().await,
        "INVALID_MESSAGE",
        "unknown message type",
    );

    let mut gnosari = connect_gnosari_as(&server, "stream=2", ALICE).await;
    gnosari.send_json(paced_message()).await;
    let info = gnosari.recv_event().await;
    let mut events = vec![
        info.clone(),
        gnosari.recv_event().await,
        gnosari.recv_event().await,
    ];
    gnosari
        .send_json(json!({"type": "cancel", "session_id": info["session_id"]}))
        .await;
    events.extend(gnosari.recv_gnosari_turn().await);
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "agent_completed", "{events:?}");
    assert_eq!(completed["cancelled"], true, "{completed}");
    let streamed: String = events
        .iter()
        .filter(|e| e["type"] == "token")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(completed["full_response"], streamed);
    assert_ne!(streamed, "one two three four five");
    server.stop().await;
}

#[tokio::test]
async fn a_cancel_closes_the_model_providers_stream() {
    let (model, closed) = crate::fake_http::openai_endless().await;
    let top_level = format!(
        "auth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\nproviders:\n  - name: endless\n    type: openai\n    base_url: http://{model}/v1\n    model: gpt-4o-mini\n",
        digest(ALICE)
    );
    let agents = "  - name: streamer\n    handler: runtime\n    provider: endless\n";
    let server = TestServer::with_runtime(&top_level, agents).await;
    let (mut client, _) = connect_as(&server, "agent=streamer&stream=2", ALICE).await;
    client.say("go on forever").await;
    assert_eq!(client.recv().await["type"], "turn_started");
    for _ in 0..3 {
        assert_eq!(client.recv().await["content"], "word ");
    }
    client.send_json(json!({"type": "cancel"})).await;
    let rest = until_done(&mut client).await;
    let done = rest.last().unwrap();
    assert_eq!(done["cancelled"], true, "{done}");
    assert!(
        done["content"]
            .as_str()
            .unwrap()
            .starts_with("word word word ")
    );
    tokio::time::timeout(Duration::from_secs(2), closed)
        .await
        .expect("the model's stream was closed within 2 s of the cancel")
        .unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_cancel_drops_a_running_http_tool_call() {
    let (api, asked, closed) = crate::fake_http::hanging_http().await;
    let top_level = format!(
        r#"
providers:
  - name: scripted
    type: mock
    scenarios:
      lookup:
        turns:
          1: {{tool_calls: [{{name: lookup, arguments: {{q: "slow"}}}}]}}
tools:
  - name: lookup
    type: http
    description: Looks a word up
    parameters: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
    timeout: 30s
    request:
      method: GET
      url: "http://{api}/lookup/{{{{q}}}}"
"#
    );
    let agent =
        "  - name: looker\n    handler: runtime\n    provider: scripted\n    tools: [lookup]\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    // Anonymous callers cannot rejoin, but they can cancel their own turn.
    let (mut client, _) = server.connect("agent=looker&stream=2").await;
    client.script("lookup", "look it up").await;
    tokio::time::timeout(Duration::from_secs(5), asked)
        .await
        .expect("the tool's request arrived")
        .unwrap();
    let cancelled_at = Instant::now();
    client.send_json(json!({"type": "cancel"})).await;
    let done = until_done(&mut client).await.pop().unwrap();
    assert_eq!(done["cancelled"], true, "{done}");
    tokio::time::timeout(Duration::from_secs(2), closed)
        .await
        .expect("the tool's request was dropped within 2 s of the cancel")
        .unwrap();
    assert!(cancelled_at.elapsed() < Duration::from_secs(2));
    server.stop().await;
}

#[tokio::test]
async fn a_cancel_stops_a_running_mcp_call_and_the_mcp_session_goes_on() {
    let Some(entry) = crate::runtime::mcp_everything() else {
        return;
    };
    let top_level = format!(
        r#"
providers:
  - name: scripted
    type: mock
    scenarios:
      mcp:
        turns:
          1: {{tool_calls: [{{name: trigger-long-running-operation, arguments: {{duration: 20, steps: 4}}}}]}}
          2: {{tool_calls: [{{name: echo, arguments: {{message: "after the cancel"}}}}]}}
          3: "Again: {{{{last_tool_result}}}}"
tools:
  - name: everything
    type: mcp
    command: node
    args: ["{}", "stdio"]
    timeout: 60s
"#,
        entry.display()
    );
    let agent = "  - name: mcp-agent\n    handler: runtime\n    provider: scripted\n    tools: [everything]\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    let (mut client, _) = server.connect("agent=mcp-agent&stream=2").await;
    client.script("mcp", "run the long one").await;
    assert_eq!(client.recv().await["type"], "turn_started");
    // The server starts and the 20 s operation is under way.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cancelled_at = Instant::now();
    client.send_json(json!({"type": "cancel"})).await;
    let done = until_done(&mut client).await.pop().unwrap();
    assert_eq!(done["cancelled"], true, "{done}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(2),
        "the turn ended without waiting for the operation"
    );
    // The connection's MCP session serves the next turn.
    client.script("mcp", "again").await;
    let done = tokio::time::timeout(Duration::from_secs(20), until_done(&mut client))
        .await
        .expect("the next turn ends")
        .pop()
        .unwrap();
    let text = done["content"].as_str().unwrap();
    assert!(
        text.starts_with("Again: ") && text.contains("after the cancel"),
        "{done}"
    );
    server.stop().await;
}

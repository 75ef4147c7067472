//! Client-side tool calls: answers, denials, timeouts, scoping, persistence.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Client, TestServer, assert_error};

/// Starts the `client-tool` script and returns the `tool_call` frame.
async fn start_call(client: &mut Client) -> Value {
    client.script("client-tool", "where am I?").await;
    let call = client.recv().await;
    assert_eq!(call["type"], "tool_call", "{call}");
    call
}

fn call_id(call: &Value) -> String {
    call["tool_call"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_result_completes_the_call_and_the_turn() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let call = start_call(&mut client).await;
    assert_eq!(call["session_id"], connected["session_id"]);
    let tool = &call["tool_call"];
    assert_eq!(tool["name"], "get_location");
    assert_eq!(tool["arguments"], json!({"query": "current"}));
    assert_eq!(tool["consent_message"], "Allow location access?");
    assert_eq!(tool["categories"], json!(["location"]));
    let id = call_id(&call);
    assert!(id.len() >= 32, "unguessable id: {id}");
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}))
        .await;
    client
        .send_json(
            json!({"type": "tool_result", "tool_result": {"call_id": id, "result": {"lat": 39.7}}}),
        )
        .await;
    let done = client.recv().await;
    assert_eq!(done["content"], "Tool result received");
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": 1}}))
        .await;
    assert_error(
        &client.recv().await,
        "INVALID_MESSAGE",
        "no pending tool call",
    );
}

#[tokio::test]
async fn each_call_gets_a_fresh_id() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let id = call_id(&start_call(&mut client).await);
        client
            .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": 1}}))
            .await;
        client.recv().await;
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn a_nack_denies_with_its_reason() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let id = call_id(&start_call(&mut client).await);
    client
        .send_json(json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": id, "reason": "user declined"}}))
        .await;
    assert_eq!(
        client.recv().await["content"],
        "Tool rejected: user declined"
    );
}

#[tokio::test]
async fn a_client_error_is_reported_as_an_error() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let id = call_id(&start_call(&mut client).await);
    client
        .send_json(
            json!({"type": "tool_result", "tool_result": {"call_id": id, "error": "GPS off"}}),
        )
        .await;
    assert_eq!(client.recv().await["content"], "Tool rejected: GPS off");
}

#[tokio::test]
async fn an_unacknowledged_call_is_denied_after_the_ack_timeout() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=quick-tools").await;
    let started = Instant::now();
    let id = call_id(&start_call(&mut client).await);
    let denial = client.recv().await;
    let waited = started.elapsed();
    assert_eq!(denial["type"], "tool_result", "{denial}");
    assert_eq!(denial["tool_result"]["id"], id.as_str());
    assert_eq!(
        denial["tool_result"]["error"],
        "client did not acknowledge the tool call within 300ms"
    );
    assert!(
        waited >= Duration::from_millis(280) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    let done = client.recv().await;
    assert_eq!(
        done["content"],
        "Tool rejected: client did not acknowledge the tool call within 300ms"
    );
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": 1}}))
        .await;
    assert_error(
        &client.recv().await,
        "INVALID_MESSAGE",
        "no pending tool call",
    );
}

#[tokio::test]
async fn an_acknowledged_but_unanswered_call_is_denied_after_the_tool_timeout() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=quick-tools").await;
    let started = Instant::now();
    let id = call_id(&start_call(&mut client).await);
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}))
        .await;
    let denial = client.recv().await;
    let waited = started.elapsed();
    assert_eq!(
        denial["tool_result"]["error"],
        "client did not answer the tool call within 600ms"
    );
    assert!(
        waited >= Duration::from_millis(580),
        "the ack moved the call to the longer wait: {waited:?}"
    );
    assert_eq!(client.recv().await["type"], "done");
}

#[tokio::test]
async fn calls_are_scoped_to_their_connection() {
    let server = TestServer::start().await;
    let (mut owner, connected) = server.connect("agent=test-agent").await;
    let id = call_id(&start_call(&mut owner).await);
    let (mut intruder, _) = server.connect("agent=test-agent").await;
    intruder
        .send_json(
            json!({"type": "tool_result", "session_id": connected["session_id"],
                          "tool_result": {"call_id": id, "result": "spoofed"}}),
        )
        .await;
    assert_error(
        &intruder.recv().await,
        "INVALID_MESSAGE",
        "no pending tool call",
    );
    owner
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": "real"}}))
        .await;
    assert_eq!(owner.recv().await["content"], "Tool result received");
}

#[tokio::test]
async fn tool_messages_do_not_count_as_turns_and_a_message_waits_its_turn() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let id = call_id(&start_call(&mut client).await);
    client.say("meanwhile").await;
    assert_eq!(client.recv().await["error"]["code"], "TURN_IN_PROGRESS");
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}))
        .await;
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": 1}}))
        .await;
    assert_eq!(client.recv().await["content"], "Tool result received");
    let (_, _, metrics) = (0, 0, server.get("/metrics").await.1);
    assert!(metrics.contains("agentwire_turns_total 1\n"), "{metrics}");
}

#[tokio::test]
async fn calls_and_outcomes_are_stored_with_the_session() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=quick-tools").await;
    let id = call_id(&start_call(&mut client).await);
    client
        .send_json(
            json!({"type": "tool_result", "tool_result": {"call_id": id, "result": {"lat": 1}}}),
        )
        .await;
    client.recv().await;
    call_id(&start_call(&mut client).await);
    client.recv_turn().await; // expires: denial, then done
    let session = connected["session_id"].as_str().unwrap();
    let tool_rows: Vec<Value> = crate::support::stored_messages(&server.db_path)
        .into_iter()
        .filter(|(s, _, role, _)| s == session && role == "tool")
        .map(|(_, _, _, content)| serde_json::from_str(&content).unwrap())
        .collect();
    assert_eq!(tool_rows.len(), 4, "{tool_rows:?}");
    assert_eq!(tool_rows[0]["call"]["name"], "get_location");
    assert_eq!(tool_rows[0]["call"]["side"], "client");
    assert_eq!(tool_rows[1]["result"]["status"], "ok");
    assert_eq!(tool_rows[1]["result"]["value"], json!({"lat": 1}));
    assert_eq!(tool_rows[3]["result"]["status"], "denied");
}

#[tokio::test]
async fn the_server_tool_script_shows_both_frames() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client.script("server-tool", "find").await;
    let frames = client.recv_turn().await;
    assert_eq!(
        frames[0]["tool_call"],
        json!({"id": "tool-1", "name": "search", "arguments": {"query": "test"}})
    );
    assert_eq!(
        frames[1]["tool_result"],
        json!({"id": "tool-1", "result": "found results"})
    );
    assert_eq!(frames[2]["content"], "complete");
}

//! Text turns: the scripts, parts, and every malformed message.

use serde_json::json;
use std::time::Duration;

use crate::support::{TestServer, assert_error, stored_messages};

#[tokio::test]
async fn echo_agent_and_test_default_reply_on_the_connection_session() {
    let server = TestServer::start().await;
    let (mut echo, connected) = server.connect("agent=echo").await;
    echo.say("hi").await;
    let done = echo.recv().await;
    assert_eq!(done["type"], "done");
    assert_eq!(done["content"], "Echo: hi");
    assert_eq!(done["session_id"], connected["session_id"]);

    let (mut test, connected) = server.connect("agent=test-agent").await;
    test.send_json(
        json!({"type": "message", "content": "yo", "session_id": connected["session_id"]}),
    )
    .await;
    let done = test.recv().await;
    assert_eq!(done["content"], "echo: yo");
    assert_eq!(done["session_id"], connected["session_id"]);
}

#[tokio::test]
async fn the_client_need_not_wait_for_connected() {
    let server = TestServer::start().await;
    let mut client = server.try_connect("agent=echo").await.unwrap();
    client.say("early").await;
    assert_eq!(client.recv().await["type"], "connected");
    assert_eq!(client.recv().await["content"], "Echo: early");
}

#[tokio::test]
async fn scripts_stream_chunks_then_done() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.script("stream", "x").await;
    let frames = client.recv_turn().await;
    let contents: Vec<&str> = frames
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["chunk", "chunk", "chunk", "done"]);
    assert_eq!(contents, ["Hello", " ", "world", "Hello world"]);
    for frame in &frames {
        assert_eq!(frame["session_id"], connected["session_id"]);
    }
    client.script("chunk-done", "x").await;
    let frames = client.recv_turn().await;
    assert_eq!(frames[0]["content"], "chunk1");
    assert_eq!(frames[1]["content"], "done");
}

#[tokio::test]
async fn failing_scripts_end_the_turn_and_the_socket_stays_usable() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.script("error", "x").await;
    let error = client.recv().await;
    assert_error(&error, "TEST_ERROR", "something went wrong");
    assert_eq!(error["session_id"], connected["session_id"]);
    client.script("handler-error", "x").await;
    assert_error(&client.recv().await, "INTERNAL_ERROR", "handler error");
    client.say("after").await;
    assert_eq!(client.recv().await["content"], "echo: after");
}

#[tokio::test]
async fn text_parts_are_joined_by_a_blank_line() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client
        .send_json(json!({"type": "message", "content": "ignored", "parts": [
            {"type": "text", "text": "one"},
            {"type": "image", "media": {"url": "https://example.com/a.png", "mime_type": "image/png"}},
            {"type": "text", "text": "two"}
        ]}))
        .await;
    assert_eq!(client.recv().await["content"], "echo: one\n\ntwo");
}

#[tokio::test]
async fn parts_script_answers_with_parts() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client
        .send_json(
            json!({"type": "message", "metadata": {"mock_scenario": "parts"}, "parts": [
                {"type": "image", "media": {"data": "iVBORw0KGgo=", "mime_type": "image/png"}}
            ]}),
        )
        .await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done");
    assert_eq!(
        done["parts"],
        json!([{"type": "text", "text": "I see your image"}])
    );
    client.script("parts", "no media").await;
    assert_eq!(client.recv().await["content"], "no parts received");
}

/// Every malformed frame, as text, with the message of its `INVALID_MESSAGE`.
fn malformed_frames() -> Vec<(String, &'static str)> {
    let long_value = "v".repeat(8193);
    let many_keys: serde_json::Map<String, serde_json::Value> =
        (0..33).map(|i| (format!("k{i}"), json!("v"))).collect();
    let big_total: serde_json::Map<String, serde_json::Value> = (0..5)
        .map(|i| (format!("k{i}"), json!("v".repeat(8000))))
        .collect();
    vec![
        ("{not json".into(), "invalid message format"),
        ("[1,2]".into(), "invalid message format"),
        (
            json!({"content": "no type"}).to_string(),
            "invalid message format",
        ),
        (
            json!({"type": "message", "content": 5}).to_string(),
            "invalid message format",
        ),
        (
            json!({"type": "message", "content": "x", "metadata": {"a": 1}}).to_string(),
            "invalid message format",
        ),
        (
            json!({"type": "message", "parts": "nope"}).to_string(),
            "invalid message format",
        ),
        (
            json!({"type": "user_message", "content": "x"}).to_string(),
            "unknown message type",
        ),
        (
            json!({"type": "message"}).to_string(),
            "message requires content or parts",
        ),
        (
            json!({"type": "message", "content": "x", "metadata": many_keys}).to_string(),
            "metadata has more than 32 keys",
        ),
        (
            json!({"type": "message", "content": "x", "metadata": {"bad key!": "v"}}).to_string(),
            "metadata key must be 1 to 64 characters of letters, digits, _, . or -",
        ),
        (
            json!({"type": "message", "content": "x", "metadata": {"k": long_value}}).to_string(),
            "metadata value exceeds 8 KiB",
        ),
        (
            json!({"type": "message", "content": "x", "metadata": big_total}).to_string(),
            "metadata exceeds 32 KiB in total",
        ),
        (
            json!({"type": "message", "content": "x", "declare": {"blob": "d".repeat(16_400)}})
                .to_string(),
            "declare exceeds 16 KiB",
        ),
        (
            json!({"type": "message", "parts": [{"type": "hologram"}]}).to_string(),
            "unknown content part type",
        ),
        (
            json!({"type": "tool_result"}).to_string(),
            "tool_result.call_id is required",
        ),
    ]
}

#[tokio::test]
async fn malformed_frames_get_invalid_message_and_nothing_is_stored() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let cases = malformed_frames();
    for (frame, message) in &cases {
        client.send_invalid_text(frame).await;
        let error = client.recv().await;
        assert_error(&error, "INVALID_MESSAGE", message);
        assert!(
            error.get("session_id").is_none(),
            "decode errors carry no session_id: {error}"
        );
    }
    assert!(
        stored_messages(&server.db_path).is_empty(),
        "nothing stored for rejected messages"
    );
    client.say("still usable").await;
    assert_eq!(client.recv().await["content"], "echo: still usable");
    assert_eq!(stored_messages(&server.db_path).len(), 2);
}

#[tokio::test]
async fn metadata_at_the_limits_is_accepted() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let mut metadata: serde_json::Map<String, serde_json::Value> =
        (0..31).map(|i| (format!("k{i}"), json!("v"))).collect();
    metadata.insert("k".repeat(64), json!("v".repeat(8192)));
    client
        .send_json(json!({"type": "message", "content": "ok", "metadata": metadata}))
        .await;
    assert_eq!(client.recv().await["content"], "echo: ok");
}

#[tokio::test]
async fn a_second_message_during_a_turn_is_refused_not_queued() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.script("slow", "first").await;
    client.say("second").await;
    let refused = client.recv().await;
    assert_eq!(refused["error"]["code"], "TURN_IN_PROGRESS", "{refused}");
    assert_eq!(refused["session_id"], connected["session_id"]);
    let done = client.recv().await;
    assert_eq!(done["content"], "done: first");
    client.expect_silence(Duration::from_millis(300)).await;
    let stored = stored_messages(&server.db_path);
    assert!(
        stored.iter().all(|(_, _, _, content)| content != "second"),
        "{stored:?}"
    );
}

#[tokio::test]
async fn turn_in_progress_holds_across_connections_on_one_session() {
    let server = TestServer::start().await;
    let (mut a, connected) = server.connect("agent=test-agent").await;
    a.script("slow", "first").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut b, _) = server.connect("agent=test-agent").await;
    b.send_json(json!({"type": "message", "content": "x", "session_id": connected["session_id"]}))
        .await;
    let refused = b.recv().await;
    assert_eq!(refused["error"]["code"], "TURN_IN_PROGRESS");
    assert_eq!(refused["session_id"], connected["session_id"]);
    assert_eq!(a.recv().await["content"], "done: first");
}

#[tokio::test]
async fn tool_messages_are_never_blocked_by_a_running_turn() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.script("slow", "first").await;
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": "nope"}}))
        .await;
    client
        .send_json(json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": "nope", "reason": "no"}}))
        .await;
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": "nope", "result": 1}}))
        .await;
    let error = client.recv().await;
    assert_error(&error, "INVALID_MESSAGE", "no pending tool call");
    assert_eq!(error["session_id"], connected["session_id"]);
    assert_eq!(
        client.recv().await["content"],
        "done: first",
        "acks and nacks got no reply"
    );
}

#[tokio::test]
async fn control_messages_get_no_reply_and_uploads_need_media_storage() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.send_json(json!({"type": "hangup"})).await;
    client.send_json(json!({"type": "disclosure_ack"})).await;
    client
        .send_json(json!({"type": "credential_refresh", "token": "t"}))
        .await;
    client
        .send_json(json!({"type": "upload_request", "upload_request": {"filename": "a.png", "mime_type": "image/png", "size_bytes": 1}}))
        .await;
    let error = client.recv().await;
    assert_error(&error, "MEDIA_NOT_ENABLED", "media storage is not enabled");
    assert_eq!(error["session_id"], connected["session_id"]);
}

#[tokio::test]
async fn unknown_scenarios_fail_the_turn() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client.script("no-such-script", "x").await;
    assert_error(
        &client.recv().await,
        "INVALID_MESSAGE",
        "unknown mock_scenario",
    );
}

#[tokio::test]
async fn an_empty_session_id_is_refused_like_every_malformed_id() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    for id in ["", "bad id!", &"x".repeat(129)] {
        client
            .send_invalid_json(json!({"type": "message", "content": "hi", "session_id": id}))
            .await;
        let error = client.recv().await;
        assert_error(
            &error,
            "INVALID_MESSAGE",
            "invalid session_id: 1 to 128 ASCII letters, digits, '.', '_', ':' or '-'",
        );
        assert!(error.get("session_id").is_none(), "{id:?}: {error}");
    }
    assert!(
        stored_messages(&server.db_path).is_empty(),
        "the empty id joined no session"
    );
}

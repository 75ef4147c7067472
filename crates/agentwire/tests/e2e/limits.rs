//! `server.limits`: connection cap, per-connection rate, payload size.

use std::time::Duration;

use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::support::{TestServer, assert_error};

/// A `message` frame for the test agent exactly `len` bytes long.
fn message_of_len(len: usize) -> String {
    let overhead = json!({"type": "message", "content": ""}).to_string().len();
    let text = json!({"type": "message", "content": "a".repeat(len - overhead)}).to_string();
    assert_eq!(text.len(), len);
    text
}

#[tokio::test]
async fn connection_limit_refuses_then_frees_a_slot() {
    let server = TestServer::with_server_yaml("  limits:\n    max_connections: 2").await;
    let (mut first, _) = server.connect("agent=test-agent").await;
    let (_second, _) = server.connect("agent=test-agent").await;

    let refused = server.try_connect("agent=test-agent").await.err();
    assert_eq!(
        refused,
        Some((503, "connection limit reached\n".to_owned()))
    );

    first.close(None).await.expect("close sent");
    // Read the server's close reply so the close handshake completes.
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(_)) = first.next_message().await {}
    })
    .await;
    drop(first);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (mut third, _) = server.connect("agent=test-agent").await;
    third.say("in").await;
    assert_eq!(third.recv().await["content"], "echo: in");
}

#[tokio::test]
async fn rate_limit_sheds_frames_beyond_the_burst() {
    let server =
        TestServer::with_server_yaml("  limits:\n    messages_per_second: 1\n    message_burst: 3")
            .await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    for _ in 0..5 {
        client.send_json(json!({"type": "hangup"})).await;
    }
    for _ in 0..2 {
        let error = client.recv().await;
        assert_error(&error, "RATE_LIMITED", "rate limit exceeded");
        assert!(
            error.get("session_id").is_none(),
            "no session_id key: {error}"
        );
    }
    // The three within the burst were hangups: no reply, and no third error.
    client.expect_silence(Duration::from_millis(200)).await;

    tokio::time::sleep(Duration::from_millis(1100)).await;
    client.say("after the refill").await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"], "echo: after the refill", "{done}");
}

#[tokio::test]
async fn oversized_frame_closes_with_1009() {
    let server = TestServer::with_server_yaml("  limits:\n    max_payload_bytes: 1024").await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    assert_eq!(
        connected["connected"]["capabilities"]["max_payload_size"], 1024,
        "{connected}"
    );
    client.send_text(&message_of_len(2000)).await;
    let frame = client
        .expect_close(Duration::from_secs(2))
        .await
        .expect("a close frame");
    assert_eq!(frame.code, CloseCode::Size, "{frame:?}");
    assert_eq!(frame.reason.as_str(), "", "{frame:?}");

    let (mut fresh, _) = server.connect("agent=test-agent").await;
    let message = message_of_len(1000);
    fresh.send_text(&message).await;
    let done = fresh.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    let sent: serde_json::Value = serde_json::from_str(&message).unwrap();
    assert_eq!(
        done["content"],
        format!("echo: {}", sent["content"].as_str().unwrap())
    );
}

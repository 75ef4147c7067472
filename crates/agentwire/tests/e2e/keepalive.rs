//! Keepalive: the server pings every `ping_interval` and closes a socket it
//! has heard nothing from for `pong_timeout`.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::support::{Client, TestServer, metric};

const FAST_KEEPALIVE: &str = "  limits:\n    ping_interval: 100ms\n    pong_timeout: 300ms";

/// Reads raw frames until `until`, which must all be pings or pongs (reading
/// makes tungstenite answer the pings); returns how many pings came.
async fn read_pings_until(client: &mut Client, until: Instant) -> usize {
    let mut pings = 0;
    loop {
        match tokio::time::timeout_at(until, client.next_message()).await {
            Err(_) => return pings,
            Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
            Ok(Some(Ok(Message::Pong(_)))) => {}
            Ok(other) => panic!("expected only pings, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn server_pings_and_a_reading_client_stays_connected() {
    let server = TestServer::with_server_yaml(FAST_KEEPALIVE).await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let start = Instant::now();

    let pings = read_pings_until(&mut client, start + Duration::from_millis(500)).await;
    assert!(
        pings >= 3,
        "expected a ping every 100 ms, got {pings} in 500 ms"
    );

    // Well past pong_timeout, the auto-pongs keep the socket open.
    read_pings_until(&mut client, start + Duration::from_millis(1100)).await;
    client.say("still here").await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"], "echo: still here", "{done}");
}

#[tokio::test]
async fn silent_client_is_closed_after_pong_timeout() {
    let server = TestServer::with_server_yaml(FAST_KEEPALIVE).await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    // Neither read (so no pongs) nor write.
    tokio::time::sleep(Duration::from_millis(800)).await;

    let (_, body) = server.get("/metrics").await;
    assert_eq!(
        metric(&body, "agentwire_connections_active"),
        0.0,
        "the server dropped the socket:\n{body}"
    );

    if let Some(frame) = client.expect_close(Duration::from_secs(2)).await {
        assert_eq!(frame.code, CloseCode::Away, "{frame:?}");
    }
}

#[tokio::test]
async fn client_frames_count_as_liveness() {
    let server = TestServer::with_server_yaml(FAST_KEEPALIVE).await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    // Never read (no pongs), but send a frame every 100 ms for 1 s.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.send_json(json!({"type": "hangup"})).await;
    }
    client.say("alive").await;
    // `recv` skips the pings queued while the client was not reading.
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"], "echo: alive", "{done}");
}

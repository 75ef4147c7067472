//! The drain on shutdown: refuse new sockets, let running turns finish,
//! close every socket with 1001, then return.

use std::time::Duration;

use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::support::TestServer;

/// Polls `/readyz` until it fails (the drain has begun), for at most `within`.
async fn wait_not_ready(server: &TestServer, within: Duration) -> (u16, String) {
    let deadline = Instant::now() + within;
    loop {
        let answer = server.get("/readyz").await;
        if answer.0 != 200 || Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn drain_refuses_new_sockets_and_lets_the_turn_finish() {
    let mut server = TestServer::with_server_yaml("  limits:\n    drain_timeout: 10s").await;
    let (mut busy, _) = server.connect("agent=test-agent").await;
    busy.script("slow", "patience").await;
    let (mut idle, _) = server.connect("agent=test-agent").await;
    // Let the slow turn start before the drain.
    tokio::time::sleep(Duration::from_millis(100)).await;

    server.begin_shutdown();
    let began = Instant::now();
    assert_eq!(
        wait_not_ready(&server, Duration::from_millis(300)).await,
        (503, "draining\n".to_owned())
    );
    let refused = server.try_connect("agent=test-agent").await.err();
    assert_eq!(refused, Some((503, "server draining\n".to_owned())));
    assert!(
        began.elapsed() < Duration::from_millis(500),
        "refusals took {:?}",
        began.elapsed()
    );

    // `resume` bypasses the drain gate.
    match server.try_connect("agent=test-agent&resume=x").await {
        Err((status, body)) => {
            assert!(
                !(status == 503 && body == "server draining\n"),
                "a resume upgrade must bypass the drain gate, got {status} {body:?}"
            );
        }
        Ok(mut resumed) => {
            let frame = resumed.expect_close(Duration::from_secs(1)).await;
            if let Some(frame) = frame {
                assert_eq!(frame.code, CloseCode::Away, "{frame:?}");
            }
        }
    }

    // The idle socket closes at once.
    let frame = idle
        .expect_close(Duration::from_secs(1))
        .await
        .expect("a close frame");
    assert_eq!(frame.code, CloseCode::Away, "{frame:?}");
    assert_eq!(frame.reason.as_str(), "server shutdown", "{frame:?}");
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "idle close took {:?}",
        began.elapsed()
    );

    // The running turn completes, then its socket closes.
    let turn = busy.recv_turn().await;
    let done = turn.last().unwrap();
    assert_eq!(done["type"], "done", "{turn:?}");
    assert_eq!(done["content"], "done: patience", "{turn:?}");
    let frame = busy
        .expect_close(Duration::from_secs(1))
        .await
        .expect("a close frame");
    assert_eq!(frame.code, CloseCode::Away, "{frame:?}");

    tokio::time::timeout(Duration::from_secs(2), server.wait_stopped())
        .await
        .expect("the server returns once every socket is closed");
}

#[tokio::test]
async fn drain_timeout_cancels_the_running_turn() {
    let mut server = TestServer::with_server_yaml("  limits:\n    drain_timeout: 300ms").await;
    let (mut busy, _) = server.connect("agent=test-agent").await;
    busy.script("slow", "too slow").await;
    let sent = Instant::now();
    tokio::time::sleep(Duration::from_millis(100)).await;

    server.begin_shutdown();
    // Any frame before the close (an error for the cancelled turn) is fine;
    // the turn's `done` is not: it would have needed 2 s.
    let close = loop {
        let next = tokio::time::timeout(Duration::from_millis(1500), busy.next_message())
            .await
            .expect("the socket closes within 1.5 s");
        match next {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(Message::Text(text))) => {
                let frame: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                assert_ne!(
                    frame["type"], "done",
                    "the turn should have been cancelled: {frame}"
                );
            }
            Some(Ok(_)) => {}
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    let frame = close.expect("a close frame with a code");
    assert_eq!(frame.code, CloseCode::Away, "{frame:?}");
    assert!(
        sent.elapsed() < Duration::from_millis(1500),
        "closed after {:?}",
        sent.elapsed()
    );

    tokio::time::timeout(Duration::from_secs(2), server.wait_stopped())
        .await
        .expect("the server returns after the forced close");
}

#[tokio::test]
async fn a_gnosari_turn_cut_short_by_the_drain_timeout_still_answers_every_queued_message() {
    let mut server = TestServer::with_server_yaml("  limits:\n    drain_timeout: 300ms").await;
    let mut client = server.connect_gnosari("test-agent").await;
    client
        .send_json(serde_json::json!({"message": "too slow", "client_message_id": "running", "metadata": {"mock_scenario": "slow"}}))
        .await;
    let started = client.recv_event().await;
    assert_eq!(started["type"], "agent_started", "{started}");
    let queued: Vec<String> = (0..6).map(|n| format!("q-{n}")).collect();
    for id in &queued {
        client
            .send_json(serde_json::json!({"message": "later", "client_message_id": id}))
            .await;
    }
    // Let the queued frames arrive before the drain.
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.begin_shutdown();

    let mut events = Vec::new();
    let close = loop {
        let next = tokio::time::timeout(Duration::from_secs(2), client.next_message())
            .await
            .expect("the socket closes within 2 s");
        match next {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(Message::Text(text))) => {
                events.push(serde_json::from_str::<serde_json::Value>(text.as_str()).unwrap());
            }
            Some(Ok(_)) => {}
            other => panic!("expected a close frame after {events:?}, got {other:?}"),
        }
    };
    assert_eq!(close.expect("a close frame").code, CloseCode::Away);
    // The running turn ends with an error (never its 2-second `done`), then
    // each queued message is told, in order, that it was not processed.
    let (first, rest) = events.split_first().expect("an error for the running turn");
    assert_eq!(first["type"], "error", "{events:#?}");
    assert_eq!(first["session_id"], started["session_id"], "{events:#?}");
    assert_eq!(first["client_message_id"], "running", "{events:#?}");
    let told: Vec<&str> = rest
        .iter()
        .map(|e| {
            assert_eq!(
                (&e["type"], &e["error"]),
                (
                    &serde_json::json!("error"),
                    &serde_json::json!("server is shutting down; the message was not processed")
                ),
                "{events:#?}"
            );
            e["client_message_id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(told, queued, "{events:#?}");

    tokio::time::timeout(Duration::from_secs(2), server.wait_stopped())
        .await
        .expect("the server returns after the forced close");
}

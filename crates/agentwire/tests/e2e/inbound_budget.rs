//! `server.limits.inbound_bytes_in_flight`: the server-wide budget of
//! client bytes read and not yet through their turn. A frame that would
//! exceed it is refused with `RATE_LIMITED` (the socket stays open and
//! nothing is stored); the bytes come back when the turn ends.

use std::time::Duration;

use agentwire_server::InboundBudget;
use serde_json::{Value, json};

use crate::config_errors::{check_config, write_config};
use crate::support::{TestServer, assert_error, metric};

const BUSY: &str = "server busy: too many large messages in flight; send it again shortly";

/// Room for one 600 KB message, not two: 1 MB of messages at what each
/// byte costs the budget.
fn small_budget() -> String {
    let budget = 1_000_000 * InboundBudget::COST_PER_BYTE;
    format!("  limits:\n    max_payload_bytes: 700000\n    inbound_bytes_in_flight: {budget}")
}

const LARGE: usize = 600_000;

fn stored_user_messages_of_len(server: &TestServer, len: usize) -> i64 {
    let conn = rusqlite::Connection::open(&server.db_path).unwrap();
    conn.query_row(
        "SELECT count(*) FROM messages WHERE role = 'user' AND length(content) = ?1",
        [len as i64],
        |row| row.get(0),
    )
    .unwrap()
}

async fn in_flight(server: &TestServer) -> u64 {
    let (_, metrics) = server.get("/metrics").await;
    metric(&metrics, "agentwire_inbound_bytes_in_flight") as u64
}

/// Waits until the server has read at least `bytes` (a frame is counted
/// once tungstenite has handed it over whole).
async fn until_in_flight(server: &TestServer, bytes: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while in_flight(server).await < bytes {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first message was never counted in flight"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn omnia_refuses_a_message_over_the_budget_and_takes_it_once_the_first_turn_ends() {
    let server = TestServer::with_server_yaml(&small_budget()).await;
    let (mut slow, _) = server.connect("agent=test-agent").await;
    let (mut other, _) = server.connect("agent=test-agent").await;
    let large = "a".repeat(LARGE);

    // The slow script holds its turn (and so its message's bytes) for 2 s.
    slow.script("slow", &large).await;
    until_in_flight(&server, LARGE as u64).await;

    other.say(&large).await;
    let refused = other.recv().await;
    assert_error(&refused, "RATE_LIMITED", BUSY);
    assert!(refused.get("session_id").is_none(), "{refused}");

    // Still usable: a small message fits beside the large one.
    other.say("small").await;
    let done = other.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"], "echo: small");

    let done = slow.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"].as_str().map(str::len), Some(LARGE + 6));

    // The first turn's bytes are back: the same large message is taken.
    other.say(&large).await;
    let done = other.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"].as_str().map(str::len), Some(LARGE + 6));

    assert_eq!(in_flight(&server).await, 0, "every permit given back");
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(metric(&metrics, "agentwire_inbound_refused_total"), 1.0);
    assert_eq!(
        metric(&metrics, "agentwire_errors_total{code=\"RATE_LIMITED\"}"),
        1.0
    );

    // Nothing of the refused message was stored: the user messages of
    // that length are the slow one and the accepted retry.
    drop((slow, other));
    assert_eq!(stored_user_messages_of_len(&server, LARGE), 2);
}

#[tokio::test]
async fn gnosari_refuses_a_message_over_the_budget_in_order_and_keeps_the_socket() {
    let server = TestServer::with_server_yaml(&small_budget()).await;
    let mut slow = server.connect_gnosari("test-agent").await;
    let mut other = server.connect_gnosari("echo").await;
    let large = "a".repeat(LARGE);

    slow.send_json(json!({"message": large, "metadata": {"mock_scenario": "slow"}}))
        .await;
    until_in_flight(&server, LARGE as u64).await;

    other
        .send_json(json!({"message": large, "client_message_id": "m-1"}))
        .await;
    let refused = other.recv_event().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"], BUSY, "{refused}");
    assert_eq!(refused["agent_name"], "echo", "{refused}");

    other.send_json(json!({"message": "small"})).await;
    let events = other.recv_gnosari_turn().await;
    let completed: &Value = events.last().unwrap();
    assert_eq!(completed["type"], "agent_completed", "{events:?}");
    assert_eq!(completed["full_response"], "Echo: small");

    let events = slow.recv_gnosari_turn().await;
    assert_eq!(
        events.last().unwrap()["type"],
        "agent_completed",
        "{events:?}"
    );

    other.send_json(json!({"message": large})).await;
    let events = other.recv_gnosari_turn().await;
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "agent_completed", "{events:?}");
    assert_eq!(
        completed["full_response"].as_str().map(str::len),
        Some(LARGE + 6)
    );
    assert_eq!(in_flight(&server).await, 0);
}

#[test]
fn a_budget_below_the_payload_limit_is_a_startup_error_naming_the_key() {
    let (_dir, path) = write_config(
        "server:\n  limits:\n    max_payload_bytes: 2048\n    inbound_bytes_in_flight: 1024\nagents:\n  - name: echo\n    handler: echo\n",
    );
    let output = check_config(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.starts_with("config error: server.limits.inbound_bytes_in_flight: "),
        "{stderr}"
    );
}

//! Memory that follows live work, not history: the sessions API reads a
//! session's messages a page at a time, and the `memory` store keeps at
//! most `storage.memory_max_sessions` sessions, dropping the least recently
//! active one no connection holds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Client, Dialect, TestServer, http_get};

/// One turn of `scenario` on the test agent, optionally on `session_id`;
/// the terminal frame.
async fn ask(client: &mut Client, session_id: Option<&str>, scenario: &str, text: &str) -> Value {
    let mut message =
        json!({"type": "message", "content": text, "metadata": {"mock_scenario": scenario}});
    if let Some(id) = session_id {
        message["session_id"] = json!(id);
    }
    client.send_json(message).await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    done
}

/// `GET path` as JSON, asserting `200`.
async fn get_json(addr: SocketAddr, path: &str) -> Value {
    let (status, body) = http_get(addr, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn a_sessions_messages_are_read_page_by_page_without_gaps_or_repeats() {
    const TURNS: usize = 130;
    let server = TestServer::with_server_yaml(
        "  limits:\n    messages_per_second: 1000\n    message_burst: 1000\n",
    )
    .await;
    let (mut client, connected) = server.connect("agent=echo").await;
    let id = connected["session_id"].as_str().unwrap().to_owned();
    for turn in 0..TURNS {
        client.say(&format!("m{turn}")).await;
        let done = client.recv_turn().await.pop().unwrap();
        assert_eq!(done["type"], "done", "{done}");
    }
    let path = format!("/api/v1/sessions/{id}/messages");

    // Default pages of 100 stored messages, walked with `after`.
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut query = String::new();
    loop {
        let page = get_json(server.addr, &format!("{path}{query}")).await;
        let messages = page["messages"].as_array().unwrap();
        pages.push((messages.len(), page["next_after"].clone()));
        seen.extend(messages.iter().cloned());
        match page["next_after"].as_u64() {
            Some(after) => query = format!("?after={after}"),
            None => break,
        }
    }
    assert_eq!(
        pages,
        [(100, json!(99)), (100, json!(199)), (60, Value::Null)]
    );
    let seqs: Vec<u64> = seen.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..2 * TURNS as u64).collect::<Vec<_>>());
    for (turn, pair) in seen.chunks(2).enumerate() {
        assert_eq!(
            (&pair[0]["role"], &pair[0]["content"]),
            (&json!("user"), &json!(format!("m{turn}")))
        );
        assert_eq!(pair[1]["content"], format!("Echo: m{turn}"));
    }

    // A limit of its own, and a larger one than allowed taken as 500.
    let small = get_json(server.addr, &format!("{path}?limit=7&after=250")).await;
    let small_seqs: Vec<u64> = small["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(small_seqs, [251, 252, 253, 254, 255, 256, 257]);
    assert_eq!(small["next_after"], 257);
    let whole = get_json(server.addr, &format!("{path}?limit=100000")).await;
    assert_eq!(whole["messages"].as_array().unwrap().len(), 2 * TURNS);
    assert_eq!(whole["next_after"], Value::Null);
    // What came after the last message: nothing yet.
    let after_end = get_json(server.addr, &format!("{path}?after=259")).await;
    assert_eq!(after_end, json!({"messages": [], "next_after": null}));

    for (query, error) in [
        ("limit=0", "invalid limit"),
        ("limit=-3", "invalid limit"),
        ("limit=ten", "invalid limit"),
        ("after=-1", "invalid after"),
        ("after=1.5", "invalid after"),
        ("after=seq-9", "invalid after"),
    ] {
        let (status, body) = http_get(server.addr, &format!("{path}?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body, json!({"error": error}), "{query}");
    }
}

/// A server on the `memory` store with room for `max_sessions` sessions.
async fn memory_server(max_sessions: usize) -> SocketAddr {
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: memory\n  memory_max_sessions: {max_sessions}\n{}",
        crate::support::AGENTS
    );
    let config = agentwire::config::parse(&yaml, |_| None).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agentwire::run(listener, config, std::future::pending()));
    addr
}

async fn connect(addr: SocketAddr) -> (Client, String) {
    let url = format!("ws://{addr}/ws?agent=test-agent");
    let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let mut client = Client::new(ws, Dialect::Omnia);
    let connected = client.recv().await;
    (client, connected["session_id"].as_str().unwrap().to_owned())
}

/// Waits until `live` sessions are held in memory (connections that closed
/// have let theirs go).
async fn wait_for_live_sessions(addr: SocketAddr, live: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, body) = http_get(addr, "/metrics").await;
        let now = body
            .lines()
            .find_map(|line| line.strip_prefix("agentwire_sessions_live "))
            .and_then(|value| value.trim().parse::<u64>().ok());
        if now == Some(live) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "live sessions: {now:?}, want {live}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn over_the_memory_cap_the_least_recently_active_idle_session_goes() {
    let addr = memory_server(3).await;
    // The oldest session, but its connection stays open.
    let (mut held, held_id) = connect(addr).await;
    ask(&mut held, None, "echo", "held").await;
    // Two sessions whose connections close, oldest first.
    let mut idle = Vec::new();
    for text in ["first idle", "second idle"] {
        let (mut client, id) = connect(addr).await;
        ask(&mut client, None, "echo", text).await;
        drop(client);
        wait_for_live_sessions(addr, 1).await;
        idle.push(id);
    }
    // A fourth session: over the cap of three.
    let (mut newest, newest_id) = connect(addr).await;
    ask(&mut newest, None, "echo", "newest").await;

    let session = |id: &str| format!("/api/v1/sessions/{id}");
    assert_eq!(http_get(addr, &session(&idle[0])).await.0, 404, "evicted");
    for id in [&held_id, &idle[1], &newest_id] {
        assert_eq!(http_get(addr, &session(id)).await.0, 200, "{id} kept");
    }
    // The open connection's session kept its history.
    let done = ask(&mut held, None, "history", "what did I say?").await;
    assert_eq!(done["content"], "user: held\nassistant: echo: held\n");
    // The evicted id is one never seen: it opens a new, empty session.
    let (mut again, _) = connect(addr).await;
    let done = ask(&mut again, Some(&idle[0]), "history", "anything?").await;
    assert_eq!(done["session_id"], idle[0].as_str());
    assert!(done.get("content").is_none(), "no history: {done}");
}

/// An idle session's window leaves memory after `idle_window_ttl` (the
/// metric counts it), and its next turn shows the model the whole window
/// again, read from the store.
#[tokio::test]
async fn an_idle_sessions_window_leaves_memory_and_comes_back_whole() {
    let server = TestServer::with_server_yaml("  limits:\n    idle_window_ttl: 1s\n").await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    ask(&mut client, None, "echo", "first").await;
    ask(&mut client, None, "echo", "second").await;

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = http_get(server.addr, "/metrics").await;
        if crate::support::metric(&body, "agentwire_session_windows_released_total") >= 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "the idle window was not let go");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let done = ask(&mut client, None, "history", "what came before?").await;
    let seen = done["content"].as_str().unwrap();
    for line in ["user: first\n", "user: second\n"] {
        assert!(seen.contains(line), "{line:?} missing from {done}");
    }
}

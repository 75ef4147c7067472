//! Sessions: joining, resuming, expiry, opening by id, and surviving restarts.

use std::time::Duration;

use serde_json::json;

use crate::support::{Client, Dialect, TestServer, assert_error, stored_messages};

async fn ask(
    client: &mut Client,
    session_id: Option<&str>,
    scenario: &str,
    content: &str,
) -> serde_json::Value {
    let mut message =
        json!({"type": "message", "content": content, "metadata": {"mock_scenario": scenario}});
    if let Some(id) = session_id {
        message["session_id"] = json!(id);
    }
    client.send_json(message).await;
    client.recv_turn().await.pop().unwrap()
}

#[tokio::test]
async fn a_new_connection_resumes_a_session_with_its_history() {
    let server = TestServer::start().await;
    let (mut first, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    ask(&mut first, None, "echo", "my name is Ada").await;
    drop(first);

    let (mut second, connected) = server.connect("agent=test-agent").await;
    assert_ne!(connected["session_id"], session.as_str());
    let done = ask(&mut second, Some(&session), "history", "who am I?").await;
    assert_eq!(
        done["session_id"],
        session.as_str(),
        "frames carry the resumed id"
    );
    assert_eq!(
        done["content"],
        "user: my name is Ada\nassistant: echo: my name is Ada\n"
    );
    let follow_up = ask(&mut second, None, "echo", "again").await;
    assert_eq!(
        follow_up["session_id"],
        session.as_str(),
        "the connection stays on the resumed session"
    );
}

#[tokio::test]
async fn an_expired_session_is_refused_with_the_exact_message() {
    let server = TestServer::start().await;
    let (mut first, connected) = server.connect("agent=short-lived").await;
    let old = connected["session_id"].as_str().unwrap().to_owned();
    ask(&mut first, None, "echo", "hello").await;
    drop(first);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (mut second, connected) = server.connect("agent=short-lived").await;
    second
        .send_json(json!({"type": "message", "content": "resume?", "session_id": old}))
        .await;
    let error = second.recv().await;
    assert_error(
        &error,
        "SESSION_EXPIRED",
        "session context has expired; start a new session",
    );
    assert_eq!(
        error["session_id"],
        old.as_str(),
        "the error names the requested id"
    );
    let done = ask(&mut second, None, "echo", "resume?").await;
    assert_eq!(
        done["session_id"], connected["session_id"],
        "retry joins the connection's own session"
    );
    let stored = stored_messages(&server.db_path);
    assert_eq!(
        stored.iter().filter(|m| m.0 == old).count(),
        2,
        "nothing stored for the refused message"
    );
}

#[tokio::test]
async fn an_unknown_id_opens_a_new_session_with_that_id() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let done = ask(&mut client, Some("my-own-id.1"), "history", "first").await;
    assert_eq!(done["session_id"], "my-own-id.1");
    assert!(
        done.get("content").is_none(),
        "no history, so an empty (omitted) transcript: {done}"
    );
    let stored = stored_messages(&server.db_path);
    assert!(stored.iter().all(|m| m.0 == "my-own-id.1"), "{stored:?}");
}

#[tokio::test]
async fn a_malformed_session_id_is_invalid() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client
        .send_invalid_json(json!({"type": "message", "content": "x", "session_id": "has spaces"}))
        .await;
    let error = client.recv().await;
    assert_eq!(error["error"]["code"], "INVALID_MESSAGE");
    assert!(error.get("session_id").is_none());
    assert!(stored_messages(&server.db_path).is_empty());
}

#[tokio::test]
async fn another_agents_session_cannot_be_resumed() {
    let server = TestServer::start().await;
    let (mut echo, connected) = server.connect("agent=echo").await;
    let echo_session = connected["session_id"].as_str().unwrap().to_owned();
    echo.say("hi").await;
    echo.recv().await;
    let (mut test, _) = server.connect("agent=test-agent").await;
    test.send_json(json!({"type": "message", "content": "x", "session_id": echo_session}))
        .await;
    assert_error(
        &test.recv().await,
        "SESSION_EXPIRED",
        "session context has expired; start a new session",
    );
}

#[tokio::test]
async fn messages_are_stored_with_roles_metadata_and_timestamps() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap();
    client
        .send_json(json!({"type": "message", "content": "hi", "metadata": {"user_id": "u-1"}}))
        .await;
    client.recv().await;
    let conn = rusqlite::Connection::open(&server.db_path).unwrap();
    let rows: Vec<(i64, String, String, Option<String>, i64)> = conn
        .prepare(
            "SELECT seq, role, content, metadata, created_at FROM messages
             WHERE session_key = (SELECT key FROM sessions WHERE id = ?1) ORDER BY seq",
        )
        .unwrap()
        .query_map([session], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].0, rows[0].1.as_str(), rows[0].2.as_str()),
        (0, "user", "hi")
    );
    assert!(
        rows[0].3.as_deref().unwrap().contains("u-1"),
        "metadata kept: {:?}",
        rows[0].3
    );
    assert_eq!(
        (rows[1].0, rows[1].1.as_str(), rows[1].2.as_str()),
        (1, "assistant", "echo: hi")
    );
    assert!(
        rows[0].4 > 1_600_000_000_000_000_000 && rows[1].4 >= rows[0].4,
        "nanosecond timestamps"
    );
    let agent: String = conn
        .query_row("SELECT agent FROM sessions WHERE id = ?1", [session], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(agent, "test-agent");
}

#[tokio::test]
async fn a_restart_on_the_same_database_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let server = TestServer::on_database(&db, "").await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    ask(&mut client, None, "echo", "remember the number 42").await;
    ask(&mut client, None, "stream", "and this").await;
    drop(client);
    server.stop().await;

    let server = TestServer::on_database(&db, "").await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let done = ask(&mut client, Some(&session), "history", "what do you know?").await;
    assert_eq!(done["session_id"], session.as_str());
    assert_eq!(
        done["content"],
        "user: remember the number 42\nassistant: echo: remember the number 42\nuser: and this\nassistant: Hello world\n"
    );
    server.stop().await;
}

#[tokio::test]
async fn memory_storage_keeps_sessions_for_the_process_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: memory\n{}",
        crate::support::AGENTS
    );
    let config = agentwire::config::parse(&yaml, |_| None).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agentwire::run(listener, config, std::future::pending()));
    let url = format!("ws://{addr}/ws?agent=test-agent");
    let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let mut first = Client::new(ws, Dialect::Omnia);
    let session = first.recv().await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    ask(&mut first, None, "echo", "in memory").await;
    drop(first);
    let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let mut second = Client::new(ws, Dialect::Omnia);
    second.recv().await;
    let done = ask(&mut second, Some(&session), "history", "?").await;
    assert_eq!(
        done["content"],
        "user: in memory\nassistant: echo: in memory\n"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "memory storage writes no file"
    );
}

//! PostgreSQL and Redis stopped and restarted under load (issue 16, faults
//! on purpose): clients run turns one after another on their own sessions
//! while the server under them goes away and comes back. What a user would
//! notice is asserted: every turn ends with exactly one terminal (`done`,
//! or `error` INTERNAL_ERROR while the server is down), or, on a replica
//! whose turn could not reach Redis, its socket is closed 4008 to reload
//! (the client goes on with a new connection), `/readyz` says 503
//! while it is down and 200 once it is back, the same connections go on
//! and their turns work again, and every turn a client saw `done` for is in
//! PostgreSQL exactly once with its answer (nothing half-written).
//!
//! Each test stops a server of its own: a PostgreSQL cluster from
//! `scripts/postgres.sh` (`pause` / `resume`) or a Redis from
//! [`own_redis`]; the shared test servers are never touched.

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::postgres::{OwnPostgres, stdout_of};
use crate::replicas::{
    deployment, own_redis, redis_server, required, unique_prefix, wait_for_socket,
};
use crate::support::{Client, Dialect, TestServer};

/// Clients per server.
const CLIENTS: usize = 4;
/// Between one client's turns.
const PACE: Duration = Duration::from_millis(50);

/// What one client saw.
#[derive(Debug, Default)]
struct Tally {
    /// The client's sessions, a new one after each closed socket.
    sessions: Vec<String>,
    /// Sockets closed mid-turn (4008: the turn's replica lost Redis).
    closed: usize,
    /// Questions answered `done`, in order.
    acknowledged: Vec<String>,
    /// Questions answered `error`.
    refused: Vec<String>,
    /// Turns answered `done` after the server came back.
    acknowledged_after: usize,
    /// The longest a turn took to its terminal.
    slowest: Duration,
}

/// One client's turns, one after another until `stop`; each question is
/// unique, and each turn's frames must be exactly one terminal, or a close
/// 4008, after which it goes on with a new socket and session on `url`.
fn run_client(
    url: String,
    name: String,
    stop: Arc<AtomicBool>,
    back: Arc<AtomicBool>,
) -> JoinHandle<Tally> {
    tokio::spawn(async move {
        let mut tally = Tally::default();
        let (mut client, mut session) = new_session(&url).await;
        tally.sessions.push(session.clone());
        for turn in 0.. {
            if stop.load(Ordering::Acquire) {
                break;
            }
            let question = format!("{name}-{turn}");
            let after_restart = back.load(Ordering::Acquire);
            client
                .send_json(json!({"type": "message", "session_id": session, "content": question}))
                .await;
            let started = Instant::now();
            let Some(terminal) = terminal_or_closed(&mut client).await else {
                tally.closed += 1;
                (client, session) = new_session(&url).await;
                tally.sessions.push(session.clone());
                continue;
            };
            tally.slowest = tally.slowest.max(started.elapsed());
            assert_eq!(terminal["session_id"], session.as_str(), "{terminal}");
            match terminal["type"].as_str() {
                Some("done") => {
                    assert_eq!(terminal["content"], format!("echo: {question}"));
                    tally.acknowledged.push(question);
                    tally.acknowledged_after += usize::from(after_restart);
                }
                Some("error") => {
                    assert_eq!(terminal["error"]["code"], "INTERNAL_ERROR", "{terminal}");
                    assert_eq!(terminal["error"]["message"], "internal server error");
                    tally.refused.push(question);
                }
                _ => panic!("a terminal: {terminal}"),
            }
            tokio::time::sleep(PACE).await;
        }
        tally
    })
}

/// The turn's one frame, its terminal; `None` when the socket is closed
/// 4008 instead (to reload), after any number of frames.
async fn terminal_or_closed(client: &mut Client) -> Option<Value> {
    let mut frames = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(15), client.next_message())
            .await
            .expect("a frame within the timeout");
        match message {
            Some(Ok(Message::Text(text))) => {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                if frame["type"] == "done" || frame["type"] == "error" {
                    assert!(
                        frames.is_empty(),
                        "one terminal per turn: {frames:?} {frame}"
                    );
                    return Some(frame);
                }
                frames.push(frame);
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(Some(close)))) => {
                assert_eq!(u16::from(close.code), 4008, "{close:?}");
                return None;
            }
            other => panic!("a frame or a close: {other:?}"),
        }
    }
}

/// A socket on `url` with a session of its own made by a first turn (tried
/// again while the outage refuses it).
async fn new_session(url: &str) -> (Client, String) {
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut client = Client::new(ws, Dialect::of_path(url));
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    loop {
        client
            .send_json(json!({"type": "message", "content": "first"}))
            .await;
        let terminal = client.recv_turn().await.pop().unwrap();
        if terminal["type"] == "done" {
            let session = terminal["session_id"].as_str().unwrap().to_owned();
            return (client, session);
        }
        assert_eq!(terminal["error"]["code"], "INTERNAL_ERROR", "{terminal}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `/readyz` on every server answers `status` (`within`).
async fn readyz_becomes(servers: &[&TestServer], status: u16, within: Duration) {
    let deadline = Instant::now() + within;
    for server in servers {
        loop {
            let (now, body) = server.get("/readyz").await;
            if now == status {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "/readyz still {now} {body:?}, not {status}, after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn sessions_of(tallies: &[Tally]) -> Vec<String> {
    tallies.iter().flat_map(|t| t.sessions.clone()).collect()
}

/// Every session's stored rows, `(role, content)` in order, from `url`.
fn stored_rows(url: &str, sessions: &[String]) -> HashMap<String, Vec<(String, String)>> {
    let ids: Vec<String> = sessions.iter().map(|s| format!("'{s}'")).collect();
    let out = stdout_of(
        Command::new("psql")
            .arg(url)
            .args(["-At", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c"])
            .arg(format!(
                "SELECT s.id, m.role, m.content FROM messages m JOIN sessions s ON s.key = m.session_key \
                 WHERE s.id IN ({}) ORDER BY s.id, m.seq",
                ids.join(",")
            )),
    );
    let mut rows: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for line in out.lines() {
        let mut fields = line.splitn(3, '|');
        let (id, role, content) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap_or_default(),
        );
        rows.entry(id.to_owned())
            .or_default()
            .push((role.to_owned(), content.to_owned()));
    }
    rows
}

/// What the load did, checked against what PostgreSQL holds: every turn
/// answered `done` stored exactly once, followed by its answer; a refused
/// turn's question never stored without its answer; the outage refused
/// some turns, and every connection had turns answered after it.
fn check(tallies: &[Tally], rows: &HashMap<String, Vec<(String, String)>>) {
    let refused: usize = tallies.iter().map(|t| t.refused.len()).sum();
    let acknowledged: usize = tallies.iter().map(|t| t.acknowledged.len()).sum();
    let slowest = tallies.iter().map(|t| t.slowest).max().unwrap_or_default();
    let closed: usize = tallies.iter().map(|t| t.closed).sum();
    eprintln!(
        "outage load: {acknowledged} turns acknowledged, {refused} refused, {closed} sockets closed to reload, the slowest in {slowest:?}"
    );
    assert!(refused > 0, "the outage refused no turn: {tallies:?}");
    // Bounded by the store's timeouts, or a lease's life (3 s here) and
    // the retries around it; a busy machine adds to it.
    assert!(slowest < Duration::from_secs(8), "a turn took {slowest:?}");
    for tally in tallies {
        assert!(
            tally.acknowledged_after > 0,
            "no turn answered on this connection after the restart: {tally:?}"
        );
        let stored: Vec<(String, String)> = tally
            .sessions
            .iter()
            .flat_map(|session| rows.get(session).cloned().unwrap_or_default())
            .collect();
        let users: Vec<usize> = (0..stored.len())
            .filter(|&i| stored[i].0 == "user")
            .collect();
        for &i in &users {
            let answer = format!("echo: {}", stored[i].1);
            assert_eq!(
                stored.get(i + 1),
                Some(&("assistant".to_owned(), answer)),
                "a question stored without its answer: {stored:?}"
            );
        }
        for question in &tally.acknowledged {
            let copies = stored
                .iter()
                .filter(|(role, content)| role == "user" && content == question)
                .count();
            assert_eq!(copies, 1, "{question} stored {copies} times: {stored:?}");
        }
    }
}

/// Runs the clients of every `(server, name)` until `outage` is over (it
/// sets the flag it is given once the server is back) and 2 s more have
/// passed; their tallies, and what `outage` returned.
async fn under_load<F, Fut, T>(servers: &[(&TestServer, &str)], outage: F) -> (Vec<Tally>, T)
where
    F: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let back = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (server, name) in servers {
        for i in 0..CLIENTS {
            let url = server.url("/ws?agent=test-agent");
            let name = format!("{name}{i}");
            tasks.push(run_client(url, name, stop.clone(), back.clone()));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outcome = outage(back).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Release);
    let mut tallies = Vec::new();
    for task in tasks {
        tallies.push(task.await.expect("a client's load ran to its end"));
    }
    (tallies, outcome)
}

#[tokio::test]
async fn postgres_stopped_and_restarted_under_load_loses_nothing_acknowledged() {
    // Durable commits: a killed server keeps what it acknowledged.
    let Some(postgres) = OwnPostgres::start("--durable") else {
        return;
    };
    let server = TestServer::with_top_level(&format!(
        "storage:\n  sessions: \"{}\"\n  postgres:\n    connect_timeout: 1s\n    statement_timeout: 2s\n",
        postgres.url
    ))
    .await;
    let (db, ready) = (&postgres, &server);
    let (tallies, ()) = under_load(&[(&server, "pg")], |back| async move {
        db.pause();
        readyz_becomes(&[ready], 503, Duration::from_secs(5)).await;
        assert_eq!(ready.get("/readyz").await.1, "session store unavailable\n");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        db.resume();
        readyz_becomes(&[ready], 200, Duration::from_secs(15)).await;
        back.store(true, Ordering::Release);
    })
    .await;
    check(
        &tallies,
        &stored_rows(&postgres.url, &sessions_of(&tallies)),
    );
    server.stop().await;
}

#[tokio::test]
async fn redis_stopped_and_restarted_under_load_on_two_replicas_loses_nothing_acknowledged() {
    let Some(shared) = required("AGENTWIRE_TEST_POSTGRES", "PostgreSQL server") else {
        return;
    };
    let Some((dir, mut redis, socket, url)) = own_redis().await else {
        return;
    };
    let config = deployment(&shared, &url, &unique_prefix("redis-load"), "3s");
    let first = TestServer::with_top_level(&config).await;
    let second = TestServer::with_top_level(&config).await;
    let (dir, socket, a, b) = (&dir, &socket, &first, &second);
    let servers = [(a, "a"), (b, "b")];
    let (tallies, _restarted) = under_load(&servers, |back| async move {
        redis.kill().await.unwrap();
        let _ = std::fs::remove_file(socket);
        readyz_becomes(&[a, b], 503, Duration::from_secs(5)).await;
        assert_eq!(a.get("/readyz").await.1, "live state unavailable\n");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let restarted = redis_server(dir.path()).expect("redis-server starts again");
        wait_for_socket(socket).await;
        readyz_becomes(&[a, b], 200, Duration::from_secs(15)).await;
        back.store(true, Ordering::Release);
        restarted
    })
    .await;
    check(&tallies, &stored_rows(&shared, &sessions_of(&tallies)));
    first.stop().await;
    second.stop().await;
}

//! Crash consistency: the real binary as a child process under concurrent
//! turns, killed with SIGKILL at a random moment, round after round on the
//! same SQLite file. After each kill, every turn whose `done` a client read
//! is stored exactly once (its user message and its reply), nothing is
//! stored twice, and every session resumes on the restarted server.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{Client, Dialect, agentwire_serve, start_child, stored_messages};

const ROUNDS: u64 = 20;
const CLIENTS: usize = 6;

/// A small, seeded generator: the kill moments of a run can be replayed
/// from the seed it prints.
struct Moments(u64);

impl Moments {
    fn next_ms(&mut self, range: std::ops::Range<u64>) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        range.start + (self.0 >> 33) % (range.end - range.start)
    }
}

/// `agentwire serve` on `config`, and the address it listens on.
async fn start(config: &Path) -> (Child, String) {
    let (child, address, mut lines) = start_child(agentwire_serve(config)).await;
    // Keep draining its log so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, address)
}

/// A turn a client saw end: its session and its text.
struct Acknowledged {
    session: String,
    text: String,
}

/// Turns on `session` (a fresh one if `None`) until the server goes away;
/// each acknowledged turn is sent on `acks`. The first turn resumes the
/// session: its reply proves the session survived the kill.
async fn client(
    address: String,
    client: usize,
    round: u64,
    session: Option<String>,
    acks: mpsc::UnboundedSender<Acknowledged>,
) {
    let request = format!("ws://{address}/ws?agent=echo")
        .into_client_request()
        .unwrap();
    let Ok((ws, _)) = tokio_tungstenite::connect_async(request).await else {
        return;
    };
    let mut client_ws = Client::new(ws, Dialect::Omnia);
    let Some(connected) = client_ws.try_recv().await else {
        return;
    };
    let session = session.unwrap_or_else(|| connected["session_id"].as_str().unwrap().to_owned());
    for turn in 0.. {
        let text = format!("c{client} r{round} t{turn}");
        let frame = json!({"type": "message", "content": text, "session_id": session});
        if !client_ws.try_send(frame).await {
            return;
        }
        let Some(done) = client_ws.try_recv().await else {
            return;
        };
        assert_eq!(done["type"], "done", "{done}");
        assert_eq!(done["content"], format!("Echo: {text}"));
        // The same session, resumed after the kill.
        assert_eq!(done["session_id"], session.as_str(), "{done}");
        let _ = acks.send(Acknowledged {
            session: session.clone(),
            text,
        });
    }
}

/// Writes a config in `dir` serving `echo` on the SQLite file `db`, with
/// limits high enough for the clients' pace; its path.
fn write_crash_config(dir: &Path, db: &Path) -> PathBuf {
    let config = dir.join("agentwire.yaml");
    std::fs::write(
        &config,
        format!(
            "server:\n  listen: 127.0.0.1:0\n  limits:\n    messages_per_second: 100000\n    message_burst: 100000\nstorage:\n  sessions: sqlite://{}\nagents:\n  - name: echo\n    handler: echo\n",
            db.display()
        ),
    )
    .unwrap();
    config
}

/// One round: the server on `config`, a client on each of `sessions`, a
/// SIGKILL at a moment from `moments`. Each client's session is what it
/// used; the turns they saw end are pushed on `acknowledged`, at least one.
async fn kill_round(
    config: &Path,
    round: u64,
    moments: &mut Moments,
    sessions: &mut [Option<String>],
    acknowledged: &mut Vec<Acknowledged>,
) {
    let (mut child, address) = start(config).await;
    let (acks, mut received) = mpsc::unbounded_channel();
    let clients: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| {
            tokio::spawn(client(
                address.clone(),
                i,
                round,
                session.clone(),
                acks.clone(),
            ))
        })
        .collect();
    drop(acks);
    // The kill's moment counts from the round's first acknowledged turn:
    // on a loaded machine the clients may take longer than the moment to
    // connect, and a round that kills before any turn tests nothing.
    let mut first = tokio::time::timeout(Duration::from_secs(20), received.recv())
        .await
        .ok()
        .flatten();
    tokio::time::sleep(Duration::from_millis(moments.next_ms(0..350))).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    for task in clients {
        task.await.expect("a client saw only well-formed frames");
    }
    let mut this_round = 0;
    while let Some(ack) = match first.take() {
        Some(ack) => Some(ack),
        None => received.recv().await,
    } {
        let index = ack.text[1..]
            .split(' ')
            .next()
            .unwrap()
            .parse::<usize>()
            .unwrap();
        sessions[index] = Some(ack.session.clone());
        acknowledged.push(ack);
        this_round += 1;
    }
    assert!(
        this_round > 0,
        "round {round}: no turn finished before the kill"
    );
}

/// Every acknowledged turn once, its reply once; nothing stored twice.
fn assert_acknowledged_stored_once(db: &Path, acknowledged: &[Acknowledged]) {
    let stored = stored_messages(db);
    let mut counts: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for (session, _, role, content) in &stored {
        *counts.entry((session, role, content)).or_default() += 1;
    }
    assert!(
        counts.values().all(|n| *n == 1),
        "a message stored twice: {:?}",
        counts.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    for ack in acknowledged {
        let reply = format!("Echo: {}", ack.text);
        assert_eq!(
            counts.get(&(&*ack.session, "user", &*ack.text)),
            Some(&1),
            "{}",
            ack.text
        );
        assert_eq!(
            counts.get(&(&*ack.session, "assistant", &*reply)),
            Some(&1),
            "{reply}"
        );
    }
    let stored_turns = stored.iter().filter(|m| m.2 == "user").count();
    println!(
        "{ROUNDS} kill rounds: {} turns acknowledged, {stored_turns} user messages stored (the rest were in flight at a kill), every acknowledged one exactly once",
        acknowledged.len()
    );
    assert!(stored_turns >= acknowledged.len());
}

#[tokio::test]
async fn every_acknowledged_turn_survives_kill_9_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let config = write_crash_config(dir.path(), &db);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("kill moments seeded with {seed}");
    let mut moments = Moments(seed);
    let mut sessions: Vec<Option<String>> = vec![None; CLIENTS];
    let mut acknowledged: Vec<Acknowledged> = Vec::new();
    for round in 0..ROUNDS {
        kill_round(
            &config,
            round,
            &mut moments,
            &mut sessions,
            &mut acknowledged,
        )
        .await;
    }

    // Every acknowledged turn once, its reply once; nothing stored twice.
    assert_acknowledged_stored_once(&db, &acknowledged);
}

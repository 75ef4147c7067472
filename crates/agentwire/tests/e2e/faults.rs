//! Faults on purpose (issue #16): each port made to fail while a turn or an
//! upload is under way, over real sockets with the real parts underneath (a
//! SQLite file, a size-limited filesystem, moto, the MCP test server, a model
//! API speaking OpenAI's wire format), asserting what the client sees and
//! what is stored.
//!
//! The session and media stores are made to fail with
//! `agentwire_core::testing`'s wrappers, each with a switch the test holds,
//! so tests running side by side never trip each other's faults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentwire::app::Wrappers;
use agentwire_core::testing::{FailingMediaStore, FailingSessionStore, FaultSwitch};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::fake_http::{delta, openai_text, read_request};
use crate::support::{AGENTS, Client, TestServer, assert_error, http_url, stored_messages};

/// A whole config: the SQLite file `db`, `storage_extra` after `sessions:`
/// (indented by the caller), `top_level` blocks, the standard agents and
/// `extra_agents`.
fn yaml(db: &Path, storage_extra: &str, top_level: &str, extra_agents: &str) -> String {
    format!(
        "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: sqlite://{}\n{storage_extra}\n{top_level}\n{AGENTS}{extra_agents}",
        db.display()
    )
}

fn failing_sessions(switch: &FaultSwitch) -> Wrappers {
    let switch = switch.clone();
    Wrappers {
        sessions: Some(Box::new(move |store| {
            Arc::new(FailingSessionStore::new(store, switch))
        })),
        media: None,
    }
}

fn failing_media(switch: &FaultSwitch) -> Wrappers {
    let switch = switch.clone();
    Wrappers {
        sessions: None,
        media: Some(Box::new(move |store| {
            Arc::new(FailingMediaStore::new(store, switch))
        })),
    }
}

/// `(seq, role, content)` of every stored message of `session`, read from
/// the SQLite file.
fn rows(db: &Path, session: &str) -> Vec<(i64, String, String)> {
    stored_messages(db)
        .into_iter()
        .filter(|m| m.0 == session)
        .map(|(_, seq, role, content)| (seq, role, content))
        .collect()
}

/// `(role, content)` of `rows`, for comparing with a literal.
fn texts(rows: &[(i64, String, String)]) -> Vec<(&str, &str)> {
    rows.iter()
        .map(|(_, role, content)| (role.as_str(), content.as_str()))
        .collect()
}

/// Seqs run 0, 1, … with no gap and no repeat.
fn assert_seqs_contiguous(rows: &[(i64, String, String)]) {
    let seqs: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let expected: Vec<i64> = (0..rows.len() as i64).collect();
    assert_eq!(seqs, expected, "{rows:?}");
}

/// Waits (up to 5 s) until `session` has `count` stored messages.
async fn wait_for_rows(db: &Path, session: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while rows(db, session).len() < count {
        assert!(
            Instant::now() < deadline,
            "{count} rows never stored: {:?}",
            rows(db, session)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A dependency the test cannot run without is missing: skipped with a
/// message, or a failure when `CI` is set.
fn missing(what: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and this fault test cannot run: {what}"
    );
    eprintln!("skipped: {what}");
}

// ---------------------------------------------------------------------------
// The session store
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_session_store_failing_mid_turn_ends_it_with_internal_error_and_it_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let switch = FaultSwitch::new();
    let server =
        TestServer::with_wrappers(&db, &yaml(&db, "", "", ""), failing_sessions(&switch)).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    client.say("before").await;
    assert_done(&client.recv_turn().await, &session, "echo: before");
    assert_eq!(server.get("/readyz").await, (200, "ok\n".to_owned()));

    // A paced turn; once its message is stored, the store goes down.
    client.script("paced", "during").await;
    assert_eq!(client.recv().await["content"], "one ");
    wait_for_rows(&db, &session, 3).await;
    switch.fail();
    let frames = client.recv_turn().await;
    let (terminal, body) = frames.split_last().unwrap();
    assert_error(terminal, "INTERNAL_ERROR", "internal server error");
    assert_eq!(terminal["session_id"], session.as_str(), "{terminal}");
    assert!(
        body.iter().all(|f| f["type"] == "chunk"
            || f["type"] == "tool_call"
            || f["type"] == "tool_result"),
        "the turn's own frames, then its one terminal: {frames:?}"
    );
    client.expect_silence(Duration::from_millis(300)).await;
    assert_eq!(
        server.get("/readyz").await,
        (503, "session store unavailable\n".to_owned())
    );
    // The accepted message is stored; none of the turn's records (its tool
    // call and result, its reply) are: the turn is stored whole or not at all.
    let stored = rows(&db, &session);
    assert_eq!(
        texts(&stored),
        [
            ("user", "before"),
            ("assistant", "echo: before"),
            ("user", "during")
        ]
    );

    // While it is down, a message's own write fails too: the same error,
    // nothing stored.
    client.say("while down").await;
    let frames = client.recv_turn().await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_error(&frames[0], "INTERNAL_ERROR", "internal server error");
    assert_eq!(rows(&db, &session), stored);
    assert!(switch.tripped() >= 2, "the faults were hit");

    // Back up: ready again, and the same connection goes on.
    switch.recover();
    assert_eq!(server.get("/readyz").await, (200, "ok\n".to_owned()));
    client.say("after").await;
    assert_done(&client.recv_turn().await, &session, "echo: after");
    // A second connection resuming the session sees exactly what is
    // stored: the failed turns left nothing behind in memory either.
    let (mut other, _) = server.connect("agent=test-agent").await;
    other
        .send_json(json!({
            "type": "message", "content": "what do you know?", "session_id": session,
            "metadata": {"mock_scenario": "history"}
        }))
        .await;
    let done = other.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(
        done["content"],
        "user: before\nassistant: echo: before\nuser: during\nuser: after\nassistant: echo: after\n"
    );
    let stored = rows(&db, &session);
    assert_seqs_contiguous(&stored);
    assert_eq!(stored.len(), 7, "{stored:?}");
    server.stop().await;
}

/// `frames` are one `done` of `session` with `content`.
fn assert_done(frames: &[Value], session: &str, content: &str) {
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["type"], "done", "{frames:?}");
    assert_eq!(frames[0]["session_id"], session, "{frames:?}");
    assert_eq!(frames[0]["content"], content, "{frames:?}");
}

/// A mounted tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).unwrap();
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
        }
        Ok(Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: the server's SQLite thread may still hold the file.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// What the disk-full test leaves free: a few turns' worth.
const HEADROOM: u64 = 512 * 1024;

/// Writes `path` until the filesystem is full; the bytes written.
fn fill(path: &Path) -> u64 {
    use std::io::Write as _;
    let mut file = std::fs::File::create(path).unwrap();
    let mut written = 0u64;
    for size in [64 * 1024, 4096, 512, 1] {
        let block = vec![0xa5u8; size];
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling {}: {e}", path.display()),
            }
        }
    }
    written
}

/// Fills the filesystem of `filler` but for [`HEADROOM`]: the first turns
/// fit, then the disk is full.
fn leave_only_headroom(filler: &Path) {
    let filled = fill(filler);
    assert!(filled > HEADROOM, "the filesystem had room to fill");
    std::fs::OpenOptions::new()
        .write(true)
        .open(filler)
        .unwrap()
        .set_len(filled - HEADROOM)
        .unwrap();
}

/// Turns of 48 KiB messages until three have failed: each acknowledged
/// one is pushed on `acknowledged`; the failed ones are returned.
async fn turns_until_three_fail(
    client: &mut Client,
    session: &str,
    acknowledged: &mut Vec<String>,
) -> Vec<String> {
    let mut failed = Vec::new();
    for i in 0..40 {
        let content = format!("turn {i} {}", "x".repeat(48 * 1024));
        client.say(&content).await;
        let frames = client.recv_turn().await;
        let terminal = frames.last().unwrap();
        match terminal["type"].as_str() {
            Some("done") => {
                assert_eq!(terminal["content"], format!("echo: {content}"));
                acknowledged.push(content);
            }
            _ => {
                assert_error(terminal, "INTERNAL_ERROR", "internal server error");
                assert_eq!(terminal["session_id"], session);
                failed.push(content);
                if failed.len() == 3 {
                    break;
                }
            }
        }
    }
    failed
}

/// Every acknowledged turn is stored exactly once, message and reply; no
/// failed turn's reply is.
fn assert_acknowledged_stored_once(
    db: &Path,
    session: &str,
    acknowledged: &[String],
    failed: &[String],
) {
    let stored = rows(db, session);
    let count = |role: &str, content: &str| {
        stored
            .iter()
            .filter(|(_, r, c)| r == role && c == content)
            .count()
    };
    for content in acknowledged {
        assert_eq!(count("user", content), 1, "{}", &content[..10]);
        assert_eq!(
            count("assistant", &format!("echo: {content}")),
            1,
            "{}",
            &content[..10]
        );
    }
    for content in failed {
        assert_eq!(
            count("assistant", &format!("echo: {content}")),
            0,
            "a failed turn's reply is not stored: {}",
            &content[..10]
        );
        assert!(count("user", content) <= 1);
    }
    assert_seqs_contiguous(&stored);
}

#[tokio::test]
async fn a_full_disk_under_sqlite_fails_turns_loses_nothing_acknowledged_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    let _tmpfs = match Tmpfs::mount(&mount, "4m") {
        Ok(tmpfs) => tmpfs,
        Err(e) => {
            missing(&format!(
                "cannot mount a tmpfs (needs root and CAP_SYS_ADMIN): {e}"
            ));
            return;
        }
    };
    let db = mount.join("agentwire.db");
    let server = TestServer::with_wrappers(&db, &yaml(&db, "", "", ""), Wrappers::default()).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    client.say("warm up").await;
    assert_done(&client.recv_turn().await, &session, "echo: warm up");

    // Full but for a little room: the first turns fit, then the disk is full.
    let filler = mount.join("filler");
    leave_only_headroom(&filler);

    // Turns of 48 KiB messages until three have failed.
    let mut acknowledged = vec!["warm up".to_owned()];
    let failed = turns_until_three_fail(&mut client, &session, &mut acknowledged).await;
    assert_eq!(failed.len(), 3, "a full disk failed turns");
    assert!(
        acknowledged.len() >= 2,
        "turns were acknowledged while the disk filled: {}",
        acknowledged.len()
    );

    // Space again: the next turn, as large as those that failed, works on
    // the same connection.
    std::fs::remove_file(&filler).unwrap();
    let content = format!("space again {}", "x".repeat(48 * 1024));
    client.say(&content).await;
    assert_done(
        &client.recv_turn().await,
        &session,
        &format!("echo: {content}"),
    );
    acknowledged.push(content);

    assert_acknowledged_stored_once(&db, &session, &acknowledged, &failed);
    server.stop().await;
}

mod media;
mod tools;

#[tokio::test]
async fn the_request_doors_answer_a_failing_store_with_their_internal_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let switch = FaultSwitch::new();
    let top_level = "facades:\n  a2a: true\n  functions: true\n";
    let server = TestServer::with_wrappers(
        &db,
        &yaml(&db, "", top_level, ""),
        failing_sessions(&switch),
    )
    .await;
    let json = [("Content-Type", "application/json")];
    let call = server
        .http("POST", "/functions/echo", &json, b"\"hi\"")
        .await;
    assert_eq!(call.status, 200, "{}", String::from_utf8_lossy(&call.body));
    switch.fail();
    let call = server
        .http("POST", "/functions/echo", &json, b"\"hi\"")
        .await;
    assert_eq!(call.status, 500);
    let body: serde_json::Value = serde_json::from_slice(&call.body).unwrap();
    assert_eq!(body["error"], "internal_error", "{body}");
    let send = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#;
    let a2a = [("Content-Type", "application/json"), ("A2A-Version", "1.0")];
    let answer = server
        .http("POST", "/a2a/echo", &a2a, send.as_bytes())
        .await;
    let answer: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(
        answer["error"]["data"][0]["reason"], "INTERNAL_ERROR",
        "{answer}"
    );
    assert_eq!(
        answer["error"]["message"], "internal server error",
        "no detail: {answer}"
    );
    switch.recover();
    let call = server
        .http("POST", "/functions/echo", &json, b"\"again\"")
        .await;
    assert_eq!(call.status, 200, "recovered");
}

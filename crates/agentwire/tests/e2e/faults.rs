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
    let filled = fill(&filler);
    assert!(filled > HEADROOM, "the filesystem had room to fill");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(filled - HEADROOM)
        .unwrap();

    // Turns of 48 KiB messages until three have failed.
    let mut acknowledged = vec!["warm up".to_owned()];
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
                assert_eq!(terminal["session_id"], session.as_str());
                failed.push(content);
                if failed.len() == 3 {
                    break;
                }
            }
        }
    }
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

    // Every acknowledged turn is stored exactly once, message and reply; no
    // failed turn's reply is.
    let stored = rows(&db, &session);
    let count = |role: &str, content: &str| {
        stored
            .iter()
            .filter(|(_, r, c)| r == role && c == content)
            .count()
    };
    for content in &acknowledged {
        assert_eq!(count("user", content), 1, "{}", &content[..10]);
        assert_eq!(
            count("assistant", &format!("echo: {content}")),
            1,
            "{}",
            &content[..10]
        );
    }
    for content in &failed {
        assert_eq!(
            count("assistant", &format!("echo: {content}")),
            0,
            "a failed turn's reply is not stored: {}",
            &content[..10]
        );
        assert!(count("user", content) <= 1);
    }
    assert_seqs_contiguous(&stored);
    server.stop().await;
}

// ---------------------------------------------------------------------------
// The media store
// ---------------------------------------------------------------------------

fn upload_request(filename: &str, mime_type: &str, size_bytes: usize) -> Value {
    json!({
        "type": "upload_request",
        "upload_request": {"filename": filename, "mime_type": mime_type, "size_bytes": size_bytes}
    })
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The path and query of an absolute URL.
fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").unwrap().1;
    &rest[rest.find('/').unwrap()..]
}

#[tokio::test]
async fn the_media_store_failing_during_an_upload_is_upload_failed_and_it_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let media = dir.path().join("media");
    let storage = format!(
        "  media:\n    backend: local\n    path: {}\n",
        media.display()
    );
    let switch = FaultSwitch::new();
    let server =
        TestServer::with_wrappers(&db, &yaml(&db, &storage, "", ""), failing_media(&switch)).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let bytes = vec![7u8; 20_000];

    // Unreachable when asked: the documented error, with the session.
    switch.fail();
    client
        .send_json(upload_request("a.png", "image/png", bytes.len()))
        .await;
    let frame = client.recv().await;
    assert_error(&frame, "UPLOAD_FAILED", "failed to prepare upload");
    assert_eq!(frame["session_id"], session.as_str(), "{frame}");
    assert!(files(&media).is_empty(), "{:?}", files(&media));

    // Reachable when asked, unreachable when the bytes come.
    switch.recover();
    client
        .send_json(upload_request("a.png", "image/png", bytes.len()))
        .await;
    let ready = client.recv().await;
    assert_eq!(ready["type"], "upload_ready", "{ready}");
    let ready = &ready["upload_ready"];
    let id = ready["upload_id"].as_str().unwrap();
    let put_path = path_of(ready["upload_url"].as_str().unwrap()).to_owned();
    switch.fail();
    let put = server
        .http("PUT", &put_path, &[("Content-Type", "image/png")], &bytes)
        .await;
    assert_eq!(put.status, 500, "{put:?}");
    assert_eq!(put.text(), "internal server error\n");
    let info = server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 500, "{info:?}");
    let stored_files = files(&media);
    assert!(
        stored_files
            .iter()
            .all(|f| !f.contains(id) || f.starts_with("uploads")),
        "no bytes and no item for the failed upload: {stored_files:?}"
    );
    // The conversation does not depend on media storage.
    client.say("still here").await;
    assert_done(&client.recv_turn().await, &session, "echo: still here");

    // Back: the pending upload is still good, and the item is usable.
    switch.recover();
    let put = server
        .http("PUT", &put_path, &[("Content-Type", "image/png")], &bytes)
        .await;
    assert_eq!(put.status, 204, "{put:?}");
    let info = server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 200, "{}", info.text());
    assert_eq!(info.json()["size_bytes"], bytes.len());
    client
        .send_json(json!({
            "type": "message",
            "metadata": {"mock_scenario": "parts"},
            "parts": [{"type": "image", "media": {"storage_ref": ready["storage_ref"], "mime_type": "image/png"}}]
        }))
        .await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let stored = rows(&db, &session);
    assert_eq!(
        texts(&stored)[..2],
        [("user", "still here"), ("assistant", "echo: still here")]
    );
    assert_eq!(stored.len(), 4, "{stored:?}");
    server.stop().await;
}

/// The next JSON text frame, waiting up to `wait`.
async fn recv_within(client: &mut Client, wait: Duration) -> Value {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(wait, client.ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                return serde_json::from_str(text.as_str()).unwrap();
            }
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            other => panic!("no frame within {wait:?}: {other:?}"),
        }
    }
}

/// The status and body of `request_line` (`METHOD path`, no body) to
/// `addr`, waiting up to `wait` for the answer.
async fn status_of(addr: SocketAddr, request_line: &str, wait: Duration) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{request_line} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(wait, stream.read_to_end(&mut response))
        .await
        .unwrap_or_else(|_| panic!("{request_line}: no answer within {wait:?}"))
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The moto server to start a private instance of: the one
/// `scripts/moto.sh` installs, else one on `PATH`.
fn moto_binary() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/moto-venv/bin/moto_server");
    if venv.is_file() {
        return Some(venv);
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join("moto_server"))
        .find(|path| path.is_file())
}

/// A private S3-compatible server (moto) on its own port, in its own
/// process group; killed when dropped. Never the shared instance.
struct Moto {
    binary: PathBuf,
    port: u16,
    child: Option<std::process::Child>,
}

impl Moto {
    async fn start(binary: PathBuf) -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut moto = Moto {
            binary,
            port,
            child: None,
        };
        moto.restart().await;
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts it (again, on the same port: empty) and waits until it answers.
    async fn restart(&mut self) {
        use std::os::unix::process::CommandExt as _;
        let child = std::process::Command::new(&self.binary)
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("moto_server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                let answer =
                    http_url("GET", &format!("{}/moto-api/", self.endpoint()), &[], b"").await;
                if answer.status == 200 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "moto did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills its whole process group at once, as a crash would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn the_s3_server_stopped_mid_transfer_fails_the_upload_and_the_next_one_works() {
    let Some(binary) = moto_binary() else {
        missing("no moto_server (scripts/moto.sh install puts one in target/moto-venv)");
        return;
    };
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
        || std::env::var_os("AWS_SECRET_ACCESS_KEY").is_none()
    {
        missing(
            "the S3 fault test needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (scripts/test sets dummies)",
        );
        return;
    }
    let mut moto = Moto::start(binary).await;
    let bucket = "agentwire-faults";
    let create_bucket = |endpoint: String| async move {
        let created = http_url("PUT", &format!("{endpoint}/{bucket}"), &[], b"").await;
        assert_eq!(created.status, 200, "create bucket: {}", created.text());
    };
    create_bucket(moto.endpoint()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let storage = format!(
        "  media:\n    backend: s3\n    endpoint: {}\n    bucket: {bucket}\n    region: us-east-1\n",
        moto.endpoint()
    );
    let server =
        TestServer::with_wrappers(&db, &yaml(&db, &storage, "", ""), Wrappers::default()).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let bytes = vec![3u8; 400_000];

    client
        .send_json(upload_request("scan.pdf", "application/pdf", bytes.len()))
        .await;
    let ready = client.recv().await;
    assert_eq!(ready["type"], "upload_ready", "{ready}");
    let id = ready["upload_ready"]["upload_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = ready["upload_ready"]["upload_url"]
        .as_str()
        .unwrap()
        .to_owned();

    // Half the body goes to S3; then S3 stops.
    let mut put = TcpStream::connect(("127.0.0.1", moto.port)).await.unwrap();
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        path_of(&url),
        moto.port,
        bytes.len()
    );
    put.write_all(head.as_bytes()).await.unwrap();
    put.write_all(&bytes[..bytes.len() / 2]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    moto.kill();
    let _ = put.write_all(&bytes[bytes.len() / 2..]).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), put.read_to_end(&mut answer)).await;
    assert!(
        !String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "the transfer did not complete"
    );

    // The server can neither confirm it nor prepare another: its documented
    // answers, once the S3 client's retries (object_store's: ten, with
    // backoff, a few seconds against a refused port) have run out. Both at
    // once, to keep the test short.
    let started = Instant::now();
    let confirm_line = format!("POST /media/confirm-upload/{id}");
    let confirm = status_of(server.addr, &confirm_line, Duration::from_secs(30));
    let request = async {
        client
            .send_json(upload_request("scan.pdf", "application/pdf", bytes.len()))
            .await;
        recv_within(&mut client, Duration::from_secs(30)).await
    };
    let (confirm, frame) = tokio::join!(confirm, request);
    assert_eq!(confirm, (500, "internal server error\n".to_owned()));
    eprintln!("S3 down: answered in {:?}", started.elapsed());
    assert_error(&frame, "UPLOAD_FAILED", "failed to prepare upload");
    assert_eq!(frame["session_id"], session.as_str());
    // The conversation goes on, and nothing of the upload is in it.
    client.say("still here").await;
    assert_done(&client.recv_turn().await, &session, "echo: still here");
    assert_eq!(
        texts(&rows(&db, &session)),
        [("user", "still here"), ("assistant", "echo: still here")]
    );

    // S3 back (empty, as moto keeps nothing): the next upload works end to end.
    moto.restart().await;
    create_bucket(moto.endpoint()).await;
    client
        .send_json(upload_request("scan.pdf", "application/pdf", bytes.len()))
        .await;
    let ready = client.recv().await;
    assert_eq!(ready["type"], "upload_ready", "{ready}");
    let id = ready["upload_ready"]["upload_id"].as_str().unwrap();
    let url = ready["upload_ready"]["upload_url"].as_str().unwrap();
    let put = http_url("PUT", url, &[("Content-Type", "application/pdf")], &bytes).await;
    assert_eq!(put.status, 200, "{}", put.text());
    let confirm = server
        .http("POST", &format!("/media/confirm-upload/{id}"), &[], b"")
        .await;
    assert_eq!(confirm.status, 200, "{}", confirm.text());
    assert_eq!(confirm.json()["size_bytes"], bytes.len());
    server.stop().await;
}

// ---------------------------------------------------------------------------
// The MCP server
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_mcp_server_dying_mid_call_is_an_error_result_and_the_next_turn_gets_a_fresh_one() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(entry) = crate::runtime::mcp_everything() else {
        return;
    };
    // The configured command records each server's pid, then becomes it.
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = dir.path().join("mcp-server.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec node '{}' stdio\n",
            pids.display(),
            entry.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = |pids: &Path| -> Vec<String> {
        std::fs::read_to_string(pids)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let top_level = format!(
        r#"
providers:
  - name: scripted
    type: mock
    scenarios:
      dies:
        turns:
          1: {{tool_calls: [{{name: trigger-long-running-operation, arguments: {{duration: 30, steps: 1}}}}]}}
          2: "The tool said: {{{{last_tool_result}}}}"
          3: {{tool_calls: [{{name: echo, arguments: {{message: "from a fresh server"}}}}]}}
          4: "Again: {{{{last_tool_result}}}}"
tools:
  - name: everything
    type: mcp
    command: {}
    timeout: 20s
"#,
        script.display()
    );
    let agent = "  - name: mcp-agent\n    handler: runtime\n    provider: scripted\n    tools: [everything]\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    let mut client = server.connect_gnosari("mcp-agent").await;
    client
        .send_json(json!({"message": "run the long one", "metadata": {"mock_scenario": "dies"}}))
        .await;
    let mut events = Vec::new();
    let session = loop {
        let event = client.recv_event().await;
        events.push(event.clone());
        if event["type"] == "tool_call" {
            assert_eq!(event["tool_name"], "trigger-long-running-operation");
            break events[0]["session_id"].as_str().unwrap().to_owned();
        }
        assert_ne!(event["type"], "agent_completed", "{events:?}");
    };
    // The call is on its way to a 30-second operation: the server dies.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = started(&pids);
    assert_eq!(first.len(), 1, "one server so far: {first:?}");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &first[0]])
        .status()
        .unwrap();
    assert!(killed.success());
    let killed_at = Instant::now();
    let rest = client.recv_gnosari_turn().await;
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "the dead server was noticed at once, not at the tool timeout"
    );
    let result = rest
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("a tool result: {rest:?}"));
    let shown = result.to_string();
    assert!(
        shown.contains("MCP server everything closed the session"),
        "{result}"
    );
    let completed = rest.last().unwrap();
    assert_eq!(completed["type"], "agent_completed", "{rest:?}");
    let reply = completed["full_response"].as_str().unwrap();
    assert!(
        reply.starts_with("The tool said: ") && reply.contains("closed the session"),
        "the model saw the error: {reply}"
    );

    // The next turn on the same connection gets a fresh server.
    client
        .send_json(json!({"message": "again", "session_id": session, "metadata": {"mock_scenario": "dies"}}))
        .await;
    let events = tokio::time::timeout(Duration::from_secs(10), client.recv_gnosari_turn())
        .await
        .expect("the turn ends");
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "agent_completed", "{events:?}");
    let reply = completed["full_response"].as_str().unwrap();
    assert!(
        reply.starts_with("Again: ") && reply.contains("from a fresh server"),
        "{events:?}"
    );
    let all = started(&pids);
    assert_eq!(all.len(), 2, "a second server was started: {all:?}");
    assert_ne!(all[0], all[1]);

    // Stored: both turns whole, the failed call's error among them.
    let stored = rows(&server.db_path, &session);
    let roles: Vec<&str> = stored.iter().map(|(_, role, _)| role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "tool",
            "tool",
            "assistant",
            "user",
            "tool",
            "tool",
            "assistant"
        ],
        "{stored:?}"
    );
    let step: Value = serde_json::from_str(&stored[2].2).unwrap();
    assert!(
        step.to_string().contains("closed the session"),
        "the stored result is the error: {step}"
    );
    assert_seqs_contiguous(&stored);
}

// ---------------------------------------------------------------------------
// The model provider
// ---------------------------------------------------------------------------

/// How a scripted model connection ends after its bytes.
#[derive(Clone, Copy)]
enum End {
    /// A TCP reset.
    Reset,
    /// Nothing more, the connection held open until the client goes.
    Hang,
    /// A clean close.
    Close,
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

/// The role delta every OpenAI stream opens with.
fn opening() -> String {
    delta(
        "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}",
        "null",
    )
}

fn text_delta(text: &str) -> String {
    delta(&format!("{{\"content\":{}}}", json!(text)), "null")
}

/// A model API on a real socket whose `n`-th request (from 0) is answered
/// with `script(n)`'s bytes and end. Counts requests, and connections the
/// client closed while held open.
struct ScriptedModel {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    hung_up: Arc<AtomicUsize>,
}

impl ScriptedModel {
    async fn start(
        script: impl Fn(usize) -> (String, End) + Send + Sync + 'static,
    ) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let hung_up = Arc::new(AtomicUsize::new(0));
        let script = Arc::new(script);
        let (count, hangs) = (requests.clone(), hung_up.clone());
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let (script, count, hangs) = (script.clone(), count.clone(), hangs.clone());
                tokio::spawn(async move {
                    if read_request(&mut stream).await.is_none() {
                        return;
                    }
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    let (bytes, end) = script(n);
                    if stream.write_all(bytes.as_bytes()).await.is_err() {
                        return;
                    }
                    match end {
                        End::Reset => {
                            // Let the bytes reach the client before the reset
                            // (a reset discards what is still unsent).
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            stream.set_zero_linger().unwrap();
                            drop(stream);
                        }
                        End::Hang => {
                            let mut buffer = [0u8; 256];
                            while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
                            hangs.fetch_add(1, Ordering::SeqCst);
                        }
                        End::Close => {
                            let _ = stream.shutdown().await;
                        }
                    }
                });
            }
        });
        ScriptedModel {
            addr,
            requests,
            hung_up,
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// A server whose `model` agent uses this API with `settings` (provider
    /// keys, indented by four spaces).
    async fn server(&self, settings: &str) -> TestServer {
        let top_level = format!(
            "providers:\n  - name: flaky\n    type: openai\n    base_url: http://{}/v1\n    model: gpt-4o-mini\n{settings}",
            self.addr
        );
        let agent = "  - name: model\n    handler: runtime\n    provider: flaky\n";
        TestServer::with_runtime(&top_level, agent).await
    }
}

/// Sends `content` and returns the turn's frames and the session's rows
/// once it has ended.
async fn model_turn(
    server: &TestServer,
    client: &mut Client,
    session: &str,
    content: &str,
) -> (Vec<Value>, Vec<(i64, String, String)>) {
    client.say(content).await;
    let frames = client.recv_turn().await;
    (frames, rows(&server.db_path, session))
}

#[tokio::test]
async fn a_model_stream_reset_mid_answer_is_provider_unavailable_and_is_not_retried() {
    let model = ScriptedModel::start(|n| match n {
        0 => (
            format!("{SSE_HEAD}{}{}", opening(), text_delta("Half an ans")),
            End::Reset,
        ),
        _ => (
            format!("{SSE_HEAD}{}", openai_text("A whole answer.")),
            End::Close,
        ),
    })
    .await;
    let server = model.server("").await;
    let (mut client, connected) = server.connect("agent=model").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let (frames, stored) = model_turn(&server, &mut client, &session, "tell me").await;
    let (terminal, body) = frames.split_last().unwrap();
    assert_eq!(body.len(), 1, "{frames:?}");
    assert_eq!(
        body[0]["content"], "Half an ans",
        "what was streamed is shown"
    );
    assert_error(
        terminal,
        "PROVIDER_UNAVAILABLE",
        "provider openai model gpt-4o-mini: stream interrupted after 1 attempt",
    );
    assert_eq!(model.requests(), 1, "text was streamed: no retry");
    assert_eq!(
        texts(&stored),
        [
            ("user", "tell me"),
            (
                "error",
                "provider openai model gpt-4o-mini: stream interrupted after 1 attempt"
            )
        ]
    );

    let (frames, stored) = model_turn(&server, &mut client, &session, "again").await;
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["content"], "A whole answer.");
    assert_eq!(texts(&stored)[3], ("assistant", "A whole answer."));
    assert_seqs_contiguous(&stored);
}

#[tokio::test]
async fn a_model_stream_reset_before_any_text_is_retried() {
    let model = ScriptedModel::start(|n| match n {
        0 => (format!("{SSE_HEAD}{}", opening()), End::Reset),
        _ => (
            format!("{SSE_HEAD}{}", openai_text("Second try.")),
            End::Close,
        ),
    })
    .await;
    let server = model.server("    max_retries: 1\n").await;
    let (mut client, connected) = server.connect("agent=model").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let (frames, stored) = model_turn(&server, &mut client, &session, "tell me").await;
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["content"], "Second try.");
    assert_eq!(model.requests(), 2);
    assert_eq!(
        texts(&stored),
        [("user", "tell me"), ("assistant", "Second try.")]
    );
}

#[tokio::test]
async fn a_malformed_model_stream_is_an_internal_error_naming_the_model() {
    let model = ScriptedModel::start(|n| match n {
        0 => (
            format!("{SSE_HEAD}{}data: {{not json}}\n\n", opening()),
            End::Close,
        ),
        _ => (
            format!("{SSE_HEAD}{}", openai_text("Readable.")),
            End::Close,
        ),
    })
    .await;
    let server = model.server("").await;
    let (mut client, connected) = server.connect("agent=model").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let (frames, stored) = model_turn(&server, &mut client, &session, "tell me").await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    let message = frames[0]["error"]["message"].as_str().unwrap();
    assert_eq!(frames[0]["error"]["code"], "INTERNAL_ERROR", "{frames:?}");
    assert!(
        message.starts_with("provider openai model gpt-4o-mini: unreadable stream"),
        "{message}"
    );
    assert!(!message.contains("not json"), "never the body: {message}");
    assert_eq!(model.requests(), 1, "an unreadable stream is not retried");
    assert_eq!(texts(&stored), [("user", "tell me"), ("error", message)]);

    let (frames, _) = model_turn(&server, &mut client, &session, "again").await;
    assert_eq!(frames.last().unwrap()["content"], "Readable.", "{frames:?}");
}

#[tokio::test]
async fn a_model_stream_that_never_ends_is_provider_stalled() {
    let model = ScriptedModel::start(|n| match n {
        0 => (
            format!("{SSE_HEAD}{}{}", opening(), text_delta("Thinking")),
            End::Hang,
        ),
        _ => (
            format!("{SSE_HEAD}{}", openai_text("Done now.")),
            End::Close,
        ),
    })
    .await;
    let server = model.server("    idle_timeout: 400ms\n").await;
    let (mut client, connected) = server.connect("agent=model").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let (frames, stored) = model_turn(&server, &mut client, &session, "tell me").await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "ended by the idle timeout"
    );
    let (terminal, body) = frames.split_last().unwrap();
    assert_eq!(body.len(), 1, "{frames:?}");
    assert_eq!(body[0]["content"], "Thinking");
    assert_error(
        terminal,
        "PROVIDER_STALLED",
        "provider openai model gpt-4o-mini: stream stalled for 400ms",
    );
    assert_eq!(
        texts(&stored),
        [
            ("user", "tell me"),
            (
                "error",
                "provider openai model gpt-4o-mini: stream stalled for 400ms"
            )
        ]
    );
    let (frames, _) = model_turn(&server, &mut client, &session, "again").await;
    assert_eq!(frames.last().unwrap()["content"], "Done now.", "{frames:?}");
    assert_eq!(
        model.hung_up.load(Ordering::SeqCst),
        1,
        "the stalled stream's connection was closed"
    );
}

#[tokio::test]
async fn a_model_that_never_sends_a_byte_is_provider_timeout() {
    let model = ScriptedModel::start(|n| match n {
        0 => (SSE_HEAD.to_owned(), End::Hang),
        _ => (format!("{SSE_HEAD}{}", openai_text("Here.")), End::Close),
    })
    .await;
    let server = model.server("    first_token_timeout: 400ms\n").await;
    let (mut client, connected) = server.connect("agent=model").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let (frames, stored) = model_turn(&server, &mut client, &session, "tell me").await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_error(
        &frames[0],
        "PROVIDER_TIMEOUT",
        "provider openai model gpt-4o-mini: no response within 400ms",
    );
    assert_eq!(model.requests(), 1, "a timeout is not retried");
    assert_eq!(stored.len(), 2, "{stored:?}");
    let (frames, _) = model_turn(&server, &mut client, &session, "again").await;
    assert_eq!(frames.last().unwrap()["content"], "Here.", "{frames:?}");
}

//! Several replicas of the server over one PostgreSQL database and one Redis
//! (`live: redis://…`): the one-turn-per-session rule across them, what each
//! sees of the other's writes, a killed replica's lease taken at once, and Redis
//! going away and coming back. The servers are `AGENTWIRE_TEST_POSTGRES` and
//! `AGENTWIRE_TEST_REDIS` (`scripts/test` starts both); without them the
//! tests are skipped, except under `CI`. Each test uses a Redis key prefix of
//! its own, and sessions get fresh ids, so the tests share both servers.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::support::{Client, Dialect, TestServer, agentwire_serve, http_get, start_child};

pub(crate) fn required(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the replica tests: set {var} (scripts/test does)"
            );
            eprintln!("skipped: no {what} (set {var})");
            None
        }
    }
}

/// The PostgreSQL and Redis URLs, when both servers are there.
pub(crate) fn servers() -> Option<(String, String)> {
    let postgres = required("AGENTWIRE_TEST_POSTGRES", "PostgreSQL server")?;
    let redis = required("AGENTWIRE_TEST_REDIS", "Redis server")?;
    Some((postgres, redis))
}

pub(crate) fn unique_prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("e2e-{test}-{}-{nanos}:", std::process::id())
}

/// The config of every replica of one deployment: the same database,
/// Redis and key prefix.
pub(crate) fn deployment(postgres: &str, redis: &str, prefix: &str, lease_ttl: &str) -> String {
    format!(
        "storage:\n  sessions: \"{postgres}\"\nlive: \"{redis}\"\nredis:\n  key_prefix: \"{prefix}\"\n  lease_ttl: {lease_ttl}\n  timeout: 300ms\n"
    )
}

async fn ask(client: &mut Client, session: &str, scenario: &str, content: &str) {
    client
        .send_json(json!({
            "type": "message",
            "content": content,
            "session_id": session,
            "metadata": {"mock_scenario": scenario},
        }))
        .await;
}

/// The turn's terminal frame (`done` or `error`).
async fn terminal(client: &mut Client) -> Value {
    client.recv_turn().await.pop().unwrap()
}

#[tokio::test]
async fn a_session_messaged_on_two_replicas_at_once_runs_one_turn_and_refuses_the_other() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let config = deployment(&postgres, &redis, &unique_prefix("busy"), "10s");
    let one = TestServer::with_top_level(&config).await;
    let two = TestServer::with_top_level(&config).await;
    let (mut on_one, connected) = one.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    ask(&mut on_one, &session, "echo", "hello").await;
    assert_eq!(terminal(&mut on_one).await["content"], "echo: hello");
    let (mut on_two, _) = two.connect("agent=test-agent").await;

    for round in 0..4 {
        // Both at once; whichever replica takes the lease first runs its
        // turn, and the other is refused, wherever each arrived.
        let (first, second) = if round % 2 == 0 {
            (&mut on_one, &mut on_two)
        } else {
            (&mut on_two, &mut on_one)
        };
        let (a_text, b_text) = (format!("a{round}"), format!("b{round}"));
        tokio::join!(
            ask(first, &session, "slow", &a_text),
            ask(second, &session, "slow", &b_text),
        );
        let (a, b) = tokio::join!(terminal(first), terminal(second));
        let refused: Vec<&Value> = [&a, &b]
            .into_iter()
            .filter(|frame| frame["error"]["code"] == "TURN_IN_PROGRESS")
            .collect();
        assert_eq!(refused.len(), 1, "exactly one refusal: {a} {b}");
        assert_eq!(refused[0]["session_id"], session.as_str());
        let done: Vec<&Value> = [&a, &b]
            .into_iter()
            .filter(|frame| frame["type"] == "done")
            .collect();
        assert_eq!(done.len(), 1, "exactly one turn ran: {a} {b}");
    }

    // Each replica's next turn sees every turn either ran: the one that
    // ran elsewhere is read from PostgreSQL when the lease changed hands.
    ask(&mut on_two, &session, "history", "two?").await;
    let from_two = terminal(&mut on_two).await;
    ask(&mut on_one, &session, "history", "one?").await;
    let from_one = terminal(&mut on_one).await;
    let two_saw = from_two["content"].as_str().unwrap();
    let one_saw = from_one["content"].as_str().unwrap();
    assert!(
        one_saw.starts_with(two_saw),
        "replica one's history holds replica two's turn:\n{one_saw}\n---\n{two_saw}"
    );
    assert!(one_saw.contains("user: two?\n"), "{one_saw}");
    let ran = (0..4)
        .filter(|round| {
            two_saw.contains(&format!("done: a{round}\n"))
                || two_saw.contains(&format!("done: b{round}\n"))
        })
        .count();
    assert_eq!(ran, 4, "every turn that ran is in the history: {two_saw}");
    assert!(
        !two_saw.contains("user: b0\n") || !two_saw.contains("user: a0\n"),
        "a refused message is not stored: {two_saw}"
    );
    let (status, body) = one.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    one.stop().await;
    two.stop().await;
}

/// A Redis server of the test's own, on a Unix socket in `dir`.
pub(crate) fn redis_server(dir: &Path) -> Option<tokio::process::Child> {
    redis_server_with(dir, &[])
}

/// [`redis_server`] with more of redis-server's options.
fn redis_server_with(dir: &Path, options: &[std::ffi::OsString]) -> Option<tokio::process::Child> {
    let binary = required("AGENTWIRE_TEST_REDIS_SERVER", "redis-server binary")?;
    let child = tokio::process::Command::new(binary)
        .args(["--port", "0", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(dir.join("redis.sock"))
        .arg("--dir")
        .arg(dir)
        .args(options)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server starts");
    Some(child)
}

pub(crate) async fn wait_for_socket(path: &Path) {
    for _ in 0..200 {
        if path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no Redis socket at {}", path.display());
}

/// A Redis server of the test's own (to stop and start again): its dir, the
/// process, its socket and URL; `None` without the binary.
pub(crate) async fn own_redis() -> Option<(
    tempfile::TempDir,
    tokio::process::Child,
    std::path::PathBuf,
    String,
)> {
    let dir = tempfile::tempdir().unwrap();
    let redis = redis_server(dir.path())?;
    let socket = dir.path().join("redis.sock");
    wait_for_socket(&socket).await;
    let url = format!("redis+unix://{}", socket.display());
    Some((dir, redis, socket, url))
}

#[tokio::test]
async fn redis_going_away_turns_readyz_503_and_refuses_turns_until_it_is_back() {
    let Some((postgres, _)) = servers() else {
        return;
    };
    let Some((dir, mut redis, socket, url)) = own_redis().await else {
        return;
    };
    let server =
        TestServer::with_top_level(&deployment(&postgres, &url, &unique_prefix("outage"), "3s"))
            .await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    ask(&mut client, &session, "echo", "before").await;
    assert_eq!(terminal(&mut client).await["content"], "echo: before");

    redis.kill().await.unwrap();
    let _ = std::fs::remove_file(&socket);
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body, "live state unavailable\n");
    // No turn without the lease: an internal error, nothing stored, and
    // the connection goes on.
    ask(&mut client, &session, "echo", "during").await;
    let refused = terminal(&mut client).await;
    assert_eq!(refused["error"]["code"], "INTERNAL_ERROR", "{refused}");
    assert_eq!(refused["error"]["message"], "internal server error");

    let _redis = redis_server(dir.path()).unwrap();
    wait_for_socket(&socket).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = server.get("/readyz").await;
        if status == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz still {status} 10 s after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ask(&mut client, &session, "history", "after").await;
    let done = terminal(&mut client).await;
    assert_eq!(done["type"], "done", "{done}");
    let history = done["content"].as_str().unwrap();
    assert!(history.contains("user: before\n"), "{history}");
    assert!(
        !history.contains("during"),
        "the refused message was stored: {history}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_killed_replicas_session_is_taken_at_once_its_orphan_ended_first() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_prefix("kill");
    let config_text = format!(
        "server:\n  listen: 127.0.0.1:0\n{}agents:\n  - name: test-agent\n    handler: test\n",
        deployment(&postgres, &redis, &prefix, "3s")
    );
    let config = dir.path().join("agentwire.yaml");
    std::fs::write(&config, config_text).unwrap();
    let (mut child, address, mut lines) = start_child(agentwire_serve(&config)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let request = format!("ws://{address}/ws?agent=test-agent")
        .into_client_request()
        .unwrap();
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut doomed = Client::new(ws, Dialect::Omnia);
    let connected = doomed.recv().await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    ask(&mut doomed, &session, "echo", "stored").await;
    assert_eq!(terminal(&mut doomed).await["content"], "echo: stored");
    ask(&mut doomed, &session, "slow", "never answered").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed_at = tokio::time::Instant::now();

    let survivor = TestServer::with_top_level(&deployment(&postgres, &redis, &prefix, "3s")).await;
    let (mut client, _) = survivor.connect("agent=test-agent").await;
    // The dead replica's lease is taken at once: the kernel closed its
    // connections, so Redis has no subscription of it left (a replica cut
    // off from Redis, whose connections stay open, keeps its lease until
    // the TTL: `failover.rs`).
    let mut refusals = 0;
    loop {
        ask(&mut client, &session, "history", "again").await;
        let frame = terminal(&mut client).await;
        if frame["type"] == "done" {
            let history = frame["content"].as_str().unwrap();
            assert!(history.contains("user: stored\n"), "{history}");
            assert!(history.contains("assistant: echo: stored\n"), "{history}");
            // The dead replica's turn was ended before this one started.
            let (_, metrics) = survivor.get("/metrics").await;
            assert_eq!(
                crate::support::metric(&metrics, "agentwire_live_orphaned_turns_ended_total"),
                1.0
            );
            break;
        }
        assert_eq!(frame["error"]["code"], "TURN_IN_PROGRESS", "{frame}");
        refusals += 1;
        assert!(
            killed_at.elapsed() < Duration::from_secs(4),
            "the session is still busy {:?} after the kill (lease TTL 3 s)",
            killed_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(refusals, 0, "the dead replica's lease held the session");
    assert!(killed_at.elapsed() < Duration::from_secs(3));
    let (status, _) = http_get(survivor.addr, "/readyz").await;
    assert_eq!(status, 200);
    survivor.stop().await;
}

/// A Redis server of the test's own that speaks TLS only, on 127.0.0.1,
/// its certificate (for localhost) from `scripts/test-certs.sh`; its port
/// and the CA's PEM file.
async fn tls_redis(dir: &Path) -> Option<(tokio::process::Child, u16, std::path::PathBuf)> {
    required("AGENTWIRE_TEST_REDIS_SERVER", "redis-server binary")?;
    let certs = dir.join("tls");
    let made =
        std::process::Command::new(crate::support::repo_root().join("scripts/test-certs.sh"))
            .arg(&certs)
            .status()
            .expect("test-certs.sh runs");
    assert!(made.success(), "test-certs.sh");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut options: Vec<std::ffi::OsString> = ["--bind", "127.0.0.1", "--tls-auth-clients", "no"]
        .map(Into::into)
        .into();
    options.extend(["--tls-port".into(), port.to_string().into()]);
    for (option, file) in [
        ("--tls-cert-file", "server.pem"),
        ("--tls-key-file", "server.key"),
        ("--tls-ca-cert-file", "ca.pem"),
    ] {
        options.extend([option.into(), certs.join(file).into_os_string()]);
    }
    let child = redis_server_with(dir, &options)?;
    wait_for_socket(&dir.join("redis.sock")).await;
    Some((child, port, certs.join("ca.pem")))
}

#[tokio::test]
async fn rediss_is_tls_with_the_servers_certificate_checked() {
    let Some((postgres, _)) = servers() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some((_redis, port, ca)) = tls_redis(dir.path()).await else {
        return;
    };
    let config = |url: &str, ca_file: Option<&Path>| {
        let mut config = deployment(&postgres, url, &unique_prefix("tls"), "3s");
        if let Some(ca) = ca_file {
            config.push_str(&format!("  tls_ca_file: {}\n", ca.display()));
        }
        config
    };
    // Verified against the CA given: the server starts and answers a turn.
    let verified = config(&format!("rediss://localhost:{port}"), Some(&ca));
    assert_eq!(crate::postgres::startup_error_of(&verified).await, None);

    for (url, ca_file, expected) in [
        // The system's roots do not know the test's CA.
        (format!("rediss://localhost:{port}"), None, "UnknownIssuer"),
        // The certificate names localhost only.
        (
            format!("rediss://127.0.0.1:{port}"),
            Some(ca.as_path()),
            "certificate not valid for name",
        ),
        // Plaintext to a port that speaks TLS only.
        (
            format!("redis://localhost:{port}"),
            None,
            "cannot reach Redis",
        ),
    ] {
        let error = crate::postgres::startup_error_of(&config(&url, ca_file))
            .await
            .expect("refused");
        assert!(error.starts_with("live: "), "{url}: {error}");
        assert!(error.contains(expected), "{url}: {error}");
    }
}

//! The built binary as users run it: `serve` with its listening log line and
//! SIGTERM drain, the `hash-*` commands, and what reaches its log.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::config_errors::{ONE_AGENT, agentwire, check_config, write_config};
use crate::credentials::base64url;
use crate::support::{Client, Dialect};

#[tokio::test]
async fn serve_with_bad_config_exits_64_before_listening() {
    let (_dir, path) = write_config(&format!("server:\n  limts: {{}}\n{ONE_AGENT}"));
    let output = agentwire()
        .env("RUST_LOG", "info")
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "stderr: {stderr}");
    assert!(
        stderr.contains("config error: server.limts: "),
        "{stderr:?}"
    );
    assert!(!stderr.contains("agentwire listening"), "{stderr:?}");
}

/// A spawned server process, killed if the test ends early.
struct ServerProcess {
    child: Child,
    stderr: mpsc::UnboundedReceiver<String>,
}

impl ServerProcess {
    fn spawn(args: &[&str], current_dir: Option<&Path>) -> ServerProcess {
        ServerProcess::spawn_logging(args, current_dir, "info")
    }

    fn spawn_logging(args: &[&str], current_dir: Option<&Path>, log: &str) -> ServerProcess {
        let mut command = agentwire();
        command
            .env("RUST_LOG", log)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(dir) = current_dir {
            command.current_dir(dir);
        }
        let mut child = command.spawn().expect("the binary starts");
        let pipe = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        // Keeps draining stderr for the life of the process so it never blocks.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens any more; keep reading so the pipe drains.
                }
            }
        });
        ServerProcess { child, stderr: rx }
    }

    /// Reads stderr until the `agentwire listening` line; its `address=`.
    async fn listening_address(&mut self) -> SocketAddr {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        loop {
            let line = match tokio::time::timeout_at(deadline, self.stderr.recv()).await {
                Ok(Some(line)) => strip_ansi(&line),
                Ok(None) => panic!("stderr closed before the listening line: {seen:#?}"),
                Err(_) => panic!("no listening line within 10 s: {seen:#?}"),
            };
            if line.contains("agentwire listening") {
                let address = line
                    .split_whitespace()
                    .find_map(|field| field.strip_prefix("address="))
                    .unwrap_or_else(|| panic!("no address= in {line:?}"));
                return address
                    .parse()
                    .unwrap_or_else(|e| panic!("bad address {address:?}: {e}"));
            }
            seen.push(line);
        }
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM failed");
    }

    /// `serve` on the config `text` at `RUST_LOG=debug`, listening: the
    /// process, its address, and the config's directory (kept with it).
    async fn serve_at_debug(text: &str) -> (ServerProcess, SocketAddr, tempfile::TempDir) {
        let (dir, path) = write_config(text);
        let path = path.to_str().unwrap().to_owned();
        let mut server = ServerProcess::spawn_logging(
            &["serve", "--config", &path, "--listen", "127.0.0.1:0"],
            Some(dir.path()),
            "debug",
        );
        let addr = server.listening_address().await;
        (server, addr, dir)
    }

    /// SIGTERM, the exit, then every line it logged since the listening one.
    async fn drained_log(&mut self) -> String {
        self.sigterm();
        self.wait_exit(Duration::from_secs(10)).await;
        let mut log = String::new();
        while let Ok(line) = self.stderr.try_recv() {
            log.push_str(&line);
            log.push('\n');
        }
        log
    }

    /// Waits for the process to exit.
    async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "process still running after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Removes `ESC [ ... letter` sequences, in case the log is coloured.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test]
async fn binary_serves_and_drains_on_sigterm() {
    let (dir, path) = write_config(&format!("storage:\n  sessions: memory\n{ONE_AGENT}"));
    let path = path.to_str().unwrap().to_owned();
    let mut server = ServerProcess::spawn(
        &["serve", "--config", &path, "--listen", "127.0.0.1:0"],
        Some(dir.path()),
    );
    let addr = server.listening_address().await;
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");

    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws?agent=echo"))
        .await
        .expect("upgrade accepted");
    let mut client = Client::new(ws, Dialect::Omnia);
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    client
        .send_json(json!({"type": "message", "content": "hi"}))
        .await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"], "Echo: hi", "{done}");

    server.sigterm();
    let frame = client
        .expect_close(Duration::from_secs(5))
        .await
        .expect("a close frame");
    assert_eq!(frame.code, CloseCode::Away, "{frame:?}");
    let status = server.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{status:?}");
    // Memory storage: nothing written next to the config.
    assert!(!dir.path().join("data").exists());
}

#[tokio::test]
async fn serve_without_config_uses_data_dir_under_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServerProcess::spawn(&["serve", "--listen", "127.0.0.1:0"], Some(dir.path()));
    let addr = server.listening_address().await;
    assert_ne!(
        addr.port(),
        8080,
        "--listen overrides the demo config's port"
    );

    // The demo config serves `echo` too; a turn proves the store is open.
    let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws?agent=echo"))
        .await
        .expect("upgrade accepted");
    let mut client = Client::new(ws, Dialect::Omnia);
    assert_eq!(client.recv().await["type"], "connected");
    client.say("hello").await;
    let done = client.recv().await;
    assert_eq!(done["content"], "Echo: hello", "{done}");

    let db = dir.path().join("data").join("agentwire.db");
    assert!(db.is_file(), "{} should exist", db.display());

    server.sigterm();
    let status = server.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[tokio::test]
async fn hash_commands_print_what_the_config_takes() {
    use std::io::Write as _;
    let run = |subcommand: &str, input: &str| {
        let mut child = agentwire()
            .arg(subcommand)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{subcommand}: {:?}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    assert_eq!(
        run("hash-key", "abc\n"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let phc = run("hash-password", "s3cret\n");
    assert!(phc.starts_with("$argon2id$"), "{phc}");
    let (_dir, path) = write_config(&format!(
        "auth:\n  api_keys:\n    - id: k\n      sha256: ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n      subject: s\nagents:\n  - name: a\n    handler: echo\n    password_argon2: '{phc}'\n"
    ));
    let output = check_config(&path);
    assert!(
        output.status.success(),
        "{:?}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The API keys, secrets and agent passwords `no_credential_reaches_the_log`
/// configures or presents, good and bad.
const LOG_KEY: &str = "ak_log_test_secret_key_0001";
const LOG_BAD_KEY: &str = "ak_log_test_wrong_key_0002";
const LOG_SECRET: &str = "log-test-hs256-secret-at-least-32-bytes";
const LOG_PSEUDONYM_KEY: &str = "log-test-pseudonym-key";
const LOG_PASSWORD: &str = "log-test-agent-password";
const LOG_BAD_PASSWORD: &str = "log-test-wrong-password";

/// An HS256 JWT of the log test's issuer and audience for `sub`, expiring
/// at `exp`, signed with `secret`.
fn hs256_jwt(sub: &str, exp: i64, secret: &str) -> String {
    use hmac::{Hmac, Mac};
    use sha2::Sha256;
    let head = base64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = base64url(
        json!({"iss": "https://i.test", "aud": "a", "sub": sub, "exp": exp})
            .to_string()
            .as_bytes(),
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{head}.{body}").as_bytes());
    format!("{head}.{body}.{}", base64url(&mac.finalize().into_bytes()))
}

/// The JWTs the log test presents: a good one, one signed with another
/// secret, an expired one, and a good one to refresh with.
struct LogTokens {
    good: String,
    forged: String,
    expired: String,
    refresh: String,
}

impl LogTokens {
    fn new() -> LogTokens {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        LogTokens {
            good: hs256_jwt("log-subject-alice", now + 600, LOG_SECRET),
            forged: hs256_jwt(
                "log-subject-alice",
                now + 600,
                "a-different-secret-at-least-32-bytes!!",
            ),
            expired: hs256_jwt("log-subject-alice", now - 600, LOG_SECRET),
            refresh: hs256_jwt("log-subject-alice", now + 1200, LOG_SECRET),
        }
    }
}

/// The log test's config: the API key, the JWT secret, the pseudonym key,
/// and a `locked` agent behind [`LOG_PASSWORD`].
fn log_test_config() -> String {
    use sha2::{Digest, Sha256};
    let digest: String = Sha256::digest(LOG_KEY.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let phc = agentwire_auth::hash_password(LOG_PASSWORD).unwrap();
    format!(
        "storage:\n  sessions: memory\nauth:\n  pseudonym_key: {LOG_PSEUDONYM_KEY}\n  api_keys:\n    - id: log-key\n      sha256: {digest}\n      subject: log-subject-bob\n  jwt:\n    issuer: https://i.test\n    audience: a\n    hs256_secret: {LOG_SECRET}\n{ONE_AGENT}  - name: locked\n    handler: echo\n    password_argon2: '{phc}'\n"
    )
}

/// Each key and token as an Omnia bearer; where admitted, a refresh with a
/// good token and a forged one, then a message.
async fn present_omnia_bearers(addr: SocketAddr, tokens: &LogTokens) {
    for bearer in [
        LOG_KEY,
        LOG_BAD_KEY,
        tokens.good.as_str(),
        tokens.forged.as_str(),
        tokens.expired.as_str(),
    ] {
        let mut request =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
                format!("ws://{addr}/ws?agent=echo"),
            )
            .unwrap();
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {bearer}").parse().unwrap());
        if let Ok((ws, _)) = tokio_tungstenite::connect_async(request).await {
            let mut client = Client::new(ws, Dialect::Omnia);
            client.recv().await;
            client
                .send_json(json!({"type": "credential_refresh", "token": tokens.refresh}))
                .await;
            client
                .send_json(json!({"type": "credential_refresh", "token": tokens.forged}))
                .await;
            client
                .send_json(json!({"type": "message", "content": "hello"}))
                .await;
            let done = client.recv().await;
            assert!(
                !done.to_string().contains(bearer),
                "no credential in a frame"
            );
        }
    }
}

/// The Gnosari dialect also takes credentials in the query and in its own
/// headers: each, good and bad, admitted or refused as it should be.
async fn present_gnosari_credentials(addr: SocketAddr, tokens: &LogTokens) {
    let gnosari = [
        (format!("/ws/agent/echo?token={}", tokens.good), None, true),
        (
            format!("/ws/agent/echo?token={}", tokens.forged),
            None,
            false,
        ),
        (format!("/ws/agent/echo?api_key={LOG_KEY}"), None, true),
        (format!("/ws/agent/echo?api_key={LOG_BAD_KEY}"), None, false),
        (
            "/ws/agent/echo".to_owned(),
            Some(("X-AUTH-TOKEN", LOG_KEY)),
            true,
        ),
        (
            format!("/ws/agent/locked?password={LOG_PASSWORD}"),
            None,
            true,
        ),
        (
            format!("/ws/agent/locked?password={LOG_BAD_PASSWORD}"),
            None,
            false,
        ),
        (
            "/ws/agent/locked".to_owned(),
            Some(("X-Access-Password", LOG_PASSWORD)),
            true,
        ),
    ];
    for (path, header, admitted) in gnosari {
        let mut request =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
                format!("ws://{addr}{path}"),
            )
            .unwrap();
        if let Some((name, value)) = header {
            request.headers_mut().insert(name, value.parse().unwrap());
        }
        let connected = tokio_tungstenite::connect_async(request).await;
        assert_eq!(connected.is_ok(), admitted, "{path} {header:?}");
        if let Ok((ws, _)) = connected {
            let mut client = Client::new(ws, Dialect::Gnosari);
            client.send_json(json!({"message": "hello"})).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), client.next_message()).await;
        }
    }
}

/// No key, secret, password, token, token signature or subject in `log`.
fn assert_no_credential_in(log: &str, tokens: &LogTokens) {
    for secret in [
        LOG_KEY,
        LOG_BAD_KEY,
        LOG_SECRET,
        LOG_PSEUDONYM_KEY,
        LOG_PASSWORD,
        LOG_BAD_PASSWORD,
        &tokens.good,
        &tokens.forged,
        &tokens.expired,
        &tokens.refresh,
        "log-subject-alice",
        "log-subject-bob",
    ] {
        assert!(
            !log.contains(secret),
            "{secret:?} appears in the log:\n{log}"
        );
    }
    // Signature segments alone must not leak either.
    for token in [&tokens.good, &tokens.forged] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            !log.contains(signature),
            "a token signature appears in the log"
        );
    }
}

/// Every credential the server sees, good and bad, must stay out of its log.
#[tokio::test]
async fn no_credential_reaches_the_log() {
    let tokens = LogTokens::new();
    let (mut server, addr, _dir) = ServerProcess::serve_at_debug(&log_test_config()).await;
    present_omnia_bearers(addr, &tokens).await;
    present_gnosari_credentials(addr, &tokens).await;
    let log = server.drained_log().await;
    assert!(
        log.contains("credential refused"),
        "the refusals were logged (without the credentials): {log}"
    );
    assert_no_credential_in(&log, &tokens);
}

/// A voice call's words stay out of the log at `debug`: what the caller
/// said, what the agent answered, its instructions, the OpenAI Realtime
/// key and what that provider said; audio never appears as data.
#[tokio::test]
async fn no_call_transcript_instruction_or_audio_reaches_the_log() {
    use crate::voice::{WEATHER_16K, audio_frame, next_text, speak, until_done};
    use crate::voice_openai::{KEY, fake_realtime};
    let (realtime, _seen) = fake_realtime().await;
    const SAID: &str = "zebra42 secret utterance";
    const REPLY: &str = "okapi77 secret reply";
    const INSTRUCTIONS: &str = "quokka99 secret instructions";
    let (mut server, addr, _dir) = ServerProcess::serve_at_debug(&format!(
        "storage:\n  sessions: memory\nproviders:\n  - {{name: text, type: mock, default_response: hi}}\nvoice_providers:\n  - {{name: v, type: mock, output: echo, reply: \"{REPLY}\", user_transcripts: [\"{SAID}\"]}}\n  - {{name: broken, type: mock, fail_after_frames: 2}}\n  - {{name: rt, type: openai_realtime, model: gpt-realtime, api_key: {KEY}, url: \"ws://{realtime}/v1/realtime\"}}\nagents:\n  - {{name: caller, handler: runtime, provider: text, instructions: \"{INSTRUCTIONS}\", voice: v}}\n  - {{name: failing, handler: echo, voice: broken}}\n  - {{name: realtime-caller, handler: echo, voice: rt}}\n"
    ))
    .await;
    for agent in ["caller", "failing"] {
        let url = format!("ws://{addr}/ws?agent={agent}&binary=true");
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut client = Client::new(ws, Dialect::Omnia);
        let connected = client.recv().await;
        let session = connected["session_id"].as_str().unwrap().to_owned();
        for (sequence, chunk) in WEATHER_16K.chunks(640).enumerate() {
            let frame = audio_frame(&session, sequence as u32, 16_000, 0, chunk);
            if client.send_message(Message::binary(frame)).await.is_err() {
                break;
            }
            // Twice real time, as a client catching up would.
            if sequence % 2 == 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // Until the reply's done, or the failure.
        loop {
            match tokio::time::timeout(Duration::from_secs(10), client.next_message()).await {
                Ok(Some(Ok(Message::Text(text)))) => {
                    let frame: serde_json::Value = serde_json::from_str(&text).unwrap();
                    if frame["type"] == "done" || frame["type"] == "error" {
                        break;
                    }
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("the call ended early: {other:?}"),
            }
        }
    }
    // On OpenAI Realtime (the fake): its format, then its transcripts.
    let url = format!("ws://{addr}/ws?agent=realtime-caller&binary=true");
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut client = Client::new(ws, Dialect::Omnia);
    let session = client.recv().await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    speak(&mut client, &session, 16_000, 0, &WEATHER_16K[..640], false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    speak(&mut client, &session, 24_000, 1, &[1u8; 960 * 40], false).await;
    let (texts, _) = until_done(&mut client, &session).await;
    assert_eq!(texts[0]["content"], "what is the weather");
    client.send_json(json!({"type": "hangup"})).await;
    drop(client);
    let log = server.drained_log().await;
    assert!(
        log.contains("a voice call failed"),
        "the failure was logged: {log}"
    );
    for secret in [
        SAID,
        REPLY,
        INSTRUCTIONS,
        "zebra42",
        "okapi77",
        "quokka99",
        KEY,
        "what is the weather",
        "Sunny",
    ] {
        assert!(
            !log.contains(secret),
            "{secret:?} appears in the log:\n{log}"
        );
    }
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2_000, "a {longest}-byte log line: audio as data?");
}

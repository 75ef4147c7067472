//! The built binary against bad config files: exit status 64 and a stderr
//! line that names the offending key; plus a smoke test of `serve` and
//! SIGTERM over a real process.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::support::Client;

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// A valid `agents:` block for configs whose fault lies elsewhere.
const ONE_AGENT: &str = "agents:\n  - name: echo\n    handler: echo\n";

/// Writes `text` as `config.yaml` in a fresh directory.
fn write_config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A command for the binary with the test's variables cleared from its
/// environment, so a developer's shell cannot change the outcome.
fn agentwire() -> Command {
    let mut command = Command::new(BIN);
    command
        .env_remove("AGENTWIRE_TEST_UNSET_VAR_XYZ")
        .env_remove("AGENTWIRE_TEST_PORT_VAR")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

fn check_config(path: &Path) -> Output {
    agentwire()
        .arg("check-config")
        .arg("--config")
        .arg(path)
        .output()
        .expect("the binary runs")
}

/// Runs `check-config` on `text`; asserts exit 64 and that stderr is
/// `config error: <key>: ...` mentioning `fragment`.
fn assert_rejected(text: &str, key: &str, fragment: &str) {
    let (_dir, path) = write_config(text);
    let output = check_config(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(64),
        "exit status for {key}; stderr: {stderr}"
    );
    let prefix = format!("config error: {key}: ");
    assert!(
        stderr.starts_with(&prefix),
        "stderr should start with {prefix:?}, got {stderr:?}"
    );
    assert!(
        stderr.contains(fragment),
        "stderr should mention {fragment:?}, got {stderr:?}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[tokio::test]
async fn unknown_top_level_key_in_server_is_named() {
    assert_rejected(
        &format!("server:\n  limts: {{}}\n{ONE_AGENT}"),
        "server.limts",
        "unknown field `limts`",
    );
}

#[tokio::test]
async fn unknown_nested_limit_key_is_named() {
    assert_rejected(
        &format!("server:\n  limits:\n    max_conections: 5\n{ONE_AGENT}"),
        "server.limits.max_conections",
        "unknown field `max_conections`",
    );
}

#[tokio::test]
async fn unknown_root_and_agent_keys_are_named() {
    assert_rejected(
        &format!("bogus: 1\n{ONE_AGENT}"),
        "bogus",
        "unknown field `bogus`",
    );
    assert_rejected(
        "agents:\n  - name: a\n    handler: echo\n    extra: 1\n",
        "agents[0].extra",
        "unknown field `extra`",
    );
}

#[tokio::test]
async fn bad_duration_is_named() {
    assert_rejected(
        &format!("server:\n  limits:\n    ping_interval: 30 seconds\n{ONE_AGENT}"),
        "server.limits.ping_interval",
        "invalid duration \"30 seconds\"",
    );
}

#[tokio::test]
async fn unsupported_session_storage_is_named() {
    assert_rejected(
        &format!("storage:\n  sessions: postgres://x\n{ONE_AGENT}"),
        "storage.sessions",
        "postgres://x",
    );
}

#[tokio::test]
async fn runtime_agents_need_a_declared_provider() {
    assert_rejected(
        "agents:\n  - name: echo\n    handler: echo\n  - name: r\n    handler: runtime\n",
        "agents[1].provider",
        "required for `handler: runtime`",
    );
    assert_rejected(
        "agents:\n  - name: r\n    handler: runtime\n    provider: nope\n",
        "agents[0].provider",
        "no provider named \"nope\"",
    );
}

#[tokio::test]
async fn runtime_fields_need_the_runtime_handler() {
    assert_rejected(
        "agents:\n  - name: e\n    handler: echo\n    instructions: be nice\n",
        "agents[0].handler",
        "need `handler: runtime`",
    );
}

#[tokio::test]
async fn providers_and_tools_are_validated() {
    let provider = "providers:\n  - name: p\n    type: mock\n";
    let agent = "agents:\n  - name: r\n    handler: runtime\n    provider: p\n";
    assert_rejected(
        &format!("{provider}{agent}    tools: [missing]\n"),
        "agents[0].tools[0]",
        "no tool named \"missing\"",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: openai\n",
        "providers[0].model",
        "required",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: openai\n    model: m\n    api_key_env: AGENTWIRE_TEST_UNSET_KEY_XYZ\n",
        "providers[0].api_key_env",
        "AGENTWIRE_TEST_UNSET_KEY_XYZ is not set",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: mock\n    base_url: http://x\n",
        "providers[0].base_url",
        "does not apply",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: gemini\n",
        "providers[0].type",
        "unknown variant",
    );
    assert_rejected(
        &format!("{provider}tools:\n  - name: t\n    type: http\n"),
        "tools[0].request",
        "required for `type: http`",
    );
    assert_rejected(
        &format!("{provider}tools:\n  - name: t\n    type: client\n    parameters: {{type: 12}}\n"),
        "tools[0].parameters",
        "schema",
    );
    assert_rejected(
        &format!("{provider}tools:\n  - name: t\n    type: client\n    command: ls\n"),
        "tools[0].command",
        "does not apply",
    );
    assert_rejected(
        &format!("{provider}{agent}    message_metadata_template: \"{{{{ unclosed\"\n"),
        "agents[0].message_metadata_template",
        "",
    );
    assert_rejected(
        &format!(
            "{provider}{provider_again}",
            provider_again = "  - name: p\n    type: mock\n"
        ),
        "providers[1].name",
        "duplicate",
    );
}

#[tokio::test]
async fn unknown_handler_is_named() {
    assert_rejected(
        "agents:\n  - name: a\n    handler: bogus\n",
        "agents[0].handler",
        "unknown variant `bogus`",
    );
}

#[tokio::test]
async fn duplicate_agent_name_is_named() {
    assert_rejected(
        "agents:\n  - name: a\n    handler: echo\n  - name: a\n    handler: test\n",
        "agents[1].name",
        "duplicate agent name \"a\"",
    );
}

#[tokio::test]
async fn no_agents_is_an_error() {
    assert_rejected(
        "storage:\n  sessions: memory\n",
        "agents",
        "at least one agent",
    );
    assert_rejected("agents: []\n", "agents", "at least one agent");
}

#[tokio::test]
async fn unset_variable_without_default_is_named() {
    assert_rejected(
        &format!("server:\n  listen: ${{AGENTWIRE_TEST_UNSET_VAR_XYZ}}\n{ONE_AGENT}"),
        "${AGENTWIRE_TEST_UNSET_VAR_XYZ}",
        "not set",
    );
}

#[tokio::test]
async fn pong_timeout_must_exceed_ping_interval() {
    for pong in ["30s", "10s"] {
        assert_rejected(
            &format!(
                "server:\n  limits:\n    ping_interval: 30s\n    pong_timeout: {pong}\n{ONE_AGENT}"
            ),
            "server.limits.pong_timeout",
            "ping_interval",
        );
    }
}

#[tokio::test]
async fn unreadable_config_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = check_config(&dir.path().join("missing.yaml"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "stderr: {stderr}");
    assert!(stderr.starts_with("config error: --config: "), "{stderr:?}");
}

#[tokio::test]
async fn variable_default_is_substituted() {
    // The default is used when the variable is unset...
    let (_dir, path) = write_config(&format!(
        "server:\n  listen: ${{AGENTWIRE_TEST_PORT_VAR:127.0.0.1:0}}\n{ONE_AGENT}"
    ));
    let output = check_config(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(": ok"), "stdout: {stdout:?}");

    // ...and is really what gets validated: a bad default fails on the key.
    assert_rejected(
        &format!("server:\n  listen: ${{AGENTWIRE_TEST_PORT_VAR:not-an-address}}\n{ONE_AGENT}"),
        "server.listen",
        "not-an-address",
    );

    // A set variable wins over the default.
    let (_dir2, path) = write_config(&format!(
        "server:\n  listen: ${{AGENTWIRE_TEST_PORT_VAR:not-an-address}}\n{ONE_AGENT}"
    ));
    let output = agentwire()
        .env("AGENTWIRE_TEST_PORT_VAR", "127.0.0.1:0")
        .arg("check-config")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

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
    let mut client = Client { ws };
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
    let mut client = Client { ws };
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
async fn media_storage_keys_are_checked_and_named() {
    let media = |body: &str| format!("storage:\n  media:\n{body}{ONE_AGENT}");
    let cases = [
        (
            "    bogus: 1\n",
            "storage.media.bogus",
            "unknown field `bogus`",
        ),
        (
            "    backend: ftp\n",
            "storage.media.backend",
            "unknown variant `ftp`",
        ),
        (
            "    backend: local\n",
            "storage.media.path",
            "required when storage.media.backend is local",
        ),
        (
            "    backend: local\n    path: ''\n",
            "storage.media.path",
            "required",
        ),
        (
            "    backend: s3\n",
            "storage.media.bucket",
            "required when storage.media.backend is s3",
        ),
        (
            "    backend: s3\n    bucket: b\n    endpoint: ftp://x\n",
            "storage.media.endpoint",
            "http://",
        ),
        (
            "    backend: s3\n    bucket: b\n    path: /tmp/x\n",
            "storage.media.path",
            "only used with storage.media.backend local",
        ),
        (
            "    backend: local\n    path: /tmp/x\n    bucket: b\n",
            "storage.media.bucket",
            "only used with storage.media.backend s3",
        ),
        (
            "    backend: local\n    path: /tmp/x\n    region: r\n",
            "storage.media.region",
            "only used with storage.media.backend s3",
        ),
        (
            "    max_bytes: 0\n",
            "storage.media.max_bytes",
            "must be greater than 0",
        ),
        (
            "    max_bytes: lots\n",
            "storage.media.max_bytes",
            "invalid",
        ),
        ("    max_bytes: -1\n", "storage.media.max_bytes", "invalid"),
        (
            "    ttl: 1 day\n",
            "storage.media.ttl",
            "invalid duration \"1 day\"",
        ),
        (
            "    ttl: 0s\n",
            "storage.media.ttl",
            "must be greater than 0",
        ),
    ];
    for (body, key, fragment) in cases {
        assert_rejected(&media(body), key, fragment);
    }
}

#[tokio::test]
async fn valid_media_storage_configs_pass() {
    for body in [
        "    backend: none\n",
        // Keys of another backend are ignored while media is off.
        "    backend: none\n    path: /tmp/x\n    bucket: b\n",
        "    backend: local\n    path: ./data/media\n    max_bytes: 1048576\n    ttl: 1h\n",
        "    backend: s3\n    bucket: media\n    endpoint: http://127.0.0.1:9000\n    region: eu-west-1\n",
    ] {
        let (_dir, path) = write_config(&format!("storage:\n  media:\n{body}{ONE_AGENT}"));
        let output = check_config(&path);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{body}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn screening_keys_are_checked_and_named() {
    let cases = [
        (
            "screening:\n  enabld: false\n",
            "screening.enabld",
            "unknown field `enabld`",
        ),
        (
            "screening:\n  enabled: maybe\n",
            "screening.enabled",
            "expected a boolean",
        ),
        (
            "screening:\n  phrases: [\"open sesame\", \"  \"]\n",
            "screening.phrases[1]",
            "must not be empty",
        ),
        (
            "screening:\n  phrases: []\n",
            "screening.phrases",
            "at least one phrase, or `enabled: false`",
        ),
        (
            "screening:\n  phrases: open sesame\n",
            "screening.phrases",
            "expected a sequence",
        ),
    ];
    for (body, key, fragment) in cases {
        assert_rejected(&format!("{body}{ONE_AGENT}"), key, fragment);
    }
}

#[tokio::test]
async fn valid_screening_configs_pass() {
    for body in [
        "screening: {}\n",
        "screening:\n  enabled: false\n  phrases: []\n",
        "screening:\n  phrases: [open sesame, \"ignore   previous instructions\"]\n",
    ] {
        let (_dir, path) = write_config(&format!("{body}{ONE_AGENT}"));
        let output = check_config(&path);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{body}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn summary_keys_are_checked_and_named() {
    let provider = "providers:\n  - name: summaries\n    type: mock\n";
    let cases = [
        (
            "agents:\n  - name: echo\n    handler: echo\n    summary_after_idle: 0s\n",
            "agents[0].summary_after_idle",
            "must be greater than 0",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n    summary_after_idle: soon\n",
            "agents[0].summary_after_idle",
            "invalid duration",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n    summarizer: ghost\n",
            "agents[0].summarizer",
            "no provider named \"ghost\" in providers[]",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n  - name: b\n    handler: echo\n    summarizer: [summaries]\n",
            "agents[1].summarizer",
            "expected a string",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n    summary_after_idel: 5m\n",
            "agents[0].summary_after_idel",
            "unknown field `summary_after_idel`",
        ),
    ];
    for (body, key, fragment) in cases {
        assert_rejected(&format!("{provider}{body}"), key, fragment);
    }
}

#[tokio::test]
async fn valid_summary_configs_pass() {
    let config = [
        "providers:",
        "  - name: summaries",
        "    type: mock",
        "agents:",
        "  - name: echo",
        "    handler: echo",
        "    summary_after_idle: 30s",
        "    summarizer: summaries",
        "  - name: demo",
        "    handler: demo",
    ];
    let (_dir, path) = write_config(&(config.join("\n") + "\n"));
    let output = check_config(&path);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
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

/// Every credential the server sees, good and bad, must stay out of its log.
#[tokio::test]
async fn no_credential_reaches_the_log() {
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};
    const KEY: &str = "ak_log_test_secret_key_0001";
    const BAD_KEY: &str = "ak_log_test_wrong_key_0002";
    const SECRET: &str = "log-test-hs256-secret-at-least-32-bytes";
    const PSEUDONYM_KEY: &str = "log-test-pseudonym-key";
    let b64 = |bytes: &[u8]| -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..=chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        out
    };
    let jwt = |sub: &str, exp: i64, secret: &str| {
        let head = b64(br#"{"alg":"HS256","typ":"JWT"}"#);
        let body = b64(
            json!({"iss": "https://i.test", "aud": "a", "sub": sub, "exp": exp})
                .to_string()
                .as_bytes(),
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{head}.{body}").as_bytes());
        format!("{head}.{body}.{}", b64(&mac.finalize().into_bytes()))
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let good_jwt = jwt("log-subject-alice", now + 600, SECRET);
    let forged_jwt = jwt(
        "log-subject-alice",
        now + 600,
        "a-different-secret-at-least-32-bytes!!",
    );
    let expired_jwt = jwt("log-subject-alice", now - 600, SECRET);
    let refresh_jwt = jwt("log-subject-alice", now + 1200, SECRET);
    let digest: String = Sha256::digest(KEY.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    const PASSWORD: &str = "log-test-agent-password";
    const BAD_PASSWORD: &str = "log-test-wrong-password";
    let phc = agentwire_auth::hash_password(PASSWORD).unwrap();
    let (dir, path) = write_config(&format!(
        "storage:\n  sessions: memory\nauth:\n  pseudonym_key: {PSEUDONYM_KEY}\n  api_keys:\n    - id: log-key\n      sha256: {digest}\n      subject: log-subject-bob\n  jwt:\n    issuer: https://i.test\n    audience: a\n    hs256_secret: {SECRET}\n{ONE_AGENT}  - name: locked\n    handler: echo\n    password_argon2: '{phc}'\n"
    ));
    let path = path.to_str().unwrap().to_owned();
    let mut server = ServerProcess::spawn_logging(
        &["serve", "--config", &path, "--listen", "127.0.0.1:0"],
        Some(dir.path()),
        "debug",
    );
    let addr = server.listening_address().await;
    for bearer in [
        KEY,
        BAD_KEY,
        good_jwt.as_str(),
        forged_jwt.as_str(),
        expired_jwt.as_str(),
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
            let mut client = Client { ws };
            client.recv().await;
            client
                .send_json(json!({"type": "credential_refresh", "token": refresh_jwt}))
                .await;
            client
                .send_json(json!({"type": "credential_refresh", "token": forged_jwt}))
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
    // The Gnosari dialect also takes credentials in the query and in its own headers.
    let gnosari = [
        (format!("/ws/agent/echo?token={good_jwt}"), None, true),
        (format!("/ws/agent/echo?token={forged_jwt}"), None, false),
        (format!("/ws/agent/echo?api_key={KEY}"), None, true),
        (format!("/ws/agent/echo?api_key={BAD_KEY}"), None, false),
        (
            "/ws/agent/echo".to_owned(),
            Some(("X-AUTH-TOKEN", KEY)),
            true,
        ),
        (format!("/ws/agent/locked?password={PASSWORD}"), None, true),
        (
            format!("/ws/agent/locked?password={BAD_PASSWORD}"),
            None,
            false,
        ),
        (
            "/ws/agent/locked".to_owned(),
            Some(("X-Access-Password", PASSWORD)),
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
            let mut client = Client { ws };
            client.send_json(json!({"message": "hello"})).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), client.ws.next()).await;
        }
    }
    server.sigterm();
    server.wait_exit(Duration::from_secs(10)).await;
    let mut log = String::new();
    while let Ok(line) = server.stderr.try_recv() {
        log.push_str(&line);
        log.push('\n');
    }
    assert!(
        log.contains("credential refused"),
        "the refusals were logged (without the credentials): {log}"
    );
    for secret in [
        KEY,
        BAD_KEY,
        SECRET,
        PSEUDONYM_KEY,
        PASSWORD,
        BAD_PASSWORD,
        &good_jwt,
        &forged_jwt,
        &expired_jwt,
        &refresh_jwt,
        "log-subject-alice",
        "log-subject-bob",
    ] {
        assert!(
            !log.contains(secret),
            "{secret:?} appears in the log:\n{log}"
        );
    }
    // Signature segments alone must not leak either.
    for token in [&good_jwt, &forged_jwt] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            !log.contains(signature),
            "a token signature appears in the log"
        );
    }
}

/// Runtime agents for the team tests: `lead` and `helper` (runtime) and `echo`.
const TEAM_AGENTS: &str = "providers:\n  - name: p\n    type: mock\nagents:\n  - name: lead\n    handler: runtime\n    provider: p\n  - name: helper\n    handler: runtime\n    provider: p\n  - name: echo\n    handler: echo\n";

#[tokio::test]
async fn delegation_and_handoff_keys_are_checked_and_named() {
    let lead =
        |extra: &str| TEAM_AGENTS.replacen("provider: p\n", &format!("provider: p\n{extra}"), 1);
    let cases = [
        (
            lead("    delegations: [ghost]\n"),
            "agents[0].delegations[0]",
            "no agent named \"ghost\" in agents[]",
        ),
        (
            lead("    delegations: [lead]\n"),
            "agents[0].delegations[0]",
            "an agent cannot name itself",
        ),
        (
            lead("    handoffs: [helper, echo]\n"),
            "agents[0].handoffs[1]",
            "\"echo\" is not a `handler: runtime` agent",
        ),
        (
            lead("    handoffs: [helper, helper]\n"),
            "agents[0].handoffs[1]",
            "listed twice",
        ),
        (
            format!("{TEAM_AGENTS}    delegations: [lead]\n"),
            "agents[2].handler",
            "delegations and handoffs need `handler: runtime`",
        ),
        (
            lead("    delegations: helper\n"),
            "agents[0].delegations",
            "expected a sequence",
        ),
    ];
    for (text, key, fragment) in cases {
        assert_rejected(&text, key, fragment);
    }
}

#[tokio::test]
async fn team_keys_are_checked_and_named() {
    let teams = |block: &str| format!("{TEAM_AGENTS}teams:\n{block}");
    let cases = [
        (
            teams("  - name: t\n    orchestrator: ghost\n"),
            "teams[0].orchestrator",
            "no agent named \"ghost\" in agents[]",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    agents: [helper, ghost]\n"),
            "teams[0].agents[1]",
            "no agent named \"ghost\"",
        ),
        (
            teams("  - name: t\n    agents: [helper]\n"),
            "teams[0].orchestrator",
            "required",
        ),
        (
            teams("  - orchestrator: lead\n"),
            "teams[0].name",
            "required",
        ),
        (
            teams("  - name: help desk\n    orchestrator: lead\n"),
            "teams[0].name",
            "1 to 128 ASCII letters",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n  - name: t\n    orchestrator: helper\n"),
            "teams[1].name",
            "duplicate team name \"t\"",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    provider: p\n"),
            "teams[0].provider",
            "only with `file`",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    access_level: secret\n"),
            "teams[0].access_level",
            "unknown variant `secret`",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    password_argon2: plain\n"),
            "teams[0].password_argon2",
            "",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    members: [helper]\n"),
            "teams[0].members",
            "unknown field `members`",
        ),
        (
            teams(
                "  - name: t\n    file: /nonexistent/agentwire-team.yaml\n    orchestrator: lead\n",
            ),
            "teams[0].orchestrator",
            "a team with `file` takes its agents from the file",
        ),
        (
            teams("  - name: t\n    file: /nonexistent/agentwire-team.yaml\n"),
            "teams[0].provider",
            "required with `file`",
        ),
        (
            teams("  - name: t\n    file: /nonexistent/agentwire-team.yaml\n    provider: p\n"),
            "teams[0].file",
            "cannot read /nonexistent/agentwire-team.yaml",
        ),
    ];
    for (text, key, fragment) in cases {
        assert_rejected(&text, key, fragment);
    }
}

/// Writes `team_yaml` as `team.yaml` and a config whose team `t` loads it.
fn team_file_config(team_yaml: &str, team_name: bool) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let team = dir.path().join("team.yaml");
    std::fs::write(&team, team_yaml).unwrap();
    let name = if team_name { "name: t\n    " } else { "" };
    let config = format!(
        "{TEAM_AGENTS}teams:\n  - {name}file: {}\n    provider: p\n",
        team.display()
    );
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config).unwrap();
    (dir, path, team.display().to_string())
}

/// `check-config` on `path` exits 64 naming `key`, with `fragment`.
fn assert_config_rejected(path: &Path, key: &str, fragment: &str) {
    let output = check_config(path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{key}: {stderr}");
    let prefix = format!("config error: {key}: ");
    assert!(stderr.starts_with(&prefix), "{prefix:?}: {stderr}");
    assert!(stderr.contains(fragment), "{fragment:?}: {stderr}");
}

#[tokio::test]
async fn team_file_errors_name_the_file_and_its_key_path() {
    let cases = [
        (
            "id: t\nagents:\n  - id: a\n    instructions: Answer.\n    delegations:\n      - target_agent_id: ghost\n",
            "agents[0].delegations[0].target_agent_id",
            "no agent with id or name \"ghost\" in the file",
        ),
        (
            "id: t\nagents:\n  - id: a\n    instructions: \"${AGENTWIRE_TEST_UNSET_VAR_XYZ}\"\n",
            "${AGENTWIRE_TEST_UNSET_VAR_XYZ}",
            "environment variable is not set and has no default",
        ),
        (
            "id: t\ntools:\n  - id: search\n    module: gnosari.tools.builtin.web_search\n    class: WebSearchTool\nagents:\n  - id: a\n    instructions: Answer.\n    tools: [search]\n",
            "agents[0].tools[0]",
            "declare a tool named \"search\" in tools[]",
        ),
        (
            "id: t\nagents:\n  - id: a\n    is_orchestrator: true\n    instructions: Answer.\n  - id: b\n    is_orchestrator: true\n    instructions: Answer too.\n",
            "agents[1].is_orchestrator",
            "a team has one",
        ),
        (
            "id: t\nagents:\n  - id: a\n    instructions: [not, text]\n",
            "agents[0].instructions",
            "invalid type",
        ),
    ];
    for (yaml, key_path, fragment) in cases {
        let (_dir, path, team) = team_file_config(yaml, true);
        assert_config_rejected(&path, &format!("{team}: {key_path}"), fragment);
    }
    let (_dir, path, team) = team_file_config("agents: [oops\n", true);
    assert_config_rejected(&path, "teams[0].file", &format!("{team}: invalid YAML"));
    let (_dir, path, team) = team_file_config(
        "name: No Id\nagents:\n  - name: a\n    instructions: Answer.\n",
        false,
    );
    assert_config_rejected(
        &path,
        "teams[0].name",
        &format!("the team file {team} has no `id`"),
    );
}

#[tokio::test]
async fn valid_team_configs_pass() {
    let (_dir, path, _) = team_file_config(
        "id: desk\nagents:\n  - id: a\n    is_orchestrator: true\n    instructions: Answer.\n    delegations: [{target_agent_id: b}]\n  - id: b\n    instructions: Help.\n    model: \"${AGENTWIRE_TEST_UNSET_VAR_XYZ:gpt-4o}\"\n",
        false,
    );
    let config = std::fs::read_to_string(&path).unwrap().replacen(
        "provider: p\n",
        "provider: p\n    delegations: [helper, echo]\n    handoffs: [helper]\n",
        1,
    ) + "  - name: pair\n    orchestrator: lead\n    agents: [helper, echo]\n    access_level: public\n";
    std::fs::write(&path, config).unwrap();
    let output = check_config(&path);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

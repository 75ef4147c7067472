//! The web console: its routes and switch, the `/console/ws` credential
//! bridge, and the console itself in headless Chromium
//! (`tests/console/console.test.mjs`, driven by playwright-core) against a
//! real server, a voice call included (Chromium's fake microphone plays a
//! WAV the test writes).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::credentials::{ALICE_KEY, auth_yaml};
use crate::support::{
    Client, Dialect, Direction, TestServer, http_get, install_tls_provider, metric,
};
use crate::voice::WEATHER_16K;

/// How long the browser script may take, all scenarios together.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn the_console_is_served_with_its_security_headers() {
    let server = TestServer::start().await;
    let page = server.http("GET", "/", &[], b"").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(page.text().contains("data-testid=\"transcript\""));
    let script = server.http("GET", "/console/console.js", &[], b"").await;
    assert_eq!(script.status, 200);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let etag = script.header("etag").unwrap().to_owned();
    let again = server
        .http(
            "GET",
            "/console/console.js",
            &[("If-None-Match", &etag)],
            b"",
        )
        .await;
    assert_eq!(again.status, 304);
    assert_eq!(server.get("/console/missing.js").await.0, 404);
    // The other routes are where they were.
    assert_eq!(server.get("/healthz").await.0, 200);
    let (mut client, _) = server.connect("agent=echo").await;
    client.say("hi").await;
    assert_eq!(client.recv().await["content"], "Echo: hi");
    server.stop().await;
}

#[tokio::test]
async fn the_agents_endpoint_lists_names_and_whether_a_credential_is_needed() {
    let server = TestServer::start().await;
    let response = server.http("GET", "/api/v1/agents", &[], b"").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("cache-control"), Some("no-store"));
    let body: Value = response.json();
    let names: Vec<&str> = body["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "by name");
    for agent in ["demo", "echo", "test-agent"] {
        assert!(names.contains(&agent), "{agent} in {names:?}");
    }
    let by_name = |body: &Value, name: &str| -> Value {
        body["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .cloned()
            .unwrap()
    };
    let demo = by_name(&body, "demo");
    assert_eq!(demo["credential_required"], false);
    assert_eq!(demo["access_level"], "public");
    assert_eq!(demo["memory"], Value::Null, "no memory tools");
    for door in ["a2a_card", "mcp_tool", "function"] {
        assert_eq!(demo[door], Value::Null, "{door}: not on by default");
    }
    assert!(demo.get("password_argon2").is_none() && demo.get("handler").is_none());
    assert_eq!(body["media"], false);
    assert_eq!(
        server.http("POST", "/api/v1/agents", &[], b"").await.status,
        405
    );
    server.stop().await;

    let private = TestServer::with_runtime(&auth_yaml(), "").await;
    let body: Value = private.http("GET", "/api/v1/agents", &[], b"").await.json();
    let demo = by_name(&body, "demo");
    assert_eq!(demo["credential_required"], true, "{body}");
    assert_eq!(demo["access_level"], "private");
    private.stop().await;
}

#[tokio::test]
async fn console_false_switches_it_off() {
    let server = TestServer::with_server_yaml("  console: false").await;
    for path in [
        "/",
        "/console/index.html",
        "/console/console.js",
        "/console/ws?agent=echo",
    ] {
        assert_eq!(server.get(path).await.0, 404, "{path}");
    }
    assert_eq!(server.get("/api/v1/sessions").await.0, 200);
    let (mut client, _) = server.connect("agent=echo").await;
    client.say("still here").await;
    assert_eq!(client.recv().await["content"], "Echo: still here");
    server.stop().await;
}

#[tokio::test]
async fn console_ws_takes_the_credential_from_access_token() {
    let server = TestServer::with_runtime(&auth_yaml(), "").await;
    let url = |path: &str| format!("ws://{}{path}", server.addr);
    let refused = |result: Result<_, tokio_tungstenite::tungstenite::Error>| match result {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("connect failed: {e}"),
        Ok(_) => 101,
    };
    let bridged = format!("/console/ws?agent=echo&access_token={ALICE_KEY}");
    let (ws, _) = tokio_tungstenite::connect_async(url(&bridged))
        .await
        .unwrap();
    let connected = Client::new(ws, Dialect::of_path(&bridged)).recv().await;
    assert_eq!(connected["type"], "connected");
    assert_eq!(
        refused(tokio_tungstenite::connect_async(url("/console/ws?agent=echo")).await),
        401,
        "no credential on a private agent"
    );
    assert_eq!(
        refused(
            tokio_tungstenite::connect_async(url("/console/ws?agent=echo&access_token=wrong"))
                .await
        ),
        401,
        "a bad credential"
    );
    assert_eq!(
        refused(
            tokio_tungstenite::connect_async(url(&format!(
                "/ws?agent=echo&access_token={ALICE_KEY}"
            )))
            .await
        ),
        401,
        "/ws itself takes no credential from the query"
    );
    server.stop().await;
}

/// Chromium and playwright-core, from `AGENTWIRE_TEST_CHROMIUM` and
/// `AGENTWIRE_TEST_PLAYWRIGHT`, else where `scripts/install-test-deps.sh`
/// puts them. `None` skips the browser test, except under CI.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let chromium = std::env::var_os("AGENTWIRE_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let playwright = std::env::var_os("AGENTWIRE_TEST_PLAYWRIGHT")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/npm/node_modules/playwright-core"));
    let node = std::process::Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if chromium.is_file() && playwright.join("package.json").is_file() && node {
        return Some((chromium, playwright));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and the browser test's tools are missing (chromium at {}, playwright-core at {}, node: {node}); run scripts/install-test-deps.sh",
        chromium.display(),
        playwright.display()
    );
    eprintln!(
        "skipped: chromium or playwright-core not installed (run scripts/install-test-deps.sh)"
    );
    None
}

/// What the mock voice provider of the call scenario answers.
const CALL_REPLY: &str = "Sunny and mild.";
/// The barge-in scenario's reply: 7.6 s of tone, longer than the fake
/// microphone's loop (6.15 s), so the question comes again over it.
const LONG_REPLY: &str =
    "This reply is long enough to be interrupted: it goes on and on for a good eight seconds.";

/// The scripted model of the runtime agent (its scenarios by name) and the
/// two client tools it calls.
const SCRIPTED_MODEL: &str = r#"
providers:
  - name: scripted
    type: mock
    model: mock-1
    default_response: "I only know scripts."
    scenarios:
      xss:
        turns:
          1: 'Here: <script>window.__pwned = 1; alert("xss")</script> and <img src=x onerror="alert(2)"> **bold** and [a link](javascript:alert(3)) and [docs](https://example.com/docs)'
      locate:
        turns:
          1: {tool_calls: [{name: get_location, arguments: {precision: high}}]}
          2: "You are at {{last_tool_result}}."
      timezone:
        turns:
          1: {tool_calls: [{name: get_timezone, arguments: {}}]}
          2: "Time zone: {{last_tool_result}}"
      narrated:
        turns:
          1: {content: "Let me look up your time zone.", tool_calls: [{name: get_timezone, arguments: {}}]}
          2: "Your time zone is {{last_tool_result}}."
      remember:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "prefers <em>window</em> seats", type: preference}}]}
          2: "Noted."
      recall:
        turns:
          1: {tool_calls: [{name: memory__recall, arguments: {query: "seats"}}]}
          2: "Recalled: {{last_tool_result}}"
tools:
  - name: get_location
    type: client
    description: The user's location
    parameters: {type: object, properties: {precision: {type: string}}}
    consent_message: Share your location?
    categories: [location]
  - name: get_timezone
    type: client
    description: The user's time zone
    parameters: {type: object, properties: {}}
    consent_message: Share your time zone?
"#;

/// The demo and test agents, two runtime agents on the scripted model (one
/// with memory), a private agent, and two voice agents.
const BROWSER_AGENTS: &str = r#"
agents:
  - name: demo
    handler: demo
    access_level: public
  - name: test-agent
    handler: test
    access_level: public
    summary_after_idle: 200ms
  - name: assistant
    handler: runtime
    provider: scripted
    tools: [get_location, get_timezone]
    access_level: public
  - name: keeper
    handler: runtime
    provider: scripted
    access_level: public
    memory: {enabled: true}
  - name: vault
    handler: demo
    access_level: private
    summary_after_idle: 200ms
  - name: caller
    handler: echo
    voice: console-voice
    access_level: public
  - name: long-caller
    handler: echo
    voice: console-long-voice
    access_level: public
"#;

/// Two pack agents on the scripted model, their packs in `dir`: one
/// compiled at startup (with a warning), one in compile mode whose pack
/// does not compile.
fn pack_agents(dir: &Path) -> String {
    let mut packed = crate::packs::minimal_pack("Be kind.");
    crate::packs::write_pack(dir, "packed.pack.json", &packed);
    packed["prompts"]["chat"]["system_template"] = json!("Hello {{name}}.");
    crate::packs::write_pack(dir, "authoring.pack.json", &packed);
    format!(
        r#"
  - name: packed
    handler: runtime
    provider: scripted
    access_level: public
    pack: {dir}/packed.pack.json
  - name: authoring
    handler: runtime
    provider: scripted
    access_level: public
    pack: {{path: {dir}/authoring.pack.json, compile: per_session}}
"#,
        dir = dir.display()
    )
}

/// The browser scenarios' server: [`SCRIPTED_MODEL`], the voice agents'
/// mock providers, [`BROWSER_AGENTS`] and [`pack_agents`], media on a
/// local directory, and API keys.
fn browser_config(db: &Path, media: &Path) -> String {
    format!(
        r#"
server:
  listen: 127.0.0.1:0
  allow_unauthenticated: true
storage:
  sessions: sqlite://{db}
  media:
    backend: local
    path: {media}
{auth}
{model}
voice_providers:
  - name: console-voice
    type: mock
    output: tone
    reply: "{reply}"
  - name: console-long-voice
    type: mock
    output: tone
    reply: "{long_reply}"
{agents}{packs}"#,
        db = db.display(),
        media = media.display(),
        auth = auth_yaml(),
        model = SCRIPTED_MODEL,
        reply = CALL_REPLY,
        long_reply = LONG_REPLY,
        agents = BROWSER_AGENTS,
        packs = pack_agents(db.parent().expect("the database is in a directory")),
    )
}

/// What Chromium's fake microphone plays (and loops): the weather question
/// (PCM16 mono 16 kHz), then 4 s of silence, so a short reply (1.2 s of
/// tone) is over before the question comes round again, and a long one is
/// barged in on.
fn call_wav() -> Vec<u8> {
    const RATE: u32 = 16_000;
    let mut pcm = WEATHER_16K.to_vec();
    pcm.resize(pcm.len() + 4 * 2 * RATE as usize, 0);
    let data = u32::try_from(pcm.len()).expect("a short clip");
    let mut wav = Vec::with_capacity(44 + pcm.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // the fmt chunk's size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&RATE.to_le_bytes());
    wav.extend_from_slice(&(2 * RATE).to_le_bytes()); // bytes per second
    wav.extend_from_slice(&2u16.to_le_bytes()); // bytes per frame
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data.to_le_bytes());
    wav.extend_from_slice(&pcm);
    wav
}

/// Role, content and metadata of the messages stored on `session`, in order.
fn session_messages(db: &Path, session: &str) -> Vec<(String, String, Option<String>)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT m.role, m.content, m.metadata FROM messages m
             JOIN sessions s ON s.key = m.session_key WHERE s.id = ?1 ORDER BY m.seq",
        )
        .unwrap();
    stmt.query_map([session], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The `parts` of every stored user message that has some.
fn user_parts(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT parts FROM messages WHERE role = 'user' AND parts IS NOT NULL")
        .unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser() {
    let Some((chromium, playwright)) = browser() else {
        return;
    };
    install_tls_provider();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let yaml = browser_config(&db, &dir.path().join("media"));
    let wav = dir.path().join("call.wav");
    std::fs::write(&wav, call_wav()).unwrap();
    let config = agentwire::config::parse(&yaml, |_| None).expect("the browser config is valid");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(agentwire::run(listener, config, async move {
        let _ = stopped.await;
    }));

    let frames = dir.path().join("frames.jsonl");
    let output = run_browser_scenarios(addr, &wav, &frames, &chromium, &playwright).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "browser scenarios failed: {}",
        output.status
    );
    every_frame_is_described(&frames);
    the_upload_reached_the_agent(&stdout, &db);
    the_call_went_both_ways_and_is_stored(addr, &stdout, &db).await;

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(40), server)
        .await
        .expect("server stopped in time")
        .expect("server task did not panic")
        .expect("server returned Ok");
}

/// `tests/console/console.test.mjs` in node, against the server at `addr`,
/// with the fake microphone playing `wav`; the pages' WebSocket frames are
/// written to `frames`.
async fn run_browser_scenarios(
    addr: SocketAddr,
    wav: &Path,
    frames: &Path,
    chromium: &Path,
    playwright: &Path,
) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("tests/console/console.test.mjs");
    // The README's screenshots are rewritten only when asked: every run
    // would otherwise leave changed PNGs behind. Without it they go under
    // target/ for a look.
    let screenshots = match std::env::var_os("AGENTWIRE_UPDATE_SCREENSHOTS") {
        Some(_) => root.join("../../docs/screenshots"),
        None => root.join("../../target/console-screenshots"),
    };
    tokio::time::timeout(
        BROWSER_TIMEOUT,
        tokio::process::Command::new("node")
            .arg(&script)
            .env("CONSOLE_URL", format!("http://{addr}"))
            .env("CONSOLE_API_KEY", ALICE_KEY)
            .env("SCREENSHOT_DIR", &screenshots)
            .env("CALL_WAV", wav)
            .env("FRAMES_FILE", frames)
            .env("CALL_REPLY", CALL_REPLY)
            .env("LONG_REPLY", LONG_REPLY)
            .env("AGENTWIRE_TEST_CHROMIUM", chromium)
            .env("AGENTWIRE_TEST_PLAYWRIGHT", playwright)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser scenarios finished in time")
    .expect("node runs")
}

/// Every frame the console sent and received on `/console/ws` (an Omnia
/// socket) is one the AsyncAPI document describes, binary frames from the
/// server included: the console's one client, the TypeScript library, is
/// held to the contract as the suite's own client is.
fn every_frame_is_described(frames: &Path) {
    use base64::Engine as _;
    let contract = Dialect::Omnia.contract();
    let text = std::fs::read_to_string(frames).expect("the browser wrote its frames");
    let (mut texts, mut binaries) = (0, 0);
    for line in text.lines() {
        let frame: Value = serde_json::from_str(line).unwrap();
        let direction = match frame["dir"].as_str() {
            Some("sent") => Direction::ClientToServer,
            _ => Direction::ServerToClient,
        };
        if let Some(text) = frame["text"].as_str() {
            contract.assert_described(direction, text);
            texts += 1;
        } else if direction == Direction::ServerToClient {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(frame["binary"].as_str().unwrap())
                .unwrap();
            contract.assert_server_binary_described(&bytes);
            binaries += 1;
        }
    }
    // The scenarios chat, upload, use tools and call: hundreds of frames.
    assert!(texts > 100, "{texts} text frames recorded");
    println!("{texts} text and {binaries} binary frames held to the document");
}

/// The uploaded image's storage_ref is in the message the agent got.
fn the_upload_reached_the_agent(stdout: &str, db: &Path) {
    let storage_ref = stdout
        .lines()
        .find_map(|line| line.strip_prefix("STORAGE_REF="))
        .expect("the upload scenario printed its storage_ref");
    let parts = user_parts(db);
    assert!(
        parts.iter().any(|p| p.contains(storage_ref)),
        "a stored user message's parts name {storage_ref}: {parts:?}"
    );
}

/// The call: over (the hang-up parked nothing), its audio went both ways,
/// and the exchange is in the session's history.
async fn the_call_went_both_ways_and_is_stored(addr: SocketAddr, stdout: &str, db: &Path) {
    let (status, metrics) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(metric(&metrics, "agentwire_calls_active"), 0.0);
    assert_eq!(metric(&metrics, "agentwire_calls_parked"), 0.0);
    assert!(metric(&metrics, "agentwire_calls_total") >= 1.0);
    assert!(metric(&metrics, "agentwire_call_audio_in_bytes_total") > 0.0);
    assert!(metric(&metrics, "agentwire_call_audio_out_bytes_total") > 0.0);
    assert!(metric(&metrics, "agentwire_call_barge_ins_total") >= 1.0);
    let session = stdout
        .lines()
        .find_map(|line| line.strip_prefix("CALL_SESSION="))
        .expect("the call scenario printed its session");
    let stored = session_messages(db, session);
    let voice = |role: &str, content: &dyn Fn(&str) -> bool| {
        stored.iter().any(|(r, c, metadata)| {
            r == role
                && content(c)
                && metadata
                    .as_deref()
                    .is_some_and(|m| m.contains(r#""via":"voice""#))
        })
    };
    assert!(
        voice("user", &|c| c.starts_with("utterance 1 (")),
        "the caller's transcript is stored: {stored:?}"
    );
    assert!(
        voice("assistant", &|c| c == CALL_REPLY),
        "the reply is stored: {stored:?}"
    );
}

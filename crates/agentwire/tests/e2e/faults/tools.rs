//! Faults of an MCP server and of the model provider.

use super::*;

// ---------------------------------------------------------------------------
// The MCP server
// ---------------------------------------------------------------------------

/// A script in `dir` that records each MCP server's pid in the file `pids`,
/// then becomes the everything server at `entry`: the script.
fn pid_recording_mcp_script(dir: &Path, pids: &Path, entry: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let script = dir.join("mcp-server.sh");
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
    script
}

/// The pids of the MCP servers started so far.
fn started(pids: &Path) -> Vec<String> {
    std::fs::read_to_string(pids)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A model whose `dies` script calls a 30-second operation, quotes its
/// result, then calls `echo` and quotes that; the MCP server is `script`.
fn dies_config(script: &Path) -> String {
    format!(
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
    )
}

/// Events up to the long operation's call; the session.
async fn until_the_long_call(client: &mut Client) -> String {
    let mut events = Vec::new();
    loop {
        let event = client.recv_event().await;
        events.push(event.clone());
        if event["type"] == "tool_call" {
            assert_eq!(event["tool_name"], "trigger-long-running-operation");
            break events[0]["session_id"].as_str().unwrap().to_owned();
        }
        assert_ne!(event["type"], "agent_completed", "{events:?}");
    }
}

/// Kills the one MCP server started so far; the turn ends at once with the
/// error as the call's result, which the model saw.
async fn kill_the_server_mid_call(client: &mut Client, pids: &Path) {
    let first = started(pids);
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
}

/// The next turn of `session` gets a fresh server, a second one.
async fn next_turn_gets_a_fresh_server(client: &mut Client, session: &str, pids: &Path) {
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
    let all = started(pids);
    assert_eq!(all.len(), 2, "a second server was started: {all:?}");
    assert_ne!(all[0], all[1]);
}

/// Stored: both turns whole, the failed call's error among them.
fn assert_both_mcp_turns_stored(db: &Path, session: &str) {
    let stored = rows(db, session);
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

#[tokio::test]
async fn the_mcp_server_dying_mid_call_is_an_error_result_and_the_next_turn_gets_a_fresh_one() {
    let Some(entry) = crate::runtime::mcp_everything() else {
        return;
    };
    // The configured command records each server's pid, then becomes it.
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = pid_recording_mcp_script(dir.path(), &pids, &entry);
    let agent = "  - name: mcp-agent\n    handler: runtime\n    provider: scripted\n    tools: [everything]\n";
    let server = TestServer::with_runtime(&dies_config(&script), agent).await;
    let mut client = server.connect_gnosari("mcp-agent").await;
    client
        .send_json(json!({"message": "run the long one", "metadata": {"mock_scenario": "dies"}}))
        .await;
    let session = until_the_long_call(&mut client).await;
    // The call is on its way to a 30-second operation: the server dies.
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill_the_server_mid_call(&mut client, &pids).await;

    // The next turn on the same connection gets a fresh server.
    next_turn_gets_a_fresh_server(&mut client, &session, &pids).await;

    // Stored: both turns whole, the failed call's error among them.
    assert_both_mcp_turns_stored(&server.db_path, &session);
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

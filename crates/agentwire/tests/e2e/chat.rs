//! `agentwire chat`, the binary itself, driven through pipes against a real
//! server: what a user types on standard input and reads on standard output.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::credentials::{ALICE_KEY, auth_yaml};
use crate::support::{TestServer, stored_messages};

const WAIT: Duration = Duration::from_secs(10);

/// A running `agentwire chat` and everything it has printed so far.
struct Chat {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    printed: String,
    /// How much of `printed` earlier expectations consumed.
    seen: usize,
}

fn command(server: &TestServer, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentwire"));
    command
        .arg("chat")
        .arg("--url")
        .arg(format!("ws://{}", server.addr))
        .args(args)
        .env_remove("AGENTWIRE_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

impl Chat {
    fn spawn(server: &TestServer, args: &[&str]) -> Chat {
        let mut child = command(server, args)
            .spawn()
            .expect("agentwire chat starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        Chat {
            child,
            stdin,
            stdout,
            printed: String::new(),
            seen: 0,
        }
    }

    async fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Reads until `needle` is printed after what earlier calls saw, and
    /// returns when it was first seen.
    async fn expect(&mut self, needle: &str) -> Instant {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut buffer = [0u8; 4096];
        loop {
            if let Some(at) = self.printed[self.seen..].find(needle) {
                self.seen += at + needle.len();
                return Instant::now();
            }
            let read = tokio::time::timeout_at(deadline, self.stdout.read(&mut buffer))
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{needle:?} not printed within {WAIT:?}; printed:\n{}",
                        self.printed
                    )
                })
                .unwrap();
            assert!(
                read > 0,
                "chat exited before printing {needle:?}:\n{}",
                self.printed
            );
            self.printed
                .push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    }

    /// Closes standard input and waits for the exit.
    async fn finish(mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("chat exits at the end of its input")
            .unwrap();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).await.unwrap();
        self.printed.push_str(&rest);
        (status, self.printed)
    }
}

/// `agentwire chat --once …` to its end: status, stdout, stderr.
async fn once(server: &TestServer, args: &[&str]) -> (Option<i32>, String, String) {
    let output = tokio::time::timeout(WAIT, command(server, args).output())
        .await
        .expect("--once exits")
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_reply_streams_to_standard_output_as_it_is_produced() {
    let server = TestServer::start().await;
    let mut chat = Chat::spawn(&server, &["--agent", "demo"]);
    chat.expect("(agent demo, session ").await;
    chat.type_line("hello").await;
    let first_words = chat.expect("Hello! I'm the agentwire demo agent.").await;
    let last_words = chat.expect("watch the tool calls stream by.\n").await;
    // The demo streams a word every 30 ms: the start of the reply is on the
    // screen well before its end.
    assert!(
        last_words - first_words >= Duration::from_millis(300),
        "the reply was printed at once ({:?} between its first and last words)",
        last_words - first_words
    );
    chat.type_line("what's the weather?").await;
    chat.expect("[tool weather ").await;
    chat.expect("[tool result ").await;
    chat.expect("72°F and sunny").await;
    chat.type_line("/quit").await;
    let (status, printed) = chat.finish().await;
    assert!(status.success(), "{status}: {printed}");
    assert!(
        !printed.contains("[y/n]"),
        "a server tool is not asked about:\n{printed}"
    );
}

const CLIENT_TOOL_CONFIG: &str = r#"
providers:
  - name: scripted
    type: mock
    model: mock-1
    scenarios:
      default:
        turns:
          1: {tool_calls: [{name: get_location, arguments: {precision: city}}]}
          2: "Thanks, that settles it."
tools:
  - name: get_location
    type: client
    description: The user's location
    parameters: {type: object, properties: {precision: {type: string}}}
    consent_message: "Share your location?"
"#;

const CLIENT_TOOL_AGENT: &str = "  - name: locator
    handler: runtime
    provider: scripted
    tools: [get_location]
";

#[tokio::test]
async fn client_tools_are_answered_yes_and_no_from_standard_input() {
    let server = TestServer::with_runtime(CLIENT_TOOL_CONFIG, CLIENT_TOOL_AGENT).await;
    let mut chat = Chat::spawn(&server, &["--agent", "locator"]);
    chat.type_line("where am I?").await;
    chat.expect("[tool get_location {\"precision\":\"city\"}]")
        .await;
    chat.expect("? Share your location? (get_location) [y/n] ")
        .await;
    chat.type_line("y").await;
    chat.expect("result> ").await;
    chat.type_line(r#"{"city":"Denver"}"#).await;
    chat.expect("Thanks, that settles it.\n").await;

    chat.type_line("/new").await;
    chat.expect("(session ").await;
    chat.type_line("where am I now?").await;
    chat.expect("[y/n] ").await;
    chat.type_line("n").await;
    chat.expect("Thanks, that settles it.\n").await;
    let (status, printed) = chat.finish().await;
    assert!(status.success(), "{status}: {printed}");

    // What the model was given is what was typed: the answer, then the
    // refusal, in two sessions.
    let tool_rows: Vec<String> = stored_messages(&server.db_path)
        .into_iter()
        .filter(|(_, _, role, _)| role == "tool")
        .map(|(_, _, _, content)| content)
        .collect();
    assert!(
        tool_rows.iter().any(|c| c.contains("Denver")),
        "the typed result was stored: {tool_rows:?}"
    );
    assert!(
        tool_rows.iter().any(|c| c.contains("declined by the user")),
        "the refusal was stored: {tool_rows:?}"
    );
}

#[tokio::test]
async fn an_earlier_session_is_listed_resumed_and_continued() {
    let server = TestServer::with_runtime(&auth_yaml(), "").await;
    let mut first = Chat::spawn(&server, &["--agent", "test-agent", "--token", ALICE_KEY]);
    first.expect("(agent test-agent, session ").await;
    first.type_line("remember the lighthouse").await;
    first.expect("echo: remember the lighthouse\n").await;
    let (status, printed) = first.finish().await;
    assert!(status.success(), "{status}: {printed}");
    let session = printed
        .split("session ")
        .nth(1)
        .and_then(|rest| rest.split([';', ')']).next())
        .expect("the session id is printed")
        .to_owned();

    let mut second = Chat::spawn(&server, &["--agent", "test-agent", "--token", ALICE_KEY]);
    second.type_line("/sessions").await;
    second.expect(&format!("{session}  test-agent  ")).await;
    second.type_line(&format!("/resume {session}")).await;
    second.expect("you: remember the lighthouse\n").await;
    second
        .expect("agent: echo: remember the lighthouse\n")
        .await;
    second.type_line("and the keeper").await;
    second.expect("echo: and the keeper\n").await;
    let (status, printed) = second.finish().await;
    assert!(status.success(), "{status}: {printed}");

    let in_session: Vec<String> = stored_messages(&server.db_path)
        .into_iter()
        .filter(|(id, _, _, _)| *id == session)
        .map(|(_, _, _, content)| content)
        .collect();
    assert!(
        in_session.iter().any(|c| c == "and the keeper"),
        "the resumed session got the new message: {in_session:?}"
    );
}

#[tokio::test]
async fn cancel_stops_the_running_turn() {
    let server = TestServer::start().await;
    let mut chat = Chat::spawn(&server, &["--agent", "demo"]);
    chat.type_line("what's the weather?").await;
    chat.expect("Checking").await;
    chat.type_line("/cancel").await;
    chat.expect("[cancelled]\n").await;
    chat.type_line("hello").await;
    chat.expect("stream by.\n").await;
    let (status, printed) = chat.finish().await;
    assert!(status.success(), "{status}: {printed}");
    assert!(
        !printed.contains("72°F"),
        "the cancelled reply did not go on:\n{printed}"
    );
}

#[tokio::test]
async fn once_exits_with_the_turns_outcome() {
    let server = TestServer::start().await;
    let (code, stdout, stderr) = once(&server, &["--agent", "demo", "--once", "hello"]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("Hello! I'm the agentwire demo agent."),
        "{stdout}"
    );
    assert!(
        !stdout.contains("(agent demo"),
        "--once prints the reply only: {stdout}"
    );

    let (code, stdout, _) = once(
        &server,
        &[
            "--agent",
            "demo",
            "--session",
            "not a session id",
            "--once",
            "hello",
        ],
    )
    .await;
    assert_eq!(code, Some(1), "an error frame fails the turn: {stdout}");
    assert!(
        stdout.contains("error INVALID_MESSAGE: invalid session_id"),
        "{stdout}"
    );

    let unreachable = TestServer::start().await;
    let addr = unreachable.addr;
    unreachable.stop().await;
    let output = Command::new(env!("CARGO_BIN_EXE_agentwire"))
        .args(["chat", "--url", &format!("ws://{addr}"), "--once", "hi"])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(69), "EX_UNAVAILABLE");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot connect"),
        "{output:?}"
    );
}

const MEMORY_MODEL: &str = r#"
providers:
  - name: memo
    type: mock
    scenarios:
      default:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "prefers window seats", type: preference}}]}
          2: "Noted: {{last_tool_result}}"
"#;

const MEMORY_AGENTS: &str = "  - {name: concierge, handler: runtime, provider: memo, access_level: public, memory: {enabled: true}}
  - {name: porter, handler: runtime, provider: memo, access_level: public, memory: {enabled: true, tier: caller}}
";

async fn memory_server() -> TestServer {
    TestServer::with_runtime(&format!("{MEMORY_MODEL}{}", auth_yaml()), MEMORY_AGENTS).await
}

/// The id of the memory `/memories` printed on the line ending `content`.
fn listed_id(printed: &str, content: &str) -> String {
    let line = printed
        .lines()
        .rfind(|line| line.ends_with(content))
        .unwrap_or_else(|| panic!("no memory line ending {content:?}:\n{printed}"));
    line.split("  ").next().unwrap().to_owned()
}

#[tokio::test]
async fn a_remembered_fact_is_listed_and_forgotten() {
    let server = memory_server().await;
    let mut chat = Chat::spawn(&server, &["--agent", "concierge", "--token", ALICE_KEY]);
    chat.type_line("/memories").await;
    chat.expect("(no memories)\n").await;
    chat.type_line("I like window seats").await;
    chat.expect("Noted: ").await;
    chat.expect("remembered").await;

    chat.type_line("/memories").await;
    chat.expect("  preference  ").await;
    chat.expect("  prefers window seats\n").await;
    let id = listed_id(&chat.printed, "  prefers window seats");
    // A runtime agent's server tools are not shown on the wire: the reply
    // quotes the tool's result.
    let noted = chat.printed.lines().find(|l| l.starts_with("Noted: "));
    assert!(
        noted.is_some_and(|line| line.contains(&id)),
        "the listed id is the one the tool returned:\n{}",
        chat.printed
    );
    chat.type_line(&format!("/forget {id}")).await;
    chat.expect(&format!("forgotten {id}\n")).await;
    chat.type_line("/memories").await;
    chat.expect("(no memories)\n").await;
    chat.type_line(&format!("/forget {id}")).await;
    chat.expect(&format!("no memory {id}\n")).await;
    chat.type_line("/forget").await;
    chat.expect("usage: /forget ID").await;
    let (status, printed) = chat.finish().await;
    assert!(status.success(), "{status}: {printed}");
}

#[tokio::test]
async fn memories_keep_to_the_chats_facet_and_an_api_error_is_one_line() {
    let server = memory_server().await;
    let alice = ["--agent", "concierge", "--token", ALICE_KEY];
    let mut in_facet = Chat::spawn(
        &server,
        &[&alice[..], &["--memory-facet", "trip-7"]].concat(),
    );
    in_facet.type_line("I like window seats").await;
    in_facet.expect("Noted: ").await;
    in_facet.type_line("/memories").await;
    in_facet.expect("  preference  ").await;
    in_facet.expect("  prefers window seats\n").await;
    let (status, printed) = in_facet.finish().await;
    assert!(status.success(), "{status}: {printed}");

    // A memory of the `caller` tier, which every agent on that tier shares.
    let mut porter = Chat::spawn(&server, &["--agent", "porter", "--token", ALICE_KEY]);
    porter.type_line("I like window seats").await;
    porter.expect("Noted: ").await;
    let (status, printed) = porter.finish().await;
    assert!(status.success(), "{status}: {printed}");

    // Without a facet, every facet's memories are listed, each with its
    // own; the agent's first, then the shared ones.
    let mut any_facet = Chat::spawn(&server, &alice);
    any_facet.type_line("/memories").await;
    any_facet.expect("  preference (facet trip-7)  ").await;
    any_facet.expect("  preference (shared)  ").await;
    let (status, printed) = any_facet.finish().await;
    assert!(status.success(), "{status}: {printed}");

    // An anonymous caller may talk to the agent but not read the API: the
    // refusal is a line, and the chat goes on.
    let mut anonymous = Chat::spawn(&server, &["--agent", "concierge"]);
    anonymous.type_line("/memories").await;
    anonymous
        .expect("(cannot list memories: HTTP 401 unauthorized)\n")
        .await;
    anonymous.type_line("/forget m-1").await;
    anonymous
        .expect("(cannot forget m-1: HTTP 401 unauthorized)\n")
        .await;
    anonymous.type_line("hello").await;
    anonymous
        .expect("Noted: memory remember: memory needs an identified caller")
        .await;
    let (status, printed) = anonymous.finish().await;
    assert!(status.success(), "{status}: {printed}");
}

//! The pool with `isolation: none` and a tiny MCP server in `sh` (it
//! answers `whoami` with its process id and arguments): checks, caps,
//! reuse, the idle TTL, forgetting and shutdown. bubblewrap itself is
//! tested end to end (`crates/agentwire/tests/e2e/sandboxes.rs`).

use std::path::Path;
use std::time::Duration;

use agentwire_core::{ConnectionScope, Declaration, TurnCaller};
use serde_json::{Value, json};

use super::*;
use crate::sandbox::{Authorize, Isolation, MissingDirectory, MountRole, Network, SandboxLimits};

/// Answers `initialize`, `tools/list` (one tool, `whoami`) and
/// `tools/call` with `pid <pid> args <args>`; ignores notifications.
const SERVER: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" ;;
    *'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"whoami","inputSchema":{"type":"object"}}]}}\n' "$id" ;;
    *'"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"pid %s args %s"}]}}\n' "$id" "$$" "$*" ;;
  esac
done
"#;

struct Fixture {
    dir: tempfile::TempDir,
    pool: Arc<SandboxPool>,
    agent: Arc<AgentSandboxes>,
}

fn limits() -> SandboxLimits {
    SandboxLimits {
        instances_per_owner: 2,
        instances_per_node: 3,
        idle_ttl: Duration::from_secs(600),
        cpu_seconds: None,
        memory_bytes: None,
        start_timeout: Duration::from_secs(10),
        call_timeout: Duration::from_secs(10),
    }
}

fn sandbox(name: &str, command: &str, args: &[&str], dir: &Path) -> SandboxSettings {
    SandboxSettings {
        name: name.into(),
        command: command.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: vec![],
        isolation: Isolation::None,
        network: Network::Isolated,
        read_only: vec![],
        mount_roles: vec![
            MountRole {
                name: "project".into(),
                root: dir.join("projects").canonicalize().unwrap(),
                authorize: Authorize::Grants,
                missing: MissingDirectory::Refuse,
            },
            MountRole {
                name: "scratch".into(),
                root: dir.join("scratch").canonicalize().unwrap(),
                authorize: Authorize::Any,
                missing: MissingDirectory::Create,
            },
        ],
        limits: limits(),
    }
}

/// A pool whose agent has `files` (the server, given the mounts),
/// `rooted` (needs a project: `{mount.project}`), `missing` (no such
/// program), `quitter` (exits at once) and `silent` (never answers);
/// `edit` is configured for another agent. `adjust` changes `files`.
fn fixture(adjust: impl FnOnce(&mut SandboxSettings)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["projects/p1", "projects/p2", "scratch", "elsewhere"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    std::os::unix::fs::symlink(
        dir.path().join("elsewhere"),
        dir.path().join("projects/out"),
    )
    .unwrap();
    let script = dir.path().join("server.sh");
    std::fs::write(&script, SERVER).unwrap();
    let script = script.display().to_string();
    let mut files = sandbox("files", "sh", &[&script, "{mounts}"], dir.path());
    adjust(&mut files);
    let mut silent = sandbox("silent", "sleep", &["30"], dir.path());
    silent.limits.start_timeout = Duration::from_millis(300);
    let settings = vec![
        files,
        sandbox(
            "rooted",
            "sh",
            &[&script, "--root={mount.project}"],
            dir.path(),
        ),
        sandbox("missing", "agentwire-no-such-server", &[], dir.path()),
        sandbox("quitter", "sh", &["-c", "exit 0"], dir.path()),
        silent,
        sandbox("edit", "sh", &[&script], dir.path()),
    ];
    let pool = SandboxPool::new(settings).unwrap();
    let names = ["files", "rooted", "missing", "quitter", "silent"].map(str::to_owned);
    let agent = pool.for_agent("coder", names.to_vec(), Duration::from_secs(600));
    Fixture { dir, pool, agent }
}

impl Fixture {
    async fn open(
        &self,
        session: &str,
        owner: Option<&str>,
        grants: &[&str],
        declare: Value,
    ) -> Result<(), DeclarationRefusal> {
        let declaration = Declaration::parse(&declare).expect("a valid declaration");
        let caller = TurnCaller {
            owner: owner.map(str::to_owned),
            memory_facet: None,
        };
        let grants: Vec<String> = grants.iter().map(|g| g.to_string()).collect();
        let opening = SessionOpening {
            agent: "coder",
            session: &SessionId::parse(session).unwrap(),
            caller: &caller,
            grants: &grants,
            declaration: &declaration,
            scope: &ConnectionScope::new(),
        };
        match self.agent.open(opening).await {
            Ok(()) => Ok(()),
            Err(InitRefusal::Declaration(refusal)) => Err(refusal),
            Err(other) => panic!("{other:?}"),
        }
    }

    async fn refusal(
        &self,
        owner: Option<&str>,
        grants: &[&str],
        declare: Value,
    ) -> (String, RefusalReason, String) {
        let refusal = self
            .open("s-refused", owner, grants, declare)
            .await
            .expect_err("refused");
        assert_eq!(refusal.kind, "sandboxes");
        (refusal.handle, refusal.reason, refusal.message)
    }

    async fn tools(&self, session: &str) -> Vec<Arc<dyn ToolBox>> {
        self.agent
            .for_session(&SessionId::parse(session).unwrap())
            .await
    }

    /// Calls `tool` in the session: what it answered.
    async fn call(&self, session: &str, tool: &str) -> String {
        for tool_box in self.tools(session).await {
            if tool_box.specs().iter().any(|spec| spec.name == tool) {
                return tool_box
                    .call(tool, json!({}))
                    .await
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned();
            }
        }
        panic!("no tool {tool} in session {session}");
    }

    /// The process id of the server answering `tool` in the session.
    async fn pid(&self, session: &str, tool: &str) -> u32 {
        let answer = self.call(session, tool).await;
        answer.split(' ').nth(1).unwrap().parse().unwrap()
    }
}

fn project(id: &str) -> Value {
    json!({"role": "project", "id": id})
}

fn files(mounts: Value) -> Value {
    json!({"sandboxes": {"files": {"mounts": mounts}}})
}

/// Whether process `pid` runs (exists and is no zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !matches!(
            stat.rsplit(") ").next().and_then(|s| s.chars().next()),
            Some('Z' | 'X')
        )
    })
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Fixture {
    /// Asserts that `declare` is refused naming `handle` with `reason`
    /// and `message`, and that the pool remembers nothing of it.
    async fn refuses(
        &self,
        caller: (Option<&str>, &[&str]),
        declare: Value,
        (handle, reason, message): (&str, RefusalReason, &str),
    ) {
        let (owner, grants) = caller;
        let refused = self.refusal(owner, grants, declare.clone()).await;
        let expected = (handle.to_owned(), reason, message.to_owned());
        assert_eq!(refused, expected, "{declare}");
        assert!(self.pool.state.lock().sessions.is_empty(), "{declare}");
    }
}

#[tokio::test]
async fn what_a_declaration_names_is_checked_handle_by_handle() {
    use RefusalReason::{MountNotAuthorized, UnknownMountRole, UnknownSandbox};
    let f = fixture(|_| {});
    let alice = (Some("alice"), &["p1"][..]);
    let edit = json!({"sandboxes": {"edit": {}}});
    f.refuses(
        alice,
        edit,
        ("edit", UnknownSandbox, "this agent has no sandbox \"edit\""),
    )
    .await;
    let nope = json!({"sandboxes": {"nope/x": {}}});
    f.refuses(
        alice,
        nope,
        (
            "nope/x",
            UnknownSandbox,
            "this agent has no sandbox \"nope\"",
        ),
    )
    .await;
    let repo = files(json!([{"role": "repo", "id": "p1"}]));
    let message = "sandbox \"files\" has no mount role \"repo\"";
    f.refuses(alice, repo, ("files", UnknownMountRole, message))
        .await;
    let anonymous = (None, &["p1"][..]);
    let message = "an anonymous caller may mount nothing: project \"p1\" needs a credential";
    f.refuses(
        anonymous,
        files(json!([project("p1")])),
        ("files", MountNotAuthorized, message),
    )
    .await;
    let scratch = files(json!([{"role": "scratch", "id": "s1"}]));
    let message = "an anonymous caller may mount nothing: scratch \"s1\" needs a credential";
    f.refuses(anonymous, scratch, ("files", MountNotAuthorized, message))
        .await;
    let message = "the caller's credential does not grant project \"p2\"";
    f.refuses(
        alice,
        files(json!([project("p2")])),
        ("files", MountNotAuthorized, message),
    )
    .await;
    // The first handle in order that fails is the one named.
    let both = json!({"sandboxes": {"files": {"mounts": [project("p2")]}, "edit": {}}});
    let message = "this agent has no sandbox \"edit\"";
    f.refuses(alice, both, ("edit", UnknownSandbox, message))
        .await;
}

#[tokio::test]
async fn names_and_directories_are_checked_before_anything_starts() {
    use RefusalReason::{InvalidSandboxDeclaration, SandboxUnavailable};
    let f = fixture(|_| {});
    let alice = (Some("alice"), &["p9", "out"][..]);
    let message = "project \"p9\" does not exist on this server";
    f.refuses(
        alice,
        files(json!([project("p9")])),
        ("files", SandboxUnavailable, message),
    )
    .await;
    // A symbolic link out of the root is as if missing.
    let message = "project \"out\" does not exist on this server";
    f.refuses(
        alice,
        files(json!([project("out")])),
        ("files", SandboxUnavailable, message),
    )
    .await;
    let rooted = json!({"sandboxes": {"rooted": {}}});
    let message = "sandbox \"rooted\" needs a mount of role \"project\"";
    f.refuses(
        alice,
        rooted,
        ("rooted", InvalidSandboxDeclaration, message),
    )
    .await;
    let ambiguous = json!({"sandboxes": {"files/a__b": {}}});
    let message = "an instance name may not contain \"__\" or begin or end with \"_\" (it names the instance's tools)";
    f.refuses(
        alice,
        ambiguous,
        ("files/a__b", InvalidSandboxDeclaration, message),
    )
    .await;
    let same = json!({"sandboxes": {"files/x": {}, "files_x": {}}});
    let message = "handles \"files/x\" and \"files_x\" would give their tools the same names";
    f.refuses(alice, same, ("files_x", InvalidSandboxDeclaration, message))
        .await;
}

#[tokio::test]
async fn an_instance_gets_its_mounts_and_names_its_tools_by_handle() {
    let f = fixture(|_| {});
    let declare = json!({"sandboxes": {
        "files": {"mounts": [project("p1"), {"role": "scratch", "id": "new-one"}]},
        "files/left": {},
        "rooted": {"mounts": [project("p2")]},
    }});
    f.open("s1", Some("alice"), &["p1", "p2"], declare)
        .await
        .unwrap();
    let names: Vec<String> = (f.tools("s1").await.iter())
        .flat_map(|b| b.specs().iter().map(|s| s.name.clone()).collect::<Vec<_>>())
        .collect();
    assert_eq!(
        names,
        ["files__whoami", "files_left__whoami", "rooted__whoami"]
    );
    let root = f.dir.path().canonicalize().unwrap();
    let answer = f.call("s1", "files__whoami").await;
    let expected = format!(
        "{} {}",
        root.join("projects/p1").display(),
        root.join("scratch/new-one").display()
    );
    assert!(answer.ends_with(&format!("args {expected}")), "{answer}");
    assert!(
        root.join("scratch/new-one").is_dir(),
        "created where the role says so"
    );
    assert!(f.call("s1", "files_left__whoami").await.ends_with("args "));
    let rooted = f.call("s1", "rooted__whoami").await;
    assert!(
        rooted.ends_with(&format!("--root={}", root.join("projects/p2").display())),
        "{rooted}"
    );
    assert!(f.tools("s-unknown").await.is_empty());
}

#[tokio::test]
async fn start_failures_are_told_apart_and_start_nothing() {
    let f = fixture(|_| {});
    let cases = [
        (
            "missing",
            RefusalReason::SandboxUnavailable,
            "sandbox \"missing\" is not installed on this server",
        ),
        (
            "quitter",
            RefusalReason::SessionInitFailed,
            "sandbox \"quitter\" did not start: its server exited or does not speak MCP",
        ),
        (
            "silent",
            RefusalReason::SessionInitFailed,
            "sandbox \"silent\" did not start within 300ms",
        ),
    ];
    for (sandbox, reason, message) in cases {
        // `files` starts first (handles in order), then is stopped.
        let declare = json!({"sandboxes": {"files": {}, sandbox: {}}});
        let refused = f.open("s1", Some("alice"), &[], declare).await.unwrap_err();
        assert_eq!(
            (
                refused.handle.as_str(),
                refused.reason,
                refused.message.as_str()
            ),
            (sandbox, reason, message)
        );
        assert!(f.pool.state.lock().sessions.is_empty(), "{sandbox}");
    }
}

#[tokio::test]
async fn reopening_reuses_the_instance_and_caps_count_the_rest() {
    let f = fixture(|files| files.limits.instances_per_owner = 1);
    let declare = files(json!([]));
    f.open("a1", Some("alice"), &[], declare.clone())
        .await
        .unwrap();
    let pid = f.pid("a1", "files__whoami").await;
    f.open("a1", Some("alice"), &[], declare.clone())
        .await
        .unwrap();
    assert_eq!(
        f.pid("a1", "files__whoami").await,
        pid,
        "the running instance is reused"
    );
    let refused = f
        .open("a2", Some("alice"), &[], declare.clone())
        .await
        .unwrap_err();
    assert_eq!(refused.reason, RefusalReason::MaxInstances);
    assert_eq!(
        refused.message,
        "the caller is at its limit of instances of sandbox \"files\" (1)"
    );
    // Other owners have their own count; the node's is 3.
    f.open("b1", Some("bob"), &[], declare.clone())
        .await
        .unwrap();
    f.open("n1", None, &[], declare.clone()).await.unwrap();
    let refused = f
        .open("c1", Some("carol"), &[], declare.clone())
        .await
        .unwrap_err();
    assert_eq!(
        refused.message,
        "this server is at its limit of instances of sandbox \"files\" (3)"
    );
    // Another sandbox counts apart.
    f.open(
        "a3",
        Some("alice"),
        &["p1"],
        json!({"sandboxes": {"rooted": {"mounts": [project("p1")]}}}),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn an_idle_instance_stops_and_the_next_turn_starts_it_again() {
    let f = fixture(|files| files.limits.idle_ttl = Duration::from_millis(200));
    f.open("s1", Some("alice"), &[], files(json!([])))
        .await
        .unwrap();
    let pid = f.pid("s1", "files__whoami").await;
    until("the idle instance stopped", || !alive(pid)).await;
    assert!(matches!(
        f.pool.state.lock().sessions[&SessionId::parse("s1").unwrap()].handles[0].state,
        SlotState::Stopped
    ));
    let again = f.pid("s1", "files__whoami").await;
    assert_ne!(again, pid);
    assert!(alive(again));
}

#[tokio::test]
async fn a_dead_server_is_started_again_and_a_forgotten_session_has_no_tools() {
    let f = fixture(|_| {});
    f.open("s1", Some("alice"), &[], files(json!([])))
        .await
        .unwrap();
    let pid = f.pid("s1", "files__whoami").await;
    std::process::Command::new("sh")
        .args(["-c", &format!("kill {pid}")])
        .status()
        .unwrap();
    until("the server died", || !alive(pid)).await;
    // Once the box has seen its server go, the next turn starts another.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tools = f.tools("s1").await;
        if let Some(Ok(answer)) = match tools.first() {
            Some(tool_box) => Some(tool_box.call("files__whoami", json!({})).await),
            None => None,
        } && !answer.as_str().unwrap().starts_with(&format!("pid {pid} "))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the instance was not restarted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Forgotten after its context TTL: nothing runs, nothing is offered.
    let brief = f
        .pool
        .for_agent("brief", vec!["files".into()], Duration::from_millis(100));
    let declaration = Declaration::parse(&files(json!([]))).unwrap();
    let caller = TurnCaller {
        owner: Some("dave".into()),
        memory_facet: None,
    };
    let session = SessionId::parse("d1").unwrap();
    let opening = SessionOpening {
        agent: "brief",
        session: &session,
        caller: &caller,
        grants: &[],
        declaration: &declaration,
        scope: &ConnectionScope::new(),
    };
    brief.open(opening).await.unwrap();
    let pid = f.pid("d1", "files__whoami").await;
    until("the session was forgotten", || !alive(pid)).await;
    assert!(brief.for_session(&session).await.is_empty());
}

#[tokio::test]
async fn shutdown_stops_every_instance() {
    let f = fixture(|_| {});
    f.open("s1", Some("alice"), &[], files(json!([])))
        .await
        .unwrap();
    f.open("s2", Some("bob"), &[], files(json!([])))
        .await
        .unwrap();
    let pids = [
        f.pid("s1", "files__whoami").await,
        f.pid("s2", "files__whoami").await,
    ];
    f.pool.shutdown();
    until("every server stopped", || {
        pids.iter().all(|pid| !alive(*pid))
    })
    .await;
    assert!(f.tools("s1").await.is_empty());
}

//! What the sandbox tests run on: bubblewrap, the real filesystem MCP
//! server from npm, the probe server (`tests/clients/sandbox_probe.py`, on
//! the official Python SDK), all installed by `scripts/install-test-deps.sh`;
//! a projects directory per test; a server whose agent `coder` has the
//! sandboxes; and what the tests ask of it.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::credentials::{SECRET, auth_yaml, hs256, now_secs};
use crate::support::{Client, TestServer, repo_root};

/// What the tests need installed.
pub struct Deps {
    /// `@modelcontextprotocol/server-filesystem`'s entry point.
    filesystem: PathBuf,
    /// `target/npm`, bound read-only into the sandbox.
    npm: PathBuf,
    /// The Python with the MCP SDK, and the directories it needs to run:
    /// its installation and the venv.
    python: PathBuf,
    python_dirs: Vec<PathBuf>,
}

/// The dependencies, or `None` (the test is skipped) when one is missing
/// outside CI; under CI a missing one fails the test.
pub fn deps() -> Option<Deps> {
    let root = repo_root();
    let npm = root.join("target/npm");
    let filesystem = npm.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let venv = root.join("target/clients-venv");
    let python = venv.join("bin/python");
    let bwrap =
        agentwire_tools::sandbox::find_program("bwrap", std::env::var_os("PATH").as_deref());
    let missing = [
        (bwrap.is_none(), "bubblewrap (bwrap)"),
        (
            !filesystem.is_file(),
            "@modelcontextprotocol/server-filesystem",
        ),
        (
            !python.is_file(),
            "the Python MCP SDK in target/clients-venv",
        ),
    ];
    if let Some((_, what)) = missing.iter().find(|(missing, _)| *missing) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and {what} is missing; run scripts/install-test-deps.sh"
        );
        eprintln!("skipped: {what} is not installed (run scripts/install-test-deps.sh)");
        return None;
    }
    let base = std::process::Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .expect("the venv's python runs");
    let base = String::from_utf8(base.stdout).unwrap().trim().to_owned();
    Some(Deps {
        filesystem,
        npm: npm.canonicalize().unwrap(),
        python,
        python_dirs: vec![PathBuf::from(base), venv.canonicalize().unwrap()],
    })
}

/// A projects root with `p1` and `p2` (each with a `README.md`), beside an
/// `outside` directory no sandbox mounts.
pub struct Projects {
    pub dir: tempfile::TempDir,
}

impl Projects {
    pub fn new() -> Projects {
        let dir = tempfile::tempdir().unwrap();
        for project in ["p1", "p2"] {
            let path = dir.path().join("projects").join(project);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("README.md"), format!("# {project}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        Projects { dir }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn project(&self, id: &str) -> PathBuf {
        self.root().join("projects").join(id)
    }

    /// The processes whose command line names this test's directory: the
    /// sandboxes running for it.
    pub fn running(&self) -> usize {
        let needle = self.root().display().to_string();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        entries
            .flatten()
            .filter(|entry| {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                let zombie = stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z'));
                !zombie
                    && String::from_utf8_lossy(&cmdline)
                        .replace('\0', " ")
                        .contains(&needle)
            })
            .count()
    }

    /// Waits until `count` sandbox processes run for this test (bubblewrap
    /// runs as two: its own and the server's).
    pub async fn until_running(&self, what: &str, done: impl Fn(usize) -> bool) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let running = self.running();
            if done(running) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: {running} sandbox processes"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// The scripted model: each scenario calls one sandbox tool, then answers
/// `<label>: <the tool's result>`. `@PORT@` is the port the network probe
/// tries; `@ROOT@` the test's directory.
const PROVIDERS: &str = r#"
providers:
  - name: scripted
    type: mock
    default_response: "no script"
    scenarios:
      list:
        turns:
          1: {tool_calls: [{name: files__list_directory, arguments: {path: /sandbox/project/p1}}]}
          2: "Listed: {{last_tool_result}}"
          3: {tool_calls: [{name: files__list_directory, arguments: {path: /sandbox/project/p1}}]}
          4: "Listed again: {{last_tool_result}}"
          5: {tool_calls: [{name: files__list_directory, arguments: {path: /sandbox/project/p1}}]}
          6: "Listed once more: {{last_tool_result}}"
      write:
        turns:
          1: {tool_calls: [{name: files__write_file, arguments: {path: /sandbox/project/p1/notes.txt, content: "hello from the sandbox"}}]}
          2: "Wrote: {{last_tool_result}}"
      escape:
        turns:
          1: {tool_calls: [{name: files__write_file, arguments: {path: "@ROOT@/outside/escaped.txt", content: "escaped"}}]}
          2: "Escape: {{last_tool_result}}"
      plain-list:
        turns:
          1: {tool_calls: [{name: plain__list_directory, arguments: {path: "@ROOT@/projects/p2"}}]}
          2: "Listed: {{last_tool_result}}"
      sibling:
        turns:
          1: {tool_calls: [{name: probe__write, arguments: {path: "@ROOT@/projects/p2/evil.txt", text: "evil"}}]}
          2: "Sibling: {{last_tool_result}}"
      system:
        turns:
          1: {tool_calls: [{name: probe__write, arguments: {path: /usr/agentwire-evil.txt, text: "evil"}}]}
          2: "System: {{last_tool_result}}"
      mounted:
        turns:
          1: {tool_calls: [{name: probe__write, arguments: {path: /sandbox/project/p1/probe.txt, text: "probed"}}]}
          2: "Mounted: {{last_tool_result}}"
      connect:
        turns:
          1: {tool_calls: [{name: probe__connect, arguments: {port: @PORT@}}]}
          2: "Connect: {{last_tool_result}}"
      connect-net:
        turns:
          1: {tool_calls: [{name: netprobe__connect, arguments: {port: @PORT@}}]}
          2: "Connect: {{last_tool_result}}"
"#;

/// The sandboxes: `files` (the filesystem server on the declared
/// projects), `probe` and `netprobe` (the probe, without and with the
/// network), `missing` (no such program), `mute` (exits at once) and
/// `plain` (`isolation: none`, a project for any caller). `limits` is
/// `files`' limits block.
const SANDBOXES: &str = r#"
sandboxes:
  - name: files
    command: node
    args: ["@FILESYSTEM@", "{mounts}"]
    read_only: ["@NPM@"]
    mount_roles:
      project: {root: "@ROOT@/projects"}
    limits: @LIMITS@
  - name: probe
    command: "@PYTHON@"
    args: ["@PROBE@"]
    read_only: [@PYTHON_DIRS@]
    mount_roles:
      project: {root: "@ROOT@/projects"}
    limits: {cpu_seconds: 60, instances_per_owner: 8}
  - name: netprobe
    command: "@PYTHON@"
    args: ["@PROBE@"]
    read_only: [@PYTHON_DIRS@]
    network: true
  - name: missing
    command: /nonexistent/agentwire-sandbox-server
  - name: mute
    command: sh
    args: ["-c", "exit 0"]
  - name: plain
    command: node
    args: ["@FILESYSTEM@", "{mount.project}"]
    isolation: none
    mount_roles:
      project: {root: "@ROOT@/projects", authorize: any}
"#;

pub const AGENT: &str = "  - name: coder
    handler: runtime
    provider: scripted
    access_level: public
    sandboxes: [files, probe, netprobe, missing, mute, plain]
";

/// The config beside the agents: the credentials of `credentials.rs`
/// (whose JWTs carry `projects`), the model, the sandboxes.
pub fn top_level(deps: &Deps, projects: &Projects, port: u16, limits: &str) -> String {
    let probe = repo_root().join("crates/agentwire/tests/clients/sandbox_probe.py");
    let clients = probe.parent().unwrap().canonicalize().unwrap();
    let mut python_dirs: Vec<String> = (deps.python_dirs.iter().chain([&clients]))
        .map(|dir| format!("\"{}\"", dir.display()))
        .collect();
    python_dirs.dedup();
    let text = format!("{}{PROVIDERS}{SANDBOXES}", auth_yaml());
    text.replace("@PORT@", &port.to_string())
        .replace("@ROOT@", &projects.root().display().to_string())
        .replace("@FILESYSTEM@", &deps.filesystem.display().to_string())
        .replace("@NPM@", &deps.npm.display().to_string())
        .replace("@PYTHON@", &deps.python.display().to_string())
        .replace(
            "@PROBE@",
            &probe.canonicalize().unwrap().display().to_string(),
        )
        .replace("@PYTHON_DIRS@", &python_dirs.join(", "))
        .replace("@LIMITS@", limits)
}

/// A JWT for `subject` granting `projects`.
pub fn granting(subject: &str, projects: &[&str]) -> String {
    hs256(
        &json!({"iss": "https://issuer.test", "aud": "agentwire", "sub": subject,
                "exp": now_secs() + 600, "projects": projects}),
        SECRET,
    )
}

/// Connects to `coder` with `token` (none: anonymous).
pub async fn connect(server: &TestServer, token: Option<&str>) -> (Client, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("Authorization", b.as_str()))
        .collect();
    let mut client = server
        .try_connect_with("agent=coder", &headers)
        .await
        .expect("upgrade accepted");
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    let session = connected["session_id"].as_str().unwrap().to_owned();
    (client, session)
}

/// A message running `scenario`, with `declare` when given and naming
/// `session` when given.
pub fn message(scenario: &str, declare: Option<Value>, session: Option<&str>) -> Value {
    let mut message =
        json!({"type": "message", "content": scenario, "metadata": {"mock_scenario": scenario}});
    if let Some(declare) = declare {
        message["declare"] = declare;
    }
    if let Some(session) = session {
        message["session_id"] = json!(session);
    }
    message
}

/// `{"sandboxes": {handle: {"mounts": [project ids]}}}`.
pub fn declare(handle: &str, projects: &[&str]) -> Value {
    let mounts: Vec<Value> = (projects.iter())
        .map(|id| json!({"role": "project", "id": id}))
        .collect();
    json!({"sandboxes": {handle: {"mounts": mounts}}})
}

/// Sends `message` and reads its turn: the `done` text, or the error frame.
pub async fn turn(client: &mut Client, message: Value) -> Result<String, Value> {
    client.send_json(message).await;
    let mut frames = Vec::new();
    loop {
        // A sandbox's server starting under a loaded machine takes seconds.
        let frame = client.recv_within(std::time::Duration::from_secs(30)).await;
        match frame["type"].as_str() {
            Some("done") => return Ok(frame["content"].as_str().unwrap_or_default().to_owned()),
            Some("error") => return Err(frame),
            _ => frames.push(frame),
        }
    }
}

/// The refusal an error frame carries: its `details`, checked to be the
/// `SESSION_DECLARATION_REFUSED` shape with the same message.
pub fn refusal(frame: &Value) -> Value {
    let error = &frame["error"];
    assert_eq!(error["code"], "SESSION_DECLARATION_REFUSED", "{frame}");
    assert_eq!(error["message"], error["details"]["message"], "{frame}");
    error["details"].clone()
}

pub fn details(handle: &str, reason: &str, message: &str) -> Value {
    json!({"type": "sandboxes", "handle": handle, "reason": reason, "message": message})
}

/// `GET /api/v1/sessions` as the holder of `token`: the listed ids.
pub async fn sessions(server: &TestServer, token: &str) -> Vec<String> {
    let auth = format!("Bearer {token}");
    let response = server
        .http("GET", "/api/v1/sessions", &[("Authorization", &auth)], b"")
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let listed = response.json();
    (listed["sessions"].as_array().unwrap().iter())
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

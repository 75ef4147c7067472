//! Sandboxes end to end: a session declares a project mount on the Omnia
//! socket, and a scripted model lists and writes its files through the real
//! filesystem MCP server under bubblewrap; what the sandbox keeps out (other
//! projects, the system, the network); every refusal reason config can
//! reach, with its exact details; caps, the idle TTL, and a session resumed
//! on a restarted server getting its sandbox back.

mod setup;

use serde_json::json;

use crate::support::TestServer;
use setup::{
    AGENT, Projects, connect, declare, deps, details, granting, message, refusal, sessions,
    top_level, turn,
};

/// Caps high enough for a test that opens a session per scenario.
const ROOMY: &str = "{instances_per_owner: 8}";

#[tokio::test]
async fn a_declared_project_is_listed_and_written_and_writes_elsewhere_fail() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let server = TestServer::with_runtime(&top_level(&deps, &projects, 9, ROOMY), AGENT).await;
    let alice = granting("alice", &["p1"]);

    let (mut client, _) = connect(&server, Some(&alice)).await;
    let listed = turn(
        &mut client,
        message("list", Some(declare("files", &["p1"])), None),
    )
    .await
    .unwrap();
    assert!(
        listed.starts_with("Listed: ") && listed.contains("[FILE] README.md"),
        "{listed}"
    );

    let (mut client, _) = connect(&server, Some(&alice)).await;
    let wrote = turn(
        &mut client,
        message("write", Some(declare("files", &["p1"])), None),
    )
    .await
    .unwrap();
    assert!(
        wrote.contains("Successfully wrote to /sandbox/project/p1/notes.txt"),
        "{wrote}"
    );
    let notes = projects.project("p1").join("notes.txt");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "hello from the sandbox"
    );

    // A path outside the mount: the server refuses it, nothing is written.
    let (mut client, _) = connect(&server, Some(&alice)).await;
    let escaped = turn(
        &mut client,
        message("escape", Some(declare("files", &["p1"])), None),
    )
    .await
    .unwrap();
    assert!(
        escaped.starts_with("Escape: Access denied - path outside allowed directories"),
        "{escaped}"
    );
    assert!(!projects.root().join("outside/escaped.txt").exists());
    server.stop().await;
    projects
        .until_running("stopped with the server", |n| n == 0)
        .await;
}

#[tokio::test]
async fn bubblewrap_hides_other_projects_keeps_the_system_read_only_and_the_network_out() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let top = top_level(&deps, &projects, port, ROOMY);
    let server = TestServer::with_runtime(&top, AGENT).await;
    let alice = granting("alice", &["p1"]);
    // The probe server itself writes where it is given to.
    let ask = async |scenario: &str, handle: &str, mounts: &[&str]| {
        let (mut client, _) = connect(&server, Some(&alice)).await;
        turn(
            &mut client,
            message(scenario, Some(declare(handle, mounts)), None),
        )
        .await
        .unwrap()
    };
    let mounted = ask("mounted", "probe", &["p1"]).await;
    assert!(mounted.contains("written"), "{mounted}");
    assert_eq!(
        std::fs::read_to_string(projects.project("p1").join("probe.txt")).unwrap(),
        "probed"
    );
    // Another project is not there at all, even by its host path.
    let sibling = ask("sibling", "probe", &["p1"]).await;
    assert!(
        sibling.contains("failed: No such file or directory"),
        "{sibling}"
    );
    assert!(!projects.project("p2").join("evil.txt").exists());
    let system = ask("system", "probe", &["p1"]).await;
    assert!(system.contains("failed: Read-only file system"), "{system}");
    assert!(!std::path::Path::new("/usr/agentwire-evil.txt").exists());
    // No network but the sandbox's own; with `network: true`, the host's.
    let isolated = ask("connect", "probe", &["p1"]).await;
    assert!(
        isolated.contains("refused: Connection refused"),
        "{isolated}"
    );
    let shared = ask("connect-net", "netprobe", &[]).await;
    assert!(shared.contains("\"connected\""), "{shared}");
    drop(listener);
}

/// Sends `declared` as the first message on a new socket of `token`'s
/// (none: anonymous): it is refused with exactly `expected`, no session
/// is listed, and the socket's next message opens a session.
async fn refused_then_opened(
    server: &TestServer,
    token: Option<&str>,
    declared: serde_json::Value,
    (handle, reason, text): (&str, &str, &str),
) {
    let (mut client, session) = connect(server, token).await;
    let refused = turn(&mut client, message("list", Some(declared.clone()), None)).await;
    assert_eq!(
        refusal(&refused.unwrap_err()),
        details(handle, reason, text),
        "{declared}"
    );
    if let Some(token) = token {
        assert!(sessions(server, token).await.is_empty(), "{declared}");
    }
    let answer = turn(&mut client, message("none", None, None)).await;
    assert_eq!(answer.unwrap(), "no script");
    if let Some(token) = token {
        assert_eq!(sessions(server, token).await, [session.as_str()]);
        let path = format!("/api/v1/sessions/{session}");
        let auth = format!("Bearer {token}");
        let deleted = server
            .http("DELETE", &path, &[("Authorization", &auth)], b"")
            .await;
        assert_eq!(deleted.status, 204, "{}", deleted.text());
    }
}

#[tokio::test]
async fn each_refusal_names_its_handle_and_reason_and_opens_no_session() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let server = TestServer::with_runtime(&top_level(&deps, &projects, 9, ROOMY), AGENT).await;
    let alice = granting("alice", &["p2"]);
    let alice = Some(alice.as_str());
    let nope = json!({"sandboxes": {"nope": {}}});
    let text = "this agent has no sandbox \"nope\"";
    refused_then_opened(&server, alice, nope, ("nope", "UnknownSandbox", text)).await;
    let repo = json!({"sandboxes": {"files": {"mounts": [{"role": "repo", "id": "p2"}]}}});
    let text = "sandbox \"files\" has no mount role \"repo\"";
    refused_then_opened(&server, alice, repo, ("files", "UnknownMountRole", text)).await;
    let p1 = declare("files", &["p1"]);
    let text = "the caller's credential does not grant project \"p1\"";
    refused_then_opened(
        &server,
        alice,
        p1.clone(),
        ("files", "MountNotAuthorized", text),
    )
    .await;
    let text = "an anonymous caller may mount nothing: project \"p1\" needs a credential";
    refused_then_opened(
        &server,
        None,
        p1.clone(),
        ("files", "MountNotAuthorized", text),
    )
    .await;
    let missing = json!({"sandboxes": {"missing": {}}});
    let text = "sandbox \"missing\" is not installed on this server";
    refused_then_opened(
        &server,
        alice,
        missing,
        ("missing", "SandboxUnavailable", text),
    )
    .await;
    let mute = json!({"sandboxes": {"mute": {}}});
    let text = "sandbox \"mute\" did not start: its server exited or does not speak MCP";
    refused_then_opened(&server, alice, mute, ("mute", "SessionInitFailed", text)).await;
    // With the grant, the same declaration opens.
    let (mut client, _) = connect(&server, Some(&granting("alice", &["p1"]))).await;
    let listed = turn(&mut client, message("list", Some(p1), None)).await;
    assert!(listed.unwrap().contains("README.md"));
}

#[tokio::test]
async fn instances_end_at_the_idle_ttl_and_count_against_the_cap() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let limits = "{instances_per_owner: 1, idle_ttl: 1s}";
    let server = TestServer::with_runtime(&top_level(&deps, &projects, 9, limits), AGENT).await;
    let alice = granting("alice", &["p1"]);
    let (mut first, _) = connect(&server, Some(&alice)).await;
    let listed = turn(
        &mut first,
        message("list", Some(declare("files", &["p1"])), None),
    )
    .await;
    assert!(listed.unwrap().starts_with("Listed: "));
    assert!(projects.running() > 0);
    let at_cap = details(
        "files",
        "MaxInstances",
        "the caller is at its limit of instances of sandbox \"files\" (1)",
    );
    let (mut second, _) = connect(&server, Some(&alice)).await;
    let refused = turn(
        &mut second,
        message("list", Some(declare("files", &["p1"])), None),
    )
    .await;
    assert_eq!(refusal(&refused.unwrap_err()), at_cap);

    projects
        .until_running("the idle instance ended", |n| n == 0)
        .await;
    // The session's next turn starts it again, and it holds the cap again.
    let again = turn(&mut first, message("list", None, None)).await.unwrap();
    assert!(
        again.starts_with("Listed again: ") && again.contains("README.md"),
        "{again}"
    );
    assert!(projects.running() > 0);
    let refused = turn(
        &mut second,
        message("list", Some(declare("files", &["p1"])), None),
    )
    .await;
    assert_eq!(refusal(&refused.unwrap_err()), at_cap);
}

#[tokio::test]
async fn a_continuing_session_is_never_refused_for_a_slot_its_idle_instance_gave_up() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let limits = "{instances_per_owner: 1, idle_ttl: 1s}";
    let server = TestServer::with_runtime(&top_level(&deps, &projects, 9, limits), AGENT).await;
    let alice = granting("alice", &["p1"]);
    let p1 = || Some(declare("files", &["p1"]));
    let (mut first, _) = connect(&server, Some(&alice)).await;
    assert!(turn(&mut first, message("list", p1(), None)).await.is_ok());
    projects
        .until_running("the first instance ended", |n| n == 0)
        .await;
    // The slot is free: another session of the same owner takes it.
    let (mut second, _) = connect(&server, Some(&alice)).await;
    assert!(turn(&mut second, message("list", p1(), None)).await.is_ok());
    // The first session goes on without its tools until a slot frees.
    let without = turn(&mut first, message("list", None, None)).await.unwrap();
    assert_eq!(
        without,
        "Listed again: unknown tool \"files__list_directory\""
    );
    projects
        .until_running("the second instance ended", |n| n == 0)
        .await;
    let again = turn(&mut first, message("list", None, None)).await.unwrap();
    assert!(
        again.starts_with("Listed once more: ") && again.contains("README.md"),
        "{again}"
    );
}

#[tokio::test]
async fn a_resumed_session_keeps_its_declaration_across_a_restart() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let top = top_level(&deps, &projects, 9, ROOMY);
    let db = projects.root().join("agentwire.db");
    let alice = granting("alice", &["p1", "p2"]);
    let server = TestServer::on_database_with_runtime(&db, &top, AGENT).await;
    let (mut client, session) = connect(&server, Some(&alice)).await;
    let wrote = turn(
        &mut client,
        message("write", Some(declare("files", &["p1"])), None),
    )
    .await;
    assert!(wrote.unwrap().contains("Successfully wrote"));

    // Another socket resuming it must declare the same, or nothing.
    let (mut other, _) = connect(&server, Some(&alice)).await;
    let mismatch = turn(
        &mut other,
        message("list", Some(declare("files", &["p2"])), Some(&session)),
    )
    .await;
    assert_eq!(
        refusal(&mismatch.unwrap_err()),
        details(
            "files",
            "DeclarationMismatch",
            "the session was opened with another declaration; resume it with the same one, or with none"
        )
    );
    drop((client, other));
    server.stop().await;
    projects
        .until_running("stopped with the server", |n| n == 0)
        .await;

    // A new server on the same database: the session's sandbox comes back
    // with its stored declaration, without the client declaring anything.
    let server = TestServer::on_database_with_runtime(&db, &top, AGENT).await;
    let (mut client, _) = connect(&server, Some(&alice)).await;
    let listed = turn(&mut client, message("list", None, Some(&session)))
        .await
        .unwrap();
    assert!(
        listed.starts_with("Listed again: ") && listed.contains("[FILE] notes.txt"),
        "{listed}"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_unisolated_sandbox_serves_the_host_path_to_any_authenticated_caller() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let server = TestServer::with_runtime(&top_level(&deps, &projects, 9, ROOMY), AGENT).await;
    // `authorize: any`: no grant needed, but a credential is.
    let bob = granting("bob", &[]);
    let (mut client, _) = connect(&server, Some(&bob)).await;
    let listed = turn(
        &mut client,
        message("plain-list", Some(declare("plain", &["p2"])), None),
    )
    .await;
    let listed = listed.unwrap();
    assert!(
        listed.starts_with("Listed: ") && listed.contains("README.md"),
        "{listed}"
    );
    let (mut client, _) = connect(&server, None).await;
    let refused = turn(
        &mut client,
        message("plain-list", Some(declare("plain", &["p2"])), None),
    )
    .await;
    assert_eq!(
        refusal(&refused.unwrap_err())["reason"],
        "MountNotAuthorized"
    );
    // `{mount.project}` in its arguments: a declaration must mount one.
    let (mut client, _) = connect(&server, Some(&bob)).await;
    let refused = turn(
        &mut client,
        message("plain-list", Some(declare("plain", &[])), None),
    )
    .await;
    assert_eq!(
        refusal(&refused.unwrap_err()),
        details(
            "plain",
            "InvalidSandboxDeclaration",
            "sandbox \"plain\" needs a mount of role \"project\""
        )
    );
}

#[test]
fn a_bad_sandbox_config_is_refused_naming_the_key() {
    let files = "  - name: files\n    command: node\n";
    let config = |sandboxes: &str, agent: &str| {
        format!(
            "providers:\n  - name: m\n    type: mock\nsandboxes:\n{sandboxes}agents:\n  - name: a\n    handler: runtime\n    provider: m\n{agent}"
        )
    };
    let cases = [
        (
            config(
                &format!(
                    "{files}    mount_roles:\n      project: {{root: /nonexistent/projects}}\n"
                ),
                "",
            ),
            "sandboxes[0].mount_roles.project.root",
            "/nonexistent/projects",
        ),
        (
            config("  - name: a__b\n    command: node\n", ""),
            "sandboxes[0].name",
            "\"__\"",
        ),
        (
            config(&format!("{files}{files}"), ""),
            "sandboxes[1].name",
            "duplicate name \"files\"",
        ),
        (
            config(&format!("{files}    args: [\"--dirs={{mounts}}\"]\n"), ""),
            "sandboxes[0].args[0]",
            "{mounts} must be a whole argument",
        ),
        (
            config(&format!("{files}    args: [\"{{mount.repo}}\"]\n"), ""),
            "sandboxes[0].args[0]",
            "{mount.repo} names no role",
        ),
        (
            config(
                &format!("{files}    isolation: none\n    network: false\n"),
                "",
            ),
            "sandboxes[0].network",
            "`isolation: none` cannot keep the server off the network",
        ),
        (
            config(&format!("{files}    limits: {{memory: 1.5GiB}}\n"), ""),
            "sandboxes[0].limits.memory",
            "such as 512MiB",
        ),
        (
            config(&format!("{files}    limits: {{idle_ttl: 0s}}\n"), ""),
            "sandboxes[0].limits.idle_ttl",
            "greater than 0",
        ),
        (
            config(files, "    sandboxes: [nope]\n"),
            "agents[0].sandboxes[0]",
            "no sandbox named \"nope\"",
        ),
        (
            format!(
                "sandboxes:\n{files}agents:\n  - name: e\n    handler: echo\n    sandboxes: [files]\n"
            ),
            "agents[0].sandboxes",
            "sandboxes need `handler: runtime`",
        ),
    ];
    for (text, key, fragment) in cases {
        crate::config_errors::assert_rejected(&text, key, fragment);
    }
}

/// A compile-mode pack agent with sandboxes: the pack compiles at the
/// session's open, the declaration passes on to the sandboxes, and the model
/// gets the sandbox's tools beside the pack's. A declaration it cannot take
/// is still refused by the sandboxes' checks.
#[tokio::test]
async fn a_pack_agent_passes_its_declaration_to_its_sandboxes() {
    let Some(deps) = deps() else {
        return;
    };
    let projects = Projects::new();
    let pack = crate::packs::write_pack(
        &projects.root(),
        "coder.pack.json",
        &crate::packs::minimal_pack("You work on the caller's project."),
    );
    let packed = format!(
        "  - name: packed\n    handler: runtime\n    provider: scripted\n    access_level: public\n    sandboxes: [files]\n    pack: {{path: \"{}\", compile: per_session}}\n",
        pack.display()
    );
    let top = top_level(&deps, &projects, 9, ROOMY);
    let server = TestServer::with_runtime(&top, &format!("{AGENT}{packed}")).await;
    let alice = granting("alice", &["p1"]);
    let bearer = format!("Bearer {alice}");
    let connect = || async {
        let mut client = (server.try_connect_with("agent=packed", &[("Authorization", &bearer)]))
            .await
            .expect("upgrade accepted");
        assert_eq!(client.recv().await["type"], "connected");
        client
    };

    let mut client = connect().await;
    let listed = turn(
        &mut client,
        message("list", Some(declare("files", &["p1"])), None),
    )
    .await
    .unwrap();
    assert!(listed.contains("[FILE] README.md"), "{listed}");

    let mut client = connect().await;
    let refused = turn(
        &mut client,
        message("list", Some(declare("files", &["p2"])), None),
    )
    .await
    .unwrap_err();
    assert_eq!(refusal(&refused)["reason"], "MountNotAuthorized");
}

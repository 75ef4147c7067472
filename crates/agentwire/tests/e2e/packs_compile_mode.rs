//! Compile mode (`agents[].pack.compile: per_session`) over real sockets:
//! the server starts with a pack that does not compile; a session open
//! compiles the file as it is then, refusing with `pack_compile_failed`
//! (`details{error, warnings}`) and keeping the socket open; fixing the
//! file makes the next message on the same socket open the session; a
//! session keeps the pack it opened with, a new one takes the file's; the
//! agents listing shows the latest compile.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::fake_http::{openai_model, openai_text};
use crate::packs::{minimal_pack, write_pack};
use crate::support::{Client, TestServer};

/// A pack with an unused variable (a warning) whose template names a
/// variable it does not declare (an error).
fn broken_pack() -> Value {
    let mut pack = minimal_pack("Hello {{name}}.");
    pack["prompts"]["chat"]["variables"] =
        json!([{"name": "mood", "type": "string", "required": false}]);
    pack
}

/// The same pack, fixed: the template uses `mood`, given a default.
fn fixed_pack(template: &str) -> Value {
    let mut pack = minimal_pack(template);
    pack["prompts"]["chat"]["variables"] =
        json!([{"name": "mood", "type": "string", "required": false, "default": "calm"}]);
    pack
}

const UNUSED_MOOD: &str =
    "prompts.chat.variables[0]: \"mood\" is declared but the template never uses it";
const NO_COMPILATION: &str =
    "compilation: missing: packc validate would refuse the pack (agentwire needs none)";

fn compile_mode_agent(path: &std::path::Path) -> String {
    format!(
        "  - name: authoring\n    handler: runtime\n    provider: model\n    pack:\n      path: {}\n      compile: per_session\n",
        path.display()
    )
}

/// Sends a message and reads the `pack_compile_failed` it is refused with:
/// its `error.details`, after checking the frame's exact shape.
async fn refused(client: &mut Client) -> Value {
    client.say("hi").await;
    let frame = client.recv().await;
    let keys: BTreeSet<&str> = frame
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        // Named by the session the message was to open, which did not.
        BTreeSet::from(["type", "session_id", "timestamp", "error"]),
        "{frame}"
    );
    assert_eq!(frame["type"], "error");
    let error = &frame["error"];
    assert_eq!(
        (&error["code"], &error["message"]),
        (
            &json!("pack_compile_failed"),
            &json!("the agent's pack did not compile")
        ),
        "{frame}"
    );
    let details = error["details"].clone();
    let keys: BTreeSet<&str> = details
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, BTreeSet::from(["error", "warnings"]), "{frame}");
    details
}

/// The agent's `pack` in the agents listing.
async fn listed_pack(server: &TestServer) -> Value {
    let listing = server.http("GET", "/api/v1/agents", &[], b"").await.json();
    let agents = listing["agents"].as_array().unwrap();
    agents.iter().find(|a| a["name"] == "authoring").unwrap()["pack"].clone()
}

#[tokio::test]
async fn a_broken_source_is_refused_with_its_error_and_warnings_until_the_file_is_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("authoring.pack.json");
    let top_level =
        "providers:\n  - name: model\n    type: mock\n    default_response: Compiled.\n";
    // The server starts though the pack is not even there yet.
    let server = TestServer::with_runtime(top_level, &compile_mode_agent(&path)).await;
    let (mut client, _) = server.connect("agent=authoring").await;
    let details = refused(&mut client).await;
    let error = details["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("cannot read {}", path.display())),
        "{error}"
    );
    assert_eq!(details["warnings"], json!([]));

    write_pack(dir.path(), "authoring.pack.json", &broken_pack());
    let details = refused(&mut client).await;
    assert_eq!(
        details,
        json!({
            "error": "prompts.chat.system_template: references \"name\", which is neither a declared variable nor a fragment",
            "warnings": [UNUSED_MOOD, NO_COMPILATION],
        })
    );
    assert_eq!(
        listed_pack(&server).await,
        json!({"id": null, "version": null, "prompt": null, "compile": "per_session", "compiles": 3,
            "error": details["error"], "warnings": details["warnings"]})
    );

    // Fixed: the next message on the same socket opens the session.
    write_pack(
        dir.path(),
        "authoring.pack.json",
        &fixed_pack("Be {{mood}}."),
    );
    client.say("hi").await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(
        (&done["type"], &done["content"]),
        (&json!("done"), &json!("Compiled."))
    );
    let listed = listed_pack(&server).await;
    assert_eq!(
        (&listed["id"], &listed["error"], &listed["warnings"]),
        (&json!("hello"), &Value::Null, &json!([NO_COMPILATION]))
    );

    // The open session keeps its pack; a session opened now compiles the
    // file as it is, broken again.
    write_pack(dir.path(), "authoring.pack.json", &broken_pack());
    client.say("again").await;
    assert_eq!(client.recv_turn().await.pop().unwrap()["type"], "done");
    let (mut other, _) = server.connect("agent=authoring").await;
    refused(&mut other).await;
    server.stop().await;
}

#[tokio::test]
async fn each_session_runs_the_pack_it_opened_with() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_pack(
        dir.path(),
        "authoring.json",
        &fixed_pack("First: be {{mood}}."),
    );
    let model = openai_model(vec![openai_text("ok")]).await;
    let top_level = format!(
        "providers:\n  - name: model\n    type: openai\n    model: gpt-4o-mini\n    base_url: http://{}/v1\n",
        model.addr
    );
    let server = TestServer::with_runtime(&top_level, &compile_mode_agent(&path)).await;
    let (mut first, _) = server.connect("agent=authoring").await;
    first.say("one").await;
    assert_eq!(first.recv_turn().await.pop().unwrap()["type"], "done");
    write_pack(
        dir.path(),
        "authoring.json",
        &fixed_pack("Second: be {{mood}}."),
    );
    first.say("two").await;
    assert_eq!(first.recv_turn().await.pop().unwrap()["type"], "done");
    let (mut second, _) = server.connect("agent=authoring").await;
    second
        .send_json(json!({"type": "message", "content": "three", "metadata": {"mood": "brisk"}}))
        .await;
    assert_eq!(second.recv_turn().await.pop().unwrap()["type"], "done");
    let systems: Vec<String> = model
        .requests()
        .await
        .iter()
        .map(|r| {
            r.json()["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        systems,
        ["First: be calm.", "First: be calm.", "Second: be brisk."]
    );
    server.stop().await;
}

#[tokio::test]
async fn a_compile_mode_agent_without_sandboxes_takes_no_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_pack(dir.path(), "authoring.json", &fixed_pack("Be {{mood}}."));
    let top_level =
        "providers:\n  - name: model\n    type: mock\n    default_response: Compiled.\n";
    let server = TestServer::with_runtime(top_level, &compile_mode_agent(&path)).await;
    let (mut client, _) = server.connect("agent=authoring").await;
    client
        .send_json(
            json!({"type": "message", "content": "hi", "declare": {"sandboxes": {"box": {}}}}),
        )
        .await;
    let refused = client.recv().await;
    assert_eq!(
        refused["error"],
        json!({"code": "SESSION_DECLARATION_REFUSED", "message": "this agent takes no declarations",
            "details": {"type": "sandboxes", "handle": "box", "reason": "SessionInitUnsupported",
                "message": "this agent takes no declarations"}})
    );
    client.say("hi").await;
    assert_eq!(
        client.recv_turn().await.pop().unwrap()["content"],
        "Compiled."
    );
    server.stop().await;
}

//! Omnia's `declare`: the checks every agent shares, before its own (an
//! agent with sandboxes adds its own: `sandboxes.rs`).

use serde_json::{Value, json};

use crate::support::{Client, TestServer, stored_messages};

/// Sends `declare` on a message and returns the refusal's `details`,
/// checking the frame around them.
async fn refused(client: &mut Client, declare: Value) -> Value {
    client
        .send_json(json!({"type": "message", "content": "hi", "declare": declare}))
        .await;
    let frame = client.recv().await;
    assert_eq!(frame["type"], "error", "{frame}");
    assert_eq!(
        frame["error"]["code"], "SESSION_DECLARATION_REFUSED",
        "{frame}"
    );
    let details = frame["error"]["details"].clone();
    assert_eq!(frame["error"]["message"], details["message"], "{frame}");
    details
}

fn details(kind: &str, handle: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "handle": handle, "reason": reason, "message": message})
}

/// Declarations refused before any agent's own checks, with their details.
fn malformed() -> Vec<(Value, Value)> {
    let handle_rule =
        "a handle is <sandbox> or <sandbox>/<instance>, each 1 to 64 of A-Z a-z 0-9 _ -";
    vec![
        (
            json!(["sandboxes"]),
            details(
                "",
                "",
                "InvalidDeclaration",
                "declare must be a JSON object",
            ),
        ),
        (
            json!("workspace"),
            details(
                "",
                "",
                "InvalidDeclaration",
                "declare must be a JSON object",
            ),
        ),
        (
            json!({"sandboxes": {}, "volumes": {"a": 1}}),
            details(
                "volumes",
                "",
                "UnknownDeclarationType",
                "unknown declaration type \"volumes\"; the only type is \"sandboxes\"",
            ),
        ),
        (
            json!({"sandboxes": ["workspace"]}),
            details(
                "sandboxes",
                "",
                "InvalidSandboxDeclaration",
                "sandboxes must be an object of handles",
            ),
        ),
        (
            json!({"sandboxes": {"a/b/c": {}}}),
            details(
                "sandboxes",
                "a/b/c",
                "InvalidSandboxDeclaration",
                handle_rule,
            ),
        ),
        (
            json!({"sandboxes": {"workspace": {"mounts": [{"role": "project", "id": "../etc"}]}}}),
            details(
                "sandboxes",
                "workspace",
                "InvalidSandboxDeclaration",
                "a mount's role and id are 1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot",
            ),
        ),
        (
            json!({"sandboxes": {"workspace": {"image": "ubuntu"}}}),
            details(
                "sandboxes",
                "workspace",
                "InvalidSandboxDeclaration",
                "unknown field \"image\"; a sandbox declaration has only \"mounts\"",
            ),
        ),
    ]
}

#[tokio::test]
async fn malformed_declarations_are_refused_in_order_and_store_nothing() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=echo").await;
    for (declare, expected) in malformed() {
        assert_eq!(
            refused(&mut client, declare.clone()).await,
            expected,
            "{declare}"
        );
    }
    assert!(
        stored_messages(&server.db_path).is_empty(),
        "a refused declaration stores nothing"
    );
    // The session did not open: the next message opens it, here with
    // nothing declared, on the session `connected` announced.
    client.say("now").await;
    let done = client.recv().await;
    assert_eq!(done["content"], "Echo: now");
    assert_eq!(done["session_id"], connected["session_id"]);
    // Once open, `declare` is not read again.
    client
        .send_json(json!({"type": "message", "content": "later", "declare": ["ignored"]}))
        .await;
    assert_eq!(client.recv().await["content"], "Echo: later");
}

#[tokio::test]
async fn an_agent_without_session_init_takes_no_declaration_but_an_empty_one() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=echo").await;
    let declare =
        json!({"sandboxes": {"workspace/left": {"mounts": [{"role": "project", "id": "p1"}]}}});
    assert_eq!(
        refused(&mut client, declare).await,
        details(
            "sandboxes",
            "workspace/left",
            "SessionInitUnsupported",
            "this agent takes no declarations"
        )
    );
    // Nothing declared, in either spelling, opens the session.
    for declare in [json!({}), json!({"sandboxes": {}})] {
        let (mut client, _) = server.connect("agent=echo").await;
        client
            .send_json(json!({"type": "message", "content": "hi", "declare": declare}))
            .await;
        assert_eq!(client.recv().await["content"], "Echo: hi");
    }
}

#[tokio::test]
async fn a_resumed_session_keeps_what_it_opened_with() {
    let server = TestServer::start().await;
    let (mut first, connected) = server.connect("agent=echo").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    first.say("opened").await;
    assert_eq!(first.recv().await["content"], "Echo: opened");
    drop(first);

    // Resumed on another socket declaring something the session did not
    // open with: refused, named by the session it was for.
    let (mut second, _) = server.connect("agent=echo").await;
    second
        .send_json(json!({
            "type": "message", "content": "back", "session_id": session,
            "declare": {"sandboxes": {"workspace": {}}}
        }))
        .await;
    let frame = second.recv().await;
    assert_eq!(frame["session_id"], session.as_str());
    assert_eq!(frame["error"]["details"]["reason"], "DeclarationMismatch");
    assert_eq!(frame["error"]["details"]["handle"], "workspace");
    // Without a declaration it resumes.
    second
        .send_json(json!({"type": "message", "content": "back", "session_id": session}))
        .await;
    let done = second.recv().await;
    assert_eq!(
        (done["content"].as_str(), done["session_id"].as_str()),
        (Some("Echo: back"), Some(session.as_str()))
    );
}

//! Golden frames: the exact text the server sends for a fixed set of turns
//! on each dialect, compared byte for byte with `tests/e2e/golden/*.txt`
//! (key order, spacing and every value but those that differ per run:
//! timestamps, session and call ids, which are replaced by placeholders).
//! A client that does not opt in to anything new must keep seeing exactly
//! these frames. After an intended change to the frames, rewrite the files
//! with `AGENTWIRE_BLESS=1 cargo test -p agentwire --test e2e golden` and
//! review the diff.

use std::path::PathBuf;

use serde_json::json;

use crate::support::{Client, TestServer};

/// Values that differ from run to run, by key.
const VARYING: &[&str] = &["timestamp", "scheduled_at", "session_id", "call_id", "id"];

/// `text` with the string value of every [`VARYING`] key replaced by the
/// key's name in angle brackets; a session id keeps its place only.
fn normalized(text: &str) -> String {
    let mut out = text.to_owned();
    for key in VARYING {
        let pattern = format!("\"{key}\":\"");
        let mut from = 0;
        while let Some(found) = out[from..].find(&pattern) {
            let start = from + found + pattern.len();
            let Some(len) = string_len(&out[start..]) else {
                break;
            };
            out.replace_range(start..start + len, &format!("<{key}>"));
            from = start;
        }
    }
    out
}

/// The length of a JSON string's contents up to its closing quote.
fn string_len(rest: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// Raw frames up to and including the one whose `type` is in `terminal`.
async fn recv_until(client: &mut Client, terminal: &[&str], out: &mut Vec<String>) {
    loop {
        let frame = client.recv_text().await;
        let kind: serde_json::Value = serde_json::from_str(&frame).expect("JSON frame");
        let done = terminal.iter().any(|t| kind["type"] == *t);
        out.push(normalized(&frame));
        if done {
            return;
        }
    }
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/golden")
        .join(format!("{name}.txt"))
}

/// Compares `frames` with the golden file `name`, or writes it when
/// `AGENTWIRE_BLESS` is set.
fn check(name: &str, frames: &[String]) {
    let seen = frames.join("\n") + "\n";
    let path = golden_path(name);
    if std::env::var_os("AGENTWIRE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &seen).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (bless it first)", path.display()));
    if seen != expected {
        let first = seen
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(seen.lines().count().min(expected.lines().count()));
        panic!(
            "frames differ from {} at line {}:\n  seen:     {}\n  expected: {}",
            path.display(),
            first + 1,
            seen.lines().nth(first).unwrap_or("(end)"),
            expected.lines().nth(first).unwrap_or("(end)"),
        );
    }
}

#[test]
fn normalizing_keeps_everything_but_the_varying_values() {
    let frame = r#"{"type":"chunk","session_id":"sess-1","content":"a \"q\" b","timestamp":"2026-12-01T00:00:00.000Z"}"#;
    assert_eq!(
        normalized(frame),
        r#"{"type":"chunk","session_id":"<session_id>","content":"a \"q\" b","timestamp":"<timestamp>"}"#
    );
}

#[tokio::test]
async fn omnia_frames_are_unchanged() {
    let server = TestServer::start().await;
    // `connect` reads `connected`: its text is the next test's.
    let (mut client, _) = server.connect("agent=test-agent").await;
    let mut frames = Vec::new();
    for scenario in [
        "echo",
        "stream",
        "chunk-done",
        "error",
        "parts",
        "server-tool",
    ] {
        client.script(scenario, "golden").await;
        recv_until(&mut client, &["done", "error"], &mut frames).await;
    }
    // A client tool: the call, the client's answer, the end of the turn.
    client.script("client-tool", "golden").await;
    let call = client.recv_text().await;
    let call_id = serde_json::from_str::<serde_json::Value>(&call).unwrap()["tool_call"]["id"]
        .as_str()
        .expect("tool_call has an id")
        .to_owned();
    frames.push(normalized(&call));
    client
        .send_json(json!({"type": "tool_result",
            "tool_result": {"call_id": call_id, "result": {"tz": "UTC"}}}))
        .await;
    recv_until(&mut client, &["done", "error"], &mut frames).await;
    // Bad input: the error the connection answers with.
    client.send_invalid_text("{not json").await;
    recv_until(&mut client, &["error"], &mut frames).await;
    client.send_invalid_json(json!({"type": "nope"})).await;
    recv_until(&mut client, &["error"], &mut frames).await;
    check("omnia", &frames);
}

#[tokio::test]
async fn omnia_connected_frame_is_unchanged() {
    let server = TestServer::start().await;
    let mut client = server
        .try_connect("agent=test-agent")
        .await
        .expect("upgrade accepted");
    let connected = normalized(&client.recv_text().await);
    check("omnia-connected", &[connected]);
}

#[tokio::test]
async fn gnosari_frames_are_unchanged() {
    let server = TestServer::start().await;
    let mut client = server.connect_gnosari("test-agent").await;
    let mut frames = Vec::new();
    for scenario in ["echo", "stream", "error", "server-tool", "client-tool"] {
        client
            .send_json(json!({
                "message": "golden",
                "client_message_id": format!("m-{scenario}"),
                "metadata": {"mock_scenario": scenario}
            }))
            .await;
        recv_until(&mut client, &["agent_completed", "error"], &mut frames).await;
    }
    client.send_invalid_text("{not json").await;
    recv_until(&mut client, &["error"], &mut frames).await;
    check("gnosari", &frames);
}

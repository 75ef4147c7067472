//! permessage-deflate (RFC 7692) with a client that negotiates it as
//! browsers do (Python's websockets, on zlib): a streamed turn compressed
//! both ways on each dialect, the server's settings in its answer, and a
//! client that offers nothing served plain (every other test's client,
//! tokio-tungstenite, offers nothing too).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, repo_root};

/// The clients' virtualenv's Python, or `None` (skip) when it is not
/// installed, which fails under CI.
fn python() -> Option<PathBuf> {
    let python = repo_root().join("target/clients-venv/bin/python");
    if !python.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the Python clients are missing: run scripts/install-test-deps.sh"
        );
        eprintln!("skipped: the Python clients are missing (scripts/install-test-deps.sh)");
        return None;
    }
    Some(python)
}

/// Runs `deflate_client.py` against `url`: what it printed.
async fn deflate_client(
    python: &PathBuf,
    url: &str,
    offer: &str,
    greeting: usize,
    messages: Value,
) -> Value {
    let script = repo_root().join("crates/agentwire/tests/clients/deflate_client.py");
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .arg(url)
        .arg(offer)
        .arg(greeting.to_string())
        .arg(messages.to_string())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the client finishes within 60 s")
        .expect("the client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn streamed(content: &str) -> Value {
    json!({"type": "message", "content": content, "metadata": {"mock_scenario": "stream"}})
}

fn types(frames: &Value) -> Vec<&str> {
    frames
        .as_array()
        .unwrap()
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect()
}

/// Two streamed turns on one socket to `url`, compression offered.
async fn two_streamed_turns(python: &PathBuf, url: &str) -> Value {
    deflate_client(
        python,
        url,
        "deflate",
        1,
        json!([streamed("one"), streamed("two")]),
    )
    .await
}

#[tokio::test]
async fn a_streamed_omnia_turn_is_compressed_both_ways() {
    let Some(python) = python() else { return };
    let server = TestServer::start().await;
    let url = server.url("/ws?agent=test-agent");
    let out = two_streamed_turns(&python, &url).await;
    assert_eq!(
        out["extensions"],
        "permessage-deflate; server_max_window_bits=12"
    );
    let frames = &out["frames"];
    assert_eq!(
        types(frames),
        [
            "connected",
            "chunk",
            "chunk",
            "chunk",
            "done",
            "chunk",
            "chunk",
            "chunk",
            "done"
        ]
    );
    let text: Vec<&str> = frames.as_array().unwrap()[1..4]
        .iter()
        .map(|frame| frame["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, ["Hello", " ", "world"]);
    assert_eq!(frames[4]["content"], "Hello world");
    // Every frame the server sent was compressed, and so was every message
    // the client sent: the server inflated them to run the turns.
    assert!(out["compressed_in"].as_u64().unwrap() >= 9, "{out}");
    assert_eq!(out["plain_in"], 0);
    assert_eq!(out["compressed_out"], 2);
}

#[tokio::test]
async fn a_streamed_gnosari_turn_is_compressed_both_ways() {
    let Some(python) = python() else { return };
    let server = TestServer::start().await;
    let url = server.url("/ws/agent/test-agent");
    let message = json!({"message": "hi", "metadata": {"mock_scenario": "stream"}});
    let out = deflate_client(&python, &url, "deflate", 0, json!([message])).await;
    assert_eq!(
        out["extensions"],
        "permessage-deflate; server_max_window_bits=12"
    );
    let frames = out["frames"].as_array().unwrap();
    let session = frames[0]["session_id"].as_str().unwrap();
    assert_eq!(
        frames,
        &[
            json!({"type": "agent_started", "agent_name": "test-agent", "session_id": session}),
            json!({"type": "token", "content": "Hello", "agent_name": "test-agent"}),
            json!({"type": "token", "content": " ", "agent_name": "test-agent"}),
            json!({"type": "token", "content": "world", "agent_name": "test-agent"}),
            json!({"type": "agent_completed", "agent_name": "test-agent", "full_response": "Hello world"}),
        ]
    );
    // And a `session_summary_scheduled` may follow, compressed too.
    assert!(out["compressed_in"].as_u64().unwrap() >= 5, "{out}");
    assert_eq!(out["plain_in"], 0);
    assert_eq!(out["compressed_out"], 1);
}

#[tokio::test]
async fn without_context_takeover_the_answer_says_so_and_turns_still_stream() {
    let Some(python) = python() else { return };
    let server = TestServer::with_server_yaml(
        "  websocket:\n    compression:\n      context_takeover: false\n      max_window_bits: 10",
    )
    .await;
    let url = server.url("/ws?agent=test-agent");
    let out = two_streamed_turns(&python, &url).await;
    assert_eq!(
        out["extensions"],
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10"
    );
    assert_eq!(types(&out["frames"]).len(), 9);
    assert_eq!(out["frames"][8]["content"], "Hello world");
    // Without a context, frames under 1 KiB are not worth compressing:
    // they go plain (RSV1 unset), as the RFC allows.
    assert_eq!(out["compressed_in"], 0);
    assert!(out["plain_in"].as_u64().unwrap() >= 9, "{out}");
    assert_eq!(out["compressed_out"], 2);
}

#[tokio::test]
async fn a_client_asking_for_no_context_takeover_gets_it() {
    let Some(python) = python() else { return };
    let server = TestServer::start().await;
    let url = server.url("/ws/agent/test-agent");
    let messages = json!([{"message": "a"}, {"message": "b"}]);
    let out = deflate_client(&python, &url, "no-takeover", 0, messages).await;
    assert_eq!(
        out["extensions"],
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12"
    );
    let completed: Vec<&Value> = out["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|frame| frame["type"] == "agent_completed")
        .collect();
    assert_eq!(completed.len(), 2);
    assert_eq!(completed[1]["full_response"], "echo: b");
}

#[tokio::test]
async fn a_client_that_offers_nothing_gets_plain_frames() {
    let Some(python) = python() else { return };
    let server = TestServer::start().await;
    let url = server.url("/ws?agent=test-agent");
    let out = deflate_client(&python, &url, "none", 1, json!([streamed("one")])).await;
    assert_eq!(out["extensions"], Value::Null);
    assert_eq!(
        types(&out["frames"]),
        ["connected", "chunk", "chunk", "chunk", "done"]
    );
    assert_eq!(out["compressed_in"], 0);
}

#[tokio::test]
async fn compression_turned_off_declines_the_offer() {
    let Some(python) = python() else { return };
    let server =
        TestServer::with_server_yaml("  websocket:\n    compression:\n      enabled: false").await;
    let url = server.url("/ws/agent/test-agent");
    let out = deflate_client(&python, &url, "deflate", 0, json!([{"message": "x"}])).await;
    assert_eq!(out["extensions"], Value::Null);
    assert_eq!(out["compressed_in"], 0);
    let frames = out["frames"].as_array().unwrap();
    assert_eq!(frames.last().unwrap()["full_response"], "echo: x");
}

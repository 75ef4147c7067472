//! The Omnia connection driven through channels, without a server: the
//! frames a client sees for a message, a refusal, a busy session, a cancel
//! and a client tool answer.

use std::time::Duration;

use serde_json::{Value, json};

use super::{ConnectionParams, run};
use crate::connection::testing::{
    Frames, Harness, NOW_TEXT, TestClient, anonymous, at, script, token_caller,
};
use crate::identity::Caller;
use crate::socket::TURN_IN_PROGRESS;

/// The session the connection announces: the engine's first minted id.
const SESSION: &str = "s0";

/// The log's epoch, as `turn_started` names it: the first the ids mint.
const EPOCH: &str = "0000000000000001";

/// An Omnia connection to the test agent; `frames` says whether it asked for `stream=2`.
fn connect(harness: &Harness, frames: Frames, caller: Caller) -> TestClient {
    let params = ConnectionParams {
        agent: harness.agent(),
        namespace: "default".to_owned(),
        binary: false,
        memory_facet: None,
        caller,
        positions: frames == Frames::Positions,
        rejoin: None,
        resume_call: None,
        resume_asked: false,
    };
    let slot = harness.slot();
    TestClient::connect(|socket| run(socket, slot, params))
}

/// A connection that has read its `connected`.
async fn connected(harness: &Harness, caller: Caller) -> TestClient {
    let mut client = connect(harness, Frames::Plain, caller);
    assert_eq!(client.recv().await["type"], "connected");
    client
}

fn message(content: &str) -> Value {
    json!({"type": "message", "content": content})
}

fn chunk(content: &str) -> Value {
    json!({"type": "chunk", "session_id": SESSION, "content": content, "timestamp": NOW_TEXT})
}

fn done(content: &str) -> Value {
    json!({"type": "done", "session_id": SESSION, "content": content, "timestamp": NOW_TEXT})
}

/// An `error` frame; `session` says whether it names the session.
fn error(session: bool, code: &str, text: &str) -> Value {
    let mut frame = json!({
        "type": "error",
        "error": {"code": code, "message": text},
        "timestamp": NOW_TEXT,
    });
    if session {
        frame["session_id"] = json!(SESSION);
    }
    frame
}

#[tokio::test(start_paused = true)]
async fn connected_comes_first_and_a_message_streams_to_done() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Plain, anonymous());
    let capabilities = json!({
        "binary_frames": false,
        "max_payload_size": 1_048_576,
        "protocol_version": 1,
    });
    assert_eq!(
        client.recv().await,
        json!({
            "type": "connected",
            "session_id": SESSION,
            "connected": {"capabilities": capabilities},
            "timestamp": NOW_TEXT,
        })
    );
    client.send(&message(script::STREAM));
    assert_eq!(
        client.recv_n(4).await,
        [
            chunk("Hello"),
            chunk(" "),
            chunk("world"),
            done("Hello world")
        ]
    );
    client.send(&message("again"));
    assert_eq!(client.recv().await, done("echo: again"));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_frame_is_refused_and_the_connection_goes_on() {
    let harness = Harness::new(|_| {});
    let mut client = connected(&harness, anonymous()).await;
    client.send(&json!({"type": "message"}));
    let empty = error(
        false,
        "INVALID_MESSAGE",
        "message requires content or parts",
    );
    assert_eq!(client.recv().await, empty);
    client.send(&json!({"type": "message", "content": "hi", "session_id": ""}));
    assert_eq!(client.recv().await["error"]["code"], "INVALID_MESSAGE");
    client.send_text("not json");
    let format = error(false, "INVALID_MESSAGE", "invalid message format");
    assert_eq!(client.recv().await, format);
    client.send(&json!({"type": "no_such_type"}));
    let unknown = error(false, "INVALID_MESSAGE", "unknown message type");
    assert_eq!(client.recv().await, unknown);
    // Without `stream=2` a cancel is a type this connection does not take.
    client.send(&json!({"type": "cancel"}));
    assert_eq!(client.recv().await, unknown);
    // A tool answer nobody asked for is about the session.
    let stray = json!({"type": "tool_result", "tool_result": {"call_id": "nope", "result": 1}});
    client.send(&stray);
    let no_call = error(true, "INVALID_MESSAGE", "no pending tool call");
    assert_eq!(client.recv().await, no_call);
    client.send(&message("still here"));
    assert_eq!(client.recv().await, done("echo: still here"));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_frame_rate_a_frame_is_refused() {
    let harness = Harness::new(|limits| {
        limits.messages_per_second = 1;
        limits.message_burst = 1;
    });
    let mut client = connected(&harness, anonymous()).await;
    client.send(&message("one"));
    assert_eq!(client.recv().await, done("echo: one"));
    client.send(&message("two"));
    let refused = error(false, "RATE_LIMITED", "rate limit exceeded");
    assert_eq!(client.recv().await, refused);
    // A second later the bucket has a frame again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    client.send(&message("three"));
    assert_eq!(client.recv().await, done("echo: three"));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_turn_rate_a_message_is_refused() {
    let harness = Harness::new(|limits| limits.abuse.turns_per_minute_per_caller = Some(1));
    let caller = token_caller("owner-a", Duration::from_secs(3600));
    let mut client = connected(&harness, caller).await;
    client.send(&message("one"));
    assert_eq!(client.recv().await, done("echo: one"));
    client.send(&message("two"));
    let refused = error(false, "RATE_LIMITED", "turn rate limit exceeded");
    assert_eq!(client.recv().await, refused);
    assert_eq!(
        harness
            .state
            .metrics()
            .turns_total
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the refused message started no turn"
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_credential_expiring_mid_turn_refuses_the_next_message_then_closes_4401() {
    let harness = Harness::new(|_| {});
    // Used until 20 s before its expiry: 20 s from now.
    let caller = token_caller("owner-a", Duration::from_secs(40));
    let mut client = connected(&harness, caller).await;
    client.send(&message(script::HOLD));
    assert_eq!(client.recv().await, chunk("partial"));
    tokio::time::sleep(Duration::from_secs(21)).await;
    client.send(&message("again"));
    let expired = error(true, "CREDENTIAL_EXPIRED", "credential expired");
    assert_eq!(client.recv().await, expired);
    // The running turn still ends; then the connection does.
    harness.release();
    assert_eq!(client.recv().await, done("partial"));
    let close = client.recv_close().await;
    assert_eq!(close, (4401, "credential expired".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_second_message_while_a_turn_runs_is_refused_turn_in_progress() {
    let harness = Harness::new(|_| {});
    let mut client = connected(&harness, anonymous()).await;
    client.send(&message(script::HOLD));
    assert_eq!(client.recv().await, chunk("partial"));
    client.send(&message("meanwhile"));
    let busy = error(true, "TURN_IN_PROGRESS", TURN_IN_PROGRESS);
    assert_eq!(client.recv().await, busy);
    harness.release();
    assert_eq!(client.recv().await, done("partial"));
    // The refused message was not kept: the next turn is the next message's.
    client.send(&message("after"));
    assert_eq!(client.recv().await, done("echo: after"));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn with_positions_a_cancel_ends_the_turn_cancelled() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Positions, anonymous());
    let connected = client.recv().await;
    let capabilities = &connected["connected"]["capabilities"];
    assert_eq!(capabilities["cancel"], true);
    assert_eq!(capabilities["event_log"], json!({"head": 0}));
    client.send(&message(script::HOLD));
    let turn_started = |turn: u64| {
        let started = json!({"turn_id": turn, "epoch": EPOCH, "agent": "test-agent"});
        let frame = json!({
            "type": "turn_started",
            "session_id": SESSION,
            "turn_started": started,
            "timestamp": NOW_TEXT,
        });
        at(frame, turn)
    };
    assert_eq!(
        client.recv_n(2).await,
        [turn_started(1), at(chunk("partial"), 2)]
    );
    client.send(&json!({"type": "cancel"}));
    let mut cancelled = at(done("partial"), 3);
    cancelled["cancelled"] = json!(true);
    assert_eq!(client.recv().await, cancelled);
    // A cancel with nothing running does nothing; the session is free.
    client.send(&json!({"type": "cancel"}));
    client.send(&message("after"));
    assert_eq!(
        client.recv_n(2).await,
        [turn_started(4), at(done("echo: after"), 5)]
    );
    client.close().await;
}

/// The tool call the [`script::TOOL`] turn makes, as the client sees it.
fn tool_call(id: &str) -> Value {
    json!({
        "type": "tool_call",
        "session_id": SESSION,
        "tool_call": {
            "id": id,
            "name": "get_location",
            "arguments": {"precision": "city"},
            "consent_message": "Share your city?",
            "categories": ["location"],
        },
        "timestamp": NOW_TEXT,
    })
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_answered_with_ack_then_result_completes_the_turn() {
    let harness = Harness::new(|_| {});
    let mut client = connected(&harness, anonymous()).await;
    client.send(&message(script::TOOL));
    // The ids' next after the connection's session.
    let id = "call-1";
    assert_eq!(client.recv().await, tool_call(id));
    client.send(&json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}));
    client.expect_silence(Duration::from_secs(1)).await;
    let result = json!({"call_id": id, "result": {"city": "Lisbon"}});
    client.send(&json!({"type": "tool_result", "tool_result": result}));
    // The client's own answer is not echoed back.
    assert_eq!(client.recv().await, done(r#"located: {"city":"Lisbon"}"#));
    // Answered once: a second answer finds no call.
    client.send(&json!({"type": "tool_result", "tool_result": result}));
    let no_call = error(true, "INVALID_MESSAGE", "no pending tool call");
    assert_eq!(client.recv().await, no_call);
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_declined_completes_the_turn_with_the_reason() {
    let harness = Harness::new(|_| {});
    let mut client = connected(&harness, anonymous()).await;
    client.send(&message(script::TOOL));
    assert_eq!(client.recv().await, tool_call("call-1"));
    let nack = json!({"call_id": "call-1", "reason": "user said no"});
    client.send(&json!({"type": "tool_call_nack", "tool_call_nack": nack}));
    assert_eq!(client.recv().await, done("no location: user said no"));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_not_acknowledged_in_time_is_denied_and_the_client_told() {
    let harness = Harness::new(|_| {});
    let mut client = connected(&harness, anonymous()).await;
    client.send(&message(script::TOOL));
    assert_eq!(client.recv().await, tool_call("call-1"));
    // The agent's `ack_timeout` is a minute.
    tokio::time::sleep(Duration::from_secs(61)).await;
    let reason = "client did not acknowledge the tool call within 60s";
    let denied = json!({
        "type": "tool_result",
        "session_id": SESSION,
        "tool_result": {"id": "call-1", "error": reason},
        "timestamp": NOW_TEXT,
    });
    assert_eq!(
        client.recv_n(2).await,
        [denied, done(&format!("no location: {reason}"))]
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn with_positions_a_cancel_withdraws_a_pending_client_tool_call() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Positions, anonymous());
    assert_eq!(client.recv().await["type"], "connected");
    client.send(&message(script::TOOL));
    let frames = client.recv_n(2).await;
    assert_eq!(frames[0]["type"], "turn_started");
    assert_eq!(frames[1], at(tool_call("call-1"), 2));
    client.send(&json!({"type": "cancel"}));
    let withdrawn = json!({
        "type": "tool_result",
        "session_id": SESSION,
        "tool_result": {"id": "call-1", "error": "turn cancelled"},
        "timestamp": NOW_TEXT,
    });
    // Nothing was streamed: no `content` (left out when empty).
    let cancelled = json!({
        "type": "done",
        "session_id": SESSION,
        "cancelled": true,
        "seq": 4,
        "timestamp": NOW_TEXT,
    });
    assert_eq!(client.recv_n(2).await, [at(withdrawn, 3), cancelled]);
    // A late answer finds no call.
    let late = json!({"call_id": "call-1", "result": {"city": "Lisbon"}});
    client.send(&json!({"type": "tool_result", "tool_result": late}));
    let no_call = error(true, "INVALID_MESSAGE", "no pending tool call");
    assert_eq!(client.recv().await, no_call);
    client.close().await;
}

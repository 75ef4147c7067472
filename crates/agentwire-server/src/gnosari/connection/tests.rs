//! The Gnosari connection driven through channels, without a server: the
//! events a client sees for a message, a refusal, a busy session (queued,
//! answered in order), a cancel and a client tool call (denied at once).

use std::time::Duration;

use serde_json::{Value, json};

use super::{CLIENT_TOOLS_UNAVAILABLE, GnosariParams, MAX_QUEUED, QUEUE_FULL, run};
use crate::connection::testing::{
    AGENT, Frames, Harness, TestClient, anonymous, at, script, token_caller,
};
use crate::identity::Caller;

/// The session a message without `session_id` opens: the engine's second
/// minted id (the connection minted the first, which no client sees).
const SESSION: &str = "s1";

/// The log's epoch, as `stream_info` names it: the first the ids mint.
const EPOCH: &str = "0000000000000001";

/// How long a test listens for a frame that must not come.
const QUIET: Duration = Duration::from_secs(1);

/// A Gnosari connection to the test agent; `frames` says whether it asked for `stream=2`.
fn connect(harness: &Harness, frames: Frames, caller: Caller) -> TestClient {
    let params = GnosariParams {
        agent: harness.agent().agent.clone(),
        agent_name: AGENT.to_owned(),
        caller,
        positions: frames == Frames::Positions,
        rejoin: None,
    };
    let slot = harness.slot();
    TestClient::connect(|socket| run(socket, slot, params))
}

/// A message opening a new session.
fn message(text: &str, client_message_id: &str) -> Value {
    json!({"message": text, "client_message_id": client_message_id})
}

/// A message on [`SESSION`].
fn follow_up(text: &str, client_message_id: &str) -> Value {
    json!({"message": text, "session_id": SESSION, "client_message_id": client_message_id})
}

fn agent_started() -> Value {
    json!({"type": "agent_started", "agent_name": AGENT, "session_id": SESSION})
}

fn token(content: &str) -> Value {
    json!({"type": "token", "content": content, "agent_name": AGENT})
}

fn agent_completed(full_response: &str) -> Value {
    json!({"type": "agent_completed", "agent_name": AGENT, "full_response": full_response})
}

/// An `error` event; `about` is the session and the message it answers.
fn error(text: &str, about: Option<(&str, &str)>) -> Value {
    let mut event = json!({"type": "error", "error": text, "agent_name": AGENT});
    if let Some((session, client_message_id)) = about {
        event["session_id"] = json!(session);
        event["client_message_id"] = json!(client_message_id);
    }
    event
}

#[tokio::test(start_paused = true)]
async fn nothing_comes_first_and_a_message_streams_to_agent_completed() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Plain, anonymous());
    client.expect_silence(QUIET).await;
    client.send(&message(script::STREAM, "c1"));
    assert_eq!(
        client.recv_n(5).await,
        [
            agent_started(),
            token("Hello"),
            token(" "),
            token("world"),
            agent_completed("Hello world"),
        ]
    );
    // The session goes on; a reply not streamed comes as one last token.
    client.send(&follow_up("again", "c2"));
    assert_eq!(
        client.recv_n(3).await,
        [
            agent_started(),
            token("echo: again"),
            agent_completed("echo: again")
        ]
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_frame_is_answered_with_an_error_event() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Plain, anonymous());
    client.send(&json!({"message": "  ", "client_message_id": "c1"}));
    let empty = json!({
        "type": "error",
        "error": "message must not be empty",
        "agent_name": AGENT,
        "client_message_id": "c1",
    });
    assert_eq!(client.recv().await, empty);
    client.send_text("[1]");
    let not_object = error("invalid frame: expected a JSON object", None);
    assert_eq!(client.recv().await, not_object);
    client.send_text("{");
    assert_eq!(
        client.recv().await,
        error("invalid frame: not valid JSON", None)
    );
    // Without `stream=2` a cancel frame is a message without one.
    client.send(&json!({"type": "cancel"}));
    assert_eq!(client.recv().await, error("message is required", None));
    client.send(&message("still here", "c2"));
    assert_eq!(
        client.recv_n(3).await[2],
        agent_completed("echo: still here")
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_turn_rate_a_message_is_refused() {
    let harness = Harness::new(|limits| limits.abuse.turns_per_minute_per_caller = Some(1));
    let caller = token_caller("owner-a", Duration::from_secs(3600));
    let mut client = connect(&harness, Frames::Plain, caller);
    client.send(&message("one", "c1"));
    assert_eq!(client.recv_n(3).await[2], agent_completed("echo: one"));
    client.send(&follow_up("two", "c2"));
    let refused = error("turn rate limit exceeded", Some((SESSION, "c2")));
    assert_eq!(client.recv().await, refused);
    client.expect_silence(QUIET).await;
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_frame_rate_a_frame_is_refused() {
    let harness = Harness::new(|limits| {
        limits.messages_per_second = 1;
        limits.message_burst = 1;
    });
    let mut client = connect(&harness, Frames::Plain, anonymous());
    client.send(&message("one", "c1"));
    assert_eq!(client.recv_n(3).await[2], agent_completed("echo: one"));
    client.send(&follow_up("two", "c2"));
    assert_eq!(client.recv().await, error("rate limit exceeded", None));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_credential_expiring_mid_turn_refuses_the_queued_message_then_closes_1008() {
    let harness = Harness::new(|_| {});
    // Used until 20 s before its expiry: 20 s from now.
    let caller = token_caller("owner-a", Duration::from_secs(40));
    let mut client = connect(&harness, Frames::Plain, caller);
    client.send(&message(script::HOLD, "c1"));
    assert_eq!(client.recv_n(2).await, [agent_started(), token("partial")]);
    tokio::time::sleep(Duration::from_secs(21)).await;
    client.send(&follow_up("again", "c2"));
    client.expect_silence(QUIET).await;
    // The running turn ends, the queued message is answered, then the
    // connection ends.
    harness.release();
    assert_eq!(
        client.recv_n(2).await,
        [
            agent_completed("partial"),
            error("credential expired", Some((SESSION, "c2")))
        ]
    );
    let close = client.recv_close().await;
    assert_eq!(close, (1008, "credential expired".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_message_while_a_turn_runs_is_queued_and_answered_after_it_in_order() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Plain, anonymous());
    client.send(&message(script::HOLD, "c1"));
    assert_eq!(client.recv_n(2).await, [agent_started(), token("partial")]);
    client.send(&follow_up("second", "c2"));
    client.send(&json!({"message": ""}));
    client.send(&follow_up("third", "c3"));
    // Nothing is answered while the first turn runs, not even the error.
    client.expect_silence(QUIET).await;
    harness.release();
    assert_eq!(
        client.recv_n(8).await,
        [
            agent_completed("partial"),
            agent_started(),
            token("echo: second"),
            agent_completed("echo: second"),
            error("message must not be empty", None),
            agent_started(),
            token("echo: third"),
            agent_completed("echo: third"),
        ]
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn past_the_queue_a_message_is_refused_at_once() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Plain, anonymous());
    client.send(&message(script::HOLD, "c0"));
    assert_eq!(client.recv_n(2).await, [agent_started(), token("partial")]);
    for n in 1..=MAX_QUEUED {
        client.send(&follow_up("queued", &format!("c{n}")));
    }
    client.send(&follow_up("one too many", "late"));
    let full = error(QUEUE_FULL, Some((SESSION, "late")));
    assert_eq!(client.recv().await, full);
    harness.release();
    let answers = client.recv_n(1 + 3 * MAX_QUEUED).await;
    assert_eq!(answers[0], agent_completed("partial"));
    let completed = answers.iter().filter(|e| e["type"] == "agent_completed");
    assert_eq!(completed.count(), 1 + MAX_QUEUED);
    client.expect_silence(QUIET).await;
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn with_positions_a_cancel_ends_the_turn_cancelled() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Positions, anonymous());
    client.send(&message(script::HOLD, "c1"));
    let stream_info = |turn: u64| {
        let info = json!({
            "type": "stream_info",
            "session_id": SESSION,
            "epoch": EPOCH,
            "head": turn,
            "turn_id": turn,
        });
        at(info, turn)
    };
    assert_eq!(
        client.recv_n(3).await,
        [
            stream_info(1),
            at(agent_started(), 1),
            at(token("partial"), 2)
        ]
    );
    // Queued behind the running turn.
    client.send(&follow_up("after", "c2"));
    // A cancel naming another session stops nothing.
    client.send(&json!({"type": "cancel", "session_id": "s9"}));
    client.expect_silence(QUIET).await;
    // A cancel is not queued behind the turn it stops; the queued message
    // is answered once it has ended.
    client.send(&json!({"type": "cancel", "session_id": SESSION}));
    let mut cancelled = at(agent_completed("partial"), 3);
    cancelled["cancelled"] = json!(true);
    assert_eq!(
        client.recv_n(5).await,
        [
            cancelled,
            stream_info(4),
            at(agent_started(), 4),
            at(token("echo: after"), 5),
            at(agent_completed("echo: after"), 5),
        ]
    );
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_client_tool_call_is_denied_at_once_and_not_shown() {
    let harness = Harness::new(|_| {});
    let mut client = connect(&harness, Frames::Plain, anonymous());
    client.send(&message(script::TOOL, "c1"));
    let reply = format!("no location: {CLIENT_TOOLS_UNAVAILABLE}");
    assert_eq!(
        client.recv_n(3).await,
        [agent_started(), token(&reply), agent_completed(&reply)]
    );
    client.expect_silence(QUIET).await;
    client.close().await;
}

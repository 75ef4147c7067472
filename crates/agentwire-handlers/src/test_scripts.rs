//! The test handler's scripts (Omnia behaviour reference §8), chosen by the
//! message's `metadata.mock_scenario`.

use std::fmt::Write as _;
use std::time::Duration;

use agentwire_core::{
    ContentPart, ErrorCode, Handler, MessageRole, Reply, TurnContext, TurnFailure,
};
use async_trait::async_trait;

/// How long the `slow` script blocks before answering.
const SLOW_SCRIPT_DELAY: Duration = Duration::from_secs(2);

pub struct TestHandler;

#[async_trait]
impl Handler for TestHandler {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        let scenario = turn.input.metadata.get("mock_scenario").map(String::as_str);
        let text = &turn.input.text;
        match scenario.unwrap_or("echo") {
            "echo" => Ok(Reply::text(format!("echo: {text}"))),
            "stream" => {
                for delta in ["Hello", " ", "world"] {
                    turn.events().text_delta(delta).await;
                }
                Ok(Reply::text("Hello world"))
            }
            "chunk-done" => {
                turn.events().text_delta("chunk1").await;
                Ok(Reply::text("done"))
            }
            "error" => Err(TurnFailure::new(
                ErrorCode::Custom("TEST_ERROR"),
                "something went wrong",
            )),
            "handler-error" => Err(TurnFailure::new(ErrorCode::Internal, "handler error")),
            "parts" if turn.input.parts.is_empty() => Ok(Reply::text("no parts received")),
            "parts" => Ok(Reply {
                text: String::new(),
                parts: vec![ContentPart::text("I see your image")],
            }),
            "slow" => {
                tokio::select! {
                    () = tokio::time::sleep(SLOW_SCRIPT_DELAY) => Ok(Reply::text(format!("done: {text}"))),
                    () = turn.cancel.cancelled() => Err(TurnFailure::internal()),
                }
            }
            "history" => Ok(Reply::text(transcript(turn))),
            _ => Err(TurnFailure::new(
                ErrorCode::InvalidMessage,
                "unknown mock_scenario",
            )),
        }
    }
}

/// The `history` script (agentwire's own): the user and assistant messages the
/// session held before this turn, one `role: content` line each, so a client
/// can see what context a resumed session carries.
fn transcript(turn: &TurnContext) -> String {
    let before_this_turn = &turn.history[..turn.history.len().saturating_sub(1)];
    let mut out = String::new();
    for message in before_this_turn {
        if matches!(message.role, MessageRole::User | MessageRole::Assistant) {
            let _ = writeln!(out, "{}: {}", message.role.as_str(), message.content);
        }
    }
    out
}

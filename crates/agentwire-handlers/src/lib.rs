//! Scripted handlers: what answers turns when no model is involved.
//!
//! - [`TestHandler`]: the scripts of the Omnia behaviour reference §8, picked
//!   by `metadata.mock_scenario`, for black-box tests of any client.
//! - [`EchoHandler`]: `Echo: <content>`.
//! - [`DemoHandler`]: a keyword-driven responder (§9) with simulated
//!   server-side tool calls, so a new user sees every frame kind.
//! - [`ExtractiveSummarizer`]: the session summary of these agents, taken
//!   from the conversation itself.

mod demo;
mod media;
mod summary;
mod test_scripts;

use agentwire_core::{Handler, Reply, TurnContext, TurnFailure};
use async_trait::async_trait;

pub use demo::DemoHandler;
pub use summary::ExtractiveSummarizer;
pub use test_scripts::TestHandler;

/// Replies `done "Echo: <content>"`.
pub struct EchoHandler;

#[async_trait]
impl Handler for EchoHandler {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        Ok(Reply::text(format!("Echo: {}", turn.input.text)))
    }

    /// It reads the turn's own message alone, so nothing older stays live.
    fn history_window(&self) -> usize {
        1
    }
}

/// Streams `text` word by word: a word, then the space after it.
async fn stream_words(turn: &TurnContext, text: &str, pause: std::time::Duration) {
    let mut words = text.split(' ').peekable();
    while let Some(word) = words.next() {
        turn.events().text_delta(word).await;
        if words.peek().is_some() {
            turn.events().text_delta(" ").await;
        }
        tokio::time::sleep(pause).await;
    }
}

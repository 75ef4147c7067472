//! The demo responder (Omnia behaviour reference §9): keywords pick a reply,
//! streamed in chunks, some with a simulated server-side tool call.

use std::time::Duration;

use agentwire_core::{
    ContentPart, Handler, Reply, ToolCall, ToolOutcome, ToolSide, TurnContext, TurnFailure,
};
use async_trait::async_trait;
use serde_json::json;

use crate::{media, stream_words};

/// Pause before the first frame, as Omnia's demo mode does.
const INITIAL_DELAY: Duration = Duration::from_millis(200);
/// Pause between streamed chunks, so the streaming is visible in a UI.
const CHUNK_PAUSE: Duration = Duration::from_millis(30);

const WEATHER_REPORT: &str = "\n\nIt's 72°F and sunny in Denver, CO, with 45% humidity and a light 5 mph wind from the northwest. A fine day to be outside.";
const PASSWORD_HELP: &str = "\n\nI found your account (user@example.com). To reset your password, open Settings → Security → Reset password, and follow the link we email you. The link is valid for 30 minutes.";
const GREETING: &str = "Hello! I'm the agentwire demo agent. Ask me about the weather, or how to reset your password, and watch the tool calls stream by.";

pub struct DemoHandler;

#[async_trait]
impl Handler for DemoHandler {
    /// Its replies depend on the turn's own message alone, so nothing older
    /// stays live.
    fn history_window(&self) -> usize {
        1
    }

    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        tokio::time::sleep(INITIAL_DELAY).await;
        let input = turn.input.text.to_lowercase();
        let said = |keys: &[&str]| keys.iter().any(|k| input.contains(k));
        if said(&["show image", "send image"]) {
            Ok(media_reply(turn, "Here's a test image for you:", media::image()).await)
        } else if said(&["play audio", "send audio"]) {
            Ok(media_reply(turn, "Here's a test audio clip for you:", media::audio()).await)
        } else if said(&["play video", "send video"]) {
            Ok(media_reply(turn, "Here's a test video for you:", media::video()).await)
        } else if said(&["show document", "send document", "send pdf"]) {
            Ok(media_reply(turn, "Here's a test document for you:", media::document()).await)
        } else if said(&["multimodal", "mixed content"]) {
            let lead = "Here's an image";
            turn.events().text_delta(lead).await;
            Ok(Reply {
                text: String::new(),
                parts: vec![
                    ContentPart::text(lead),
                    media::image(),
                    ContentPart::text("\n\nAnd here's an audio clip:"),
                    media::audio(),
                ],
            })
        } else if input.contains("password") {
            Ok(password(turn).await)
        } else if input.contains("weather") {
            Ok(weather(turn).await)
        } else if ["help", "hello", "hi"].iter().any(|k| input.contains(k)) {
            stream_words(turn, GREETING, CHUNK_PAUSE).await;
            Ok(Reply::text(GREETING))
        } else {
            let text = format!(
                "You said: \"{}\". I'm a demo agent: try asking about the weather, or how to reset your password.",
                turn.input.text
            );
            stream_words(turn, &text, CHUNK_PAUSE).await;
            Ok(Reply::text(text))
        }
    }
}

/// A streamed lead line, then `done.parts` with the line and the media.
async fn media_reply(turn: &TurnContext, lead: &str, part: ContentPart) -> Reply {
    turn.events().text_delta(lead).await;
    Reply {
        text: String::new(),
        parts: vec![ContentPart::text(lead), part],
    }
}

async fn weather(turn: &TurnContext) -> Reply {
    let lead = "Checking the weather for you";
    stream(turn, &[lead, ".", ".", "."]).await;
    simulated_tool(
        turn,
        "call_002",
        "weather",
        json!({"location": "Denver, CO"}),
        json!({"temperature": "72°F", "condition": "Sunny", "humidity": "45%", "wind": "5 mph NW"}),
    )
    .await;
    Reply::text(format!("{lead}...{WEATHER_REPORT}"))
}

async fn password(turn: &TurnContext) -> Reply {
    let chunks = [
        "I can help you ",
        "reset your password. ",
        "Let me look up ",
        "your account...",
    ];
    stream(turn, &chunks).await;
    simulated_tool(
        turn,
        "call_001",
        "lookup-user",
        json!({"email": "user@example.com"}),
        json!({"found": true, "email": "user@example.com"}),
    )
    .await;
    Reply::text(format!("{}{PASSWORD_HELP}", chunks.concat()))
}

async fn stream(turn: &TurnContext, chunks: &[&str]) {
    for chunk in chunks {
        turn.events().text_delta(*chunk).await;
        tokio::time::sleep(CHUNK_PAUSE).await;
    }
}

async fn simulated_tool(
    turn: &TurnContext,
    id: &str,
    name: &str,
    arguments: serde_json::Value,
    result: serde_json::Value,
) {
    turn.events()
        .tool_call(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments,
            side: ToolSide::Server,
            consent_message: None,
            categories: Vec::new(),
        })
        .await;
    tokio::time::sleep(CHUNK_PAUSE).await;
    turn.events().tool_result(id, ToolOutcome::Ok(result)).await;
}

//! The test handler's scripts (Omnia behaviour reference §8), chosen by the
//! message's `metadata.mock_scenario`.

use std::fmt::Write as _;
use std::time::Duration;

use agentwire_core::{
    AudioFormat, ClientToolRequest, ContentPart, ErrorCode, Handler, MediaChunk, MessageRole,
    Reply, ToolCall, ToolOutcome, ToolSide, TurnContext, TurnFailure,
};
use async_trait::async_trait;
use serde_json::json;

/// How long the `slow` script blocks before answering.
const SLOW_SCRIPT_DELAY: Duration = Duration::from_secs(2);
/// The longest a `hold` turn lasts: long enough to hold streams open for a
/// capacity run, bounded so that none outlives its test.
const HOLD_SCRIPT_LIMIT: Duration = Duration::from_secs(600);
/// The pause before each of the `paced` script's words.
const PACED_STEP: Duration = Duration::from_millis(150);
/// The `paced` script's words; a server tool runs before the third.
const PACED_WORDS: [&str; 5] = ["one ", "two ", "three ", "four ", "five"];
/// The `flood` script's reply: this many deltas of [`FLOOD_DELTA_BYTES`]
/// (40 MiB, more than loopback TCP buffers hold), as fast as it can.
const FLOOD_DELTAS: usize = 40 * 1024;
const FLOOD_DELTA_BYTES: usize = 1024;

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
            "paced" => paced(turn).await,
            "flood" => {
                let delta = "x".repeat(FLOOD_DELTA_BYTES);
                for _ in 0..FLOOD_DELTAS {
                    turn.events().text_delta(delta.as_str()).await;
                }
                Ok(Reply::text("flooded"))
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
            "hold" => {
                turn.events().text_delta("held").await;
                tokio::select! {
                    () = tokio::time::sleep(HOLD_SCRIPT_LIMIT) => Ok(Reply::text("held")),
                    () = turn.cancel.cancelled() => Err(TurnFailure::internal()),
                }
            }
            "history" => Ok(Reply::text(transcript(turn))),
            "client-tool" => Ok(client_tool(turn).await),
            "server-tool" => Ok(server_tool(turn).await),
            "server-then-client-tool" => {
                announce_search(turn).await;
                Ok(client_tool(turn).await)
            }
            "binary-media" => {
                let data = b"test audio data".to_vec();
                Ok(media(turn, "test-media", "audio/mp3", 0, data).await)
            }
            "big-media" => Ok(media(turn, "test-media", "video/mp4", 0, pattern(1_081_344)).await),
            "small-media" => {
                Ok(media(turn, "test-media", "image/png", 42, pattern(1_048_575)).await)
            }
            "threshold-media" => {
                Ok(media(turn, "test-media", "image/png", 0, pattern(1_048_576)).await)
            }
            "over-threshold-media" => {
                Ok(media(turn, "test-media", "image/png", 0, pattern(1_048_577)).await)
            }
            "interrupt" => {
                turn.events().interrupt().await;
                Ok(Reply::default())
            }
            "session-config" => Ok(session_config(turn).await),
            _ => Err(TurnFailure::new(
                ErrorCode::InvalidMessage,
                "unknown mock_scenario",
            )),
        }
    }
}

/// Five words, one every [`PACED_STEP`], with a server tool call and its
/// result before the third: a turn long enough to drop a socket in.
async fn paced(turn: &TurnContext) -> Result<Reply, TurnFailure> {
    for (i, word) in PACED_WORDS.iter().enumerate() {
        if i == 2 {
            announce_search(turn).await;
        }
        tokio::select! {
            () = tokio::time::sleep(PACED_STEP) => {}
            () = turn.cancel.cancelled() => return Err(TurnFailure::internal()),
        }
        turn.events().text_delta(*word).await;
    }
    Ok(Reply::text(PACED_WORDS.concat()))
}

/// Asks the client for its location and reports how the call ended.
async fn client_tool(turn: &TurnContext) -> Reply {
    let request = ClientToolRequest {
        id: turn.new_call_id(),
        name: "get_location".to_owned(),
        arguments: json!({"query": "current"}),
        consent_message: Some("Allow location access?".to_owned()),
        categories: vec!["location".to_owned()],
    };
    match turn.call_client_tool(request).await {
        ToolOutcome::Ok(_) => Reply::text("Tool result received"),
        ToolOutcome::Error(reason) | ToolOutcome::Denied(reason) => {
            Reply::text(format!("Tool rejected: {reason}"))
        }
    }
}

/// Announces a 24 kHz mono PCM audio output.
async fn session_config(turn: &TurnContext) -> Reply {
    let format = AudioFormat {
        codec: "pcm".to_owned(),
        sample_rate: 24_000,
        channels: 1,
    };
    turn.events().audio_format(format).await;
    Reply::default()
}

/// A server-side tool, shown on the wire as the test handler does.
async fn server_tool(turn: &TurnContext) -> Reply {
    announce_search(turn).await;
    Reply::text("complete")
}

/// The `search` call and its result, as the test handler shows them.
async fn announce_search(turn: &TurnContext) {
    turn.events()
        .tool_call(ToolCall {
            id: "tool-1".to_owned(),
            name: "search".to_owned(),
            arguments: json!({"query": "test"}),
            side: ToolSide::Server,
            consent_message: None,
            categories: Vec::new(),
        })
        .await;
    turn.events()
        .tool_result("tool-1", ToolOutcome::Ok(json!("found results")))
        .await;
}

/// One media item, sent whole as the last chunk of its stream.
async fn media(
    turn: &TurnContext,
    media_id: &str,
    mime_type: &str,
    sequence: u32,
    data: Vec<u8>,
) -> Reply {
    let chunk = MediaChunk {
        media_id: media_id.to_owned(),
        mime_type: mime_type.to_owned(),
        sequence,
        is_last: true,
        data,
    };
    turn.events().media(chunk).await;
    Reply::default()
}

/// `len` bytes where byte `i` is `i mod 256`, so corruption is visible.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

/// The `history` script (agentwire's own): the user and assistant messages the
/// session held before this turn, one `role: content` line each, so a client
/// can see what context a resumed session carries.
fn transcript(turn: &TurnContext) -> String {
    let before_this_turn = &turn.history[..turn.history.len().saturating_sub(1)];
    let mut out = String::new();
    for message in before_this_turn {
        let role = message.role();
        if let (MessageRole::User | MessageRole::Assistant, Some(text)) =
            (role, message.body.text())
        {
            let _ = writeln!(out, "{}: {text}", role.as_str());
        }
    }
    out
}

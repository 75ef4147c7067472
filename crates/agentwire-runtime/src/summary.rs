//! A session's summary written by a model: the agent's own provider, or the
//! one named by `agents[].summarizer`.

use std::borrow::Cow;
use std::sync::Arc;

use agentwire_core::{
    MessageBody, Metadata, ModelMessage, ModelProvider, ModelRequest, StoredMessage, Summarizer,
    TextSink, ToolOutcome,
};
use async_trait::async_trait;

use crate::context::SCENARIO_KEY;

/// The system prompt of a summary request.
pub const SUMMARY_INSTRUCTIONS: &str = "You summarise conversations between a user and an AI \
agent. In at most three sentences, say what the user wanted, what was established, and what \
is still open. Answer with the summary only, as plain text.";

/// The scenario a summary request names in its metadata, as a client's
/// message would (`mock_scenario`), so a `mock` provider can script
/// summaries (`scenarios.summary.turns.1`) apart from the agent's turns.
pub const SUMMARY_SCENARIO: &str = "summary";

/// The most characters of transcript sent; older lines are left out first.
const MAX_TRANSCRIPT_CHARS: usize = 32_000;
/// The most characters of one tool call or result in the transcript.
const MAX_TOOL_CHARS: usize = 500;

/// Asks a model for the summary: [`SUMMARY_INSTRUCTIONS`] as the system
/// prompt and the conversation as one user message holding its transcript
/// (`User:`, `Assistant:`, `Tool call:` and `Tool result:` lines; events and
/// failures left out), no tools. A transcript instead of the conversation's
/// own messages keeps the request valid for every provider whatever tools
/// the conversation used.
pub struct ModelSummarizer {
    provider: Arc<dyn ModelProvider>,
}

impl ModelSummarizer {
    pub fn new(provider: Arc<dyn ModelProvider>) -> ModelSummarizer {
        ModelSummarizer { provider }
    }
}

/// The summary is not streamed anywhere.
struct Discard;

#[async_trait]
impl TextSink for Discard {
    async fn text(&self, _delta: &str) {}
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    async fn summarize(&self, messages: &[StoredMessage]) -> Result<String, String> {
        let request = ModelRequest {
            system: Some(SUMMARY_INSTRUCTIONS.to_owned()),
            messages: vec![ModelMessage::User {
                text: format!("Summarise this conversation.\n\n{}", transcript(messages)).into(),
                parts: Default::default(),
            }],
            tools: Vec::new(),
            metadata: Cow::Owned(Metadata::from([(
                SCENARIO_KEY.to_owned(),
                SUMMARY_SCENARIO.to_owned(),
            )])),
        };
        let reply = self
            .provider
            .complete(&request, &Discard)
            .await
            .map_err(|e| e.message)?;
        let text = reply.text.trim();
        if text.is_empty() {
            return Err("the model answered with an empty summary".to_owned());
        }
        Ok(text.to_owned())
    }
}

/// One line per user message, answer, tool call and tool result, the most
/// recent [`MAX_TRANSCRIPT_CHARS`] characters of them.
pub(crate) fn transcript(messages: &[StoredMessage]) -> String {
    let lines: Vec<String> = messages.iter().filter_map(line).collect();
    let mut kept = Vec::new();
    let mut size = 0;
    for line in lines.iter().rev() {
        size += line.len() + 1;
        if size > MAX_TRANSCRIPT_CHARS && !kept.is_empty() {
            break;
        }
        kept.push(line.as_str());
    }
    let mut out = String::new();
    if kept.len() < lines.len() {
        out.push_str("[earlier messages left out]\n");
    }
    for line in kept.iter().rev() {
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn line(message: &StoredMessage) -> Option<String> {
    match &message.body {
        MessageBody::User { text, .. } => Some(format!("User: {text}")),
        MessageBody::Reply { text, .. } | MessageBody::Interim { text } => {
            Some(format!("Assistant: {text}"))
        }
        MessageBody::ToolCall {
            name, arguments, ..
        } => Some(format!("Tool call: {name} {}", shortened(arguments))),
        MessageBody::ToolResult { outcome, .. } => {
            let (status, value) = match outcome {
                ToolOutcome::Ok(value) => ("ok", shortened(value)),
                ToolOutcome::Error(e) => ("error", shortened(&e.as_str().into())),
                ToolOutcome::Denied(r) => ("denied", shortened(&r.as_str().into())),
            };
            Some(format!("Tool result ({status}): {value}"))
        }
        MessageBody::Failure { .. } | MessageBody::Event { .. } => None,
    }
}

fn shortened(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() <= MAX_TOOL_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_TOOL_CHARS).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod summary_tests {
    use agentwire_core::{
        Metadata, ModelReply, ProviderError, ProviderErrorKind, SessionId, Timestamp,
    };
    use parking_lot::Mutex;

    use super::*;

    fn message(body: MessageBody) -> StoredMessage {
        StoredMessage {
            session_id: SessionId::parse("s").unwrap(),
            seq: 0,
            body,
            via: agentwire_core::Via::Text,
            metadata: Metadata::new(),
            created_at: Timestamp(0),
        }
    }

    fn user(text: &str) -> StoredMessage {
        message(MessageBody::User {
            text: text.into(),
            parts: Vec::new(),
            attachment: None,
        })
    }

    /// Answers `answer` and keeps the request it was asked.
    struct Recorder {
        answer: Result<String, ProviderError>,
        asked: Mutex<Option<ModelRequest<'static>>>,
    }

    #[async_trait]
    impl ModelProvider for Recorder {
        fn provider_name(&self) -> &'static str {
            "mock"
        }

        fn model(&self) -> &str {
            "recorder"
        }

        async fn complete(
            &self,
            request: &ModelRequest<'_>,
            _text: &dyn TextSink,
        ) -> Result<ModelReply, ProviderError> {
            *self.asked.lock() = Some(request.clone().into_owned());
            self.answer.clone().map(|text| ModelReply {
                text,
                ..ModelReply::default()
            })
        }
    }

    fn recorder(answer: Result<String, ProviderError>) -> Arc<Recorder> {
        Arc::new(Recorder {
            answer,
            asked: Mutex::new(None),
        })
    }

    #[tokio::test]
    async fn asks_with_the_instructions_and_the_transcript() {
        let provider = recorder(Ok("  The user asked about weather.\n".into()));
        let summarizer = ModelSummarizer::new(provider.clone());
        let messages = [
            user("what's the weather?"),
            message(MessageBody::ToolCall {
                id: "c".into(),
                name: "weather".into(),
                arguments: serde_json::json!({"city": "Denver"}),
                side: agentwire_core::ToolSide::Server,
            }),
            message(MessageBody::ToolResult {
                id: "c".into(),
                outcome: ToolOutcome::Ok(serde_json::json!({"t": "72F"})),
            }),
            message(MessageBody::Failure {
                code: agentwire_core::ErrorCode::Internal,
                message: "failed".into(),
            }),
            message(MessageBody::Event {
                name: "ai.disclosure.displayed".into(),
            }),
            message(MessageBody::Reply {
                text: "It's 72F.".into(),
                parts: Vec::new(),
                end: agentwire_core::ReplyEnd::Complete,
            }),
        ];
        let summary = summarizer.summarize(&messages).await.unwrap();
        assert_eq!(summary, "The user asked about weather.");
        let asked = provider.asked.lock().take().unwrap();
        assert_eq!(asked.system.as_deref(), Some(SUMMARY_INSTRUCTIONS));
        assert!(asked.tools.is_empty());
        assert_eq!(
            asked.metadata.get("mock_scenario").map(String::as_str),
            Some(SUMMARY_SCENARIO)
        );
        let [ModelMessage::User { text, .. }] = asked.messages.as_slice() else {
            panic!("one user message: {:?}", asked.messages);
        };
        assert_eq!(
            text,
            "Summarise this conversation.\n\nUser: what's the weather?\n\
             Tool call: weather {\"city\":\"Denver\"}\nTool result (ok): {\"t\":\"72F\"}\n\
             Assistant: It's 72F.\n"
        );
    }

    #[tokio::test]
    async fn provider_failures_and_empty_answers_are_errors() {
        let failing = recorder(Err(ProviderError::new(
            ProviderErrorKind::Unavailable,
            "openai (gpt): unavailable",
        )));
        let err = ModelSummarizer::new(failing)
            .summarize(&[user("hi")])
            .await
            .unwrap_err();
        assert_eq!(err, "openai (gpt): unavailable");
        let empty = recorder(Ok(" \n".into()));
        assert!(
            ModelSummarizer::new(empty)
                .summarize(&[user("hi")])
                .await
                .is_err()
        );
    }

    #[test]
    fn long_transcripts_keep_the_latest_lines() {
        let long = "x".repeat(1000);
        let messages: Vec<StoredMessage> = (0..100)
            .map(|_| user(&long))
            .chain([message(MessageBody::Reply {
                text: "the end".into(),
                parts: Vec::new(),
                end: agentwire_core::ReplyEnd::Complete,
            })])
            .collect();
        let text = transcript(&messages);
        assert!(text.starts_with("[earlier messages left out]\n"));
        assert!(text.ends_with("Assistant: the end\n"));
        assert!(text.len() <= MAX_TRANSCRIPT_CHARS + 64, "{}", text.len());
    }
}

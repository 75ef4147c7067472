//! The summary of a scripted agent's session: deterministic and extractive,
//! with no model involved.

use agentwire_core::{MessageBody, StoredMessage, Summarizer};
use async_trait::async_trait;

/// The most characters kept of the first user message.
pub const FIRST_MESSAGE_CHARS: usize = 120;
/// The most characters kept of the last answer.
pub const LAST_ANSWER_CHARS: usize = 240;

/// `Asked: <first user message> — Last answer: <last answer>`: the session's
/// first user message and its last final answer (not interim text), each
/// with runs of whitespace folded into one space and cut to
/// [`FIRST_MESSAGE_CHARS`] / [`LAST_ANSWER_CHARS`] characters (an ellipsis
/// marks a cut). Without an answer yet, only the first part.
pub struct ExtractiveSummarizer;

#[async_trait]
impl Summarizer for ExtractiveSummarizer {
    async fn summarize(&self, messages: &[StoredMessage]) -> Result<String, String> {
        extract(messages).ok_or_else(|| "no message to summarise".to_owned())
    }
}

fn extract(messages: &[StoredMessage]) -> Option<String> {
    let first = messages
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::User { text, .. } => Some(folded(text)),
            _ => None,
        })
        .find(|text| !text.is_empty());
    let last = messages
        .iter()
        .rev()
        .filter_map(|m| match &m.body {
            MessageBody::Reply { text, .. } => Some(folded(text)),
            _ => None,
        })
        .find(|text| !text.is_empty());
    match (first, last) {
        (Some(first), Some(last)) => Some(format!(
            "Asked: {} — Last answer: {}",
            cut(&first, FIRST_MESSAGE_CHARS),
            cut(&last, LAST_ANSWER_CHARS)
        )),
        (Some(first), None) => Some(format!("Asked: {}", cut(&first, FIRST_MESSAGE_CHARS))),
        (None, Some(last)) => Some(format!("Last answer: {}", cut(&last, LAST_ANSWER_CHARS))),
        (None, None) => None,
    }
}

fn folded(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters, the last one an ellipsis when something was cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use agentwire_core::{ErrorCode, Metadata, ReplyEnd, SessionId, Timestamp, Via};

    use super::*;

    fn message(body: MessageBody) -> StoredMessage {
        StoredMessage {
            session_id: SessionId::parse("s").unwrap(),
            seq: 0,
            body,
            via: Via::Text,
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

    fn reply(text: &str) -> StoredMessage {
        message(MessageBody::Reply {
            text: text.into(),
            parts: Vec::new(),
            end: ReplyEnd::Complete,
        })
    }

    #[test]
    fn first_question_and_last_final_answer() {
        let messages = [
            message(MessageBody::Event {
                name: "ai.disclosure.displayed".into(),
            }),
            user("  what's   the\nweather? "),
            reply("Sunny."),
            user("and tomorrow?"),
            message(MessageBody::ToolCall {
                id: "c".into(),
                name: "weather".into(),
                arguments: serde_json::Value::Null,
                side: agentwire_core::ToolSide::Server,
            }),
            reply("Rain,\n\nlater."),
            message(MessageBody::Interim {
                text: "Checking...".into(),
            }),
            message(MessageBody::Failure {
                code: ErrorCode::Internal,
                message: "failed".into(),
            }),
        ];
        assert_eq!(
            extract(&messages).as_deref(),
            Some("Asked: what's the weather? — Last answer: Rain, later.")
        );
    }

    #[test]
    fn long_texts_are_cut_with_an_ellipsis() {
        let long = "word ".repeat(100);
        let messages = [user(&long), reply(&"é".repeat(500))];
        let summary = extract(&messages).unwrap();
        let (asked, answer) = summary.split_once(" — Last answer: ").unwrap();
        let asked = asked.strip_prefix("Asked: ").unwrap();
        assert_eq!(asked.chars().count(), FIRST_MESSAGE_CHARS);
        assert!(asked.ends_with("word…"), "{asked}");
        assert_eq!(answer.chars().count(), LAST_ANSWER_CHARS);
        assert!(answer.ends_with('…'));
    }

    #[test]
    fn partial_and_empty_sessions() {
        assert_eq!(extract(&[user("hi")]).as_deref(), Some("Asked: hi"));
        assert_eq!(
            extract(&[message(MessageBody::Event { name: "x".into() })]),
            None
        );
    }
}

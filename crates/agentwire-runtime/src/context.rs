//! The conversation the model sees, rebuilt from the session's stored
//! messages: users' messages (with their rendered metadata), the model's
//! answers, its tool calls and their results. Failed turns leave their user
//! message and whatever tool work was done; the failure itself is not shown.

use std::borrow::Cow;
use std::collections::HashMap;

use agentwire_core::{
    MessageBody, Metadata, ModelMessage, ModelToolCall, StoredMessage, ToolOutcome, Via,
    context_window,
};

/// The metadata key a message names a `mock` provider's scenario by.
pub(crate) const SCENARIO_KEY: &str = "mock_scenario";

/// Keys the server or a provider reads itself and never shows the model.
fn is_reserved(key: &str) -> bool {
    key == SCENARIO_KEY || key == "content_type" || key.starts_with("omnia.")
}

/// `message_metadata_template`: a minijinja template rendered with
/// `metadata` (the message's non-reserved metadata, and `via: "voice"` for
/// one spoken in a call, as the sessions API shows it) and appended to the
/// user message's text.
pub struct MetadataTemplate {
    env: minijinja::Environment<'static>,
}

const TEMPLATE_NAME: &str = "metadata";

impl MetadataTemplate {
    /// Compiles `source`; the error names the problem.
    pub fn compile(source: &str) -> Result<MetadataTemplate, String> {
        let mut env = minijinja::Environment::new();
        env.add_template_owned(TEMPLATE_NAME, source.to_owned())
            .map_err(|e| e.to_string())?;
        Ok(MetadataTemplate { env })
    }

    fn render(&self, metadata: &Metadata, via: Via) -> Option<String> {
        let mut visible: Metadata = metadata
            .iter()
            .filter(|(k, _)| !is_reserved(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if via == Via::Voice {
            visible.insert("via".to_owned(), "voice".to_owned());
        }
        if visible.is_empty() {
            return None;
        }
        let template = self.env.get_template(TEMPLATE_NAME).ok()?;
        match template.render(minijinja::context! { metadata => visible }) {
            Ok(text) if !text.trim().is_empty() => Some(text),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "message_metadata_template failed to render");
                None
            }
        }
    }
}

/// The conversation the model sees: at most the latest `limit` stored
/// messages, from a user message on ([`context_window`], the rule the
/// engine also keeps live sessions by).
pub(crate) fn rebuild<'h>(
    history: &'h [StoredMessage],
    template: Option<&MetadataTemplate>,
    limit: usize,
) -> Vec<ModelMessage<'h>> {
    let history = context_window(history, limit);
    let mut out = Vec::with_capacity(history.len());
    let mut step = Step::default();
    for message in history {
        match &message.body {
            MessageBody::User { .. } => {
                step.flush(&mut out);
                out.push(user_message(message, template));
            }
            MessageBody::Interim { text } => {
                step.flush(&mut out);
                step.text = text;
            }
            MessageBody::Reply { text, .. } => {
                step.flush(&mut out);
                out.push(ModelMessage::Assistant {
                    text: Cow::Borrowed(text),
                    tool_calls: Vec::new(),
                });
            }
            MessageBody::ToolCall {
                id,
                name,
                arguments,
                ..
            } => step.calls.push(ModelToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            }),
            MessageBody::ToolResult { id, outcome } => step.add_result(id, outcome),
            MessageBody::Failure { .. } => step.flush(&mut out),
            MessageBody::Event { .. } => {}
        }
    }
    step.flush(&mut out);
    out
}

fn user_message<'h>(
    message: &'h StoredMessage,
    template: Option<&MetadataTemplate>,
) -> ModelMessage<'h> {
    let stored = message.body.text().unwrap_or_default();
    let text = match template.and_then(|t| t.render(&message.metadata, message.via)) {
        Some(rendered) if stored.is_empty() => Cow::Owned(rendered),
        Some(rendered) => Cow::Owned(format!("{stored}\n\n{rendered}")),
        None => Cow::Borrowed(stored),
    };
    let parts = message.body.parts();
    let parts = match parts.iter().all(|p| p.media.is_some()) {
        true => Cow::Borrowed(parts),
        false => parts
            .iter()
            .filter(|p| p.media.is_some())
            .cloned()
            .collect(),
    };
    ModelMessage::User { text, parts }
}

/// One model step in progress: its text, the calls it made, their results.
#[derive(Default)]
struct Step<'h> {
    text: &'h str,
    calls: Vec<ModelToolCall>,
    results: HashMap<String, ModelMessage<'h>>,
}

impl<'h> Step<'h> {
    fn add_result(&mut self, id: &str, outcome: &'h ToolOutcome) {
        let name = self
            .calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        self.results
            .insert(id.to_owned(), tool_message(id, &name, outcome));
    }

    /// Emits the step: the assistant message with the calls that have a
    /// result, then those results in call order. A call left without a
    /// result (a cancelled turn) is dropped: providers refuse unanswered calls.
    fn flush(&mut self, out: &mut Vec<ModelMessage<'h>>) {
        let step = std::mem::take(self);
        let answered: Vec<ModelToolCall> = step
            .calls
            .into_iter()
            .filter(|c| step.results.contains_key(&c.id))
            .collect();
        if step.text.is_empty() && answered.is_empty() {
            return;
        }
        let mut results = step.results;
        let ordered: Vec<ModelMessage<'h>> = answered
            .iter()
            .filter_map(|c| results.remove(&c.id))
            .collect();
        out.push(ModelMessage::Assistant {
            text: Cow::Borrowed(step.text),
            tool_calls: answered,
        });
        out.extend(ordered);
    }
}

/// A tool's outcome as the model reads it.
pub(crate) fn tool_message<'h>(
    call_id: &str,
    name: &str,
    outcome: &'h ToolOutcome,
) -> ModelMessage<'h> {
    let (content, is_error) = match outcome {
        ToolOutcome::Ok(value) => (as_text(value), false),
        ToolOutcome::Error(error) => (Cow::Borrowed(error.as_str()), true),
        ToolOutcome::Denied(reason) => (
            Cow::Owned(format!("the client declined the call: {reason}")),
            true,
        ),
    };
    ModelMessage::Tool {
        call_id: call_id.to_owned(),
        name: name.to_owned(),
        content,
        is_error,
    }
}

/// Strings as they are; anything else as JSON.
fn as_text(value: &serde_json::Value) -> Cow<'_, str> {
    match value {
        serde_json::Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::{SessionId, Timestamp};

    fn user(text: &str) -> MessageBody {
        MessageBody::User {
            text: text.into(),
            parts: Vec::new(),
            attachment: None,
        }
    }

    fn reply(text: &str) -> MessageBody {
        MessageBody::Reply {
            text: text.into(),
            parts: Vec::new(),
            end: agentwire_core::ReplyEnd::Complete,
        }
    }

    fn interim(text: &str) -> MessageBody {
        MessageBody::Interim { text: text.into() }
    }

    fn stored(body: MessageBody, metadata: &[(&str, &str)]) -> StoredMessage {
        StoredMessage {
            session_id: SessionId::minted("s".into()),
            seq: 0,
            body,
            via: Via::Text,
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn a_tool_round_is_rebuilt_as_call_then_result() {
        let history = [
            stored(
                user("weather?"),
                &[("user_id", "u1"), ("mock_scenario", "x")],
            ),
            stored(interim("let me check"), &[]),
            stored(
                MessageBody::ToolCall {
                    id: "c1".into(),
                    name: "weather".into(),
                    arguments: serde_json::json!({"city": "Oslo"}),
                    side: agentwire_core::ToolSide::Server,
                },
                &[],
            ),
            stored(
                MessageBody::ToolResult {
                    id: "c1".into(),
                    outcome: ToolOutcome::Ok(serde_json::json!({"t": 3})),
                },
                &[],
            ),
            stored(reply("3 degrees"), &[]),
        ];
        let template = MetadataTemplate::compile("[user {{ metadata.user_id }}]").unwrap();
        let messages = rebuild(&history, Some(&template), 100);
        assert_eq!(
            messages,
            vec![
                ModelMessage::User {
                    text: "weather?\n\n[user u1]".into(),
                    parts: Default::default()
                },
                ModelMessage::Assistant {
                    text: "let me check".into(),
                    tool_calls: vec![ModelToolCall {
                        id: "c1".into(),
                        name: "weather".into(),
                        arguments: serde_json::json!({"city": "Oslo"})
                    }],
                },
                ModelMessage::Tool {
                    call_id: "c1".into(),
                    name: "weather".into(),
                    content: r#"{"t":3}"#.into(),
                    is_error: false
                },
                ModelMessage::Assistant {
                    text: "3 degrees".into(),
                    tool_calls: vec![]
                },
            ]
        );
    }

    #[test]
    fn unanswered_calls_and_failures_are_dropped() {
        let history = [
            stored(user("hi"), &[]),
            stored(
                MessageBody::ToolCall {
                    id: "c1".into(),
                    name: "slow".into(),
                    arguments: serde_json::json!({}),
                    side: agentwire_core::ToolSide::Server,
                },
                &[],
            ),
            stored(
                MessageBody::Failure {
                    code: agentwire_core::ErrorCode::Internal,
                    message: "internal server error".into(),
                },
                &[],
            ),
            stored(user("again"), &[]),
        ];
        let messages = rebuild(&history, None, 100);
        assert_eq!(messages.len(), 2);
        assert!(matches!(&messages[1], ModelMessage::User { text, .. } if text == "again"));
    }

    #[test]
    fn the_window_keeps_the_latest_messages_from_a_user_message_on() {
        let turn = |n: usize| {
            [
                stored(user(&format!("q{n}")), &[]),
                stored(reply(&format!("a{n}")), &[]),
            ]
        };
        let history: Vec<StoredMessage> = (0..5).flat_map(turn).collect();
        let texts = |limit| -> Vec<String> {
            rebuild(&history, None, limit)
                .into_iter()
                .map(|m| match m {
                    ModelMessage::User { text, .. } | ModelMessage::Assistant { text, .. } => {
                        text.into_owned()
                    }
                    ModelMessage::Tool { content, .. } => content.into_owned(),
                })
                .collect()
        };
        assert_eq!(texts(100).len(), 10);
        assert_eq!(texts(4), ["q3", "a3", "q4", "a4"]);
        // An odd limit would start at an answer: the window starts at the
        // next question instead.
        assert_eq!(texts(3), ["q4", "a4"]);
        // A turn longer than the limit keeps its own question.
        let mut long = vec![stored(user("q"), &[])];
        long.extend((0..6).map(|i| stored(interim(&format!("step {i}")), &[])));
        let kept = rebuild(&long, None, 2);
        assert!(matches!(&kept[0], ModelMessage::User { text, .. } if text == "q"));
    }

    #[test]
    fn reserved_keys_never_reach_the_model() {
        let template = MetadataTemplate::compile(
            "{% for k, v in metadata|items %}{{ k }}={{ v }};{% endfor %}",
        )
        .unwrap();
        let metadata: Metadata = [
            ("mock_scenario", "a"),
            ("content_type", "b"),
            ("omnia.x", "c"),
            ("plan", "pro"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(
            template.render(&metadata, Via::Text).as_deref(),
            Some("plan=pro;")
        );
        // A spoken message shows how it came, as the sessions API does.
        assert_eq!(
            template.render(&metadata, Via::Voice).as_deref(),
            Some("plan=pro;via=voice;")
        );
    }

    #[test]
    fn denials_and_errors_are_errors_for_the_model() {
        let outcome = ToolOutcome::Denied("no".into());
        let denied = tool_message("c", "t", &outcome);
        assert_eq!(
            denied,
            ModelMessage::Tool {
                call_id: "c".into(),
                name: "t".into(),
                content: "the client declined the call: no".into(),
                is_error: true
            }
        );
    }
}

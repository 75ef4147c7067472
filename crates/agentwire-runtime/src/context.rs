//! The conversation the model sees, rebuilt from the session's stored
//! messages: users' messages (with their rendered metadata), the model's
//! answers, its tool calls and their results. Failed turns leave their user
//! message and whatever tool work was done; the failure itself is not shown.

use std::collections::HashMap;

use agentwire_core::{
    MessageRole, Metadata, ModelMessage, ModelToolCall, StoredMessage, ToolOutcome, context_window,
};

/// Keys the runtime reads itself and never shows the model.
fn is_reserved(key: &str) -> bool {
    key == "mock_scenario"
        || key == "content_type"
        || key == agentwire_core::assets::ASSET_METADATA_KEY
        || key.starts_with("omnia.")
}

/// `message_metadata_template`: a minijinja template rendered with
/// `metadata` (the message's non-reserved metadata) and appended to the user
/// message's text.
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

    fn render(&self, metadata: &Metadata) -> Option<String> {
        let visible: Metadata = metadata
            .iter()
            .filter(|(k, _)| !is_reserved(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
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
pub(crate) fn rebuild(
    history: &[StoredMessage],
    template: Option<&MetadataTemplate>,
    limit: usize,
) -> Vec<ModelMessage> {
    let history = context_window(history, limit);
    let mut out = Vec::with_capacity(history.len());
    let mut step = Step::default();
    for message in history {
        match message.role {
            MessageRole::User => {
                step.flush(&mut out);
                out.push(user_message(message, template));
            }
            MessageRole::Assistant
                if message.metadata.get("step").is_some_and(|s| s == "interim") =>
            {
                step.flush(&mut out);
                step.text = message.content.clone();
            }
            MessageRole::Assistant => {
                step.flush(&mut out);
                out.push(ModelMessage::Assistant {
                    text: message.content.clone(),
                    tool_calls: Vec::new(),
                });
            }
            MessageRole::Tool => step.add_tool_record(&message.content),
            MessageRole::Error => step.flush(&mut out),
            MessageRole::Event => {}
        }
    }
    step.flush(&mut out);
    out
}

fn user_message(message: &StoredMessage, template: Option<&MetadataTemplate>) -> ModelMessage {
    let mut text = message.content.clone();
    if let Some(rendered) = template.and_then(|t| t.render(&message.metadata)) {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&rendered);
    }
    let parts = message
        .parts
        .iter()
        .filter(|p| p.media.is_some())
        .cloned()
        .collect();
    ModelMessage::User { text, parts }
}

/// One model step in progress: its text, the calls it made, their results.
#[derive(Default)]
struct Step {
    text: String,
    calls: Vec<ModelToolCall>,
    results: HashMap<String, ModelMessage>,
}

impl Step {
    fn add_tool_record(&mut self, content: &str) {
        let Ok(record) = serde_json::from_str::<serde_json::Value>(content) else {
            return;
        };
        if let Some(call) = record.get("call") {
            self.calls.push(ModelToolCall {
                id: string_at(call, "id"),
                name: string_at(call, "name"),
                arguments: call.get("arguments").cloned().unwrap_or_default(),
            });
        } else if let Some(result) = record.get("result") {
            let id = string_at(result, "id");
            let name = self
                .calls
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.name.clone())
                .unwrap_or_default();
            let value = result.get("value").cloned().unwrap_or_default();
            let outcome = match result.get("status").and_then(|s| s.as_str()) {
                Some("ok") => ToolOutcome::Ok(value),
                Some("denied") => ToolOutcome::Denied(as_text(&value)),
                _ => ToolOutcome::Error(as_text(&value)),
            };
            self.results
                .insert(id.clone(), tool_message(&id, &name, &outcome));
        }
    }

    /// Emits the step: the assistant message with the calls that have a
    /// result, then those results in call order. A call left without a
    /// result (a cancelled turn) is dropped: providers refuse unanswered calls.
    fn flush(&mut self, out: &mut Vec<ModelMessage>) {
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
        let ordered: Vec<ModelMessage> = answered
            .iter()
            .filter_map(|c| results.remove(&c.id))
            .collect();
        out.push(ModelMessage::Assistant {
            text: step.text,
            tool_calls: answered,
        });
        out.extend(ordered);
    }
}

/// A tool's outcome as the model reads it.
pub(crate) fn tool_message(call_id: &str, name: &str, outcome: &ToolOutcome) -> ModelMessage {
    let (content, is_error) = match outcome {
        ToolOutcome::Ok(value) => (as_text(value), false),
        ToolOutcome::Error(error) => (error.clone(), true),
        ToolOutcome::Denied(reason) => (format!("the client declined the call: {reason}"), true),
    };
    ModelMessage::Tool {
        call_id: call_id.to_owned(),
        name: name.to_owned(),
        content,
        is_error,
    }
}

/// Strings as they are; anything else as JSON.
fn as_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn string_at(value: &serde_json::Value, key: &str) -> String {
    value
        .get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::{SessionId, Timestamp};

    fn stored(role: MessageRole, content: &str, metadata: &[(&str, &str)]) -> StoredMessage {
        StoredMessage {
            session_id: SessionId::minted("s".into()),
            seq: 0,
            role,
            content: content.into(),
            parts: Vec::new(),
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
                MessageRole::User,
                "weather?",
                &[("user_id", "u1"), ("mock_scenario", "x")],
            ),
            stored(
                MessageRole::Assistant,
                "let me check",
                &[("step", "interim")],
            ),
            stored(
                MessageRole::Tool,
                r#"{"call":{"id":"c1","name":"weather","arguments":{"city":"Oslo"},"side":"server"}}"#,
                &[],
            ),
            stored(
                MessageRole::Tool,
                r#"{"result":{"id":"c1","status":"ok","value":{"t":3}}}"#,
                &[],
            ),
            stored(MessageRole::Assistant, "3 degrees", &[]),
        ];
        let template = MetadataTemplate::compile("[user {{ metadata.user_id }}]").unwrap();
        let messages = rebuild(&history, Some(&template), 100);
        assert_eq!(
            messages,
            vec![
                ModelMessage::User {
                    text: "weather?\n\n[user u1]".into(),
                    parts: vec![]
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
            stored(MessageRole::User, "hi", &[]),
            stored(
                MessageRole::Tool,
                r#"{"call":{"id":"c1","name":"slow","arguments":{}}}"#,
                &[],
            ),
            stored(
                MessageRole::Error,
                "internal server error",
                &[("code", "INTERNAL_ERROR")],
            ),
            stored(MessageRole::User, "again", &[]),
        ];
        let messages = rebuild(&history, None, 100);
        assert_eq!(messages.len(), 2);
        assert!(matches!(&messages[1], ModelMessage::User { text, .. } if text == "again"));
    }

    #[test]
    fn the_window_keeps_the_latest_messages_from_a_user_message_on() {
        let turn = |n: usize| {
            [
                stored(MessageRole::User, &format!("q{n}"), &[]),
                stored(MessageRole::Assistant, &format!("a{n}"), &[]),
            ]
        };
        let history: Vec<StoredMessage> = (0..5).flat_map(turn).collect();
        let texts = |limit| -> Vec<String> {
            rebuild(&history, None, limit)
                .into_iter()
                .map(|m| match m {
                    ModelMessage::User { text, .. } | ModelMessage::Assistant { text, .. } => text,
                    ModelMessage::Tool { content, .. } => content,
                })
                .collect()
        };
        assert_eq!(texts(100).len(), 10);
        assert_eq!(texts(4), ["q3", "a3", "q4", "a4"]);
        // An odd limit would start at an answer: the window starts at the
        // next question instead.
        assert_eq!(texts(3), ["q4", "a4"]);
        // A turn longer than the limit keeps its own question.
        let mut long = vec![stored(MessageRole::User, "q", &[])];
        long.extend((0..6).map(|i| {
            stored(
                MessageRole::Assistant,
                &format!("step {i}"),
                &[("step", "interim")],
            )
        }));
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
            ("gnosari_asset_id", "d"),
            ("plan", "pro"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(template.render(&metadata).as_deref(), Some("plan=pro;"));
    }

    #[test]
    fn denials_and_errors_are_errors_for_the_model() {
        let denied = tool_message("c", "t", &ToolOutcome::Denied("no".into()));
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

//! A scripted model in the shape of Omnia's mock provider (PromptKit's
//! `mock`): `default_response` plus `scenarios.<id>.turns.<n>`.
//!
//! The scenario is the one the turn's message names in its metadata,
//! `mock_scenario` ([`SCENARIO_KEY`]; `default` when unset or empty). The turn number is one plus the assistant messages already in the
//! request, so a tool round-trip moves on to the next turn. A missing
//! scenario or turn answers `default_response`, else
//! `Mock response for provider <name> model <model>`. Text streams in
//! 20-character chunks; tool calls get PromptKit's ids `call_<i>_<name>`.
//!
//! agentwire's addition: `{{last_tool_result}}` in a scripted text (a text
//! turn, or the `content` of a tool-call turn) is replaced by the content of
//! the request's latest tool result, so a script can show that a tool's
//! output reached the model. In a scripted tool call's arguments, a string
//! that is exactly `{{last_tool_result.<key>}}` becomes that key of the
//! latest tool result (a JSON object), so a script can act on what a tool
//! returned, such as the id a memory was given.

use std::collections::BTreeMap;

use agentwire_core::{
    ModelMessage, ModelProvider, ModelReply, ModelRequest, ModelToolCall, ProviderError, TextSink,
};
use async_trait::async_trait;

use crate::{MockScenario, MockTurn};

/// The metadata key of a message that names its scenario.
pub const SCENARIO_KEY: &str = "mock_scenario";

/// Characters per streamed chunk, as PromptKit's mock.
const CHUNK_CHARS: usize = 20;

pub(crate) struct MockProvider {
    name: String,
    model: String,
    default_response: Option<String>,
    scenarios: BTreeMap<String, MockScenario>,
}

impl MockProvider {
    pub fn new(
        name: String,
        model: String,
        default_response: Option<String>,
        scenarios: BTreeMap<String, MockScenario>,
    ) -> MockProvider {
        MockProvider {
            name,
            model,
            default_response,
            scenarios,
        }
    }

    fn scenario(&self, request: &ModelRequest<'_>) -> Option<&MockScenario> {
        let scenario = request
            .metadata
            .get(SCENARIO_KEY)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        self.scenarios.get(scenario)
    }

    /// The text of a turn no scenario scripts: the scenario's default, the
    /// provider's, then PromptKit's fallback.
    fn default_text(&self, scenario: Option<&MockScenario>) -> String {
        scenario
            .and_then(|s| s.default_response.clone())
            .or_else(|| self.default_response.clone())
            .unwrap_or_else(|| {
                format!(
                    "Mock response for provider {} model {}",
                    self.name, self.model
                )
            })
    }
}

/// The turn `scenario` scripts for `request`, numbered from the assistant
/// messages it already has.
fn scripted_turn<'a>(
    scenario: &'a MockScenario,
    request: &ModelRequest<'_>,
) -> Option<&'a MockTurn> {
    let assistants = request
        .messages
        .iter()
        .filter(|m| matches!(m, ModelMessage::Assistant { .. }))
        .count();
    let number = u32::try_from(assistants).ok()?.checked_add(1)?;
    scenario.turns.get(&number)
}

/// `text` in pieces of at most 20 characters (not bytes).
pub(crate) fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .nth(CHUNK_CHARS)
            .map_or(rest.len(), |(i, _)| i);
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

const LAST_TOOL_RESULT: &str = "{{last_tool_result}}";

fn with_last_tool_result(text: &str, request: &ModelRequest<'_>) -> String {
    if !text.contains(LAST_TOOL_RESULT) {
        return text.to_owned();
    }
    text.replace(
        LAST_TOOL_RESULT,
        last_tool_result(request).unwrap_or_default(),
    )
}

/// The latest tool result's content, if any.
fn last_tool_result<'r>(request: &'r ModelRequest<'_>) -> Option<&'r str> {
    request.messages.iter().rev().find_map(|m| match m {
        ModelMessage::Tool { content, .. } => Some(content.as_ref()),
        _ => None,
    })
}

/// `arguments` with each string `{{last_tool_result.<key>}}` replaced by
/// that key of the latest tool result (`null` when it has none).
fn with_last_tool_result_fields(
    arguments: &serde_json::Value,
    request: &ModelRequest<'_>,
) -> serde_json::Value {
    use serde_json::Value;
    match arguments {
        Value::String(s) => match s
            .strip_prefix("{{last_tool_result.")
            .and_then(|rest| rest.strip_suffix("}}"))
        {
            Some(key) => last_tool_result(request)
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .and_then(|result| result.get(key).cloned())
                .unwrap_or(Value::Null),
            None => arguments.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| with_last_tool_result_fields(item, request))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), with_last_tool_result_fields(v, request)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn stream(text: &str, sink: &dyn TextSink) {
    for chunk in chunks(text) {
        sink.text(chunk).await;
    }
}

#[async_trait]
impl ModelProvider for MockProvider {
    fn provider_name(&self) -> &'static str {
        "mock"
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(
        &self,
        request: &ModelRequest<'_>,
        text: &dyn TextSink,
    ) -> Result<ModelReply, ProviderError> {
        let scenario = self.scenario(request);
        let (reply_text, tool_calls) = match scenario.and_then(|s| scripted_turn(s, request)) {
            Some(MockTurn::Text(t)) => (with_last_tool_result(t, request), Vec::new()),
            Some(MockTurn::ToolCalls {
                content,
                tool_calls,
            }) => (
                with_last_tool_result(content.as_deref().unwrap_or_default(), request),
                tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| ModelToolCall {
                        id: format!("call_{i}_{name}"),
                        name: name.clone(),
                        arguments: with_last_tool_result_fields(arguments, request),
                    })
                    .collect(),
            ),
            None => (self.default_text(scenario), Vec::new()),
        };
        stream(&reply_text, text).await;
        Ok(ModelReply {
            text: reply_text,
            tool_calls,
            usage: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use agentwire_core::Metadata;

    use super::*;

    /// The metadata of a message naming `scenario`.
    fn named(scenario: &str) -> Metadata {
        Metadata::from([(SCENARIO_KEY.to_owned(), scenario.to_owned())])
    }

    #[test]
    fn last_tool_result_placeholder() {
        let request = ModelRequest {
            messages: vec![
                ModelMessage::Tool {
                    call_id: "a".into(),
                    name: "t".into(),
                    content: "first".into(),
                    is_error: false,
                },
                ModelMessage::Tool {
                    call_id: "b".into(),
                    name: "t".into(),
                    content: "second".into(),
                    is_error: false,
                },
            ],
            ..ModelRequest::default()
        };
        assert_eq!(
            with_last_tool_result("got {{last_tool_result}}.", &request),
            "got second."
        );
        assert_eq!(
            with_last_tool_result("got {{last_tool_result}}.", &ModelRequest::default()),
            "got ."
        );
    }

    #[test]
    fn a_tool_calls_arguments_take_fields_of_the_last_tool_result() {
        let request = ModelRequest {
            messages: vec![ModelMessage::Tool {
                call_id: "a".into(),
                name: "memory__remember".into(),
                content: r#"{"status":"remembered","id":"m-7"}"#.into(),
                is_error: false,
            }],
            ..ModelRequest::default()
        };
        let arguments = serde_json::json!({
            "memory_id": "{{last_tool_result.id}}",
            "nested": ["{{last_tool_result.status}}", "{{last_tool_result.none}}", 3],
            "plain": "{{last_tool_result}}",
        });
        assert_eq!(
            with_last_tool_result_fields(&arguments, &request),
            serde_json::json!({
                "memory_id": "m-7",
                "nested": ["remembered", null, 3],
                "plain": "{{last_tool_result}}",
            })
        );
    }

    #[tokio::test]
    async fn tool_call_turns_fill_the_placeholder_in_their_content() {
        struct Collect(parking_lot::Mutex<String>);
        #[async_trait]
        impl TextSink for Collect {
            async fn text(&self, delta: &str) {
                self.0.lock().push_str(delta);
            }
        }
        let turn = MockTurn::ToolCalls {
            content: Some("A said: {{last_tool_result}}".into()),
            tool_calls: vec![("next".into(), serde_json::json!({}))],
        };
        let scenario = MockScenario {
            turns: BTreeMap::from([(2, turn)]),
            default_response: None,
        };
        let provider = MockProvider::new(
            "p".into(),
            "m".into(),
            None,
            BTreeMap::from([("s".to_owned(), scenario)]),
        );
        let request = ModelRequest {
            messages: vec![
                ModelMessage::Assistant {
                    text: Default::default(),
                    tool_calls: Vec::new(),
                },
                ModelMessage::Tool {
                    call_id: "a".into(),
                    name: "t".into(),
                    content: "five days".into(),
                    is_error: false,
                },
            ],
            metadata: Cow::Owned(named("s")),
            ..ModelRequest::default()
        };
        let sink = Collect(parking_lot::Mutex::new(String::new()));
        let reply = provider.complete(&request, &sink).await.unwrap();
        assert_eq!(reply.text, "A said: five days");
        assert_eq!(*sink.0.lock(), "A said: five days");
        assert_eq!(reply.tool_calls[0].name, "next");
    }

    #[tokio::test]
    async fn an_unscripted_turn_answers_the_scenario_default_then_the_provider_default() {
        struct Discard;
        #[async_trait]
        impl TextSink for Discard {
            async fn text(&self, _: &str) {}
        }
        let with_default = MockScenario {
            turns: BTreeMap::from([(1, MockTurn::Text("first".into()))]),
            default_response: Some("scenario default".into()),
        };
        let provider = MockProvider::new(
            "p".into(),
            "m".into(),
            Some("provider default".into()),
            BTreeMap::from([
                ("s".to_owned(), with_default),
                ("bare".to_owned(), MockScenario::default()),
            ]),
        );
        let request = |scenario: &str, assistants: usize| ModelRequest {
            messages: (0..assistants)
                .map(|_| ModelMessage::Assistant {
                    text: Default::default(),
                    tool_calls: Vec::new(),
                })
                .collect(),
            metadata: Cow::Owned(named(scenario)),
            ..ModelRequest::default()
        };
        for (scenario, assistants, expected) in [
            ("s", 0, "first"),
            ("s", 1, "scenario default"),
            ("bare", 0, "provider default"),
            ("missing", 0, "provider default"),
        ] {
            let reply = provider
                .complete(&request(scenario, assistants), &Discard)
                .await
                .unwrap();
            assert_eq!(reply.text, expected, "{scenario} after {assistants}");
        }
    }

    #[test]
    fn chunks_are_twenty_characters() {
        let text = "é".repeat(45);
        let pieces: Vec<&str> = chunks(&text).collect();
        assert_eq!(
            pieces.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            vec![20, 20, 5]
        );
        assert_eq!(pieces.concat(), text);
        assert_eq!(chunks("").count(), 0);
        assert_eq!(chunks(&"a".repeat(20)).count(), 1);
    }
}

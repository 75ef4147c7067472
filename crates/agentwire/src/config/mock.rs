//! The scripts of a `type: mock` provider: inline (`default_response`,
//! `scenarios`), or a PromptKit mock file named by `mock_config`, the file an
//! Omnia deployment points its mock provider at, read as it is.
//!
//! Both take PromptKit's shape: `defaultResponse` (or `default_response`),
//! and `scenarios.<id>` with its own `defaultResponse` and `turns.<n>`, each
//! a text or a mapping with `type` (`text`, `tool_calls`), `content` (or
//! `text`, `response`) and `tool_calls: [{name, arguments}]`. A file's
//! `selfplay` section (personas of PromptKit's arena) is accepted and unused.
//! Multimodal turns (`parts`, `audio_file`) are not supported.

use std::collections::BTreeMap;
use std::fmt;

use agentwire_providers::{MockScenario, MockTurn};
use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Serialize, Serializer, de::IgnoredAny};

use super::ConfigError;

/// The forms a turn may take, for the error about one that takes none.
const TURN_FORMS: &str = "a text, or a mapping with `content` (a text) and/or \
    `tool_calls` (a list of {name, arguments}), optionally with `type: text` or `type: tool_calls`";

/// One scenario of a mock provider's scripts.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    /// The scripted turns by number: turn `n` is one plus the assistant
    /// messages so far. Default: none.
    #[serde(default)]
    turns: BTreeMap<u32, RawTurn>,
    /// The reply of a turn `turns` does not script (alias
    /// `defaultResponse`). Default: the provider's `default_response`.
    #[serde(alias = "defaultResponse")]
    default_response: Option<String>,
}

/// A PromptKit mock file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMockFile {
    #[serde(rename = "defaultResponse", alias = "default_response")]
    default_response: Option<String>,
    #[serde(default)]
    scenarios: BTreeMap<String, RawScenario>,
    #[serde(rename = "selfplay")]
    _selfplay: Option<IgnoredAny>,
}

/// One scripted answer, checked as it is read so that the error carries the
/// turn's key path.
pub(super) struct RawTurn(MockTurn);

/// Written back in the mapping form (a text stays a text).
impl Serialize for RawTurn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            MockTurn::Text(text) => serializer.serialize_str(text),
            MockTurn::ToolCalls {
                content,
                tool_calls,
            } => {
                let calls: Vec<serde_json::Value> = tool_calls
                    .iter()
                    .map(|(name, arguments)| {
                        serde_json::json!({"name": name, "arguments": arguments})
                    })
                    .collect();
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "tool_calls")?;
                if let Some(content) = content {
                    map.serialize_entry("content", content)?;
                }
                map.serialize_entry("tool_calls", &calls)?;
                map.end()
            }
        }
    }
}

/// A text, or the mapping [`StructuredTurn`] reads.
impl JsonSchema for RawTurn {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MockTurn".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mapping = generator.subschema_for::<StructuredTurn>();
        schemars::json_schema!({
            "description": TURN_FORMS,
            "anyOf": [{"type": "string"}, mapping],
        })
    }
}

impl<'de> Deserialize<'de> for RawTurn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RawTurn, D::Error> {
        struct TurnVisitor;
        impl<'de> Visitor<'de> for TurnVisitor {
            type Value = RawTurn;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(TURN_FORMS)
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawTurn, E> {
                Ok(RawTurn(MockTurn::Text(text.to_owned())))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawTurn, A::Error> {
                // Through the same map access, so errors inside the mapping
                // keep their key path.
                let turn = StructuredTurn::deserialize(MapAccessDeserializer::new(map))?;
                turn.into_mock_turn()
                    .map(RawTurn)
                    .map_err(de::Error::custom)
            }
        }
        deserializer.deserialize_any(TurnVisitor)
    }
}

#[derive(Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum TurnType {
    Text,
    ToolCalls,
}

/// A scripted turn in the mapping form.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StructuredTurn {
    /// `text` or `tool_calls`; tool calls make a tool-call turn whatever the
    /// type. Default: from the other keys.
    #[serde(rename = "type")]
    kind: Option<TurnType>,
    /// The reply's text (aliases `text`, `response`); `{{last_tool_result}}`
    /// stands for the latest tool result. Required without `tool_calls`.
    #[serde(alias = "text", alias = "response")]
    content: Option<String>,
    /// The tool calls the model makes in this turn. Default: none.
    tool_calls: Option<Vec<RawMockCall>>,
}

impl StructuredTurn {
    /// PromptKit's reading: tool calls make a tool-call turn whatever the
    /// `type`; without them the turn is its text.
    fn into_mock_turn(self) -> Result<MockTurn, String> {
        let calls = self.tool_calls.unwrap_or_default();
        if !calls.is_empty() {
            return Ok(MockTurn::ToolCalls {
                content: self.content,
                tool_calls: calls.into_iter().map(|c| (c.name, c.arguments)).collect(),
            });
        }
        if self.kind == Some(TurnType::ToolCalls) {
            return Err("`type: tool_calls` needs a non-empty `tool_calls` list".to_owned());
        }
        match self.content {
            Some(text) => Ok(MockTurn::Text(text)),
            None => Err(format!(
                "a turn needs `content` or `tool_calls`: {TURN_FORMS}"
            )),
        }
    }
}

/// One scripted tool call.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawMockCall {
    /// The tool called.
    name: String,
    /// Its arguments, a JSON object. Default: null.
    #[serde(default)]
    arguments: serde_json::Value,
}

/// The inline scripts, mapped.
pub(super) fn scenarios(raw: BTreeMap<String, RawScenario>) -> BTreeMap<String, MockScenario> {
    raw.into_iter()
        .map(|(id, scenario)| {
            let scenario = MockScenario {
                turns: scenario
                    .turns
                    .into_iter()
                    .map(|(n, turn)| (n, turn.0))
                    .collect(),
                default_response: scenario.default_response,
            };
            (id, scenario)
        })
        .collect()
}

/// The default response and scenarios of the PromptKit mock file at `path`.
/// Errors name `key` when the file cannot be read or parsed, else the file
/// and the key path inside it. No `${VAR}` is substituted: the file is
/// PromptKit's, and its texts are what the model says.
pub(super) fn load_file(
    key: &str,
    path: &str,
) -> Result<(Option<String>, BTreeMap<String, MockScenario>), ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(key, format!("cannot read {path}: {e}")))?;
    let tree: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(&text)
            .map_err(|e| ConfigError::new(key, format!("{path}: invalid YAML: {e}")))?
    };
    let raw: RawMockFile = serde_path_to_error::deserialize(tree).map_err(|e| {
        let inner = e.path().to_string();
        let inner = if inner == "." { "mock" } else { &inner };
        ConfigError::new(format!("{path}: {inner}"), e.into_inner().to_string())
    })?;
    Ok((raw.default_response, scenarios(raw.scenarios)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(yaml: &str) -> Result<MockTurn, String> {
        let tree: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        serde_path_to_error::deserialize::<_, BTreeMap<u32, RawTurn>>(tree)
            .map(|mut turns| turns.remove(&1).unwrap().0)
            .map_err(|e| {
                let path = e.path().to_string();
                format!("{path}: {}", e.into_inner())
            })
    }

    #[test]
    fn every_promptkit_turn_form_is_read() {
        let calls = vec![(
            "get_location".to_owned(),
            serde_json::json!({"accuracy": "high"}),
        )];
        for (yaml, expected) in [
            ("1: Hello", MockTurn::Text("Hello".into())),
            ("1: {content: Hello}", MockTurn::Text("Hello".into())),
            (
                "1: {type: text, text: Hello}",
                MockTurn::Text("Hello".into()),
            ),
            ("1: {response: Hello}", MockTurn::Text("Hello".into())),
            (
                "1: {type: tool_calls, tool_calls: [{name: get_location, arguments: {accuracy: high}}]}",
                MockTurn::ToolCalls {
                    content: None,
                    tool_calls: calls.clone(),
                },
            ),
            (
                "1: {content: Checking, tool_calls: [{name: get_location, arguments: {accuracy: high}}]}",
                MockTurn::ToolCalls {
                    content: Some("Checking".into()),
                    tool_calls: calls.clone(),
                },
            ),
        ] {
            assert_eq!(turn(yaml).unwrap(), expected, "{yaml}");
        }
    }

    #[test]
    fn a_turn_of_no_accepted_form_says_which_forms_are_accepted() {
        for (yaml, path, fragment) in [
            ("1: 42", "1", "expected a text, or a mapping with `content`"),
            (
                "1: [a, b]",
                "1",
                "expected a text, or a mapping with `content`",
            ),
            ("1: {}", "1", "a turn needs `content` or `tool_calls`"),
            (
                "1: {type: tool_calls, content: x}",
                "1",
                "needs a non-empty `tool_calls`",
            ),
            (
                "1: {type: multimodal, content: x}",
                "1.type",
                "expected `text` or `tool_calls`",
            ),
            (
                "1: {content: x, parts: []}",
                "1.parts",
                "unknown field `parts`",
            ),
            (
                "1: {tool_calls: [{nme: x}]}",
                "1.tool_calls[0].nme",
                "unknown field `nme`",
            ),
        ] {
            let error = turn(yaml).unwrap_err();
            assert!(error.starts_with(&format!("{path}: ")), "{yaml}: {error}");
            assert!(error.contains(fragment), "{yaml}: {error}");
        }
    }
}

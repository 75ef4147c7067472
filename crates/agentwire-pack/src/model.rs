//! The pack as typed values, read from a document the schema checks have
//! passed. Field order is the schema's, so [`Pack::canonical_json`] writes
//! every pack the same way. Features agentwire gives no meaning to are
//! kept as JSON values: the rules refuse them when they say anything.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::template::Template;

/// A PromptPack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pack {
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub id: String,
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub template_engine: TemplateEngine,
    pub prompts: BTreeMap<String, Prompt>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fragments: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compilation: Option<Compilation>,
    /// agentwire's: also accepted at the top level (the schema has it in
    /// `metadata` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_ai_disclosure: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evals: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compositions: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateEngine {
    pub version: String,
    pub syntax: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compilation {
    pub compiled_with: String,
    pub created_at: String,
    pub schema: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The schema leaves this object open.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One prompt: a task type's system template and what goes with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub version: String,
    pub system_template: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_policy: Option<ToolPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Parameters>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validators: Vec<Validator>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evals: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested_models: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_overrides: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Value>,
}

/// A template variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variable {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: VariableType,
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<Value>,
}

/// What a variable's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VariableType {
    String,
    Number,
    Boolean,
    Object,
    Array,
}

/// A tool the pack declares: what the model sees of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls_per_turn: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocklist: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    Auto,
    Required,
    None,
}

/// The model parameters: the only model block a pack has (it names no
/// model).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// `null` in the pack is no limit, as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
}

/// A guardrail on the model's replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validator {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_on_violation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
}

/// A `max_length` validator, read: replies are held to `max_characters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxLength {
    pub max_characters: usize,
    /// `fail_on_violation`: the turn fails instead of the reply being cut.
    pub fail_on_violation: bool,
    /// The validator's `message` (or `params.message`), for the failure.
    pub message: Option<String>,
}

/// The only validator type agentwire runs.
pub(crate) const MAX_LENGTH: &str = "max_length";

impl Pack {
    /// The pack as JSON: its fields in the schema's order, two-space
    /// indented, ending in a newline.
    pub fn canonical_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// `requires_ai_disclosure`, at the top level or in `metadata` (the
    /// rules refuse a pack where the two differ).
    pub fn requires_ai_disclosure(&self) -> Option<bool> {
        self.requires_ai_disclosure.or_else(|| {
            self.metadata
                .as_ref()
                .and_then(|m| m.get("requires_ai_disclosure"))
                .and_then(Value::as_bool)
        })
    }

    /// The system template of prompt `key`, parsed, its fragments expanded
    /// (`None` for no such prompt; a compiled pack's templates parse).
    pub fn system_template(&self, key: &str) -> Option<Template> {
        let prompt = self.prompts.get(key)?;
        let template = Template::parse(&prompt.system_template).ok()?;
        Some(template.expand(&self.fragment_templates(prompt)))
    }

    /// The fragments as templates, but those a prompt's variable shadows.
    pub(crate) fn fragment_templates(&self, prompt: &Prompt) -> BTreeMap<String, Template> {
        self.fragments
            .iter()
            .filter(|(name, _)| !prompt.variables.iter().any(|v| &v.name == *name))
            .filter_map(|(name, text)| Some((name.clone(), Template::parse(text).ok()?)))
            .collect()
    }
}

impl Prompt {
    /// The tools offered: `tools` without `tool_policy.blocklist`.
    pub fn offered_tools(&self) -> impl Iterator<Item = &str> {
        let blocked = self
            .tool_policy
            .as_ref()
            .map(|p| p.blocklist.as_slice())
            .unwrap_or_default();
        self.tools
            .iter()
            .map(String::as_str)
            .filter(move |name| !blocked.iter().any(|b| b == name))
    }

    /// The enabled `max_length` validator, if there is one.
    pub fn max_length(&self) -> Option<MaxLength> {
        let validator = self
            .validators
            .iter()
            .find(|v| v.kind == MAX_LENGTH && v.is_enabled())?;
        let params = validator.params.as_ref();
        let max_characters = params
            .and_then(|p| p.get("max_characters"))
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())?;
        Some(MaxLength {
            max_characters,
            fail_on_violation: validator.fail_on_violation.unwrap_or(false),
            message: validator.message.clone().or_else(|| {
                params
                    .and_then(|p| p.get("message"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
        })
    }
}

impl Validator {
    /// `enabled`, `true` when absent.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

impl Variable {
    /// A JSON Schema a value of the variable must match: its type and its
    /// `validation` (`pattern`, `min_length`, `max_length`, `minimum`,
    /// `maximum`, `enum`), for the caller to check values with.
    pub fn value_schema(&self) -> Value {
        let mut schema = Map::new();
        schema.insert("type".to_owned(), Value::from(self.kind.as_str()));
        for (key, value) in self.validation.iter().flatten() {
            let key = match key.as_str() {
                "min_length" => "minLength",
                "max_length" => "maxLength",
                other => other,
            };
            schema.insert(key.to_owned(), value.clone());
        }
        Value::Object(schema)
    }
}

impl VariableType {
    pub fn as_str(self) -> &'static str {
        match self {
            VariableType::String => "string",
            VariableType::Number => "number",
            VariableType::Boolean => "boolean",
            VariableType::Object => "object",
            VariableType::Array => "array",
        }
    }

    /// Whether `value` is of this type.
    pub fn matches(self, value: &Value) -> bool {
        match self {
            VariableType::String => value.is_string(),
            VariableType::Number => value.is_number(),
            VariableType::Boolean => value.is_boolean(),
            VariableType::Object => value.is_object(),
            VariableType::Array => value.is_array(),
        }
    }

    /// A value of this type from text (message metadata is text): a string
    /// as it is, anything else as JSON of the type.
    pub fn from_text(self, text: &str) -> Option<Value> {
        match self {
            VariableType::String => Some(Value::from(text)),
            _ => serde_json::from_str::<Value>(text.trim())
                .ok()
                .filter(|value| self.matches(value)),
        }
    }

    /// How a value is written into a template: a string as it is, anything
    /// else as JSON.
    pub fn render(value: &Value) -> Cow<'_, str> {
        match value {
            Value::String(text) => Cow::Borrowed(text),
            other => Cow::Owned(other.to_string()),
        }
    }
}

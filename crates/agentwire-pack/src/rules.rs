//! What the schema cannot say: packc's `Pack.Validate()` checks (a
//! template whose variables none are declared), references between parts
//! of the pack (a prompt's tools, the template's names), and what agentwire
//! can run. A feature agentwire has no meaning for is an error naming its
//! path, never dropped; one ignored where that changes nothing (a disabled
//! validator, `tested_models`, pipeline middleware) is a warning.

use serde_json::Value;

use crate::Finding;
use crate::model::{MAX_LENGTH, Pack, Prompt, ToolChoice};
use crate::positions::{child, item};
use crate::template::Template;

mod prompt;

/// The rules' verdict: errors stop the compile; warnings are kept.
pub(crate) struct Checked {
    pub(crate) errors: Vec<Finding>,
    pub(crate) warnings: Vec<String>,
}

/// Why a feature is refused, by its key.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("evals", "evals are not run by agentwire"),
    (
        "workflow",
        "agentwire runs one prompt per agent, not a workflow",
    ),
    (
        "agents",
        "agentwire's agents come from its config, not from a pack",
    ),
    ("skills", "skills are not loaded by agentwire"),
    ("compositions", "compositions are not run by agentwire"),
];

#[derive(Default)]
struct Rules {
    errors: Vec<Finding>,
    warnings: Vec<String>,
}

impl Rules {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(Finding::new(path, message));
    }

    fn warn(&mut self, path: &str, message: impl AsRef<str>) {
        self.warnings.push(format!("{path}: {}", message.as_ref()));
    }
}

/// Whether a feature's value says nothing: absent, `null`, `[]` or `{}`.
fn is_empty(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(map)) => map.is_empty(),
        Some(_) => false,
    }
}

pub(crate) fn check(pack: &Pack) -> Checked {
    let mut rules = Rules::default();
    rules.disclosure(pack);
    rules.template_engine(pack);
    rules.fragments(pack);
    for (key, tool) in &pack.tools {
        if &tool.name != key {
            rules.error(
                &child(&child("tools", key), "name"),
                format!("must equal its key {key:?}"),
            );
        }
    }
    let features = [
        ("evals", pack.evals.as_ref()),
        ("workflow", pack.workflow.as_ref()),
        ("agents", pack.agents.as_ref()),
        ("skills", pack.skills.as_ref()),
        ("compositions", pack.compositions.as_ref()),
    ];
    for (key, value) in features {
        if !is_empty(value) {
            let why = UNSUPPORTED
                .iter()
                .find(|(k, _)| *k == key)
                .map_or("", |(_, w)| *w);
            rules.error(key, format!("not supported: {why}"));
        }
    }
    for (key, prompt) in &pack.prompts {
        rules.prompt(pack, key, prompt);
    }
    if pack.compilation.is_none() {
        rules.warn(
            "compilation",
            "missing: packc validate would refuse the pack (agentwire needs none)",
        );
    }
    Checked {
        errors: rules.errors,
        warnings: rules.warnings,
    }
}

impl Rules {
    fn disclosure(&mut self, pack: &Pack) {
        let in_metadata = pack
            .metadata
            .as_ref()
            .and_then(|m| m.get("requires_ai_disclosure"))
            .and_then(Value::as_bool);
        if let (Some(top), Some(inner)) = (pack.requires_ai_disclosure, in_metadata)
            && top != inner
        {
            self.error(
                "requires_ai_disclosure",
                format!("{top} differs from metadata.requires_ai_disclosure ({inner})"),
            );
        }
    }

    fn template_engine(&mut self, pack: &Pack) {
        let engine = &pack.template_engine;
        if engine.version != "v1" {
            self.error(
                "template_engine.version",
                "agentwire runs template engine v1 only",
            );
        }
        if engine.syntax != "{{variable}}" {
            self.error(
                "template_engine.syntax",
                "agentwire renders the {{variable}} syntax only",
            );
        }
        for (i, feature) in engine.features.iter().flatten().enumerate() {
            if !matches!(feature.as_str(), "basic_substitution" | "fragments") {
                self.error(
                    &item("template_engine.features", i),
                    format!("{feature} is not supported (basic_substitution and fragments are)"),
                );
            }
        }
    }

    fn fragments(&mut self, pack: &Pack) {
        for (name, text) in &pack.fragments {
            let path = child("fragments", name);
            match Template::parse(text) {
                Ok(template) => {
                    for inner in template.names() {
                        if pack.fragments.contains_key(inner) {
                            self.error(
                                &path,
                                format!("references the fragment {inner:?}; fragments do not nest"),
                            );
                        }
                    }
                }
                Err(e) => self.error(&path, e.to_string()),
            }
        }
    }

    fn prompt(&mut self, pack: &Pack, key: &str, prompt: &Prompt) {
        let path = child("prompts", key);
        if prompt.id != key {
            self.warn(
                &child(&path, "id"),
                format!("{:?} differs from its key {key:?}", prompt.id),
            );
        }
        self.variables(&path, prompt);
        self.system_template(pack, key, &path, prompt);
        self.prompt_tools(pack, &path, prompt);
        self.tool_policy(&path, prompt);
        self.validators(&path, prompt);
        self.prompt_features(&path, prompt);
    }

    fn tool_policy(&mut self, path: &str, prompt: &Prompt) {
        let Some(policy) = &prompt.tool_policy else {
            return;
        };
        let path = child(path, "tool_policy");
        match policy.tool_choice {
            Some(ToolChoice::Required) | Some(ToolChoice::None) => self.error(
                &child(&path, "tool_choice"),
                "only \"auto\" is supported: agentwire's providers take no tool choice",
            ),
            _ => {}
        }
        if policy.max_tool_calls_per_turn.is_some() {
            self.error(
                &child(&path, "max_tool_calls_per_turn"),
                "not supported: tool_policy.max_rounds bounds a turn's tool calls",
            );
        }
    }

    fn validators(&mut self, path: &str, prompt: &Prompt) {
        let mut limits = 0;
        for (i, validator) in prompt.validators.iter().enumerate() {
            let path = item(&child(path, "validators"), i);
            if !validator.is_enabled() {
                self.warn(&path, format!("{} is disabled; ignored", validator.kind));
                continue;
            }
            if validator.kind != MAX_LENGTH {
                self.error(
                    &path,
                    format!(
                        "validator type {:?} is not supported (agentwire runs max_length)",
                        validator.kind
                    ),
                );
                continue;
            }
            limits += 1;
            if limits > 1 {
                self.error(&path, "a second max_length; give one");
            }
            self.max_length_params(&path, validator.params.as_ref());
        }
    }

    fn max_length_params(&mut self, path: &str, params: Option<&serde_json::Map<String, Value>>) {
        let path = child(path, "params");
        let max = params.and_then(|p| p.get("max_characters"));
        if max.and_then(Value::as_u64).is_none_or(|n| n == 0) {
            self.error(
                &child(&path, "max_characters"),
                "max_length needs max_characters, an integer of at least 1",
            );
        }
        for key in params.into_iter().flat_map(|p| p.keys()) {
            if key != "max_characters" && key != "message" {
                self.error(
                    &child(&path, key),
                    "not supported: agentwire's max_length counts max_characters",
                );
            }
        }
    }
}

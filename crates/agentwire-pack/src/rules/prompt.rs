//! A prompt's variables and template, its tools, and its features agentwire
//! runs or refuses.

use serde_json::Value;

use super::{Rules, is_empty};
use crate::Finding;
use crate::model::{Pack, Prompt};
use crate::positions::{child, item};
use crate::template::Template;

/// The pipeline stages agentwire runs, in their order.
const STAGES: &[&str] = &["template", "provider", "validator"];

impl Rules {
    pub(super) fn variables(&mut self, path: &str, prompt: &Prompt) {
        for (i, variable) in prompt.variables.iter().enumerate() {
            let path = item(&child(path, "variables"), i);
            if prompt.variables[..i]
                .iter()
                .any(|v| v.name == variable.name)
            {
                self.error(
                    &child(&path, "name"),
                    format!("{:?} is declared twice", variable.name),
                );
            }
            if variable.binding.is_some() {
                self.error(
                    &child(&path, "binding"),
                    "not supported: a variable's value comes from the agent's config, the message's metadata or its default",
                );
            }
            let kind = variable.kind;
            if let Some(default) = &variable.default {
                if !kind.matches(default) {
                    self.error(&child(&path, "default"), format!("not a {}", kind.as_str()));
                } else if variable.required {
                    self.warn(
                        &child(&path, "default"),
                        "a required variable with a default: the default fills it",
                    );
                }
            }
            if variable.example.as_ref().is_some_and(|e| !kind.matches(e)) {
                self.warn(&child(&path, "example"), format!("not a {}", kind.as_str()));
            }
        }
    }

    /// The template parses, and every name in it is a declared variable or
    /// a fragment whose own names are declared; packc's wording when none is
    /// declared.
    pub(super) fn system_template(&mut self, pack: &Pack, key: &str, path: &str, prompt: &Prompt) {
        let template_path = child(path, "system_template");
        let template = match Template::parse(&prompt.system_template) {
            Ok(template) => template.expand(&pack.fragment_templates(prompt)),
            Err(e) => return self.error(&template_path, e.to_string()),
        };
        let names = template.names();
        let declared = |name: &str| prompt.variables.iter().any(|v| v.name == name);
        let undeclared: Vec<&str> = names.iter().copied().filter(|n| !declared(n)).collect();
        if !undeclared.is_empty() && prompt.variables.is_empty() {
            let message = "system_template references variables, but none are declared";
            self.errors.push(
                Finding::new(&template_path, message).packc(format!("prompt '{key}': {message}")),
            );
        } else {
            for name in undeclared {
                self.error(
                    &template_path,
                    format!(
                        "references {name:?}, which is neither a declared variable nor a fragment"
                    ),
                );
            }
        }
        for (i, variable) in prompt.variables.iter().enumerate() {
            if !names.contains(&variable.name.as_str()) {
                self.warn(
                    &item(&child(path, "variables"), i),
                    format!(
                        "{:?} is declared but the template never uses it",
                        variable.name
                    ),
                );
            }
        }
    }

    pub(super) fn prompt_tools(&mut self, pack: &Pack, path: &str, prompt: &Prompt) {
        for (i, name) in prompt.tools.iter().enumerate() {
            let tool_path = item(&child(path, "tools"), i);
            if !pack.tools.contains_key(name) {
                self.error(&tool_path, format!("no tool {name:?} in tools"));
            } else if prompt.tools[..i].contains(name) {
                self.error(&tool_path, format!("{name:?} is listed twice"));
            }
        }
        let blocklist = prompt.tool_policy.iter().flat_map(|p| &p.blocklist);
        for (i, name) in blocklist.enumerate() {
            if !prompt.tools.contains(name) {
                self.warn(
                    &item(&child(path, "tool_policy.blocklist"), i),
                    format!("{name:?} is not one of the prompt's tools"),
                );
            }
        }
    }

    pub(super) fn prompt_features(&mut self, path: &str, prompt: &Prompt) {
        if let Some(pipeline) = &prompt.pipeline {
            self.pipeline(&child(path, "pipeline"), pipeline);
        }
        let refused = [
            (
                "evals",
                prompt.evals.as_ref(),
                "evals are not run by agentwire",
            ),
            (
                "model_overrides",
                prompt.model_overrides.as_ref(),
                "the agent's provider names its one model",
            ),
        ];
        for (key, value, why) in refused {
            if !is_empty(value) {
                self.error(&child(path, key), format!("not supported: {why}"));
            }
        }
        let media_on = prompt
            .media
            .as_ref()
            .and_then(|m| m.get("enabled"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if media_on {
            self.error(
                &child(path, "media"),
                "not supported: media a client sends reaches the model as for any agent, unchecked by the pack",
            );
        }
        if !is_empty(prompt.tested_models.as_ref()) {
            self.warn(&child(path, "tested_models"), "a record of tests; ignored");
        }
    }

    /// Stages agentwire runs anyway, in their order; middleware ignored
    /// (agentwire's own retries and timeouts apply).
    fn pipeline(&mut self, path: &str, pipeline: &Value) {
        let stages = pipeline.get("stages").and_then(Value::as_array);
        let mut next = 0;
        for (i, stage) in stages.into_iter().flatten().enumerate() {
            let name = stage.as_str().unwrap_or_default();
            match STAGES[next..].iter().position(|s| *s == name) {
                Some(found) => next += found + 1,
                None => self.error(
                    &item(&child(path, "stages"), i),
                    format!("{name:?} is not a stage agentwire runs (template, provider, validator, in that order)"),
                ),
            }
        }
        if !is_empty(pipeline.get("middleware")) {
            self.warn(
                &child(path, "middleware"),
                "ignored: agentwire's own retries, timeouts and template rules apply",
            );
        }
    }
}

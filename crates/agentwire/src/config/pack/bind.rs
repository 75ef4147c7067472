//! A compiled pack bound to one agent: the prompt it runs, its variables
//! against the values the config fixes, its parameters against what the
//! agent's provider takes, its tool policy against the agent's, and each
//! of its tools to the `tools[]` entry that runs it. What cannot be bound
//! is an error naming the pack's JSON path or the config key.

use std::sync::Arc;

use agentwire_core::ToolSpec;
use agentwire_pack::{MaxLength, Pack, Prompt, Template, VariableType};
use agentwire_providers::{ProviderKind, Sampling};
use agentwire_tools::ArgumentSchema;
use serde_json::Value;

use super::PackSource;
use crate::config::{NamedTool, ToolConfig};

/// `agents[].max_rounds` when neither the config nor the pack says.
const DEFAULT_MAX_ROUNDS: u32 = 10;

/// What a pack gives one agent, checked against its config.
#[derive(Debug, Clone)]
pub struct PackPlan {
    pub id: String,
    pub version: String,
    /// The key of the prompt the agent runs.
    pub prompt: String,
    /// Its system template, fragments expanded.
    pub template: Template,
    /// The variables the template uses.
    pub variables: Vec<PlanVariable>,
    pub sampling: Sampling,
    pub max_rounds: u32,
    /// The tools offered (the prompt's, less its blocklist), in its order.
    pub tools: Vec<PlanTool>,
    pub reply_limit: Option<MaxLength>,
    /// What the pack declares as `requires_ai_disclosure`.
    pub ai_disclosure: Option<bool>,
    /// The compiler's warnings.
    pub warnings: Vec<String>,
}

/// A variable the template uses, and where its value comes from: the
/// config's (fixed), else a message's `metadata.<name>`, else the default.
#[derive(Debug, Clone)]
pub struct PlanVariable {
    pub name: String,
    pub kind: VariableType,
    pub required: bool,
    pub fixed: Option<Value>,
    pub default: Option<Value>,
    /// The type and `validation` a value from metadata must meet.
    pub schema: Arc<ArgumentSchema>,
}

/// A pack tool and the `tools[]` entry that runs it.
#[derive(Debug, Clone)]
pub struct PlanTool {
    /// As the pack declares it: what the model sees.
    pub spec: ToolSpec,
    pub entry: NamedTool,
}

/// Where a binding problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A JSON path in the pack.
    Pack(String),
    /// A config key.
    Config(String),
}

/// Why a pack cannot serve the agent.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {message}", match place { Place::Pack(p) | Place::Config(p) => p })]
pub struct BindError {
    pub place: Place,
    pub message: String,
}

fn in_pack(path: String, message: impl Into<String>) -> BindError {
    BindError {
        place: Place::Pack(path),
        message: message.into(),
    }
}

fn in_config(key: String, message: impl Into<String>) -> BindError {
    BindError {
        place: Place::Config(key),
        message: message.into(),
    }
}

/// Binds `pack` (compiled, with its `warnings`) to the agent `source`
/// describes.
pub fn bind(
    pack: &Pack,
    warnings: Vec<String>,
    source: &PackSource,
) -> Result<PackPlan, BindError> {
    let key = prompt_key(pack, source)?;
    let prompt = &pack.prompts[&key];
    let template = pack
        .system_template(&key)
        .ok_or_else(|| in_pack(format!("prompts.{key}.system_template"), "does not parse"))?;
    let ai_disclosure = pack.requires_ai_disclosure();
    if let (Some(config), Some(declared)) = (source.requires_ai_disclosure, ai_disclosure)
        && config != declared
    {
        return Err(in_config(
            format!("{}.requires_ai_disclosure", source.agent_key),
            format!("{config}, but the pack declares {declared}"),
        ));
    }
    Ok(PackPlan {
        id: pack.id.clone(),
        version: pack.version.clone(),
        variables: variables(&key, prompt, &template, source)?,
        sampling: sampling(&key, prompt, source)?,
        max_rounds: max_rounds(prompt, source)?,
        tools: tools(pack, &key, prompt, source)?,
        reply_limit: prompt.max_length(),
        ai_disclosure,
        warnings,
        template,
        prompt: key,
    })
}

/// `pack.prompt`, or the pack's one prompt.
fn prompt_key(pack: &Pack, source: &PackSource) -> Result<String, BindError> {
    let keys: Vec<&str> = pack.prompts.keys().map(String::as_str).collect();
    let key = format!("{}.pack.prompt", source.agent_key);
    match (&source.prompt, keys.as_slice()) {
        (Some(wanted), _) if keys.contains(&wanted.as_str()) => Ok(wanted.clone()),
        (Some(wanted), _) => Err(in_config(
            key,
            format!(
                "the pack has no prompt {wanted:?} (it has {})",
                keys.join(", ")
            ),
        )),
        (None, [only]) => Ok((*only).to_owned()),
        (None, _) => Err(in_config(
            key,
            format!(
                "required: the pack has {} prompts ({})",
                keys.len(),
                keys.join(", ")
            ),
        )),
    }
}

/// The variables the template uses, each with the config's value (checked)
/// and its default (checked against the variable's validation).
fn variables(
    key: &str,
    prompt: &Prompt,
    template: &Template,
    source: &PackSource,
) -> Result<Vec<PlanVariable>, BindError> {
    for (name, value) in &source.variables {
        let config_key = format!("{}.pack.variables.{name}", source.agent_key);
        let Some(declared) = prompt.variables.iter().find(|v| &v.name == name) else {
            return Err(in_config(
                config_key,
                format!("the prompt {key:?} declares no variable {name:?}"),
            ));
        };
        if !declared.kind.matches(value) {
            return Err(in_config(
                config_key,
                format!("not a {}", declared.kind.as_str()),
            ));
        }
    }
    let used = template.names();
    let mut plan = Vec::new();
    for (i, variable) in prompt.variables.iter().enumerate() {
        if !used.contains(&variable.name.as_str()) {
            continue;
        }
        let path = format!("prompts.{key}.variables[{i}]");
        let schema = ArgumentSchema::compile(&variable.value_schema())
            .map_err(|e| in_pack(format!("{path}.validation"), e))?;
        let fixed = source.variables.get(&variable.name).cloned();
        if let Some(value) = &fixed {
            schema.validate_without_values(value).map_err(|e| {
                let config_key = format!("{}.pack.variables.{}", source.agent_key, variable.name);
                in_config(config_key, format!("the variable's validation: {e}"))
            })?;
        }
        if let Some(default) = &variable.default {
            schema.validate_without_values(default).map_err(|e| {
                in_pack(
                    format!("{path}.default"),
                    format!("the variable's validation: {e}"),
                )
            })?;
        }
        plan.push(PlanVariable {
            name: variable.name.clone(),
            kind: variable.kind,
            required: variable.required,
            fixed,
            default: variable.default.clone(),
            schema: Arc::new(schema),
        });
    }
    Ok(plan)
}

fn provider_type(kind: &ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi { .. } => "openai",
        ProviderKind::Anthropic { .. } => "anthropic",
        ProviderKind::Mock { .. } => "mock",
    }
}

/// `parameters`, each one the agent's provider takes.
fn sampling(key: &str, prompt: &Prompt, source: &PackSource) -> Result<Sampling, BindError> {
    let parameters = prompt.parameters.clone().unwrap_or_default();
    let sampling = Sampling {
        temperature: parameters.temperature,
        max_tokens: parameters.max_tokens,
        top_p: parameters.top_p,
        top_k: parameters.top_k,
        frequency_penalty: parameters.frequency_penalty,
        presence_penalty: parameters.presence_penalty,
    };
    let provider = &source.provider;
    match provider.kind.unsupported(&sampling) {
        None => Ok(sampling),
        Some(name) => Err(in_pack(
            format!("prompts.{key}.parameters.{name}"),
            format!(
                "the agent's provider {:?} ({}) does not take {name}",
                provider.name,
                provider_type(&provider.kind)
            ),
        )),
    }
}

/// `tool_policy.max_rounds` or `agents[].max_rounds`, not both.
fn max_rounds(prompt: &Prompt, source: &PackSource) -> Result<u32, BindError> {
    let from_pack = prompt.tool_policy.as_ref().and_then(|p| p.max_rounds);
    match (from_pack, source.max_rounds) {
        (Some(_), Some(_)) => Err(in_config(
            format!("{}.max_rounds", source.agent_key),
            "not with the pack's tool_policy.max_rounds: give one",
        )),
        (Some(rounds), None) | (None, Some(rounds)) => Ok(rounds),
        (None, None) => Ok(DEFAULT_MAX_ROUNDS),
    }
}

/// Each tool the prompt offers, bound to the `tools[]` entry that runs it;
/// every entry the agent names runs one.
fn tools(
    pack: &Pack,
    key: &str,
    prompt: &Prompt,
    source: &PackSource,
) -> Result<Vec<PlanTool>, BindError> {
    let offered: Vec<&str> = prompt.offered_tools().collect();
    let map_key = |name: &str| format!("{}.pack.tools.{name}", source.agent_key);
    if let Some(extra) = source
        .tool_map
        .keys()
        .find(|k| !offered.contains(&k.as_str()))
    {
        return Err(in_config(
            map_key(extra),
            format!("the prompt {key:?} offers no tool {extra:?}"),
        ));
    }
    let mut plan: Vec<PlanTool> = Vec::new();
    for name in offered {
        let declared = &pack.tools[name];
        let mapped = source.tool_map.get(name);
        let entry_name = mapped.map_or(name, String::as_str);
        let Some(entry) = source.tools.iter().find(|t| t.name == entry_name) else {
            return Err(match mapped {
                Some(_) => in_config(
                    map_key(name),
                    format!("{entry_name:?} is not one of the agent's tools"),
                ),
                None => in_pack(
                    format!("tools.{name}"),
                    format!(
                        "bound to no tool: the agent's tools have none named {name:?} (or name one in pack.tools)"
                    ),
                ),
            });
        };
        let single = matches!(
            entry.config,
            ToolConfig::Http(_) | ToolConfig::Client { .. }
        );
        if matches!(entry.config, ToolConfig::A2a(_)) {
            return Err(in_pack(
                format!("tools.{name}"),
                format!(
                    "bound to the a2a tool {entry_name:?}, which takes no pack tool's parameters"
                ),
            ));
        }
        if let Some(other) = plan.iter().find(|t| single && t.entry.name == entry.name) {
            // Named where the map sends a second tool to the entry.
            let mapped = match mapped {
                Some(_) => name,
                None => other.spec.name.as_str(),
            };
            return Err(in_config(
                map_key(mapped),
                format!(
                    "{entry_name:?} runs {:?} and {name:?}; an http or client tool runs one",
                    other.spec.name
                ),
            ));
        }
        let parameters = declared
            .parameters
            .clone()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        ArgumentSchema::compile(&parameters)
            .map_err(|e| in_pack(format!("tools.{name}.parameters"), e))?;
        plan.push(PlanTool {
            spec: ToolSpec {
                name: name.to_owned(),
                description: declared.description.clone(),
                parameters,
            },
            entry: entry.clone(),
        });
    }
    for (j, tool) in source.tools.iter().enumerate() {
        if !plan.iter().any(|t| t.entry.name == tool.name) {
            return Err(in_config(
                format!("{}.tools[{j}]", source.agent_key),
                format!("runs none of the tools the pack's prompt {key:?} offers"),
            ));
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;

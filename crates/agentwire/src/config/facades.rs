//! `facades` and `agents[].a2a`, `agents[].mcp`, `agents[].function`:
//! which front doors besides the WebSocket serve an agent (A2A, MCP, REST
//! functions), and what each says about it. Every agent is on the
//! WebSocket; the others are opt-in, globally (`facades`) or per agent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::time::Duration;

use super::ConfigError;
use super::duration::ConfigDuration;
use agentwire_tools::ArgumentSchema;

/// `facades` as written: the default for agents that do not say.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFacades {
    /// Serve every agent over A2A (`/a2a/{agent}`, its card at
    /// `/a2a/{agent}/.well-known/agent-card.json`). Default: `false`.
    #[serde(default)]
    a2a: bool,
    /// Offer every agent as a tool on `/mcp` (`ask_<agent>`). Default:
    /// `false`.
    #[serde(default)]
    mcp: bool,
    /// Serve every agent as a REST function (`POST /functions/{agent}`).
    /// Default: `false`.
    #[serde(default)]
    functions: bool,
}

/// `agents[].a2a` as written: the block opts the agent in.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgentA2a {
    /// Serve this agent over A2A. Default: `true` (writing the block
    /// opts in; without the block, `facades.a2a` decides).
    enabled: Option<bool>,
    /// The card's `description`. Default: `agentwire agent <name>`.
    description: Option<String>,
    /// The card's `version`. Default: `1.0.0`.
    version: Option<String>,
    /// The card's `skills`. Default: one skill named after the agent, with
    /// the card's description and the tag `chat`.
    #[serde(default)]
    skills: Vec<RawSkill>,
}

/// One of `agents[].a2a.skills` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSkill {
    /// Unique within the card.
    id: String,
    /// What a person reads as the skill's title.
    name: String,
    /// What the skill does, for the calling agent to choose by.
    description: String,
    /// At least one.
    tags: Vec<String>,
    /// Example prompts. Default: none.
    #[serde(default)]
    examples: Vec<String>,
}

/// `agents[].mcp` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgentMcp {
    /// Offer this agent as the tool `ask_<name>` on `/mcp`. Default:
    /// `true` (without the block, `facades.mcp` decides).
    enabled: Option<bool>,
    /// The tool's description. Default: `Ask the agent <name>.`
    description: Option<String>,
    /// The longest a call that asked for progress goes without a
    /// `notifications/progress`: streamed text goes out as it comes, and
    /// when none came for this long a notification without text does, so
    /// clients that reset their timeout on progress wait out a long turn.
    /// More than 0. Default: `10s`.
    progress_interval: Option<ConfigDuration>,
}

/// `agents[].function` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgentFunction {
    /// Serve this agent at `POST /functions/{name}`. Default: `true`
    /// (without the block, `facades.functions` decides).
    enabled: Option<bool>,
    /// A JSON Schema the request body must match (`400 input_invalid`).
    /// Default: any JSON value.
    input_schema: Option<serde_json::Value>,
    /// A JSON Schema the agent's answer, parsed as JSON, must match
    /// (`502 output_invalid`). Default: the answer is returned as text.
    output_schema: Option<serde_json::Value>,
}

/// Which front doors besides the WebSocket serve an agent, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentFacades {
    /// `None`: not on A2A.
    pub a2a: Option<A2aConfig>,
    /// `None`: not on `/mcp`.
    pub mcp: Option<McpConfig>,
    /// `None`: not a REST function.
    pub function: Option<FunctionConfig>,
}

/// An agent's A2A card, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aConfig {
    pub description: String,
    pub version: String,
    /// At least one.
    pub skills: Vec<SkillConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SkillConfig {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub examples: Vec<String>,
}

/// An agent as an MCP tool, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct McpConfig {
    pub description: String,
    pub progress_interval: Duration,
}

/// An agent as a REST function, validated: the schemas compile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionConfig {
    pub input_schema: Option<serde_json::Value>,
    pub output_schema: Option<serde_json::Value>,
}

/// The blocks of one agent, as written.
pub(super) struct RawAgentFacades {
    pub(super) a2a: Option<RawAgentA2a>,
    pub(super) mcp: Option<RawAgentMcp>,
    pub(super) function: Option<RawAgentFunction>,
}

/// Agent `index`'s facades, its own blocks over `defaults`.
pub(super) fn validate_agent(
    index: usize,
    name: &str,
    raw: RawAgentFacades,
    defaults: &RawFacades,
) -> Result<AgentFacades, ConfigError> {
    let key = |field: &str| format!("agents[{index}].{field}");
    // A block opts in unless it says `enabled: false`; it is checked
    // either way, so a mistake in it is found before it is switched on.
    let a2a = match raw.a2a {
        Some(block) => {
            let enabled = block.enabled.unwrap_or(true);
            Some(validate_a2a(&key, name, block)?).filter(|_| enabled)
        }
        None if defaults.a2a => Some(validate_a2a(&key, name, RawAgentA2a::default())?),
        None => None,
    };
    let mcp = match raw.mcp {
        Some(block) => {
            let enabled = block.enabled.unwrap_or(true);
            Some(validate_mcp(&key, name, block)?).filter(|_| enabled)
        }
        None if defaults.mcp => Some(validate_mcp(&key, name, RawAgentMcp::default())?),
        None => None,
    };
    let function = match raw.function {
        Some(block) => {
            let enabled = block.enabled.unwrap_or(true);
            Some(validate_function(&key, block)?).filter(|_| enabled)
        }
        None if defaults.functions => Some(FunctionConfig::default()),
        None => None,
    };
    Ok(AgentFacades { a2a, mcp, function })
}

/// The MCP tool's default progress interval: within the 60 s request
/// timeout clients default to, with room to spare.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

fn validate_mcp(
    key: &dyn Fn(&str) -> String,
    name: &str,
    raw: RawAgentMcp,
) -> Result<McpConfig, ConfigError> {
    let progress_interval = raw.progress_interval.map_or(PROGRESS_INTERVAL, |d| d.0);
    if progress_interval.is_zero() {
        return Err(ConfigError::new(
            key("mcp.progress_interval"),
            "must be more than 0",
        ));
    }
    Ok(McpConfig {
        description: raw
            .description
            .unwrap_or_else(|| format!("Ask the agent {name}.")),
        progress_interval,
    })
}

fn validate_a2a(
    key: &dyn Fn(&str) -> String,
    name: &str,
    raw: RawAgentA2a,
) -> Result<A2aConfig, ConfigError> {
    let description = raw
        .description
        .unwrap_or_else(|| format!("agentwire agent {name}"));
    let version = raw.version.unwrap_or_else(|| "1.0.0".to_owned());
    for (field, value) in [("description", &description), ("version", &version)] {
        if value.trim().is_empty() {
            return Err(ConfigError::new(
                key(&format!("a2a.{field}")),
                "must not be empty",
            ));
        }
    }
    let skills = match raw.skills.is_empty() {
        true => vec![SkillConfig {
            id: name.to_owned(),
            name: name.to_owned(),
            description: description.clone(),
            tags: vec!["chat".to_owned()],
            examples: Vec::new(),
        }],
        false => validate_skills(key, raw.skills)?,
    };
    Ok(A2aConfig {
        description,
        version,
        skills,
    })
}

fn validate_skills(
    key: &dyn Fn(&str) -> String,
    raw: Vec<RawSkill>,
) -> Result<Vec<SkillConfig>, ConfigError> {
    let mut skills: Vec<SkillConfig> = Vec::with_capacity(raw.len());
    for (i, skill) in raw.into_iter().enumerate() {
        let field = |f: &str| key(&format!("a2a.skills[{i}].{f}"));
        for (f, value) in [
            ("id", &skill.id),
            ("name", &skill.name),
            ("description", &skill.description),
        ] {
            if value.trim().is_empty() {
                return Err(ConfigError::new(field(f), "must not be empty"));
            }
        }
        if skills.iter().any(|s| s.id == skill.id) {
            return Err(ConfigError::new(
                field("id"),
                format!("duplicate skill id {:?}", skill.id),
            ));
        }
        if skill.tags.is_empty() || skill.tags.iter().any(|t| t.trim().is_empty()) {
            return Err(ConfigError::new(
                field("tags"),
                "at least one tag, none empty",
            ));
        }
        skills.push(SkillConfig {
            id: skill.id,
            name: skill.name,
            description: skill.description,
            tags: skill.tags,
            examples: skill.examples,
        });
    }
    Ok(skills)
}

fn validate_function(
    key: &dyn Fn(&str) -> String,
    raw: RawAgentFunction,
) -> Result<FunctionConfig, ConfigError> {
    for (field, schema) in [
        ("function.input_schema", &raw.input_schema),
        ("function.output_schema", &raw.output_schema),
    ] {
        if let Some(schema) = schema {
            ArgumentSchema::compile(schema).map_err(|e| ConfigError::new(key(field), e))?;
        }
    }
    Ok(FunctionConfig {
        input_schema: raw.input_schema,
        output_schema: raw.output_schema,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    fn mcp(block: &str) -> Result<Option<super::McpConfig>, super::ConfigError> {
        let yaml = format!(
            "storage:\n  sessions: memory\nagents:\n  - name: a\n    handler: echo\n{block}"
        );
        let config = super::super::parse(&yaml, |_| None)?;
        Ok(config.agents[0].facades.mcp.clone())
    }

    #[test]
    fn the_mcp_progress_interval_defaults_to_ten_seconds_and_is_never_zero() {
        assert_eq!(mcp("").unwrap(), None);
        let default = mcp("    mcp: {enabled: true}\n").unwrap().unwrap();
        assert_eq!(default.progress_interval, Duration::from_secs(10));
        assert_eq!(default.description, "Ask the agent a.");
        let short = mcp("    mcp: {enabled: true, progress_interval: 250ms}\n");
        assert_eq!(
            short.unwrap().unwrap().progress_interval,
            Duration::from_millis(250)
        );
        let zero = mcp("    mcp: {enabled: true, progress_interval: 0s}\n").unwrap_err();
        assert_eq!(zero.key, "agents[0].mcp.progress_interval");
    }
}

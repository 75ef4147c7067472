//! `teams[]`, and the `delegations` and `handoffs` of `agents[]`.
//!
//! A team is either a set of configured agents (`orchestrator` and
//! `agents`) or a Gnosari team file (`file`, run on the `providers[]` entry
//! `provider`: see [`super::team_file`]).

use std::path::PathBuf;

use agentwire_core::AccessLevel;
use agentwire_providers::ProviderSettings;
use agentwire_runtime::{Delegation, Handoff};
use agentwire_tools::McpSettings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::auth::RawAccessLevel;
use super::runtime::NamedTool;
use super::{AgentConfig, ConfigError, refuse_given, team_file};

/// Longest tool name the model providers accept.
const MAX_TOOL_NAME: usize = 64;

/// A team: `/ws/team/{name}` (its orchestrator answers) and
/// `/ws/team/{name}/agent/{member}`.
#[derive(Debug, Clone)]
pub struct TeamConfig {
    pub name: String,
    /// Like an agent's: without it `private` for a team with a password, else
    /// `public` when unauthenticated callers are allowed and `private`
    /// otherwise. A private member makes its endpoints private too.
    pub access_level: AccessLevel,
    /// Argon2id PHC string: the team's password (Gnosari password access).
    pub password_argon2: Option<String>,
    pub members: TeamMembers,
}

#[derive(Debug, Clone)]
pub enum TeamMembers {
    /// Agents of `agents[]`, by name.
    Agents {
        orchestrator: String,
        /// Every member, the orchestrator included.
        agents: Vec<String>,
    },
    /// The agents of a Gnosari team file.
    File(TeamFile),
}

/// A Gnosari team file, loaded and mapped onto runtime agents.
#[derive(Debug, Clone)]
pub struct TeamFile {
    pub path: PathBuf,
    /// The `providers[]` entry every agent of the file runs on, with the
    /// agent's own `model`.
    pub provider: String,
    pub agents: Vec<FileAgent>,
    /// Index in `agents` of the orchestrator.
    pub orchestrator: usize,
    /// `config.enable_memory`.
    pub memory: TeamMemory,
}

/// Whether a team file's agents have memory (`config.enable_memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeamMemory {
    Off,
    /// Each agent has the memory tools, in the default tier
    /// (`caller_agent`), its scope named `<team>/<agent id>`.
    Enabled,
}

/// An agent of a team file, as a runtime agent.
#[derive(Debug, Clone)]
pub struct FileAgent {
    /// The identifier in URLs and delegation targets: the file's `id`, else its `name`.
    pub id: String,
    /// The name events carry: the file's `name`, else its `id`.
    pub name: String,
    /// Its instructions, then those of its traits.
    pub instructions: String,
    /// The model to ask through the team's provider.
    pub model: String,
    pub max_rounds: u32,
    pub tools: Vec<FileTool>,
    /// Targets are `id`s of the file's agents.
    pub delegations: Vec<Delegation>,
    pub handoffs: Vec<Handoff>,
    /// The agent's own level (our extension to the format); `None` follows the team.
    pub access_level: Option<AccessLevel>,
}

/// A tool of a team file's agent.
#[derive(Debug, Clone)]
pub enum FileTool {
    /// An entry of `tools[]`, standing in for the file's entry of that id.
    Config(String),
    /// An MCP server the file declares.
    Mcp(McpSettings),
}

/// One entry of `teams[]`: `/ws/team/{name}` (answered by its orchestrator)
/// and `/ws/team/{name}/agent/{member}`. Either configured agents
/// (`orchestrator`, `agents`) or a Gnosari team file (`file`, `provider`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTeam {
    /// The team's name in its URLs; unique. Required without `file`; with
    /// `file` default: the file's `id`.
    name: Option<String>,
    /// The agent of `agents[]` that answers on the team's endpoint; required
    /// without `file`.
    orchestrator: Option<String>,
    /// The other members, names from `agents[]`. Default: none. Not with
    /// `file`.
    agents: Option<Vec<String>>,
    /// A Gnosari team file (YAML; `${VAR}` substituted) whose agents make up
    /// the team.
    file: Option<String>,
    /// With `file`: the `providers[]` entry every agent of the file runs on,
    /// each with its own `model`; required with `file`.
    provider: Option<String>,
    /// `public` or `private`. Default: `private` with a password, else
    /// `public` when unauthenticated callers are allowed, else `private`.
    access_level: Option<RawAccessLevel>,
    /// An Argon2id PHC hash of the team's password (`agentwire
    /// hash-password`), for Gnosari password access.
    password_argon2: Option<String>,
}

pub(super) fn validate_teams(
    raw: Vec<RawTeam>,
    agents: &[AgentConfig],
    providers: &[ProviderSettings],
    tools: &[NamedTool],
    allow_unauthenticated: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<TeamConfig>, ConfigError> {
    let known = Known {
        agents,
        providers,
        tools,
        allow_unauthenticated,
        lookup,
    };
    let mut teams: Vec<TeamConfig> = Vec::with_capacity(raw.len());
    for (index, raw) in raw.into_iter().enumerate() {
        let team = validate_team(index, raw, &known)?;
        if teams.iter().any(|t| t.name == team.name) {
            return Err(ConfigError::new(
                format!("teams[{index}].name"),
                format!("duplicate team name {:?}", team.name),
            ));
        }
        teams.push(team);
    }
    Ok(teams)
}

/// What a team is checked against, and how its file's `${VAR}` are read.
struct Known<'a> {
    agents: &'a [AgentConfig],
    providers: &'a [ProviderSettings],
    tools: &'a [NamedTool],
    allow_unauthenticated: bool,
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

fn validate_team(
    index: usize,
    mut raw: RawTeam,
    known: &Known<'_>,
) -> Result<TeamConfig, ConfigError> {
    let key = |field: &str| format!("teams[{index}].{field}");
    let password_argon2 = raw.password_argon2.take();
    if let Some(phc) = &password_argon2 {
        agentwire_auth::check_password_hash(phc)
            .map_err(|e| ConfigError::new(key("password_argon2"), e))?;
    }
    let access_level = match raw.access_level {
        Some(RawAccessLevel::Public) => AccessLevel::Public,
        Some(RawAccessLevel::Private) => AccessLevel::Private,
        None if password_argon2.is_some() => AccessLevel::Private,
        None if known.allow_unauthenticated => AccessLevel::Public,
        None => AccessLevel::Private,
    };
    let (name, members) = match raw.file.take() {
        Some(file) => file_team(&key, file, raw, known)?,
        None => agents_team(&key, raw, known.agents)?,
    };
    if !super::valid_agent_name(&name) {
        return Err(ConfigError::new(
            key("name"),
            format!("{name:?}: 1 to 128 ASCII letters, digits, '.', '_' or '-'"),
        ));
    }
    Ok(TeamConfig {
        name,
        access_level,
        password_argon2,
        members,
    })
}

/// A team of a Gnosari team file: its name (default: the file's `id`) and
/// its agents, on the `providers[]` entry `provider`.
fn file_team(
    key: &dyn Fn(&str) -> String,
    file: String,
    raw: RawTeam,
    known: &Known<'_>,
) -> Result<(String, TeamMembers), ConfigError> {
    let configured = [
        ("orchestrator", raw.orchestrator.is_some()),
        ("agents", raw.agents.is_some()),
    ];
    refuse_given(
        key,
        &configured,
        "a team with `file` takes its agents from the file",
    )?;
    let provider_name = raw.provider.ok_or_else(|| {
        ConfigError::new(
            key("provider"),
            "required with `file`: the providers[] entry the file's agents run on",
        )
    })?;
    let provider = known
        .providers
        .iter()
        .find(|p| p.name == provider_name)
        .ok_or_else(|| {
            ConfigError::new(
                key("provider"),
                format!("no provider named {provider_name:?} in providers[]"),
            )
        })?;
    let loaded = team_file::load(&key("file"), &file, provider, known.tools, known.lookup)?;
    let name = match (raw.name, loaded.id) {
        (Some(name), _) => name,
        (None, Some(id)) => id,
        (None, None) => {
            return Err(ConfigError::new(
                key("name"),
                format!("required: the team file {file} has no `id`"),
            ));
        }
    };
    let members = TeamMembers::File(TeamFile {
        path: PathBuf::from(file),
        provider: provider_name,
        agents: loaded.agents,
        orchestrator: loaded.orchestrator,
        memory: loaded.memory,
    });
    Ok((name, members))
}

/// A team of configured agents: its name, its `orchestrator` and its other
/// `agents`, each named once.
fn agents_team(
    key: &dyn Fn(&str) -> String,
    raw: RawTeam,
    agents: &[AgentConfig],
) -> Result<(String, TeamMembers), ConfigError> {
    refuse_given(
        key,
        &[("provider", raw.provider.is_some())],
        "only with `file`",
    )?;
    let name = raw
        .name
        .ok_or_else(|| ConfigError::new(key("name"), "required"))?;
    let orchestrator = raw.orchestrator.ok_or_else(|| {
        ConfigError::new(
            key("orchestrator"),
            "required: the agent that answers on the team's endpoint (or give `file`)",
        )
    })?;
    if !agents.iter().any(|a| a.name == orchestrator) {
        return Err(ConfigError::new(
            key("orchestrator"),
            format!("no agent named {orchestrator:?} in agents[]"),
        ));
    }
    let mut members = vec![orchestrator.clone()];
    for (i, member) in raw.agents.unwrap_or_default().into_iter().enumerate() {
        if !agents.iter().any(|a| a.name == member) {
            return Err(ConfigError::new(
                key(&format!("agents[{i}]")),
                format!("no agent named {member:?} in agents[]"),
            ));
        }
        if members[1..].contains(&member) {
            return Err(ConfigError::new(
                key(&format!("agents[{i}]")),
                format!("{member:?} is listed twice"),
            ));
        }
        if member != orchestrator {
            members.push(member);
        }
    }
    let members = TeamMembers::Agents {
        orchestrator,
        agents: members,
    };
    Ok((name, members))
}

/// Checks `agents[].delegations` and `agents[].handoffs` against the other
/// agents: every target exists and is not the agent itself; a handoff target
/// is a runtime agent (it continues the turn with its model and tools).
pub(super) fn check_agent_links(agents: &[AgentConfig]) -> Result<(), ConfigError> {
    for (index, agent) in agents.iter().enumerate() {
        let Some(runtime) = &agent.runtime else {
            continue;
        };
        for (list, targets) in [
            ("delegations", &runtime.delegations),
            ("handoffs", &runtime.handoffs),
        ] {
            for (i, target) in targets.iter().enumerate() {
                let key = format!("agents[{index}].{list}[{i}]");
                let Some(found) = agents.iter().find(|a| &a.name == target) else {
                    return Err(ConfigError::new(
                        key,
                        format!("no agent named {target:?} in agents[]"),
                    ));
                };
                if found.name == agent.name {
                    return Err(ConfigError::new(key, "an agent cannot name itself"));
                }
                if targets[..i].contains(target) {
                    return Err(ConfigError::new(key, format!("{target:?} is listed twice")));
                }
                let compiled_per_session = found.runtime.as_ref().is_some_and(|r| {
                    matches!(
                        r.pack,
                        Some(super::PackConfig {
                            mode: super::PackMode::PerSession,
                            ..
                        })
                    )
                });
                if list == "handoffs" && compiled_per_session {
                    return Err(ConfigError::new(
                        key,
                        format!(
                            "{target:?} compiles its pack per session; such an agent cannot take over a turn"
                        ),
                    ));
                }
                if list == "handoffs" && found.runtime.is_none() {
                    return Err(ConfigError::new(
                        key,
                        format!(
                            "{target:?} is not a `handler: runtime` agent; only those can take over a turn"
                        ),
                    ));
                }
            }
        }
        check_transfer_names(&format!("agents[{index}].handoffs"), &runtime.handoffs)?;
    }
    Ok(())
}

/// Every handoff target of one agent needs its own transfer tool name, one
/// a model provider accepts.
pub(super) fn check_transfer_names(key: &str, targets: &[String]) -> Result<(), ConfigError> {
    let names: Vec<String> = targets
        .iter()
        .map(|t| agentwire_runtime::transfer_tool_name(t))
        .collect();
    for (i, name) in names.iter().enumerate() {
        if name.len() > MAX_TOOL_NAME {
            return Err(ConfigError::new(
                format!("{key}[{i}]"),
                format!("the handoff tool {name} is longer than {MAX_TOOL_NAME} characters"),
            ));
        }
        if names[..i].contains(name) {
            return Err(ConfigError::new(
                format!("{key}[{i}]"),
                format!(
                    "the handoff tool {name} would also hand off to {:?}",
                    targets[names[..i].iter().position(|n| n == name).unwrap_or(0)]
                ),
            ));
        }
    }
    Ok(())
}

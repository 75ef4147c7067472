//! Gnosari team files (`teams[].file`), loaded as they are: both generations
//! of the format (the behaviour notes, §1.13), with `${VAR}` /
//! `${VAR:default}` substituted in their values, mapped onto runtime agents.
//!
//! | file | agentwire |
//! |---|---|
//! | `id` (new) / `name` | the team's name when `teams[].name` is not given (`id` only) |
//! | `config.max_turns`, agent `max_turns` | `max_rounds` (default 10) |
//! | `config.enable_memory` | every agent's memory tools (`agents[].memory` with `enabled: true`), each agent's scope its own (`<team>/<agent id>`) |
//! | agent `id` (new) / `name` | the member's identifier; `name` (default: `id`) is the events' `agent_name` |
//! | `instructions`, plus the `instructions` of its `traits` | the system prompt |
//! | `model` | the model asked through the team's `provider` (default: the provider's) |
//! | `is_orchestrator` (new) / `orchestrator` (old) | the agent on `/ws/team/{team}`; none marked: the first |
//! | `tools` | an MCP entry of the file (`url`, `command`), or a `tools[]` entry of the same name standing in for any entry |
//! | `delegations: [{target_agent_id, instructions}]` (new), `delegation: [{agent, instructions}]` (old) | `delegate_agent` |
//! | `handoffs: [{target_agent_id, condition, message}]` (new), `can_transfer_to: [name \| {agent, instructions}]` (old) | `transfer_to_<name>` |
//! | `access_level` (our extension): `PUBLIC`, `PRIVATE`, `PASSWORD` | the member's own level (`PASSWORD`: private) |
//!
//! Everything else (`description`, `knowledge`, `temperature`,
//! `reasoning_effort`, delegation `mode`, `listen`, `trigger`, ...) is
//! accepted and not used. Targets are matched by `id`, then by `name`.

use std::collections::BTreeMap;

use agentwire_core::AccessLevel;
use agentwire_providers::ProviderSettings;
use agentwire_runtime::{Delegation, Handoff};
use agentwire_tools::{McpSettings, McpTransport};
use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;
use super::runtime::NamedTool;
use super::team::{FileAgent, FileTool, TeamMemory, check_transfer_names};

/// A team file, mapped.
pub(super) struct LoadedTeam {
    pub(super) id: Option<String>,
    pub(super) agents: Vec<FileAgent>,
    pub(super) orchestrator: usize,
    /// `config.enable_memory`.
    pub(super) memory: TeamMemory,
}

/// Reads, parses, substitutes and maps the team file at `path`. Errors name
/// `file_key` when the file cannot be read or parsed, else the file and the
/// key path inside it.
pub(super) fn load(
    file_key: &str,
    path: &str,
    provider: &ProviderSettings,
    tools: &[NamedTool],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<LoadedTeam, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(file_key, format!("cannot read {path}: {e}")))?;
    // Errors are keyed inside the file, then prefixed with its path.
    let in_file = |e: ConfigError| ConfigError {
        key: format!("{path}: {}", e.key),
        message: e.message,
    };
    let (tree, written) = super::env::parse(&text, lookup).map_err(|e| match e {
        super::env::LoadError::Yaml(e) => {
            ConfigError::new(file_key, format!("{path}: invalid YAML: {e}"))
        }
        super::env::LoadError::At(e) => in_file(e),
    })?;
    let raw: RawTeamFile = super::env::deserialize(tree, "team").map_err(in_file)?;
    map(raw, provider, tools)
        .map_err(|(key, message)| in_file(written.redact(ConfigError::new(key, message))))
}

/// A mapping error: the key path in the file and the message.
type MapError = (String, String);

fn map(
    raw: RawTeamFile,
    provider: &ProviderSettings,
    tools: &[NamedTool],
) -> Result<LoadedTeam, MapError> {
    if raw.agents.is_empty() {
        return Err(("agents".into(), "at least one agent is required".into()));
    }
    let team = Team {
        // Identifiers and names first: targets may come later in the list.
        members: Members::identify(&raw.agents)?,
        file_tools: map_tools(&raw.tools)?,
        traits: &raw.traits,
        max_turns: raw.config.max_turns,
        provider,
        tools,
    };
    let mut orchestrator = None;
    let mut agents = Vec::with_capacity(raw.agents.len());
    for (i, agent) in raw.agents.into_iter().enumerate() {
        if let Some(field) = orchestrator_mark(&agent) {
            if let Some(first) = orchestrator {
                return Err((
                    format!("agents[{i}].{field}"),
                    format!("agents[{first}] is the orchestrator already; a team has one"),
                ));
            }
            orchestrator = Some(i);
        }
        agents.push(team.agent(i, agent)?);
    }
    Ok(LoadedTeam {
        id: raw.id,
        agents,
        orchestrator: orchestrator.unwrap_or(0),
        memory: match raw.config.enable_memory {
            Some(true) => TeamMemory::Enabled,
            _ => TeamMemory::Off,
        },
    })
}

/// The field that marks `agent` as the orchestrator, if one does.
fn orchestrator_mark(agent: &RawFileAgent) -> Option<&'static str> {
    match (agent.is_orchestrator, agent.orchestrator) {
        (Some(true), _) => Some("is_orchestrator"),
        (_, Some(true)) => Some("orchestrator"),
        _ => None,
    }
}

/// The agents' identifiers and names (`id` then `name`), by position.
struct Members(Vec<(String, String)>);

impl Members {
    /// Each agent's `id` (default: its `name`) and `name` (default: its
    /// `id`), both unique.
    fn identify(agents: &[RawFileAgent]) -> Result<Members, MapError> {
        let mut idents: Vec<(String, String)> = Vec::with_capacity(agents.len());
        for (i, agent) in agents.iter().enumerate() {
            let key = |field: &str| format!("agents[{i}].{field}");
            let (id, name) = match (&agent.id, &agent.name) {
                (Some(id), Some(name)) => (id.clone(), name.clone()),
                (Some(id), None) => (id.clone(), id.clone()),
                (None, Some(name)) => (name.clone(), name.clone()),
                (None, None) => {
                    return Err((key("id"), "an agent needs an `id` or a `name`".into()));
                }
            };
            if id.trim().is_empty() || name.trim().is_empty() {
                return Err((key("id"), "must not be empty".into()));
            }
            if let Some(j) = idents.iter().position(|(other, _)| *other == id) {
                return Err((key("id"), format!("{id:?} is also agents[{j}]'s")));
            }
            if let Some(j) = idents.iter().position(|(_, other)| *other == name) {
                return Err((key("name"), format!("{name:?} is also agents[{j}]'s")));
            }
            idents.push((id, name));
        }
        Ok(Members(idents))
    }

    /// The agent `target` names, by id, then by name.
    fn find(&self, target: &str) -> Option<usize> {
        let idents = &self.0;
        idents
            .iter()
            .position(|(id, _)| id == target)
            .or_else(|| idents.iter().position(|(_, name)| name == target))
    }

    /// The `id` of the agent `target` names; not `from` itself.
    fn link(&self, key: &str, target: &str, from: usize) -> Result<String, MapError> {
        match self.find(target) {
            None => Err((
                key.to_owned(),
                format!("no agent with id or name {target:?} in the file"),
            )),
            Some(i) if i == from => Err((key.to_owned(), "an agent cannot name itself".into())),
            Some(i) => Ok(self.0[i].0.clone()),
        }
    }

    /// The links of agent `from`, each `(field, target, text)`, as
    /// `(target's id, text)`; a target listed twice (in one generation's
    /// list or across both) is an error at `list`.
    fn links(
        &self,
        from: usize,
        list: &str,
        entries: impl Iterator<Item = (String, String, Option<String>)>,
    ) -> Result<Vec<(String, Option<String>)>, MapError> {
        let key = |field: &str| format!("agents[{from}].{field}");
        let links = entries
            .map(|(field, target, text)| Ok((self.link(&key(&field), &target, from)?, text)))
            .collect::<Result<Vec<_>, MapError>>()?;
        for (i, (id, _)) in links.iter().enumerate() {
            if links[..i].iter().any(|(other, _)| other == id) {
                return Err((key(list), format!("{id:?} is listed twice")));
            }
        }
        Ok(links)
    }
}

/// What every agent of a file is mapped against.
struct Team<'a> {
    members: Members,
    file_tools: Vec<(String, FileEntry)>,
    traits: &'a [RawTrait],
    /// `config.max_turns`.
    max_turns: Option<u32>,
    provider: &'a ProviderSettings,
    tools: &'a [NamedTool],
}

impl Team<'_> {
    /// `agents[i]` as a runtime agent.
    fn agent(&self, i: usize, agent: RawFileAgent) -> Result<FileAgent, MapError> {
        let key = |field: &str| format!("agents[{i}].{field}");
        let instructions = self.instructions(i, agent.instructions, agent.traits)?;
        let max_rounds = agent.max_turns.or(self.max_turns).unwrap_or(10);
        if max_rounds == 0 {
            return Err((key("max_turns"), "must be greater than 0".into()));
        }
        let (id, name) = self.members.0[i].clone();
        Ok(FileAgent {
            id,
            name,
            instructions,
            model: agent
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| self.provider.model.clone()),
            max_rounds,
            tools: self.agent_tools(i, agent.tools)?,
            delegations: self.delegations(i, agent.delegations, agent.delegation)?,
            handoffs: self.handoffs(i, agent.handoffs, agent.can_transfer_to)?,
            access_level: access_level(i, agent.access_level)?,
        })
    }

    /// `instructions` (required), then those of the agent's `traits`.
    fn instructions(
        &self,
        i: usize,
        own: Option<String>,
        traits: Option<Vec<String>>,
    ) -> Result<String, MapError> {
        let key = |field: &str| format!("agents[{i}].{field}");
        let mut instructions = own
            .filter(|text| !text.trim().is_empty())
            .ok_or_else(|| (key("instructions"), "required".to_owned()))?;
        for (j, wanted) in traits.unwrap_or_default().iter().enumerate() {
            let found = self
                .traits
                .iter()
                .find(|t| t.id.as_ref().or(t.name.as_ref()) == Some(wanted))
                .ok_or_else(|| {
                    (
                        key(&format!("traits[{j}]")),
                        format!("no trait with id {wanted:?} in the file's traits"),
                    )
                })?;
            if let Some(text) = found
                .instructions
                .as_deref()
                .filter(|t| !t.trim().is_empty())
            {
                instructions.push_str("\n\n");
                instructions.push_str(text.trim());
            }
        }
        Ok(instructions)
    }

    /// `tools`: each a `tools[]` entry or the file's.
    fn agent_tools(
        &self,
        i: usize,
        wanted: Option<Vec<String>>,
    ) -> Result<Vec<FileTool>, MapError> {
        let mut agent_tools = Vec::new();
        for (j, wanted) in wanted.unwrap_or_default().iter().enumerate() {
            let key = format!("agents[{i}].tools[{j}]");
            if let Some(tool) = resolve_tool(&key, wanted, &self.file_tools, self.tools)? {
                agent_tools.push(tool);
            }
        }
        Ok(agent_tools)
    }

    /// `delegations` (new) and `delegation` (old).
    fn delegations(
        &self,
        i: usize,
        new: Option<Vec<RawDelegation>>,
        old: Option<Vec<RawOldDelegation>>,
    ) -> Result<Vec<Delegation>, MapError> {
        let new = numbered(new, |j, d| {
            let field = format!("delegations[{j}].target_agent_id");
            (field, d.target_agent_id, d.instructions)
        });
        let old = numbered(old, |j, d| {
            (format!("delegation[{j}].agent"), d.agent, d.instructions)
        });
        let links = self.members.links(i, "delegations", new.chain(old))?;
        Ok(links
            .into_iter()
            .map(|(target, instructions)| Delegation {
                target,
                instructions,
            })
            .collect())
    }

    /// `handoffs` (new) and `can_transfer_to` (old), whose transfer tools'
    /// names must be distinct.
    fn handoffs(
        &self,
        i: usize,
        new: Option<Vec<RawHandoff>>,
        old: Option<Vec<RawTransfer>>,
    ) -> Result<Vec<Handoff>, MapError> {
        let new = numbered(new, |j, h| {
            let field = format!("handoffs[{j}].target_agent_id");
            (field, h.target_agent_id, h.condition.or(h.message))
        });
        let old = numbered(old, |j, transfer| match transfer {
            RawTransfer::Name(name) => (format!("can_transfer_to[{j}]"), name, None),
            RawTransfer::Agent {
                agent,
                instructions,
            } => (format!("can_transfer_to[{j}].agent"), agent, instructions),
        });
        let links = self.members.links(i, "handoffs", new.chain(old))?;
        let names: Vec<String> = links
            .iter()
            .map(|(id, _)| self.members.0[self.members.find(id).unwrap_or(0)].1.clone())
            .collect();
        check_transfer_names(&format!("agents[{i}].handoffs"), &names)
            .map_err(|e| (e.key, e.message))?;
        Ok(links
            .into_iter()
            .map(|(target, description)| Handoff {
                target,
                description,
            })
            .collect())
    }
}

/// The entries of an agent's list of links as `(field, target, text)`.
fn numbered<T>(
    list: Option<Vec<T>>,
    entry: impl Fn(usize, T) -> (String, String, Option<String>),
) -> impl Iterator<Item = (String, String, Option<String>)> {
    let list = list.unwrap_or_default().into_iter().enumerate();
    list.map(move |(j, item)| entry(j, item))
}

/// `access_level` (our extension): `PUBLIC`, `PRIVATE` or `PASSWORD` (a
/// private member), in any case.
fn access_level(i: usize, level: Option<String>) -> Result<Option<AccessLevel>, MapError> {
    let Some(level) = level else {
        return Ok(None);
    };
    match level.to_ascii_lowercase().as_str() {
        "public" => Ok(Some(AccessLevel::Public)),
        "private" | "password" => Ok(Some(AccessLevel::Private)),
        _ => Err((
            format!("agents[{i}].access_level"),
            format!("{level:?}: expected PUBLIC, PRIVATE or PASSWORD"),
        )),
    }
}

/// A file tool entry, by the id agents name it by.
enum FileEntry {
    Mcp(McpSettings),
    /// A Gnosari built-in (`module` + `class`); `None` for the delegation
    /// tool, which agentwire provides itself from `delegations`.
    Builtin(Option<String>),
}

fn map_tools(raw: &[RawFileTool]) -> Result<Vec<(String, FileEntry)>, MapError> {
    let mut out: Vec<(String, FileEntry)> = Vec::with_capacity(raw.len());
    for (k, tool) in raw.iter().enumerate() {
        let key = |field: &str| format!("tools[{k}].{field}");
        let id = tool
            .id
            .clone()
            .or_else(|| tool.name.clone())
            .ok_or_else(|| (key("id"), "a tool needs an `id` or a `name`".to_owned()))?;
        if out.iter().any(|(other, _)| *other == id) {
            return Err((key("id"), format!("{id:?} is also an earlier tool's")));
        }
        let is_mcp = tool.url.is_some() || tool.command.is_some();
        let is_builtin = tool.module.is_some() || tool.class.is_some();
        let entry = match (is_mcp, is_builtin) {
            (true, true) => {
                return Err((
                    key("module"),
                    "a tool is either built-in (module, class) or an MCP server (url, command), not both".into(),
                ));
            }
            (false, false) => {
                return Err((
                    key("module"),
                    "a tool needs `module` and `class` (built-in) or `url` / `command` (MCP)"
                        .into(),
                ));
            }
            (false, true) => {
                let module = tool.module.clone().unwrap_or_default();
                let class = tool.class.clone().unwrap_or_default();
                let delegation = class == "DelegateAgentTool"
                    || module.ends_with(".delegation")
                    || module.ends_with(".delegate_agent");
                FileEntry::Builtin((!delegation).then(|| format!("{module}.{class}")))
            }
            (true, false) => FileEntry::Mcp(mcp_settings(&key, &id, tool)?),
        };
        out.push((id, entry));
    }
    Ok(out)
}

fn mcp_settings(
    key: &dyn Fn(&str) -> String,
    id: &str,
    tool: &RawFileTool,
) -> Result<McpSettings, MapError> {
    let connection = tool.connection_type.as_deref().map(str::to_ascii_lowercase);
    let transport = match (&tool.url, &tool.command) {
        (Some(_), Some(_)) => {
            return Err((key("url"), "give `url` or `command`, not both".into()));
        }
        (Some(url), None) => match connection.as_deref() {
            None | Some("streamable_http" | "streamable-http" | "http") => McpTransport::Http {
                url: url.clone(),
                headers: tool
                    .headers
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            },
            Some(_) => {
                // As written, not lowercased: a substituted value is hidden
                // only in the form it was given.
                let given = tool.connection_type.as_deref().unwrap_or_default();
                return Err((
                    key("connection_type"),
                    format!(
                        "{given:?} is not supported; MCP servers with a url are reached over streamable_http"
                    ),
                ));
            }
        },
        (None, Some(command)) => {
            let args = match &tool.args {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => Ok(s.clone()),
                        other => Ok(other.to_string()),
                    })
                    .collect::<Result<_, MapError>>()?,
                Some(_) => {
                    return Err((key("args"), "a stdio MCP server's args are a list".into()));
                }
            };
            McpTransport::Stdio {
                command: command.clone(),
                args,
                env: tool.env.clone().unwrap_or_default().into_iter().collect(),
            }
        }
        (None, None) => unreachable!("only called for MCP entries"),
    };
    let mut settings = McpSettings::new(id, transport);
    if let Some(seconds) = tool.timeout {
        if !(seconds > 0.0 && seconds.is_finite()) {
            return Err((key("timeout"), "seconds, greater than 0".into()));
        }
        settings.timeout = std::time::Duration::from_secs_f64(seconds);
    }
    agentwire_tools::mcp_server(settings.clone()).map_err(|e| (key("url"), e))?;
    Ok(settings)
}

/// What an agent's tool id names: a `tools[]` entry of that name first,
/// then the file's entry. `None`: the delegation built-in, provided anyway.
fn resolve_tool(
    key: &str,
    wanted: &str,
    file_tools: &[(String, FileEntry)],
    tools: &[NamedTool],
) -> Result<Option<FileTool>, MapError> {
    if tools.iter().any(|t| t.name == wanted) {
        return Ok(Some(FileTool::Config(wanted.to_owned())));
    }
    match file_tools.iter().find(|(id, _)| id == wanted) {
        Some((_, FileEntry::Mcp(settings))) => Ok(Some(FileTool::Mcp(settings.clone()))),
        Some((_, FileEntry::Builtin(None))) => Ok(None),
        Some((_, FileEntry::Builtin(Some(class)))) => Err((
            key.to_owned(),
            format!(
                "the built-in Gnosari tool {class} cannot run here; declare a tool named {wanted:?} in tools[] to stand in for it"
            ),
        )),
        None => Err((
            key.to_owned(),
            format!("no tool with id {wanted:?} in the file's tools or in tools[]"),
        )),
    }
}

/// The file's shape. Unknown keys are accepted: the format has many this
/// server does not use.
#[derive(Deserialize)]
struct RawTeamFile {
    id: Option<String>,
    #[serde(default)]
    config: RawTeamSettings,
    #[serde(default)]
    tools: Vec<RawFileTool>,
    #[serde(default)]
    traits: Vec<RawTrait>,
    #[serde(default)]
    agents: Vec<RawFileAgent>,
}

#[derive(Deserialize, Default)]
struct RawTeamSettings {
    max_turns: Option<u32>,
    enable_memory: Option<bool>,
}

#[derive(Deserialize)]
struct RawTrait {
    id: Option<String>,
    name: Option<String>,
    instructions: Option<String>,
}

#[derive(Deserialize)]
struct RawFileTool {
    id: Option<String>,
    name: Option<String>,
    module: Option<String>,
    #[serde(alias = "class_name")]
    class: Option<String>,
    /// A built-in's constructor arguments, or a stdio server's argv.
    args: Option<Value>,
    url: Option<String>,
    command: Option<String>,
    connection_type: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    env: Option<BTreeMap<String, String>>,
    /// Seconds.
    timeout: Option<f64>,
}

#[derive(Deserialize)]
struct RawFileAgent {
    id: Option<String>,
    name: Option<String>,
    instructions: Option<String>,
    model: Option<String>,
    is_orchestrator: Option<bool>,
    orchestrator: Option<bool>,
    max_turns: Option<u32>,
    tools: Option<Vec<String>>,
    traits: Option<Vec<String>>,
    delegations: Option<Vec<RawDelegation>>,
    delegation: Option<Vec<RawOldDelegation>>,
    handoffs: Option<Vec<RawHandoff>>,
    can_transfer_to: Option<Vec<RawTransfer>>,
    access_level: Option<String>,
}

#[derive(Deserialize)]
struct RawDelegation {
    target_agent_id: String,
    instructions: Option<String>,
}

#[derive(Deserialize)]
struct RawOldDelegation {
    agent: String,
    instructions: Option<String>,
}

#[derive(Deserialize)]
struct RawHandoff {
    target_agent_id: String,
    condition: Option<String>,
    message: Option<String>,
}

/// An old-generation `can_transfer_to` entry: a name, or `{agent, instructions}`.
enum RawTransfer {
    Name(String),
    Agent {
        agent: String,
        instructions: Option<String>,
    },
}

impl<'de> Deserialize<'de> for RawTransfer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RawTransfer, D::Error> {
        #[derive(Deserialize)]
        struct Entry {
            agent: String,
            instructions: Option<String>,
        }
        struct TransferVisitor;
        impl<'de> serde::de::Visitor<'de> for TransferVisitor {
            type Value = RawTransfer;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "an agent's id or name, or a mapping with `agent` (an id or name) and optional `instructions`",
                )
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<RawTransfer, E> {
                Ok(RawTransfer::Name(name.to_owned()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawTransfer, A::Error> {
                // Through the same map access, so errors inside keep their key path.
                let entry = Entry::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RawTransfer::Agent {
                    agent: entry.agent,
                    instructions: entry.instructions,
                })
            }
        }
        deserializer.deserialize_any(TransferVisitor)
    }
}

#[cfg(test)]
mod tests;

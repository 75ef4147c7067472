//! Agents and teams as the server shows them on the wire: what the engine
//! runs, and who may use it.

use std::sync::Arc;

use agentwire_core::tools::ArgumentValidator;
use agentwire_core::{AccessLevel, MemoryTier};
use agentwire_engine::Agent;
use parking_lot::Mutex;

use crate::call;

/// How an agent is shown on the wire.
pub struct AgentEntry {
    pub agent: Arc<Agent>,
    /// Show server-side tool calls and results to Omnia clients. Only the
    /// scripted demo and test handlers do: the runtime keeps server tools to
    /// itself. Gnosari clients always see server tools, as that contract says.
    pub shows_server_tools: bool,
    /// Whether callers without a credential may use the agent.
    pub access_level: AccessLevel,
    /// Argon2id PHC string: the agent's password (Gnosari password access).
    pub password_argon2: Option<String>,
    /// The memory container the agent is scoped to: a connection naming
    /// another is refused with 403.
    pub memory_facet: Option<String>,
    /// The caller tier the agent's memory tools write to; `None`: the agent
    /// has no memory tools. Shown by `/api/v1/agents`.
    pub memory_tier: Option<MemoryTier>,
    /// Announced as `connected.ai_disclosure`; `None` says nothing.
    pub requires_ai_disclosure: Option<bool>,
    /// Voice calls on the Omnia endpoint; `None`: audio frames are answered
    /// `MEDIA_NOT_ENABLED`.
    pub voice: Option<call::Voice>,
    /// The front doors besides the WebSocket that serve the agent.
    pub facades: Facades,
    /// A pack agent's pack and its latest compile; `None` for other agents.
    pub pack: Option<Arc<PackStatus>>,
}

impl AgentEntry {
    /// What `connected.ai_disclosure` says: the agent's own setting, else
    /// what its pack declared when it last compiled.
    pub fn ai_disclosure(&self) -> Option<bool> {
        self.requires_ai_disclosure
            .or_else(|| self.pack.as_ref().and_then(|p| p.report().ai_disclosure))
    }
}

/// A pack agent's pack as the agents listing (and so the console) shows
/// it, updated at every compile: at startup, and at every session open in
/// compile mode. Nothing in it is prompt text.
#[derive(Default)]
pub struct PackStatus {
    report: Mutex<PackReport>,
}

/// One compile's outcome, and the pack that last compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackReport {
    /// `at_startup` or `per_session`.
    pub compile: &'static str,
    /// The pack's `id` and `version` and the prompt the agent runs, from
    /// the latest compile that succeeded.
    pub id: Option<String>,
    pub version: Option<String>,
    pub prompt: Option<String>,
    /// What that pack declares as `requires_ai_disclosure`.
    pub ai_disclosure: Option<bool>,
    /// Compiles so far.
    pub compiles: u64,
    /// The latest compile's error; `None` when it compiled.
    pub error: Option<String>,
    /// The latest compile's warnings.
    pub warnings: Vec<String>,
}

impl PackStatus {
    pub fn new(compile: &'static str) -> PackStatus {
        PackStatus {
            report: Mutex::new(PackReport {
                compile,
                ..PackReport::default()
            }),
        }
    }

    pub fn report(&self) -> PackReport {
        self.report.lock().clone()
    }

    /// Records a compile: `outcome` changes the report.
    pub fn record(&self, outcome: impl FnOnce(&mut PackReport)) {
        let mut report = self.report.lock();
        report.compiles += 1;
        outcome(&mut report);
    }
}

/// Which request/response front doors serve an agent; `None`: that door
/// answers as if the agent did not exist.
#[derive(Default)]
pub struct Facades {
    pub a2a: Option<A2aCard>,
    pub mcp: Option<McpTool>,
    pub function: Option<FunctionSpec>,
}

/// What an agent's A2A card says of it besides its name.
pub struct A2aCard {
    pub description: String,
    pub version: String,
    /// At least one.
    pub skills: Vec<A2aSkill>,
}

pub struct A2aSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub examples: Vec<String>,
}

/// An agent as the MCP tool `ask_<name>`.
pub struct McpTool {
    pub description: String,
    /// The longest a call with a progress token goes without a
    /// `notifications/progress`: what keeps a client's request timeout
    /// from firing on a long turn.
    pub progress_interval: std::time::Duration,
}

/// An agent as a REST function: the schemas its input and output must
/// match, as written (for the OpenAPI document) and compiled.
#[derive(Default)]
pub struct FunctionSpec {
    pub input: Option<Schema>,
    pub output: Option<Schema>,
}

/// A JSON Schema, as written and compiled.
pub struct Schema {
    pub document: serde_json::Value,
    pub validator: Arc<dyn ArgumentValidator>,
}

/// A team on the Gnosari endpoints: `/ws/team/{name}` (its orchestrator
/// answers) and `/ws/team/{name}/agent/{member}`.
pub struct TeamEntry {
    pub name: String,
    /// Whether callers without a credential may use the team. A private
    /// member makes its own endpoint (and, as orchestrator, the team's)
    /// private as well.
    pub access_level: AccessLevel,
    /// Argon2id PHC string: the team's password, for both endpoints.
    pub password_argon2: Option<String>,
    /// Answers on `/ws/team/{name}`; its agent's name keys the team's sessions.
    pub orchestrator: TeamMember,
    /// Each answers on `/ws/team/{name}/agent/{id or name}`.
    pub members: Vec<TeamMember>,
}

/// One agent of a team, as an endpoint serves it.
pub struct TeamMember {
    /// Matched first in the path.
    pub id: String,
    /// Matched second in the path; the `agent_name` of its events.
    pub name: String,
    /// The member's own level, applied on top of the team's.
    pub access_level: AccessLevel,
    /// What the engine runs. Its name keys the sessions, so a session opened
    /// on one endpoint resumes on that endpoint only.
    pub agent: Arc<Agent>,
}

impl TeamEntry {
    /// The member `identifier` names: by id, then by name.
    pub fn member(&self, identifier: &str) -> Option<&TeamMember> {
        self.members
            .iter()
            .find(|m| m.id == identifier)
            .or_else(|| self.members.iter().find(|m| m.name == identifier))
    }
}

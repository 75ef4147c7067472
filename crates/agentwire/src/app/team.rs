//! Builds `teams[]` for the Gnosari team endpoints.
//!
//! Each endpoint gets its own engine agent, named `team:<team>` for
//! `/ws/team/{team}` and `team:<team>/<member id>` for a member's endpoint:
//! the name keys sessions, so a team's sessions are neither an agent's nor
//! another endpoint's. Those names cannot clash with an agent's, which has
//! no `:`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentwire_engine::Agent;
use agentwire_runtime::{Peer, Roster};
use agentwire_server::{AgentEntry, TeamEntry, TeamMember};
use anyhow::Context as _;

use super::runtime::RuntimeParts;
use crate::config::{Config, TeamConfig, TeamFile, TeamMembers, TeamMemory};

/// The defaults of `agents[]`, for the agents of team files.
const CONTEXT_TTL: Duration = Duration::from_secs(24 * 3600);
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
const CLIENT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn build(
    config: &Config,
    agents: &HashMap<String, Arc<AgentEntry>>,
    parts: &RuntimeParts,
) -> anyhow::Result<HashMap<String, Arc<TeamEntry>>> {
    config
        .teams
        .iter()
        .map(|team| {
            let entry = match &team.members {
                TeamMembers::Agents {
                    orchestrator,
                    agents: names,
                } => of_agents(team, orchestrator, names, agents)?,
                TeamMembers::File(file) => {
                    of_file(team, file, parts).with_context(|| format!("teams: {}", team.name))?
                }
            };
            Ok((team.name.clone(), Arc::new(entry)))
        })
        .collect()
}

/// The engine agent of one endpoint: `answerer`'s handler and timeouts under
/// the endpoint's session name.
fn endpoint_agent(session_name: String, answerer: &Agent) -> Arc<Agent> {
    Arc::new(Agent {
        name: session_name,
        context_ttl: answerer.context_ttl,
        ack_timeout: answerer.ack_timeout,
        client_tool_timeout: answerer.client_tool_timeout,
        handler: answerer.handler.clone(),
        session_init: None,
    })
}

fn of_agents(
    team: &TeamConfig,
    orchestrator: &str,
    names: &[String],
    agents: &HashMap<String, Arc<AgentEntry>>,
) -> anyhow::Result<TeamEntry> {
    let member = |name: &str, session_name: String| -> anyhow::Result<TeamMember> {
        let entry = agents.get(name).context("team members were validated")?;
        Ok(TeamMember {
            id: name.to_owned(),
            name: name.to_owned(),
            access_level: entry.access_level,
            agent: endpoint_agent(session_name, &entry.agent),
        })
    };
    Ok(TeamEntry {
        name: team.name.clone(),
        access_level: team.access_level,
        password_argon2: team.password_argon2.clone(),
        orchestrator: member(orchestrator, format!("team:{}", team.name))?,
        members: names
            .iter()
            .map(|name| member(name, format!("team:{}/{name}", team.name)))
            .collect::<anyhow::Result<_>>()?,
    })
}

fn of_file(team: &TeamConfig, file: &TeamFile, parts: &RuntimeParts) -> anyhow::Result<TeamEntry> {
    let roster = Roster::new();
    let mut handlers = Vec::with_capacity(file.agents.len());
    for agent in &file.agents {
        let memory_scope = match file.memory {
            TeamMemory::Enabled => Some(format!("{}/{}", team.name, agent.id)),
            TeamMemory::Off => None,
        };
        let handler = Arc::new(parts.file_agent(&file.provider, agent, &roster, memory_scope)?);
        handlers.push(handler);
    }
    roster.fill(
        file.agents
            .iter()
            .zip(&handlers)
            .map(|(agent, handler)| (agent.id.clone(), Peer::Runtime(handler.clone()))),
    );
    let member = |index: usize, session_name: String| {
        let agent = &file.agents[index];
        let answerer = Agent {
            name: agent.name.clone(),
            context_ttl: CONTEXT_TTL,
            ack_timeout: ACK_TIMEOUT,
            client_tool_timeout: CLIENT_TOOL_TIMEOUT,
            handler: handlers[index].clone(),
            session_init: None,
        };
        TeamMember {
            id: agent.id.clone(),
            name: agent.name.clone(),
            access_level: agent.access_level.unwrap_or(team.access_level),
            agent: endpoint_agent(session_name, &answerer),
        }
    };
    Ok(TeamEntry {
        name: team.name.clone(),
        access_level: team.access_level,
        password_argon2: team.password_argon2.clone(),
        orchestrator: member(file.orchestrator, format!("team:{}", team.name)),
        members: (0..file.agents.len())
            .map(|i| member(i, format!("team:{}/{}", team.name, file.agents[i].id)))
            .collect(),
    })
}

//! Who writes each agent's session summaries, and after how long.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_core::{Summarizer, SummaryPolicy};
use agentwire_handlers::ExtractiveSummarizer;
use agentwire_runtime::ModelSummarizer;
use anyhow::Context as _;

use agentwire_server::TeamEntry;

use super::runtime::RuntimeParts;
use crate::config::{
    AgentConfig, DEFAULT_SUMMARY_AFTER_IDLE, HandlerKind, TeamConfig, TeamMembers,
};

/// The policy of every agent of `agents[]`: `summarizer`'s provider when
/// set; otherwise a runtime agent's own provider, and the extractive summary
/// for the scripted agents.
pub(super) fn policies(
    agents: &[AgentConfig],
    parts: &RuntimeParts,
) -> anyhow::Result<HashMap<String, SummaryPolicy>> {
    agents
        .iter()
        .map(|agent| {
            let provider = match (&agent.summary.summarizer, &agent.runtime) {
                (Some(name), _) => Some(name),
                (None, Some(runtime)) if agent.handler == HandlerKind::Runtime => {
                    Some(&runtime.provider)
                }
                (None, _) => None,
            };
            let summarizer: Arc<dyn Summarizer> = match provider {
                Some(name) => {
                    Arc::new(ModelSummarizer::new(parts.provider(name).with_context(
                        || format!("agents: {}: summarizer provider", agent.name),
                    )?))
                }
                None => Arc::new(ExtractiveSummarizer),
            };
            let policy = SummaryPolicy {
                after_idle: agent.summary.after_idle,
                summarizer,
            };
            Ok((agent.name.clone(), policy))
        })
        .collect()
}

/// Adds the policies of the team endpoints, whose engine agents are named
/// `team:<team>` and `team:<team>/<member>`: a member of `agents[]` keeps
/// its own policy on the team's endpoints; the agents of a team file are
/// summarised by the file's provider after the default idle time.
pub(super) fn add_team_policies(
    policies: &mut HashMap<String, SummaryPolicy>,
    teams_config: &[TeamConfig],
    teams: &HashMap<String, Arc<TeamEntry>>,
    parts: &RuntimeParts,
) -> anyhow::Result<()> {
    for team in teams_config {
        let Some(entry) = teams.get(&team.name) else {
            continue;
        };
        let endpoints = std::iter::once(&entry.orchestrator).chain(&entry.members);
        match &team.members {
            TeamMembers::Agents { .. } => {
                for member in endpoints {
                    if let Some(policy) = policies.get(&member.id).cloned() {
                        policies.insert(member.agent.name.clone(), policy);
                    }
                }
            }
            TeamMembers::File(file) => {
                let provider = parts
                    .provider(&file.provider)
                    .with_context(|| format!("teams: {}: summarizer provider", team.name))?;
                let policy = SummaryPolicy {
                    after_idle: DEFAULT_SUMMARY_AFTER_IDLE,
                    summarizer: Arc::new(ModelSummarizer::new(provider)),
                };
                for member in endpoints {
                    policies.insert(member.agent.name.clone(), policy.clone());
                }
            }
        }
    }
    Ok(())
}

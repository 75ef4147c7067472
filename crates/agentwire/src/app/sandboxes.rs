//! Sandboxes: one pool from `sandboxes[]`, built once; each agent naming
//! some gets the pool's session init (a declaration checked, its instances
//! started) and its session tools (the instances' tools on every turn).

use std::sync::Arc;

use agentwire_tools::sandbox::{AgentSandboxes, Isolation, SandboxPool};
use anyhow::Context as _;

use crate::config::{AgentConfig, Config};

/// The pool, when any sandbox is configured. A sandbox without isolation
/// is logged, once, as the risk it is.
pub(super) fn pool(config: &Config) -> anyhow::Result<Option<Arc<SandboxPool>>> {
    if config.sandboxes.is_empty() {
        return Ok(None);
    }
    for sandbox in &config.sandboxes {
        if sandbox.isolation == Isolation::None {
            tracing::warn!(
                sandbox = %sandbox.name,
                "sandbox has `isolation: none`: its server runs with agentwire's own rights and sees the whole host"
            );
        }
    }
    let pool = SandboxPool::new(config.sandboxes.clone())
        .map_err(anyhow::Error::msg)
        .context("sandboxes")?;
    Ok(Some(pool))
}

/// What agent `agent` opens and offers, when it names sandboxes.
pub(super) fn for_agent(
    pool: Option<&Arc<SandboxPool>>,
    agent: &AgentConfig,
) -> Option<Arc<AgentSandboxes>> {
    if agent.sandboxes.is_empty() {
        return None;
    }
    let pool = pool?;
    Some(pool.for_agent(&agent.name, agent.sandboxes.clone(), agent.context_ttl))
}

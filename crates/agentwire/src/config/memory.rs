//! `agents[].memory`: the memory tools of a runtime agent, and the tier
//! they write to; `memory`: how long a forgotten memory is kept.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;
use agentwire_core::MemoryTier;

/// `agents[].memory` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgentMemory {
    /// Offer the model the memory tools (`memory__recall`,
    /// `memory__remember`, `memory__list`, `memory__forget`,
    /// `memory__open`). Default: `false`.
    #[serde(default)]
    enabled: bool,
    /// Whose memory the tools write and read besides the agent's own:
    /// `caller_agent` (the caller's memory with this agent) or `caller`
    /// (the caller's memory shared by every agent that chooses `caller`).
    /// Always within the connection's `memory_facet`. Default:
    /// `caller_agent`.
    tier: Option<String>,
}

/// `memory` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMemory {
    /// How long a forgotten memory stays, hidden from every read, before
    /// it is deleted for good with its history; `0s` deletes it at the
    /// next purge. Default: `30d`.
    forget_grace: Option<ConfigDuration>,
    /// How often forgotten memories past their grace are deleted (the
    /// first time at startup). Default: `1h`.
    purge_every: Option<ConfigDuration>,
}

/// `memory.forget_grace` when not configured.
pub const DEFAULT_FORGET_GRACE: Duration = Duration::from_secs(30 * 24 * 3600);
/// `memory.purge_every` when not configured.
pub const DEFAULT_PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Validated `memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    pub forget_grace: Duration,
    pub purge_every: Duration,
}

pub(super) fn validate_memory(raw: Option<RawMemory>) -> Result<MemoryConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let purge_every = raw.purge_every.map_or(DEFAULT_PURGE_EVERY, |d| d.0);
    if purge_every.is_zero() {
        return Err(ConfigError::new(
            "memory.purge_every",
            "must be greater than 0",
        ));
    }
    Ok(MemoryConfig {
        forget_grace: raw.forget_grace.map_or(DEFAULT_FORGET_GRACE, |d| d.0),
        purge_every,
    })
}

/// Validated: the tier an agent with memory writes to; `None`: memory off.
pub(super) fn validate(
    index: usize,
    raw: Option<&RawAgentMemory>,
) -> Result<Option<MemoryTier>, ConfigError> {
    let Some(raw) = raw.filter(|raw| raw.enabled) else {
        return Ok(None);
    };
    match raw.tier.as_deref() {
        None | Some("caller_agent") => Ok(Some(MemoryTier::CallerWithAgent)),
        Some("caller") => Ok(Some(MemoryTier::Caller)),
        Some(other) => Err(ConfigError::new(
            format!("agents[{index}].memory.tier"),
            format!("{other:?} is not a tier: caller_agent or caller"),
        )),
    }
}

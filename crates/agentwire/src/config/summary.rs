//! `agents[].summary_after_idle` and `agents[].summarizer`: when a session's
//! summary is written and by which model.

use std::time::Duration;

use super::ConfigError;
use super::duration::ConfigDuration;

/// The idle time after a completed turn before the summary is written.
pub const DEFAULT_SUMMARY_AFTER_IDLE: Duration = Duration::from_secs(10 * 60);

/// How an agent's sessions are summarised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryConfig {
    /// `summary_after_idle`: from the last completed turn to the summary.
    pub after_idle: Duration,
    /// `summarizer`: a name from `providers[]`. `None`: the agent's own
    /// provider for a runtime agent, the extractive summary for a scripted one.
    pub summarizer: Option<String>,
}

pub(super) fn validate(
    index: usize,
    after_idle: Option<ConfigDuration>,
    summarizer: Option<String>,
    providers: &[agentwire_providers::ProviderSettings],
) -> Result<SummaryConfig, ConfigError> {
    let key = |field: &str| format!("agents[{index}].{field}");
    let after_idle = after_idle.map_or(DEFAULT_SUMMARY_AFTER_IDLE, |d| d.0);
    if after_idle.is_zero() {
        return Err(ConfigError::new(
            key("summary_after_idle"),
            "must be greater than 0",
        ));
    }
    if let Some(name) = &summarizer
        && !providers.iter().any(|p| &p.name == name)
    {
        return Err(ConfigError::new(
            key("summarizer"),
            format!("no provider named {name:?} in providers[]"),
        ));
    }
    Ok(SummaryConfig {
        after_idle,
        summarizer,
    })
}

//! `screening`: prompt-injection screening of visitor messages.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Validated `screening`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreeningConfig {
    pub enabled: bool,
    /// The phrases screened for, as written: the configured list, or the
    /// built-in one (`agentwire_core::screening::DEFAULT_PHRASES`).
    pub phrases: Vec<String>,
}

impl Default for ScreeningConfig {
    fn default() -> ScreeningConfig {
        ScreeningConfig {
            enabled: true,
            phrases: default_phrases(),
        }
    }
}

impl ScreeningConfig {
    /// The screen the server applies, or `None` when screening is off.
    pub fn screen(&self) -> Option<agentwire_core::PromptScreen> {
        self.enabled
            .then(|| agentwire_core::PromptScreen::new(&self.phrases))
    }
}

fn default_phrases() -> Vec<String> {
    agentwire_core::screening::DEFAULT_PHRASES
        .iter()
        .map(|p| (*p).to_owned())
        .collect()
}

/// `screening`: prompt-injection screening of visitor messages on the
/// Gnosari endpoints (a match answers `message_rejected`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScreening {
    /// Whether messages are screened. Default: `true`.
    enabled: Option<bool>,
    /// The phrases screened for (case- and whitespace-insensitive, whole
    /// words); replaces the built-in list. Default: the built-in list
    /// (`DEFAULT_PHRASES` in agentwire-core's `screening.rs`).
    phrases: Option<Vec<String>>,
}

pub(super) fn validate(raw: Option<RawScreening>) -> Result<ScreeningConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ScreeningConfig::default());
    };
    let enabled = raw.enabled.unwrap_or(true);
    let Some(phrases) = raw.phrases else {
        return Ok(ScreeningConfig {
            enabled,
            phrases: default_phrases(),
        });
    };
    for (i, phrase) in phrases.iter().enumerate() {
        if agentwire_core::screening::normalise(phrase).is_empty() {
            return Err(ConfigError::new(
                format!("screening.phrases[{i}]"),
                "must not be empty",
            ));
        }
    }
    if enabled && phrases.is_empty() {
        return Err(ConfigError::new(
            "screening.phrases",
            "at least one phrase, or `enabled: false` to turn screening off",
        ));
    }
    Ok(ScreeningConfig { enabled, phrases })
}

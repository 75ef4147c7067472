//! `agents[].memory`: the memory tools of a runtime agent, and the tier
//! they write to; `memory`: how long a forgotten memory is kept, and the
//! embeddings endpoint memories are searched by meaning with.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;
use agentwire_core::MemoryTier;
use agentwire_core::memory::vectors::MAX_DIMENSIONS;
use agentwire_providers::EmbeddingsSettings;
use agentwire_runtime::memory::Retrieval;

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
    /// Ambient recall: before the agent answers, the memories that best
    /// match the user's message are added to its system prompt. Default:
    /// off (the model recalls through `memory__recall` alone).
    retrieval: Option<RawRetrieval>,
    /// The agent's own memory: facts every caller's turns may recall
    /// (whatever their facet), never the model's to change. Written at
    /// startup, each replacing the one at its place in the list before.
    /// Default: none.
    #[serde(default)]
    facts: Vec<String>,
}

/// `agents[].memory.retrieval` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetrieval {
    /// The most memories added, 1 to 20. Default: `5`.
    limit: Option<usize>,
    /// The most characters of memory text added; a memory that does not
    /// fit whole is left out. Default: `2000`.
    max_chars: Option<usize>,
}

/// A runtime agent's memory, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMemoryConfig {
    /// The caller tier its tools write to.
    pub tier: MemoryTier,
    pub retrieval: Option<Retrieval>,
    /// `facts`: the agent's own memory.
    pub facts: Vec<String>,
}

/// The longest configured fact, in bytes, as the tools'.
const MAX_FACT_BYTES: usize = 32 * 1024;

/// `memory` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMemory {
    /// How long a forgotten memory stays, hidden from every read, before
    /// it is deleted for good with its history; `0s` deletes it at the
    /// next purge. Default: `720h` (30 days).
    forget_grace: Option<ConfigDuration>,
    /// How often forgotten memories past their grace are deleted (the
    /// first time at startup). Default: `1h`.
    purge_every: Option<ConfigDuration>,
    /// How long a memory of a consent category lives, by category
    /// (`memory:identity`, `memory:preferences`, `memory:context`,
    /// `memory:location`, `memory:health`, `memory:history`): past it, no
    /// read sees it. Default: none (memories live until forgotten).
    #[serde(default)]
    category_ttl: std::collections::BTreeMap<String, ConfigDuration>,
    /// An OpenAI-compatible embeddings endpoint: memories are then kept
    /// with vectors and recalled by meaning as well as by words, and a
    /// memory that says nearly what another of its scope says supersedes
    /// it. Default: none (words alone).
    embeddings: Option<RawEmbeddings>,
}

/// `memory.embeddings` as written.
#[derive(Deserialize, Serialize, JsonSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEmbeddings {
    /// The API's base URL (`POST {base_url}/embeddings`). Default:
    /// `https://api.openai.com/v1`.
    base_url: Option<String>,
    /// The embedding model, e.g. `text-embedding-3-small`. Required.
    model: Option<String>,
    /// The API key, sent as `Authorization: Bearer`. Not with
    /// `api_key_env`. Default: none.
    api_key: Option<String>,
    /// The environment variable holding the API key (it must be set). Not
    /// with `api_key`.
    api_key_env: Option<String>,
    /// Asks the model for vectors of this length (models that can shorten
    /// theirs) and refuses any other, 1 to 8192. Default: the model's own.
    dimensions: Option<usize>,
    /// The longest an embedding request may take; past it, the memory is
    /// written or recalled by words alone. Default: `5s`.
    timeout: Option<ConfigDuration>,
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
    /// `category_ttl`, validated: each key a consent category.
    pub category_ttl: std::collections::BTreeMap<String, Duration>,
    pub embeddings: Option<EmbeddingsSettings>,
}

pub(super) fn validate_memory(
    raw: Option<RawMemory>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<MemoryConfig, ConfigError> {
    let raw = raw.unwrap_or_default();
    let purge_every = raw.purge_every.map_or(DEFAULT_PURGE_EVERY, |d| d.0);
    if purge_every.is_zero() {
        return Err(ConfigError::new(
            "memory.purge_every",
            "must be greater than 0",
        ));
    }
    let mut category_ttl = std::collections::BTreeMap::new();
    for (category, ttl) in raw.category_ttl {
        let key = format!("memory.category_ttl.{category}");
        if !agentwire_core::memory::MEMORY_CATEGORIES.contains(&category.as_str()) {
            let known = agentwire_core::memory::MEMORY_CATEGORIES.join(", ");
            return Err(ConfigError::new(key, format!("not a category: {known}")));
        }
        if ttl.0.is_zero() {
            return Err(ConfigError::new(key, "must be greater than 0"));
        }
        category_ttl.insert(category, ttl.0);
    }
    let embeddings = match raw.embeddings {
        Some(raw) => Some(validate_embeddings(raw, lookup)?),
        None => None,
    };
    Ok(MemoryConfig {
        forget_grace: raw.forget_grace.map_or(DEFAULT_FORGET_GRACE, |d| d.0),
        purge_every,
        category_ttl,
        embeddings,
    })
}

fn validate_embeddings(
    raw: RawEmbeddings,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<EmbeddingsSettings, ConfigError> {
    let key = |field: &str| format!("memory.embeddings.{field}");
    let model = raw.model.filter(|m| !m.trim().is_empty());
    let model = model.ok_or_else(|| ConfigError::new(key("model"), "required"))?;
    if raw
        .dimensions
        .is_some_and(|d| !(1..=MAX_DIMENSIONS).contains(&d))
    {
        let message = format!("must be 1 to {MAX_DIMENSIONS}");
        return Err(ConfigError::new(key("dimensions"), message));
    }
    if let Some(base_url) = &raw.base_url {
        agentwire_providers::check_base_url(base_url)
            .map_err(|e| ConfigError::new(key("base_url"), e))?;
    }
    let timeout = raw
        .timeout
        .map_or(EmbeddingsSettings::DEFAULT_TIMEOUT, |t| t.0);
    if timeout.is_zero() {
        return Err(ConfigError::new(key("timeout"), "must be greater than 0"));
    }
    Ok(EmbeddingsSettings {
        base_url: raw.base_url.unwrap_or_default(),
        model,
        api_key: super::runtime::api_key(&key, raw.api_key, raw.api_key_env, lookup)?,
        dimensions: raw.dimensions,
        timeout,
    })
}

/// Validated: an agent's memory; `None`: memory off.
pub(super) fn validate(
    index: usize,
    raw: Option<&RawAgentMemory>,
) -> Result<Option<AgentMemoryConfig>, ConfigError> {
    let Some(raw) = raw.filter(|raw| raw.enabled) else {
        return Ok(None);
    };
    let key = |field: &str| format!("agents[{index}].memory.{field}");
    let tier = match raw.tier.as_deref() {
        None | Some("caller_agent") => MemoryTier::CallerWithAgent,
        Some("caller") => MemoryTier::Caller,
        Some(other) => {
            return Err(ConfigError::new(
                key("tier"),
                format!("{other:?} is not a tier: caller_agent or caller"),
            ));
        }
    };
    let retrieval = match &raw.retrieval {
        Some(raw) => Some(validate_retrieval(raw, &key)?),
        None => None,
    };
    for (n, fact) in raw.facts.iter().enumerate() {
        if fact.trim().is_empty() || fact.len() > MAX_FACT_BYTES {
            let message = format!("must be 1 to {MAX_FACT_BYTES} bytes");
            return Err(ConfigError::new(key(&format!("facts[{n}]")), message));
        }
    }
    Ok(Some(AgentMemoryConfig {
        tier,
        retrieval,
        facts: raw.facts.clone(),
    }))
}

fn validate_retrieval(
    raw: &RawRetrieval,
    key: &dyn Fn(&str) -> String,
) -> Result<Retrieval, ConfigError> {
    let limit = raw.limit.unwrap_or(5);
    if !(1..=20).contains(&limit) {
        return Err(ConfigError::new(key("retrieval.limit"), "must be 1 to 20"));
    }
    let max_chars = raw.max_chars.unwrap_or(2000);
    if max_chars == 0 {
        return Err(ConfigError::new(
            key("retrieval.max_chars"),
            "must be greater than 0",
        ));
    }
    Ok(Retrieval { limit, max_chars })
}

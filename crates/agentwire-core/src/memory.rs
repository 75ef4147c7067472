//! Agent memory: facts an agent keeps about a caller across sessions, and
//! the [`AgentMemory`] port the stores implement.
//!
//! Whose memory a read or a write touches is a [`MemoryScope`], and only the
//! server makes one: from the authenticated caller's owner, the agent
//! serving the turn and the connection's `memory_facet` ([`TurnCaller`]).
//! Nothing a model writes in a tool's arguments can name a scope: a memory
//! id of another scope is simply not found.
//!
//! A scope is one of three tiers: the caller's memory with one agent (the
//! default), the caller's memory shared by every agent that opts into it,
//! and an agent's own memory, shared by every caller and read-only to the
//! model. The caller's tiers are further split by the facet, the container
//! (a project, a client, a matter) the connection names; no facet is a
//! container of its own, not a wildcard. The agent's own memory is the
//! agent's, not a container's: it has no facet.
//!
//! Writes never call a model. A fact about the same subject (`about_kind`
//! and `about_key`) replaces the one before it in place: same id, the old
//! version kept as history and never read again. Forgetting hides a memory
//! from every read at once; the row itself is deleted after a grace
//! ([`AgentMemory::purge_forgotten`]).

use std::collections::HashMap;

use async_trait::async_trait;

use crate::ids::SessionId;
use crate::time::Timestamp;

/// Which memories a scope holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryTier {
    /// The caller's memory with one agent: the default.
    CallerWithAgent,
    /// The caller's memory, shared by every agent that opts into it.
    Caller,
    /// The agent's own memory, shared by every caller; the model reads it
    /// but never writes it.
    Agent,
}

impl MemoryTier {
    /// Its name in stored rows, the config and tool results.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryTier::CallerWithAgent => "caller_agent",
            MemoryTier::Caller => "caller",
            MemoryTier::Agent => "agent",
        }
    }

    pub fn parse(name: &str) -> Option<MemoryTier> {
        match name {
            "caller_agent" => Some(MemoryTier::CallerWithAgent),
            "caller" => Some(MemoryTier::Caller),
            "agent" => Some(MemoryTier::Agent),
            _ => None,
        }
    }
}

/// Who is asking, as the server established it for a turn: the caller's
/// pseudonymous owner (`None`: anonymous) and the connection's
/// `memory_facet`. The agent comes from whoever serves the turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnCaller {
    pub owner: Option<String>,
    pub memory_facet: Option<String>,
}

/// Whose memories: a tier and the keys it is made of. Built by the server
/// only, from a [`TurnCaller`] and an agent's name; stores read its parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemoryScope {
    tier: MemoryTier,
    /// Empty where the tier has no such key, so each part is one string
    /// a unique index can hold.
    owner: String,
    agent: String,
    facet: String,
}

/// Why a scope could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// The caller's tiers need an identified caller.
    #[error("memory needs an identified caller")]
    Anonymous,
}

impl MemoryScope {
    /// The caller's memory in `tier`, or the agent's own (`MemoryTier::Agent`,
    /// which needs no caller).
    pub fn new(tier: MemoryTier, caller: &TurnCaller, agent: &str) -> Result<Self, ScopeError> {
        let facet = || caller.memory_facet.clone().unwrap_or_default();
        let owner = || caller.owner.clone().ok_or(ScopeError::Anonymous);
        let (owner, agent, facet) = match tier {
            MemoryTier::CallerWithAgent => (owner()?, agent.to_owned(), facet()),
            MemoryTier::Caller => (owner()?, String::new(), facet()),
            MemoryTier::Agent => (String::new(), agent.to_owned(), String::new()),
        };
        Ok(MemoryScope {
            tier,
            owner,
            agent,
            facet,
        })
    }

    /// A scope as a store read it back from its own row (or as an operator
    /// names one): the parts exactly as [`MemoryScope::owner`] and the
    /// others return them.
    pub fn from_parts(tier: MemoryTier, owner: &str, agent: &str, facet: &str) -> MemoryScope {
        MemoryScope {
            tier,
            owner: owner.to_owned(),
            agent: agent.to_owned(),
            facet: facet.to_owned(),
        }
    }

    pub fn tier(&self) -> MemoryTier {
        self.tier
    }

    /// The caller's owner; empty in the agent tier.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The agent; empty in the caller tier.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The facet; empty when the connection named none.
    pub fn facet(&self) -> &str {
        &self.facet
    }
}

/// The consent categories a memory may be filed under (Omnia's).
pub const MEMORY_CATEGORIES: [&str; 6] = [
    "memory:identity",
    "memory:preferences",
    "memory:context",
    "memory:location",
    "memory:health",
    "memory:history",
];

/// What a memory is about: a stable subject, so a later fact about it
/// replaces the earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct About {
    pub kind: String,
    pub key: String,
}

/// One remembered fact, as a store returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    pub id: String,
    pub scope: MemoryScope,
    pub fact: Fact,
    /// The session the fact was remembered in.
    pub session_id: Option<SessionId>,
    pub created_at: Timestamp,
    /// When it was last written.
    pub updated_at: Timestamp,
    pub expires_at: Option<Timestamp>,
}

/// What a memory says, as a write gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Free-form: `general` (the default), `preference`, `decision`, …
    pub kind: String,
    pub content: String,
    /// Structured data, a JSON object.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// 0 to 1.
    pub confidence: f64,
    /// One of [`MEMORY_CATEGORIES`].
    pub category: Option<String>,
    pub about: Option<About>,
    pub purpose: Option<String>,
    pub title: Option<String>,
    pub summary: Option<String>,
}

/// A memory to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// The id a new memory gets; a replacement keeps the id it replaces.
    pub id: String,
    pub scope: MemoryScope,
    pub fact: Fact,
    pub session_id: Option<SessionId>,
    pub now: Timestamp,
    pub expires_at: Option<Timestamp>,
    /// Its embedding, when the agent's memory has an embedder and it
    /// answered: kept with the row, so recall finds it by meaning and a
    /// later write that says nearly the same supersedes it.
    pub vector: Option<Vec<f32>>,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Remembered {
    Created {
        id: String,
    },
    /// Created, beside live memories of the scope that say nearly the
    /// same (cosine at least [`DUPLICATE_SIMILARITY`]), best first.
    CreatedBeside {
        id: String,
        similar: Vec<Similar>,
    },
    /// It replaced the scope's memory about the same subject, which keeps
    /// its id; the old version is kept as history, never read.
    Replaced {
        id: String,
    },
    /// It said nearly what a live memory of the scope says (cosine at
    /// least [`SUPERSEDE_SIMILARITY`]) and replaced it, as a subject does.
    Superseded {
        id: String,
        similarity: f32,
    },
}

impl Remembered {
    pub fn id(&self) -> &str {
        match self {
            Remembered::Created { id }
            | Remembered::CreatedBeside { id, .. }
            | Remembered::Replaced { id }
            | Remembered::Superseded { id, .. } => id,
        }
    }

    /// What a store's write did, by what the write's vector found (`K`: the
    /// id of a memory it resembles).
    pub fn judged(id: String, likeness: Likeness<String>) -> Remembered {
        match likeness {
            Likeness::New => Remembered::Created { id },
            Likeness::Supersedes(id, similarity) => Remembered::Superseded { id, similarity },
            Likeness::Resembles(alike) => Remembered::CreatedBeside {
                id,
                similar: alike
                    .into_iter()
                    .map(|(id, similarity)| Similar { id, similarity })
                    .collect(),
            },
        }
    }
}

/// A search of the memories of some scopes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recall<'a> {
    /// Words to look for; ranked by relevance (full text), then by recency.
    pub text: &'a str,
    /// The text's embedding: memories with vectors are ranked by
    /// similarity too, the two rankings fused.
    pub vector: Option<&'a [f32]>,
    /// Only memories of these kinds; empty: any.
    pub kinds: &'a [String],
    pub limit: usize,
    pub min_confidence: f64,
    /// Memories expired by then are left out.
    pub now: Timestamp,
}

/// A page of the memories of some scopes, newest first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Listing<'a> {
    pub kinds: &'a [String],
    pub limit: usize,
    pub offset: usize,
    pub now: Timestamp,
}

/// A page of one owner's memories, every tier they own (the caller tiers),
/// newest first: what the owners' API reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Owned<'a> {
    /// The owner: never empty.
    pub owner: &'a str,
    /// Only the memories with this agent, or in this facet (`""`: those
    /// without one).
    pub agent: Option<&'a str>,
    pub facet: Option<&'a str>,
    /// Only the memory with this id.
    pub id: Option<&'a str>,
    pub limit: usize,
    pub offset: usize,
    pub now: Timestamp,
}

/// The most memories one read returns, whatever it asks for.
pub const MAX_READ: usize = 100;

/// A store failed; the message is for the server's log (no memory text).
#[derive(Debug, thiserror::Error)]
#[error("memory store: {0}")]
pub struct MemoryError(pub String);

/// Where memories are kept: the session stores (SQLite, PostgreSQL, in
/// memory) implement it on the same database as the sessions. Every call
/// names its scopes; a memory outside them does not exist for the call.
#[async_trait]
pub trait AgentMemory: Send + Sync + 'static {
    /// Writes `memory`, replacing the scope's live memory about the same
    /// subject when it names one.
    async fn remember(&self, memory: NewMemory) -> Result<Remembered, MemoryError>;

    /// The live memories of `scopes` that match `query.text`, best first.
    async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &Recall<'_>,
    ) -> Result<Vec<Memory>, MemoryError>;

    /// The live memories of `scopes`, newest first.
    async fn list(
        &self,
        scopes: &[MemoryScope],
        page: &Listing<'_>,
    ) -> Result<Vec<Memory>, MemoryError>;

    /// One live memory of `scopes` by id.
    async fn open(
        &self,
        scopes: &[MemoryScope],
        id: &str,
        now: Timestamp,
    ) -> Result<Option<Memory>, MemoryError>;

    /// Hides the memory `id` of `scope` from every read from now on; false
    /// when `scope` has no such live memory.
    async fn forget(
        &self,
        scope: &MemoryScope,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, MemoryError>;

    /// Deletes for good what was forgotten, or expired, before `before`,
    /// and the history of what it replaced; how many memories went.
    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError>;

    /// The live memories `page.owner` owns, newest first.
    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError>;

    /// Deletes for good the memory `id` that `owner` owns, live or
    /// forgotten, with its history; false when they own no such memory.
    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError>;

    /// Deletes for good every memory `owner` owns, with their history, in
    /// one transaction, and records that it was done (an audit row with
    /// the owner, the count and `now`, never the text): a data subject's
    /// request. How many memories went.
    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError>;

    /// How many live memories (not forgotten, not expired at `now`) each
    /// tier holds, every tier named (0 when empty): what the memories
    /// gauge shows.
    async fn count_by_tier(&self, now: Timestamp) -> Result<TierCounts, MemoryError>;
}

/// Live memories by tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierCounts {
    pub caller_agent: u64,
    pub caller: u64,
    pub agent: u64,
}

impl TierCounts {
    /// Adds `n` to `tier`'s count.
    pub fn add(&mut self, tier: MemoryTier, n: u64) {
        match tier {
            MemoryTier::CallerWithAgent => self.caller_agent += n,
            MemoryTier::Caller => self.caller += n,
            MemoryTier::Agent => self.agent += n,
        }
    }

    /// Each tier and its count, in the tiers' order.
    pub fn by_tier(&self) -> [(MemoryTier, u64); 3] {
        [
            (MemoryTier::CallerWithAgent, self.caller_agent),
            (MemoryTier::Caller, self.caller),
            (MemoryTier::Agent, self.agent),
        ]
    }
}

/// Reciprocal rank fusion's constant: a list's `n`th best (from 1) scores
/// `1 / (RRF_K + n)`.
pub const RRF_K: f64 = 60.0;

/// After this long, a memory's score is halved: 30 days, in nanoseconds.
pub const RECENCY_HALF_LIFE_NANOS: f64 = 30.0 * 24.0 * 3600.0 * 1e9;

/// Ranks memories found by several searches (each list best first: full
/// text, and vectors where a store has them) into one: each memory scores
/// the sum of `1 / (RRF_K + rank)` over the lists it is in (rank from 1),
/// times `0.5 ^ (age / 30 days)` by its last write; best first (ties by
/// id), at most `limit`.
pub fn fuse(lists: Vec<Vec<Memory>>, now: Timestamp, limit: usize) -> Vec<Memory> {
    let mut scored: Vec<(f64, Memory)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for list in lists {
        for (rank, memory) in list.into_iter().enumerate() {
            let score = 1.0 / (RRF_K + rank as f64 + 1.0);
            match index.get(&memory.id) {
                Some(&at) => scored[at].0 += score,
                None => {
                    index.insert(memory.id.clone(), scored.len());
                    scored.push((score, memory));
                }
            }
        }
    }
    for (score, memory) in &mut scored {
        let age = now.0.saturating_sub(memory.updated_at.0).max(0) as f64;
        *score *= 0.5f64.powf(age / RECENCY_HALF_LIFE_NANOS);
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    scored.into_iter().take(limit).map(|(_, m)| m).collect()
}

/// The words of a recall's text, lowercased: what every store searches
/// for (each a whole word, any of them), so the stores agree on a match.
pub fn search_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.sort();
    words.dedup();
    words.truncate(MAX_SEARCH_WORDS);
    words
}

/// The most words of a recall's text searched for.
pub const MAX_SEARCH_WORDS: usize = 32;

pub mod vectors;
pub use vectors::{
    DUPLICATE_SIMILARITY, EmbedError, Embedder, Likeness, SUPERSEDE_SIMILARITY, Similar,
};

#[cfg(any(test, feature = "testing"))]
pub mod conformance;

#[cfg(test)]
mod tests;

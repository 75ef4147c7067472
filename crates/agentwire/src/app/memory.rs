//! The agents' memory store: the session store itself (SQLite, PostgreSQL
//! or memory implement [`AgentMemory`] on the sessions' database), reached
//! through a handle the agents get before it opens. The agents are built
//! first because the in-memory session store is bounded by their
//! `context_ttl`; the handle is filled once, right after the store opens,
//! before anything can serve a turn.

use std::sync::{Arc, OnceLock};

use agentwire_core::memory::Listing;
use agentwire_core::{
    About, AgentMemory, Embedder, Fact, Memory, MemoryError, MemoryScope, MemoryTier, NewMemory,
    Owned, Recall, Remembered, TierCounts, Timestamp, TurnCaller,
};
use anyhow::Context as _;
use async_trait::async_trait;

#[derive(Default)]
pub(super) struct SessionStoreMemory {
    store: OnceLock<Arc<dyn AgentMemory>>,
}

impl SessionStoreMemory {
    /// The store, once it is open: set once, at startup.
    pub(super) fn open(&self, store: Arc<dyn AgentMemory>) {
        let _ = self.store.set(store);
    }

    fn store(&self) -> Result<&dyn AgentMemory, MemoryError> {
        match self.store.get() {
            Some(store) => Ok(store.as_ref()),
            None => Err(MemoryError("the session store is not open".to_owned())),
        }
    }
}

#[async_trait]
impl AgentMemory for SessionStoreMemory {
    async fn remember(&self, memory: NewMemory) -> Result<Remembered, MemoryError> {
        self.store()?.remember(memory).await
    }

    async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &Recall<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        self.store()?.recall(scopes, query).await
    }

    async fn list(
        &self,
        scopes: &[MemoryScope],
        page: &Listing<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        self.store()?.list(scopes, page).await
    }

    async fn open(
        &self,
        scopes: &[MemoryScope],
        id: &str,
        now: Timestamp,
    ) -> Result<Option<Memory>, MemoryError> {
        self.store()?.open(scopes, id, now).await
    }

    async fn forget(
        &self,
        scope: &MemoryScope,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, MemoryError> {
        self.store()?.forget(scope, id, now).await
    }

    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError> {
        self.store()?.purge_forgotten(before).await
    }

    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError> {
        self.store()?.owned(page).await
    }

    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError> {
        self.store()?.delete_owned(owner, id).await
    }

    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError> {
        self.store()?.delete_all_owned(owner, now).await
    }

    async fn count_by_tier(&self, now: Timestamp) -> Result<TierCounts, MemoryError> {
        self.store()?.count_by_tier(now).await
    }
}

/// Writes each runtime agent's `memory.facts` into its own memory (the
/// agent tier, no owner, no facet): fact `n` replaces the fact written at
/// place `n` before (its subject is `agent_fact` `n`), and a fact past the
/// end of the list is forgotten. A store that fails is a startup error
/// naming the agent's key.
pub(super) async fn write_agent_facts(
    store: &dyn AgentMemory,
    config: &crate::config::Config,
    embedder: Option<&dyn Embedder>,
    clock: &dyn agentwire_core::Clock,
    ids: &dyn agentwire_core::IdSource,
) -> anyhow::Result<()> {
    for (index, agent) in config.agents.iter().enumerate() {
        let Some(memory) = agent.runtime.as_ref().and_then(|r| r.memory.as_ref()) else {
            continue;
        };
        let key = || format!("agents[{index}].memory.facts");
        let scope = MemoryScope::new(MemoryTier::Agent, &TurnCaller::default(), &agent.name)
            .expect("the agent tier needs no caller");
        let now = clock.now();
        let mut vectors = fact_vectors(embedder, &memory.facts, &agent.name).await;
        for (n, content) in memory.facts.iter().enumerate() {
            let fact = configured_fact(n, content);
            let new = NewMemory {
                id: ids.call_id(),
                scope: scope.clone(),
                fact,
                session_id: None,
                now,
                expires_at: None,
                vector: vectors.get_mut(n).and_then(Option::take),
            };
            let written = store.remember(new).await;
            written.with_context(|| format!("{}: cannot write fact {n}", key()))?;
        }
        forget_facts_past(store, &scope, memory.facts.len(), now)
            .await
            .with_context(key)?;
    }
    Ok(())
}

/// The embeddings of an agent's facts, one call for them all; none when
/// there is no embedder or it fails (logged: the facts are then found by
/// their words, and startup goes on).
async fn fact_vectors(
    embedder: Option<&dyn Embedder>,
    facts: &[String],
    agent: &str,
) -> Vec<Option<Vec<f32>>> {
    let (Some(embedder), false) = (embedder, facts.is_empty()) else {
        return Vec::new();
    };
    let texts: Vec<&str> = facts.iter().map(String::as_str).collect();
    match embedder.embed(&texts).await {
        Ok(vectors) => vectors.into_iter().map(Some).collect(),
        Err(error) => {
            tracing::warn!(agent, %error, "the agent's facts are kept without vectors");
            Vec::new()
        }
    }
}

/// The fact at place `n` of an agent's `memory.facts`.
fn configured_fact(n: usize, content: &str) -> Fact {
    let mut metadata = serde_json::Map::new();
    metadata.insert("provenance".to_owned(), "configuration".into());
    Fact {
        kind: "general".to_owned(),
        content: content.to_owned(),
        metadata,
        confidence: 1.0,
        category: None,
        about: Some(About {
            kind: AGENT_FACT.to_owned(),
            key: n.to_string(),
        }),
        purpose: None,
        title: None,
        summary: None,
    }
}

/// The subject kind of configured facts.
const AGENT_FACT: &str = "agent_fact";

/// Forgets the configured facts of `scope` at place `count` or later: the
/// list got shorter.
async fn forget_facts_past(
    store: &dyn AgentMemory,
    scope: &MemoryScope,
    count: usize,
    now: Timestamp,
) -> Result<(), MemoryError> {
    let scopes = std::slice::from_ref(scope);
    let mut stale = Vec::new();
    let mut offset = 0;
    loop {
        let page = Listing {
            kinds: &[],
            limit: agentwire_core::memory::MAX_READ,
            offset,
            now,
        };
        let found = store.list(scopes, &page).await?;
        let past_the_end = found.iter().filter(|m| {
            m.fact.about.as_ref().is_some_and(|about| {
                about.kind == AGENT_FACT && about.key.parse::<usize>().is_ok_and(|n| n >= count)
            })
        });
        stale.extend(past_the_end.map(|m| m.id.clone()));
        if found.len() < agentwire_core::memory::MAX_READ {
            break;
        }
        offset += agentwire_core::memory::MAX_READ;
    }
    for id in stale {
        store.forget(scope, &id, now).await?;
    }
    Ok(())
}

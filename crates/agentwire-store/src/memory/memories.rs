//! Agent memory in the in-memory store: a map behind its own lock, searched
//! by whole words as the databases' full-text indexes do.

use std::collections::HashMap;

use agentwire_core::memory::{MAX_READ, fuse, search_words};
use agentwire_core::{
    AgentMemory, Memory, MemoryError, MemoryScope, NewMemory, Recall, Remembered, Timestamp,
};
use async_trait::async_trait;

use super::MemoryStore;
use agentwire_core::memory::{Listing, Owned};

/// Every memory, live or forgotten, by id; replaced versions apart.
#[derive(Default)]
pub(super) struct Memories {
    rows: HashMap<String, Row>,
    /// Versions a later fact about the same subject replaced, by the id of
    /// the memory that replaced them; kept until that memory is purged.
    history: HashMap<String, Vec<Memory>>,
    /// Each owner's request to delete everything: (owner, count, when).
    audit: Vec<(String, u64, Timestamp)>,
}

struct Row {
    memory: Memory,
    forgotten_at: Option<Timestamp>,
}

impl Row {
    fn readable(&self, scopes: &[MemoryScope], now: Timestamp) -> bool {
        self.forgotten_at.is_none()
            && self.memory.expires_at.is_none_or(|at| at > now)
            && scopes.contains(&self.memory.scope)
    }
}

impl Memories {
    /// The ids `owner` owns, live or forgotten.
    fn ids_of(&self, owner: &str) -> Vec<String> {
        self.rows
            .values()
            .filter(|row| !owner.is_empty() && row.memory.scope.owner() == owner)
            .map(|row| row.memory.id.clone())
            .collect()
    }

    fn delete(&mut self, id: &str) {
        self.rows.remove(id);
        self.history.remove(id);
    }

    fn live_about(&self, memory: &NewMemory) -> Option<String> {
        let about = memory.fact.about.as_ref()?;
        self.rows
            .values()
            .find(|row| {
                row.forgotten_at.is_none()
                    && row.memory.scope == memory.scope
                    && row.memory.fact.about.as_ref() == Some(about)
            })
            .map(|row| row.memory.id.clone())
    }

    /// The readable memories, newest first (ties by id).
    fn readable(&self, scopes: &[MemoryScope], now: Timestamp, kinds: &[String]) -> Vec<&Memory> {
        let mut found: Vec<&Memory> = self
            .rows
            .values()
            .filter(|row| row.readable(scopes, now))
            .map(|row| &row.memory)
            .filter(|m| kinds.is_empty() || kinds.contains(&m.fact.kind))
            .collect();
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        found
    }
}

/// How many of `words` `memory` holds as whole words (content, title,
/// summary).
fn matches(memory: &Memory, words: &[String]) -> usize {
    let fact = &memory.fact;
    let texts = [
        Some(&fact.content),
        fact.title.as_ref(),
        fact.summary.as_ref(),
    ];
    let held: Vec<String> = texts
        .into_iter()
        .flatten()
        .flat_map(|text| search_words(text))
        .collect();
    words.iter().filter(|w| held.contains(w)).count()
}

#[async_trait]
impl AgentMemory for MemoryStore {
    async fn remember(&self, memory: NewMemory) -> Result<Remembered, MemoryError> {
        let mut memories = self.memories.lock();
        let replaced = memories.live_about(&memory);
        let id = replaced.clone().unwrap_or_else(|| memory.id.clone());
        let mut stored = Memory {
            id: id.clone(),
            scope: memory.scope,
            fact: memory.fact,
            session_id: memory.session_id,
            created_at: memory.now,
            updated_at: memory.now,
            expires_at: memory.expires_at,
        };
        if let Some(old) = replaced.as_ref().and_then(|id| memories.rows.remove(id)) {
            stored.created_at = old.memory.created_at;
            memories
                .history
                .entry(id.clone())
                .or_default()
                .push(old.memory);
        }
        let row = Row {
            memory: stored,
            forgotten_at: None,
        };
        memories.rows.insert(id.clone(), row);
        Ok(match replaced {
            Some(_) => Remembered::Replaced { id },
            None => Remembered::Created { id },
        })
    }

    async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &Recall<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        let limit = query.limit.min(MAX_READ);
        let words = search_words(query.text);
        let memories = self.memories.lock();
        let readable = memories.readable(scopes, query.now, query.kinds);
        let confident = readable
            .into_iter()
            .filter(|m| m.fact.confidence >= query.min_confidence);
        let mut ranked: Vec<(usize, &Memory)> = confident
            .map(|m| (matches(m, &words), m))
            .filter(|(n, _)| words.is_empty() || *n > 0)
            .collect();
        // Stable: equal matches stay newest first.
        ranked.sort_by_key(|(matched, _)| std::cmp::Reverse(*matched));
        let by_text = ranked.into_iter().map(|(_, m)| m.clone()).collect();
        Ok(fuse(vec![by_text], query.now, limit))
    }

    async fn list(
        &self,
        scopes: &[MemoryScope],
        page: &Listing<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        let memories = self.memories.lock();
        let readable = memories.readable(scopes, page.now, page.kinds);
        let page_of = readable
            .into_iter()
            .skip(page.offset)
            .take(page.limit.min(MAX_READ));
        Ok(page_of.cloned().collect())
    }

    async fn open(
        &self,
        scopes: &[MemoryScope],
        id: &str,
        now: Timestamp,
    ) -> Result<Option<Memory>, MemoryError> {
        let memories = self.memories.lock();
        let row = memories
            .rows
            .get(id)
            .filter(|row| row.readable(scopes, now));
        Ok(row.map(|row| row.memory.clone()))
    }

    async fn forget(
        &self,
        scope: &MemoryScope,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, MemoryError> {
        let mut memories = self.memories.lock();
        let row = memories.rows.get_mut(id);
        let row = row.filter(|row| row.readable(std::slice::from_ref(scope), now));
        Ok(row.map(|row| row.forgotten_at = Some(now)).is_some())
    }

    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError> {
        let mut memories = self.memories.lock();
        let gone: Vec<String> = memories
            .rows
            .values()
            .filter(|row| row.forgotten_at.is_some_and(|at| at < before))
            .map(|row| row.memory.id.clone())
            .collect();
        for id in &gone {
            memories.delete(id);
        }
        Ok(gone.len() as u64)
    }

    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError> {
        let memories = self.memories.lock();
        let mut found: Vec<&Memory> = memories
            .rows
            .values()
            .filter(|row| row.forgotten_at.is_none())
            .filter(|row| row.memory.expires_at.is_none_or(|at| at > page.now))
            .map(|row| &row.memory)
            .filter(|m| !page.owner.is_empty() && m.scope.owner() == page.owner)
            .filter(|m| page.agent.is_none_or(|agent| m.scope.agent() == agent))
            .filter(|m| page.facet.is_none_or(|facet| m.scope.facet() == facet))
            .filter(|m| page.id.is_none_or(|id| m.id == id))
            .collect();
        found.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        let page_of = found
            .into_iter()
            .skip(page.offset)
            .take(page.limit.min(MAX_READ));
        Ok(page_of.cloned().collect())
    }

    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError> {
        let mut memories = self.memories.lock();
        let owned = memories.ids_of(owner).iter().any(|own| own == id);
        if owned {
            memories.delete(id);
        }
        Ok(owned)
    }

    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError> {
        let mut memories = self.memories.lock();
        let ids = memories.ids_of(owner);
        for id in &ids {
            memories.delete(id);
        }
        let count = ids.len() as u64;
        memories.audit.push((owner.to_owned(), count, now));
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use agentwire_core::memory::conformance;

    #[tokio::test]
    async fn the_memory_store_passes_the_memory_conformance_suite() {
        conformance::all(&super::MemoryStore::new(), "mem").await;
    }
}

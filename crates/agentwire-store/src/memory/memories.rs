//! Agent memory in the in-memory store: maps behind their own lock,
//! indexed by scope and by subject, searched by whole words as the
//! databases' full-text indexes do, and by vector as they do.

use std::collections::{HashMap, HashSet};

use agentwire_core::memory::vectors::{VECTOR_CANDIDATES, likeness, nearest};
use agentwire_core::memory::{Listing, MAX_READ, Owned, fuse, search_words};
use agentwire_core::{
    About, AgentMemory, Memory, MemoryError, MemoryScope, NewMemory, Recall, Remembered,
    TierCounts, Timestamp,
};
use async_trait::async_trait;

use super::MemoryStore;

/// Every memory, live or forgotten, by id; replaced versions apart.
#[derive(Default)]
pub(super) struct Memories {
    rows: HashMap<String, Row>,
    /// The ids of each scope's memories, live or forgotten.
    by_scope: HashMap<MemoryScope, HashSet<String>>,
    /// The live memory of each scope about each subject.
    by_subject: HashMap<(MemoryScope, About), String>,
    /// Versions a later fact about the same subject replaced, by the id of
    /// the memory that replaced them; kept until that memory is purged.
    history: HashMap<String, Vec<Memory>>,
    /// Each owner's request to delete everything: (owner, count, when).
    audit: Vec<(String, u64, Timestamp)>,
}

struct Row {
    memory: Memory,
    forgotten_at: Option<Timestamp>,
    vector: Option<Vec<f32>>,
}

impl Row {
    fn live(&self, now: Timestamp) -> bool {
        self.forgotten_at.is_none() && self.memory.expires_at.is_none_or(|at| at > now)
    }
}

/// Newest first, ties by id.
fn newest_first(memories: &mut [&Memory]) {
    memories.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.id.cmp(&b.id))
    });
}

impl Memories {
    fn subject_of(memory: &Memory) -> Option<(MemoryScope, About)> {
        let about = memory.fact.about.clone()?;
        Some((memory.scope.clone(), about))
    }

    fn insert(&mut self, memory: Memory, vector: Option<Vec<f32>>) {
        if let Some(subject) = Self::subject_of(&memory) {
            self.by_subject.insert(subject, memory.id.clone());
        }
        let scope = self.by_scope.entry(memory.scope.clone()).or_default();
        scope.insert(memory.id.clone());
        let row = Row {
            memory,
            forgotten_at: None,
            vector,
        };
        self.rows.insert(row.memory.id.clone(), row);
    }

    /// Replaces the live memory `id` with `memory` (which keeps `id` and
    /// the creation time); the old version goes to the history.
    fn replace(&mut self, id: &str, mut memory: Memory, vector: Option<Vec<f32>>) {
        let row = self.rows.get_mut(id).expect("a live memory is stored");
        memory.id = id.to_owned();
        memory.created_at = row.memory.created_at;
        row.vector = vector;
        let old = std::mem::replace(&mut row.memory, memory);
        self.history.entry(id.to_owned()).or_default().push(old);
    }

    /// How a write without a subject compares with the live memories of
    /// its scope without one, by vector.
    fn likeness_of(&self, memory: &NewMemory) -> agentwire_core::Likeness<String> {
        let (None, Some(vector)) = (&memory.fact.about, memory.vector.as_deref()) else {
            return agentwire_core::Likeness::New;
        };
        let readable = self.readable(std::slice::from_ref(&memory.scope), memory.now, &[]);
        let candidates = readable
            .into_iter()
            .filter(|m| m.fact.about.is_none())
            .filter_map(|m| Some((m.id.clone(), self.rows.get(&m.id)?.vector.as_ref()?)))
            .take(VECTOR_CANDIDATES);
        likeness(nearest(vector, candidates, MAX_READ))
    }

    /// The live memories of `scopes` (of `query`'s kinds and confidence)
    /// nearest to `vector`, best first.
    fn nearest(&self, scopes: &[MemoryScope], query: &Recall<'_>, vector: &[f32]) -> Vec<Memory> {
        let readable = self.readable(scopes, query.now, query.kinds);
        let candidates = readable
            .into_iter()
            .filter(|m| m.fact.confidence >= query.min_confidence)
            .filter_map(|m| Some((&m.id, self.rows.get(&m.id)?.vector.as_ref()?)))
            .take(VECTOR_CANDIDATES);
        let found = nearest(vector, candidates, query.limit.min(MAX_READ));
        let similar = found.into_iter().filter(|(_, s)| *s > 0.0);
        similar
            .filter_map(|(id, _)| Some(self.rows.get(id)?.memory.clone()))
            .collect()
    }

    fn forget(&mut self, id: &str, now: Timestamp) {
        let Some(row) = self.rows.get_mut(id) else {
            return;
        };
        row.forgotten_at = Some(now);
        if let Some(subject) = Self::subject_of(&row.memory) {
            self.by_subject.remove(&subject);
        }
    }

    fn delete(&mut self, id: &str) {
        let Some(row) = self.rows.remove(id) else {
            return;
        };
        if row.forgotten_at.is_none()
            && let Some(subject) = Self::subject_of(&row.memory)
        {
            self.by_subject.remove(&subject);
        }
        if let Some(ids) = self.by_scope.get_mut(&row.memory.scope) {
            ids.remove(id);
            if ids.is_empty() {
                self.by_scope.remove(&row.memory.scope);
            }
        }
        self.history.remove(id);
    }

    /// The live memories of `scopes` of the `kinds` (none: any), newest
    /// first.
    fn readable(&self, scopes: &[MemoryScope], now: Timestamp, kinds: &[String]) -> Vec<&Memory> {
        let ids = scopes.iter().filter_map(|s| self.by_scope.get(s)).flatten();
        let mut found: Vec<&Memory> = ids
            .filter_map(|id| self.rows.get(id))
            .filter(|row| row.live(now))
            .map(|row| &row.memory)
            .filter(|m| kinds.is_empty() || kinds.contains(&m.fact.kind))
            .collect();
        newest_first(&mut found);
        found
    }

    /// The ids `owner` owns, live or forgotten.
    fn ids_of(&self, owner: &str) -> Vec<String> {
        let scopes = self.by_scope.iter();
        let owned = scopes.filter(|(scope, _)| !owner.is_empty() && scope.owner() == owner);
        owned.flat_map(|(_, ids)| ids.iter().cloned()).collect()
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
        let subject = memory.fact.about.clone().map(|a| (memory.scope.clone(), a));
        let replaced = subject.and_then(|s| memories.by_subject.get(&s).cloned());
        let judged = match &replaced {
            Some(_) => agentwire_core::Likeness::New,
            None => memories.likeness_of(&memory),
        };
        let stored = Memory {
            id: memory.id.clone(),
            scope: memory.scope,
            fact: memory.fact,
            session_id: memory.session_id,
            created_at: memory.now,
            updated_at: memory.now,
            expires_at: memory.expires_at,
        };
        if let Some(id) = replaced {
            memories.replace(&id, stored, memory.vector);
            return Ok(Remembered::Replaced { id });
        }
        if let agentwire_core::Likeness::Supersedes(id, _) = &judged {
            memories.replace(id, stored, memory.vector);
        } else {
            memories.insert(stored, memory.vector);
        }
        Ok(Remembered::judged(memory.id, judged))
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
        let mut lists = vec![by_text];
        if let Some(vector) = query.vector {
            lists.push(memories.nearest(scopes, query, vector));
        }
        Ok(fuse(lists, query.now, limit))
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
        let row = memories.rows.get(id);
        let row = row.filter(|row| row.live(now) && scopes.contains(&row.memory.scope));
        Ok(row.map(|row| row.memory.clone()))
    }

    async fn forget(
        &self,
        scope: &MemoryScope,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, MemoryError> {
        let mut memories = self.memories.lock();
        let row = memories.rows.get(id);
        let forgettable = row.is_some_and(|row| row.live(now) && &row.memory.scope == scope);
        if forgettable {
            memories.forget(id, now);
        }
        Ok(forgettable)
    }

    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError> {
        let mut memories = self.memories.lock();
        let gone: Vec<String> = memories
            .rows
            .values()
            .filter(|row| {
                let forgotten = row.forgotten_at.is_some_and(|at| at < before);
                forgotten || row.memory.expires_at.is_some_and(|at| at < before)
            })
            .map(|row| row.memory.id.clone())
            .collect();
        for id in &gone {
            memories.delete(id);
        }
        Ok(gone.len() as u64)
    }

    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError> {
        let memories = self.memories.lock();
        let ids = memories.ids_of(page.owner);
        let mut found: Vec<&Memory> = ids
            .iter()
            .filter_map(|id| memories.rows.get(id))
            .filter(|row| row.live(page.now))
            .map(|row| &row.memory)
            .filter(|m| page.agent.is_none_or(|agent| m.scope.agent() == agent))
            .filter(|m| page.facet.is_none_or(|facet| m.scope.facet() == facet))
            .filter(|m| page.id.is_none_or(|id| m.id == id))
            .collect();
        newest_first(&mut found);
        let page_of = found
            .into_iter()
            .skip(page.offset)
            .take(page.limit.min(MAX_READ));
        Ok(page_of.cloned().collect())
    }

    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError> {
        let mut memories = self.memories.lock();
        let owned = memories
            .rows
            .get(id)
            .is_some_and(|row| !owner.is_empty() && row.memory.scope.owner() == owner);
        if owned {
            memories.delete(id);
        }
        Ok(owned)
    }

    async fn count_by_tier(&self, now: Timestamp) -> Result<TierCounts, MemoryError> {
        let memories = self.memories.lock();
        let mut counts = TierCounts::default();
        for row in memories.rows.values().filter(|row| row.live(now)) {
            counts.add(row.memory.scope.tier(), 1);
        }
        Ok(counts)
    }

    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError> {
        let mut memories = self.memories.lock();
        let ids = memories.ids_of(owner);
        for id in &ids {
            memories.delete(id);
        }
        let count = ids.len() as u64;
        if !owner.is_empty() {
            memories.audit.push((owner.to_owned(), count, now));
        }
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

    /// 100,000 random operations over 200 callers, 5 facets and 3 agents:
    /// no read crosses a scope, nothing forgotten or deleted is read.
    #[tokio::test]
    async fn no_scope_is_crossed_in_100000_random_operations() {
        let store = super::MemoryStore::new();
        let universe = conformance::Universe::FULL;
        conformance::isolation_holds(&store, "iso", universe, 100_000, 0x5eed).await;
    }
}

//! The in-memory store (`storage.sessions: memory`): nothing survives a restart.
//!
//! Bounded: a session past its agent's `context_ttl` can never be resumed,
//! so it is dropped; and past [`MemoryLimits::max_sessions`] the least
//! recently active session is dropped first. Neither touches a session the
//! engine holds ([`SessionStore::hold_session`]: a connection or a turn has
//! it live), so only held sessions can take the store over its cap.
//! Eviction runs when a session is created and when one stops being held,
//! and costs a lookup per dropped session: sessions no one holds wait in an
//! index by last activity, one per agent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{
    Clock, SessionCursor, SessionId, SessionOverview, SessionRecord, SessionStore, SessionSummary,
    StoreError, StoredMessage, Timestamp,
};
use async_trait::async_trait;
use parking_lot::Mutex;

mod memories;

/// `storage.memory_max_sessions` when not configured.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// What the memory store keeps.
#[derive(Debug, Clone)]
pub struct MemoryLimits {
    /// The most sessions kept; a new one past it drops the least recently
    /// active session no one holds.
    pub max_sessions: usize,
    /// Each agent's `context_ttl`, by the agent name sessions record: a
    /// session idle longer can never be resumed and is dropped. A session of
    /// an agent not named here is dropped only for the cap.
    pub context_ttl: HashMap<String, Duration>,
}

impl Default for MemoryLimits {
    /// No bound at all: for tests that want every session kept.
    fn default() -> MemoryLimits {
        MemoryLimits {
            max_sessions: usize::MAX,
            context_ttl: HashMap::new(),
        }
    }
}

/// Sessions and messages in a map behind one lock. Every operation is a short
/// critical section with no IO, so the lock is held only briefly. Behaves like
/// [`SqliteStore`](crate::SqliteStore): appending to an unknown session or
/// reusing a `seq` is rejected.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// The agents' memories ([`agentwire_core::AgentMemory`]).
    memories: Mutex<memories::Memories>,
    limits: MemoryLimits,
    /// For `context_ttl`; `None` (no limits): nothing expires.
    clock: Option<Arc<dyn Clock>>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    sessions: HashMap<SessionId, StoredSession>,
    /// Stored sessions no one holds, per agent, least recently active first:
    /// the candidates for eviction.
    idle: HashMap<String, BTreeSet<(Timestamp, SessionId)>>,
    /// How many holds each held session has (stored or not yet).
    held: HashMap<SessionId, usize>,
}

#[derive(Debug)]
struct StoredSession {
    record: SessionRecord,
    messages: BTreeMap<u64, StoredMessage>,
    summary: Option<SessionSummary>,
    summary_due_at: Option<Timestamp>,
}

impl MemoryStore {
    /// A store that keeps every session: for tests.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// A store bounded by `limits`, reading the time for `context_ttl` from
    /// `clock`.
    pub fn with_limits(limits: MemoryLimits, clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore {
            state: Mutex::default(),
            memories: Mutex::default(),
            limits,
            clock: Some(clock),
        }
    }

    /// How many sessions the store holds now.
    pub fn session_count(&self) -> usize {
        self.state.lock().sessions.len()
    }

    /// Drops the sessions past their agent's `context_ttl`, then the least
    /// recently active until the store is within its cap; never a held one.
    fn evict(&self, state: &mut State) {
        let mut dropped = Vec::new();
        if let Some(clock) = &self.clock {
            let now = clock.now();
            for (agent, idle) in &mut state.idle {
                let Some(ttl) = self.limits.context_ttl.get(agent) else {
                    continue;
                };
                while let Some(oldest) = idle.first()
                    && now > oldest.0.plus(*ttl)
                {
                    dropped.extend(idle.pop_first().map(|(_, id)| id));
                }
            }
        }
        for id in &dropped {
            state.sessions.remove(id);
        }
        while state.sessions.len() > self.limits.max_sessions {
            let oldest = state
                .idle
                .values_mut()
                .filter(|idle| !idle.is_empty())
                .min_by_key(|idle| idle.first().map(|(at, _)| *at));
            let Some((_, id)) = oldest.and_then(BTreeSet::pop_first) else {
                // Every session left is held.
                break;
            };
            state.sessions.remove(&id);
            dropped.push(id);
        }
        if !dropped.is_empty() {
            tracing::debug!(sessions = dropped.len(), "memory store evicted sessions");
        }
    }
}

impl State {
    /// Takes a stored session out of the eviction index (it became held, or
    /// is about to change position or go).
    fn unindex(&mut self, id: &SessionId) {
        if let Some(session) = self.sessions.get(id) {
            let key = (session.record.last_active_at, id.clone());
            if let Some(idle) = self.idle.get_mut(&session.record.agent) {
                idle.remove(&key);
            }
        }
    }

    /// Puts a stored session no one holds into the eviction index.
    fn index(&mut self, id: &SessionId) {
        if self.held.contains_key(id) {
            return;
        }
        let Some(session) = self.sessions.get(id) else {
            return;
        };
        let key = (session.record.last_active_at, id.clone());
        match self.idle.get_mut(&session.record.agent) {
            Some(idle) => {
                idle.insert(key);
            }
            None => {
                let agent = session.record.agent.clone();
                self.idle.insert(agent, BTreeSet::from([key]));
            }
        }
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let mut state = self.state.lock();
        if state.sessions.contains_key(&record.id) {
            return Ok(());
        }
        state.sessions.insert(
            record.id.clone(),
            StoredSession {
                record: record.clone(),
                messages: BTreeMap::new(),
                summary: None,
                summary_due_at: None,
            },
        );
        state.index(&record.id);
        self.evict(&mut state);
        Ok(())
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.state.lock().sessions.get(id).map(|s| s.record.clone()))
    }

    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        let Some(first) = messages.first() else {
            return Ok(());
        };
        let mut state = self.state.lock();
        let Some(session) = state.sessions.get(&first.session_id) else {
            return Err(StoreError::Rejected(format!(
                "message {} of session {}: unknown session",
                first.seq, first.session_id
            )));
        };
        for (i, message) in messages.iter().enumerate() {
            let repeated = messages[..i].iter().any(|m| m.seq == message.seq);
            if message.session_id != first.session_id {
                return Err(StoreError::Rejected(format!(
                    "message {} of session {}: one call appends to one session",
                    message.seq, message.session_id
                )));
            }
            if repeated || session.messages.contains_key(&message.seq) {
                return Err(StoreError::Rejected(format!(
                    "message {} of session {}: seq already stored",
                    message.seq, message.session_id
                )));
            }
        }
        // Its place in the eviction index moves with its activity (a held
        // session has none).
        let held = state.held.contains_key(&first.session_id);
        if !held {
            state.unindex(&first.session_id);
        }
        if let Some(session) = state.sessions.get_mut(&first.session_id) {
            for message in messages {
                session.messages.insert(message.seq, message.clone());
                let last_active_at = &mut session.record.last_active_at;
                *last_active_at = (*last_active_at).max(message.created_at);
            }
        }
        if !held {
            state.index(&first.session_id);
        }
        Ok(())
    }

    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        Ok(self
            .state
            .lock()
            .sessions
            .get(id)
            .map(|s| s.messages.values().cloned().collect())
            .unwrap_or_default())
    }

    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let state = self.state.lock();
        let Some(session) = state.sessions.get(id) else {
            return Ok(Vec::new());
        };
        let mut recent: Vec<StoredMessage> = session
            .messages
            .values()
            .rev()
            .take(limit)
            .cloned()
            .collect();
        recent.reverse();
        Ok(recent)
    }

    async fn load_messages_after(
        &self,
        id: &SessionId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let state = self.state.lock();
        let Some(session) = state.sessions.get(id) else {
            return Ok(Vec::new());
        };
        let from = match after {
            None => 0,
            Some(seq) => match seq.checked_add(1) {
                Some(next) => next,
                None => return Ok(Vec::new()),
            },
        };
        Ok(session
            .messages
            .range(from..)
            .take(limit)
            .map(|(_, m)| m.clone())
            .collect())
    }

    fn hold_session(&self, id: &SessionId) {
        let mut state = self.state.lock();
        let holds = state.held.entry(id.clone()).or_default();
        *holds += 1;
        if *holds == 1 {
            state.unindex(id);
        }
    }

    fn release_session(&self, id: &SessionId) {
        let mut state = self.state.lock();
        let Some(holds) = state.held.get_mut(id) else {
            return;
        };
        *holds -= 1;
        if *holds == 0 {
            state.held.remove(id);
            state.index(id);
            self.evict(&mut state);
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn list_sessions(
        &self,
        owner: &str,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<Vec<SessionOverview>, StoreError> {
        let position = |r: &SessionRecord| (r.last_active_at, r.id.clone());
        let after = after.map(|c| (c.last_active_at, c.id.clone()));
        let state = self.state.lock();
        let mut found: Vec<&StoredSession> = state
            .sessions
            .values()
            .filter(|s| s.record.owner.as_deref() == Some(owner))
            .filter(|s| after.as_ref().is_none_or(|a| position(&s.record) < *a))
            .collect();
        // Newest first: descending (last_active_at, id).
        found.sort_by_key(|s| std::cmp::Reverse(position(&s.record)));
        Ok(found
            .into_iter()
            .take(limit)
            .map(|s| SessionOverview {
                record: s.record.clone(),
                summary: s.summary.clone(),
            })
            .collect())
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        let mut state = self.state.lock();
        state.unindex(id);
        Ok(state.sessions.remove(id).is_some())
    }

    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        Ok(self
            .state
            .lock()
            .sessions
            .get(id)
            .and_then(|s| s.summary.clone()))
    }

    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        match self.state.lock().sessions.get_mut(id) {
            Some(session) => {
                session.summary_due_at = Some(due);
                Ok(())
            }
            None => Err(StoreError::Rejected(format!(
                "summary schedule of session {id}: unknown session"
            ))),
        }
    }

    async fn pending_summaries(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        let mut pending: Vec<(SessionId, Timestamp)> = self
            .state
            .lock()
            .sessions
            .iter()
            .filter_map(|(id, s)| s.summary_due_at.map(|due| (id.clone(), due)))
            .collect();
        pending.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        Ok(pending)
    }

    async fn store_summary(
        &self,
        id: &SessionId,
        summary: &SessionSummary,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        if let Some(session) = self.state.lock().sessions.get_mut(id) {
            session.summary = Some(summary.clone());
            if session.summary_due_at == Some(handled_due) {
                session.summary_due_at = None;
            }
        }
        Ok(())
    }

    async fn clear_summary_due(
        &self,
        id: &SessionId,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        if let Some(session) = self.state.lock().sessions.get_mut(id)
            && session.summary_due_at == Some(handled_due)
        {
            session.summary_due_at = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;
    use crate::conformance::{conformance_tests, message, record};

    async fn make() -> (MemoryStore, ()) {
        (MemoryStore::new(), ())
    }

    conformance_tests!(make);

    /// Bounded the way the server bounds it, so the conformance suite holds
    /// for that store too.
    async fn make_bounded() -> (MemoryStore, ()) {
        let limits = MemoryLimits {
            max_sessions: 1_000,
            context_ttl: HashMap::from([("echo".to_owned(), Duration::from_secs(3600))]),
        };
        let store = MemoryStore::with_limits(limits, Arc::new(TestClock::default()));
        (store, ())
    }

    mod bounded {
        use super::*;
        conformance_tests!(make_bounded);
    }

    /// A clock the test moves.
    #[derive(Default)]
    struct TestClock(AtomicI64);

    impl Clock for TestClock {
        fn now(&self) -> Timestamp {
            Timestamp(self.0.load(Ordering::SeqCst))
        }
    }

    const SECOND: i64 = 1_000_000_000;

    fn bounded(max_sessions: usize, ttl_secs: u64) -> (MemoryStore, Arc<TestClock>) {
        let clock = Arc::new(TestClock::default());
        let limits = MemoryLimits {
            max_sessions,
            context_ttl: HashMap::from([("echo".to_owned(), Duration::from_secs(ttl_secs))]),
        };
        (MemoryStore::with_limits(limits, clock.clone()), clock)
    }

    fn sid(s: &str) -> SessionId {
        SessionId::parse(s).unwrap()
    }

    async fn stored(store: &MemoryStore, id: &str) -> bool {
        store.load_session(&sid(id)).await.unwrap().is_some()
    }

    #[tokio::test]
    async fn past_the_cap_the_least_recently_active_idle_session_goes_first() {
        let (store, _clock) = bounded(3, 3600);
        for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
            store.create_session(&record(id, None, 0)).await.unwrap();
            store
                .append_message(&message(id, 0, (i as i64 + 1) * SECOND))
                .await
                .unwrap();
        }
        // `a` was created first but is the most recently active now.
        store
            .append_message(&message("a", 1, 10 * SECOND))
            .await
            .unwrap();
        store
            .create_session(&record("d", None, 20 * SECOND))
            .await
            .unwrap();
        assert_eq!(store.session_count(), 3);
        assert!(!stored(&store, "b").await, "the least recently active goes");
        assert!(store.load_messages(&sid("b")).await.unwrap().is_empty());
        for id in ["a", "c", "d"] {
            assert!(stored(&store, id).await, "{id}");
        }
    }

    #[tokio::test]
    async fn a_held_session_is_never_evicted_and_rejoins_the_queue_when_let_go() {
        let (store, _clock) = bounded(2, 3600);
        store.create_session(&record("a", None, 1)).await.unwrap();
        store.create_session(&record("b", None, 2)).await.unwrap();
        // Held twice (a connection and a turn), released once: still held.
        store.hold_session(&sid("a"));
        store.hold_session(&sid("a"));
        store.release_session(&sid("a"));
        store.create_session(&record("c", None, 3)).await.unwrap();
        assert!(stored(&store, "a").await, "held");
        assert!(
            !stored(&store, "b").await,
            "the oldest idle one went instead"
        );
        // Held before it exists (the engine holds a session it is about to
        // create): creating it does not evict it either.
        store.hold_session(&sid("d"));
        store.hold_session(&sid("c"));
        store.create_session(&record("d", None, 0)).await.unwrap();
        assert_eq!(
            store.session_count(),
            3,
            "every session is held: over the cap"
        );
        // Let go, the store comes back within its cap, the oldest first.
        store.release_session(&sid("a"));
        assert!(!stored(&store, "a").await);
        assert_eq!(store.session_count(), 2);
        store.release_session(&sid("d"));
        store.release_session(&sid("c"));
        assert_eq!(store.session_count(), 2);
        assert!(stored(&store, "c").await && stored(&store, "d").await);
    }

    #[tokio::test]
    async fn a_session_past_its_agents_ttl_is_dropped_unless_held() {
        let (store, clock) = bounded(100, 60);
        store.create_session(&record("old", None, 0)).await.unwrap();
        store
            .create_session(&record("live", None, 0))
            .await
            .unwrap();
        let mut other_agent = record("other", None, 0);
        other_agent.agent = "unlisted".into();
        store.create_session(&other_agent).await.unwrap();
        store.hold_session(&sid("live"));
        store
            .append_message(&message("old", 0, 30 * SECOND))
            .await
            .unwrap();
        // Exactly at the ttl it can still be resumed.
        clock.0.store(90 * SECOND, Ordering::SeqCst);
        store
            .create_session(&record("new", None, 90 * SECOND))
            .await
            .unwrap();
        assert!(stored(&store, "old").await);
        clock.0.store(91 * SECOND, Ordering::SeqCst);
        store
            .create_session(&record("newer", None, 91 * SECOND))
            .await
            .unwrap();
        assert!(!stored(&store, "old").await, "past its ttl");
        assert!(stored(&store, "live").await, "held");
        assert!(stored(&store, "other").await, "its agent has no ttl here");
        // Let go long after its ttl: dropped at once.
        store.release_session(&sid("live"));
        assert!(!stored(&store, "live").await);
        assert!(stored(&store, "new").await && stored(&store, "newer").await);
    }
}

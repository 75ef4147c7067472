//! The in-memory store (`storage.sessions: memory`): nothing survives a restart.

use std::collections::{BTreeMap, HashMap};

use agentwire_core::{
    SessionCursor, SessionId, SessionOverview, SessionRecord, SessionStore, SessionSummary,
    StoreError, StoredMessage, Timestamp,
};
use async_trait::async_trait;
use parking_lot::Mutex;

/// Sessions and messages in a map behind one lock. Every operation is a short
/// critical section with no IO, so the lock is held only briefly. Behaves like
/// [`SqliteStore`](crate::SqliteStore): appending to an unknown session or
/// reusing a `seq` is rejected.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<SessionId, StoredSession>>,
}

#[derive(Debug)]
struct StoredSession {
    record: SessionRecord,
    messages: BTreeMap<u64, StoredMessage>,
    summary: Option<SessionSummary>,
    summary_due_at: Option<Timestamp>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        self.sessions
            .lock()
            .entry(record.id.clone())
            .or_insert_with(|| StoredSession {
                record: record.clone(),
                messages: BTreeMap::new(),
                summary: None,
                summary_due_at: None,
            });
        Ok(())
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.sessions.lock().get(id).map(|s| s.record.clone()))
    }

    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        let Some(first) = messages.first() else {
            return Ok(());
        };
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&first.session_id) else {
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
        for message in messages {
            session.messages.insert(message.seq, message.clone());
            let last_active_at = &mut session.record.last_active_at;
            *last_active_at = (*last_active_at).max(message.created_at);
        }
        Ok(())
    }

    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        Ok(self
            .sessions
            .lock()
            .get(id)
            .map(|s| s.messages.values().cloned().collect())
            .unwrap_or_default())
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
        let sessions = self.sessions.lock();
        let mut found: Vec<&StoredSession> = sessions
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
        Ok(self.sessions.lock().remove(id).is_some())
    }

    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        Ok(self.sessions.lock().get(id).and_then(|s| s.summary.clone()))
    }

    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        match self.sessions.lock().get_mut(id) {
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
            .sessions
            .lock()
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
        if let Some(session) = self.sessions.lock().get_mut(id) {
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
        if let Some(session) = self.sessions.lock().get_mut(id)
            && session.summary_due_at == Some(handled_due)
        {
            session.summary_due_at = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::conformance_tests;

    async fn make() -> (MemoryStore, ()) {
        (MemoryStore::new(), ())
    }

    conformance_tests!(make);
}

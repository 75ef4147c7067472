//! The in-memory store (`storage.sessions: memory`): nothing survives a restart.

use std::collections::{BTreeMap, HashMap};

use agentwire_core::{SessionId, SessionRecord, SessionStore, StoreError, StoredMessage};
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
            });
        Ok(())
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.sessions.lock().get(id).map(|s| s.record.clone()))
    }

    async fn append_message(&self, message: &StoredMessage) -> Result<(), StoreError> {
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&message.session_id) else {
            return Err(StoreError::Rejected(format!(
                "message {} of session {}: unknown session",
                message.seq, message.session_id
            )));
        };
        if session.messages.contains_key(&message.seq) {
            return Err(StoreError::Rejected(format!(
                "message {} of session {}: seq already stored",
                message.seq, message.session_id
            )));
        }
        session.messages.insert(message.seq, message.clone());
        let last_active_at = &mut session.record.last_active_at;
        *last_active_at = (*last_active_at).max(message.created_at);
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

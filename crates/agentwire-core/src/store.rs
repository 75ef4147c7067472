//! The session store port.

use async_trait::async_trait;

use crate::ids::SessionId;
use crate::session::{SessionRecord, StoredMessage};

/// Why the store could not do what was asked. Callers answer every variant the
/// same way (an internal error to the client, `/readyz` down), so the variants
/// exist for logs and metrics, not for control flow.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store unavailable: {0}")]
    Unavailable(String),
    #[error("session store rejected the write: {0}")]
    Rejected(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// Durable sessions and messages. Implementations must make a write visible to
/// every later read once its future has resolved `Ok`.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Inserts the record; an existing record with the same id is left as it is.
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError>;

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError>;

    /// Appends a message and advances the session's `last_active_at` to the
    /// message's `created_at`.
    async fn append_message(&self, message: &StoredMessage) -> Result<(), StoreError>;

    /// Every message of the session, by `seq`.
    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError>;

    /// Cheap liveness check for `/readyz`.
    async fn ping(&self) -> Result<(), StoreError>;
}

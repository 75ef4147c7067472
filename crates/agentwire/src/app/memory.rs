//! The agents' memory store: the session store itself (SQLite, PostgreSQL
//! or memory implement [`AgentMemory`] on the sessions' database), reached
//! through a handle the agents get before it opens. The agents are built
//! first because the in-memory session store is bounded by their
//! `context_ttl`; the handle is filled once, right after the store opens,
//! before anything can serve a turn.

use std::sync::{Arc, OnceLock};

use agentwire_core::memory::Listing;
use agentwire_core::{
    AgentMemory, Memory, MemoryError, MemoryScope, NewMemory, Owned, Recall, Remembered, Timestamp,
};
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
}

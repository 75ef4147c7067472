//! The session store port.

use async_trait::async_trait;

use crate::ids::SessionId;
use crate::session::{
    SessionCursor, SessionOverview, SessionRecord, SessionSummary, StoredMessage,
};
use crate::time::Timestamp;

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
    /// A fenced write ([`SessionStore::append_turn_fenced`]) came from a
    /// turn whose lease has since been granted to another: refused.
    #[error("session store refused a write from a superseded turn lease: {0}")]
    Fenced(String),
}

/// Durable sessions and messages. Implementations must make a write visible to
/// every later read once its future has resolved `Ok`.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Inserts the record; an existing record with the same id is left as it is.
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError>;

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError>;

    /// Appends messages of one session, all or none, and advances the
    /// session's `last_active_at` to the latest `created_at` among them. A
    /// turn's records go in one call: one round trip and one commit.
    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError>;

    /// A turn's end: its messages appended as
    /// [`SessionStore::append_messages`] does and, for a turn that completed
    /// on an agent whose sessions are summarised, the summary due at
    /// `summary_due` as [`SessionStore::schedule_summary`] does. A store with
    /// round trips makes it one, all or none; the default makes the two
    /// calls in turn.
    async fn append_turn(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        self.append_messages(messages).await?;
        match (summary_due, messages.first()) {
            (Some(due), Some(first)) => self.schedule_summary(&first.session_id, due).await,
            _ => Ok(()),
        }
    }

    /// [`SessionStore::append_turn`] for a turn holding its session's lease
    /// with `fence` among replicas: refused ([`StoreError::Fenced`], nothing
    /// written) once a write with a larger fence was made for the session,
    /// so a replica that lost its lease (paused past it, cut off) cannot
    /// write over its successor. A store only one process uses has no one
    /// to fence off: the default ignores the fence.
    async fn append_turn_fenced(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
        fence: crate::live::Fence,
    ) -> Result<(), StoreError> {
        let _ = fence;
        self.append_turn(messages, summary_due).await
    }

    /// Raises the session's fence to `fence` (never lowers it): from now on
    /// fenced writes with a smaller fence are refused. A replica that takes
    /// over a session from another calls it before reading the session, so
    /// whatever the other still writes afterwards is refused rather than
    /// interleaved. The default (one process) does nothing.
    async fn fence_session(
        &self,
        id: &SessionId,
        fence: crate::live::Fence,
    ) -> Result<(), StoreError> {
        let _ = (id, fence);
        Ok(())
    }

    /// Records `step`, one move of a turn's tool call, in the tool-call
    /// ledger ([`crate::ledger`]): the call's row created when it is first
    /// seen, moved on otherwise, never back from an end. With `fence`, as
    /// [`SessionStore::append_turn_fenced`] is: refused
    /// ([`StoreError::Fenced`]) once a larger fence was written for the
    /// session. The turn's end writes each call's final state again with
    /// its messages (in [`SessionStore::append_turn`]'s one write), and a
    /// fenced append settles, `denied` as interrupted, the calls still open
    /// under a smaller fence: the turn that made them lost the session. A
    /// store only one process uses has no takeover for a ledger to inform
    /// (its turns end with it, and each call and its outcome are among the
    /// messages): the default records nothing.
    async fn record_call(
        &self,
        step: &crate::ledger::CallMove<'_>,
        fence: Option<crate::live::Fence>,
    ) -> Result<(), StoreError> {
        let _ = (step, fence);
        Ok(())
    }

    /// [`SessionStore::append_messages`] of one message.
    async fn append_message(&self, message: &StoredMessage) -> Result<(), StoreError> {
        self.append_messages(std::slice::from_ref(message)).await
    }

    /// Every message of the session, by `seq`. For what needs the whole
    /// session (a summary); a turn and a page read less.
    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError>;

    /// The latest `limit` messages of the session, by `seq`: what a resumed
    /// session's next turn can see. Costs what `limit` messages cost,
    /// however long the session is.
    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// Up to `limit` messages of the session with a `seq` above `after`
    /// (from the first, when `None`), by `seq`: one page of a keyset walk.
    async fn load_messages_after(
        &self,
        id: &SessionId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// The engine holds a session while a connection or a turn has it live
    /// (and while it loads it), and lets go with
    /// [`SessionStore::release_session`]. Holds are counted: a session is
    /// held while it has had more holds than releases, whether or not it is
    /// stored yet. A store that evicts sessions must not evict a held one; a
    /// durable store evicts nothing and ignores both.
    fn hold_session(&self, _id: &SessionId) {}

    /// The end of a [`SessionStore::hold_session`].
    fn release_session(&self, _id: &SessionId) {}

    /// Cheap liveness check for `/readyz`.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Up to `limit` of `owner`'s sessions, most recently active first
    /// (`last_active_at` descending, then `id` descending), starting strictly
    /// after `after` in that order: keyset pagination, so a page costs the
    /// same however deep it is. Each comes with its summary, if written.
    async fn list_sessions(
        &self,
        owner: &str,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<Vec<SessionOverview>, StoreError>;

    /// Deletes the session, its messages, its summary and any scheduled
    /// summary. `Ok(false)` when there was no such session.
    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError>;

    /// The session's summary; `None` when none was written or the session
    /// does not exist.
    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError>;

    /// Records that the session's summary is due at `due`, replacing any
    /// earlier due time, so the schedule survives a restart. An unknown
    /// session is [`StoreError::Rejected`].
    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError>;

    /// Every session with a summary due, with its due time, earliest first.
    async fn pending_summaries(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError>;

    /// Stores `summary` (replacing the previous one) and clears the due time
    /// if it is still `handled_due`: a turn that rescheduled the summary
    /// meanwhile keeps its later due time. An unknown session is ignored (it
    /// was deleted while its summary was written).
    async fn store_summary(
        &self,
        id: &SessionId,
        summary: &SessionSummary,
        handled_due: Timestamp,
    ) -> Result<(), StoreError>;

    /// Takes the session's summary due at `due` for this process until
    /// `until` (`now` is the caller's clock): `false` when its due time has
    /// moved on, or another replica holds an unexpired claim, and the
    /// summary is not this process's to write. Storing the summary or
    /// clearing its due time ends the claim. A store only one process uses
    /// has no one to share with: the default grants every claim.
    async fn claim_summary(
        &self,
        id: &SessionId,
        due: Timestamp,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        let _ = (id, due, now, until);
        Ok(true)
    }

    /// Clears the due time if it is still `handled_due`, storing nothing
    /// (the summary could not be written).
    async fn clear_summary_due(
        &self,
        id: &SessionId,
        handled_due: Timestamp,
    ) -> Result<(), StoreError>;
}

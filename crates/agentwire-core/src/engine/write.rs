//! A session's writes. Messages join the live history at once (their `seq`
//! assigned there) and reach the store one write at a time, in `seq` order,
//! under the session's append lock; a failed write takes its messages out of
//! the live history again, so the session is as if they had never come.
//!
//! A turn's question does not get a write of its own when the turn is
//! short: it waits up to [`QUESTION_WRITE_DELAY`] for the turn's records and
//! goes in the same write (one round trip and one commit per turn instead of
//! two, the largest part of a short turn's store cost). A turn still
//! running then has its question stored alone, and so has a new session's
//! first message (its record is created with it). Either way the terminal
//! waits for everything, so `done` still means stored; what a crash can lose
//! is a question asked less than the delay before it, whose answer never
//! came.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::OwnedMutexGuard;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::records::write_span;
use super::{LiveSession, LiveState, SessionLease};
use crate::session::{StoredMessage, retained_start};
use crate::store::{SessionStore, StoreError};
use crate::time::Timestamp;

/// The longest a turn's question waits to share the turn's write.
pub(super) const QUESTION_WRITE_DELAY: Duration = Duration::from_millis(250);

/// Messages in the live history whose write has not started. It holds the
/// session's append lock: the next append waits until it is stored.
pub(super) struct PendingWrite {
    _appending: OwnedMutexGuard<()>,
    session: Arc<LiveSession>,
    store: Arc<dyn SessionStore>,
    messages: Vec<StoredMessage>,
    first_seq: u64,
    was_persisted: bool,
    fence: Option<crate::live::Fence>,
}

impl SessionLease {
    /// Puts `messages` in the live history and returns that history with
    /// their write, not started. Once stored, the history is trimmed to what
    /// the next turn's window can reach, unless a running turn still shares
    /// it (its own end trims then).
    pub(super) async fn begin_append(
        &self,
        mut messages: Vec<StoredMessage>,
    ) -> Result<(Arc<Vec<StoredMessage>>, PendingWrite), StoreError> {
        let appending = self.session.appending.clone().lock_owned().await;
        let (first_seq, was_persisted, history, fence) = {
            let mut state = self.session.state.lock();
            if state.deleted {
                return Err(StoreError::Rejected(format!(
                    "session {}: deleted",
                    self.id()
                )));
            }
            let first_seq = admit(&mut state, &mut messages);
            let was_persisted = std::mem::replace(&mut state.persisted, true);
            (
                first_seq,
                was_persisted,
                state.history.clone(),
                state.write_fence,
            )
        };
        let write = PendingWrite {
            _appending: appending,
            session: self.session.clone(),
            store: self.inner.store.clone(),
            messages,
            first_seq,
            was_persisted,
            fence,
        };
        Ok((history, write))
    }

    /// Stores `messages` (their `seq` is assigned here) and, when given, the
    /// session summary's new due time with them.
    pub(super) async fn store_messages(
        &self,
        messages: Vec<StoredMessage>,
        summary_due: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let (history, write) = self.begin_append(messages).await?;
        // Not kept across the write: a snapshot alive then keeps the history
        // from being trimmed.
        drop(history);
        write.commit(summary_due).await
    }
}

/// Gives `messages` the session's next seqs and puts them in the live
/// history; returns the first seq.
fn admit(state: &mut LiveState, messages: &mut [StoredMessage]) -> u64 {
    let first_seq = state.next_seq;
    for (message, seq) in messages.iter_mut().zip(first_seq..) {
        message.seq = seq;
    }
    state.next_seq = first_seq + messages.len() as u64;
    if let Some(last) = messages.last() {
        state.last_active_at = state.last_active_at.max(last.created_at);
    }
    Arc::make_mut(&mut state.history).extend(messages.iter().cloned());
    first_seq
}

impl PendingWrite {
    /// Adds `more` after the pending messages, in the live history now and
    /// in the store with them.
    pub(super) fn extend(&mut self, mut more: Vec<StoredMessage>) {
        admit(&mut self.session.state.lock(), &mut more);
        self.messages.append(&mut more);
    }

    /// Stores the messages (creating the session's record first if this is
    /// its first write), with the summary's due time when given.
    pub(super) async fn commit(self, summary_due: Option<Timestamp>) -> Result<(), StoreError> {
        let span = write_span(self.was_persisted, self.messages.len());
        let PendingWrite {
            _appending,
            session,
            store,
            messages,
            first_seq,
            was_persisted,
            fence,
        } = self;
        async move {
            let created = match was_persisted {
                true => Ok(()),
                false => store.create_session(&session.record).await,
            };
            let result = match (created, fence) {
                (Err(e), _) => Err(e),
                (Ok(()), Some(fence)) => {
                    store
                        .append_turn_fenced(&messages, summary_due, fence)
                        .await
                }
                (Ok(()), None) => store.append_turn(&messages, summary_due).await,
            };
            let mut state = session.state.lock();
            match &result {
                Ok(()) => {
                    if let Some(history) = Arc::get_mut(&mut state.history) {
                        let start = retained_start(history, session.window);
                        history.drain(..start);
                    }
                }
                Err(_) => {
                    tracing::Span::current().record("error.type", "store_error");
                    let history = Arc::make_mut(&mut state.history);
                    let ours = history
                        .iter()
                        .position(|m| m.seq >= first_seq)
                        .unwrap_or(history.len());
                    history.truncate(ours);
                    state.next_seq = first_seq;
                    state.persisted = was_persisted;
                }
            }
            result
        }
        .instrument(span)
        .await
    }
}

/// A turn's question, written with the turn's records when the turn ends
/// within [`QUESTION_WRITE_DELAY`], else alone once the delay is over.
pub(super) struct QuestionWrite {
    waiting: Arc<Mutex<Option<PendingWrite>>>,
    alone: JoinHandle<Option<Result<(), StoreError>>>,
}

impl QuestionWrite {
    /// A new session's first message is written at once, creating its
    /// record: from its first message on, the session exists for the
    /// sessions API (listed, deletable, refused with 409 while the turn
    /// runs).
    /// `turn` is the turn's span, the parent of the write's.
    pub(super) fn defer(write: PendingWrite, turn: tracing::Span) -> QuestionWrite {
        if !write.was_persisted {
            return QuestionWrite {
                waiting: Arc::default(),
                alone: tokio::spawn(async move { Some(write.commit(None).await) }.instrument(turn)),
            };
        }
        let waiting = Arc::new(Mutex::new(Some(write)));
        let slot = waiting.clone();
        let alone = tokio::spawn(
            async move {
                tokio::time::sleep(QUESTION_WRITE_DELAY).await;
                let write = slot.lock().take()?;
                Some(write.commit(None).await)
            }
            .instrument(turn),
        );
        QuestionWrite { waiting, alone }
    }

    /// Stores the turn's `records` (and the summary's due time): in the
    /// question's write if it has not started, else after it, and not at
    /// all if it failed.
    pub(super) async fn finish(
        self,
        lease: &SessionLease,
        records: Vec<StoredMessage>,
        summary_due: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let waiting = self.waiting.lock().take();
        if let Some(mut write) = waiting {
            self.alone.abort();
            write.extend(records);
            return write.commit(summary_due).await;
        }
        match self.alone.await {
            Ok(Some(Ok(()))) => lease.store_messages(records, summary_due).await,
            Ok(Some(Err(e))) => Err(e),
            // Only this function takes it otherwise.
            Ok(None) => Err(StoreError::Unavailable(
                "the question's write was taken twice".to_owned(),
            )),
            Err(e) => Err(StoreError::Unavailable(format!(
                "the question's write task ended: {e}"
            ))),
        }
    }
}

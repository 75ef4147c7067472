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
//!
//! A pending write holds no messages of its own: they are in the live
//! history, held there once, and the write reads them from it. A large
//! message is copied enough on its way to the store (the turn's input, the
//! store's row, the database's own) without a copy here beside the
//! history's.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::records::write_span;
use super::{LiveSession, LiveState, SessionLease};
use agentwire_core::session::{StoredMessage, retained_start};
use agentwire_core::store::{SessionStore, StoreError};
use agentwire_core::time::Timestamp;

/// Places a trimmed live history keeps free besides its messages: a turn
/// adds its question and reply (and a few tool records), and a trim takes
/// as many out again.
const HISTORY_SPARE: usize = 8;

/// The longest a turn's question waits to share the turn's write.
pub(super) const QUESTION_WRITE_DELAY: Duration = Duration::from_millis(250);

/// How long a write whose outcome is unknown (the store timed out, perhaps
/// after committing) is looked for in the store before it counts as failed.
/// Short: a store that is down fails every turn this much later too.
const READ_BACK_FOR: Duration = Duration::from_millis(2500);

/// How long after a failed read-back the next is tried.
const READ_BACK_RETRY: Duration = Duration::from_millis(250);

/// Messages in the live history whose write has not started. It holds the
/// session's append lock: the next append waits until it is stored.
pub(super) struct PendingWrite {
    _appending: OwnedMutexGuard<()>,
    session: Arc<LiveSession>,
    store: Arc<dyn SessionStore>,
    /// The write's messages: the live history's `count` from `first_seq`
    /// on. Nothing takes them out before the write: only a write trims
    /// the history, and every other write waits for the append lock held
    /// here.
    first_seq: u64,
    count: usize,
    was_persisted: bool,
    fence: Option<agentwire_core::live::Fence>,
}

impl SessionLease {
    /// Puts `messages` in the live history and returns that history with
    /// their write, not started. Once stored, the history is trimmed to what
    /// the next turn's window can reach, unless a running turn still shares
    /// it (its own end trims then).
    pub(super) async fn begin_append(
        &self,
        messages: Vec<StoredMessage>,
    ) -> Result<(Arc<Vec<StoredMessage>>, PendingWrite), StoreError> {
        let count = messages.len();
        let appending = self.session.appending.clone().lock_owned().await;
        let (first_seq, was_persisted, history, fence) = {
            let mut state = self.session.state.lock();
            if state.deleted {
                return Err(StoreError::Rejected(format!(
                    "session {}: deleted",
                    self.id()
                )));
            }
            let first_seq = admit(&mut state, messages);
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
            first_seq,
            count,
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
        self.store_messages_then(messages, summary_due, Last::Leave)
            .await
            .map(drop)
    }

    /// [`SessionLease::store_messages`], giving back the last message once
    /// stored ([`PendingWrite::commit_giving_back_last`]).
    pub(super) async fn store_messages_giving_back_last(
        &self,
        messages: Vec<StoredMessage>,
        summary_due: Option<Timestamp>,
    ) -> Result<Option<StoredMessage>, StoreError> {
        self.store_messages_then(messages, summary_due, Last::GiveBack)
            .await
    }

    async fn store_messages_then(
        &self,
        messages: Vec<StoredMessage>,
        summary_due: Option<Timestamp>,
        last: Last,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let (history, write) = self.begin_append(messages).await?;
        // Not kept across the write: a snapshot alive then keeps the history
        // from being trimmed.
        drop(history);
        write.write(summary_due, last).await
    }
}

/// Whether a write gives its last message back once stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Leave,
    GiveBack,
}

/// Gives `messages` the session's next seqs and moves them into the live
/// history; returns the first seq.
fn admit(state: &mut LiveState, mut messages: Vec<StoredMessage>) -> u64 {
    let first_seq = state.next_seq;
    for (message, seq) in messages.iter_mut().zip(first_seq..) {
        message.seq = seq;
    }
    state.next_seq = first_seq + messages.len() as u64;
    if let Some(last) = messages.last() {
        state.last_active_at = state.last_active_at.max(last.created_at);
    }
    Arc::make_mut(&mut state.history).append(&mut messages);
    first_seq
}

/// The `count` messages of `history` from `first_seq` on.
fn pending(history: &[StoredMessage], first_seq: u64, count: usize) -> &[StoredMessage] {
    let start = history
        .iter()
        .position(|m| m.seq >= first_seq)
        .unwrap_or(history.len());
    &history[start..history.len().min(start + count)]
}

impl PendingWrite {
    /// Adds `more` after the pending messages, in the live history now and
    /// in the store with them.
    pub(super) fn extend(&mut self, more: Vec<StoredMessage>) {
        self.count += more.len();
        admit(&mut self.session.state.lock(), more);
    }

    /// Stores the messages (creating the session's record first if this is
    /// its first write), with the summary's due time when given.
    pub(super) async fn commit(self, summary_due: Option<Timestamp>) -> Result<(), StoreError> {
        self.write(summary_due, Last::Leave).await.map(drop)
    }

    /// [`PendingWrite::commit`], and the last message back once it is
    /// stored: moved out of the history if the trim let it go, else a copy
    /// of the history's. Taken after the store's write, not before, so a
    /// large reply is not copied while the store holds copies of its own.
    pub(super) async fn commit_giving_back_last(
        self,
        summary_due: Option<Timestamp>,
    ) -> Result<Option<StoredMessage>, StoreError> {
        self.write(summary_due, Last::GiveBack).await
    }

    async fn write(
        self,
        summary_due: Option<Timestamp>,
        last: Last,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let span = write_span(self.was_persisted, self.count);
        let PendingWrite {
            _appending,
            session,
            store,
            first_seq,
            count,
            was_persisted,
            fence,
        } = self;
        async move {
            let created = match was_persisted {
                true => Ok(()),
                false => store.create_session(&session.record_to_create()).await,
            };
            let result = match created {
                Err(e) => Err(e),
                Ok(()) => {
                    // Dropped before the trim below, which it would stop.
                    let history = session.state.lock().history.clone();
                    let messages = pending(&history, first_seq, count);
                    let written = match fence {
                        Some(fence) => store.append_turn_fenced(messages, summary_due, fence).await,
                        None => store.append_turn(messages, summary_due).await,
                    };
                    match written {
                        Err(e @ StoreError::Unavailable(_)) => {
                            read_back(&*store, messages, e).await
                        }
                        written => written,
                    }
                }
            };
            let mut state = session.state.lock();
            match result {
                Ok(()) => {
                    let last_seq =
                        (last == Last::GiveBack && count > 0).then(|| first_seq + count as u64 - 1);
                    Ok(trim(&mut state, session.window, last_seq))
                }
                Err(e) => {
                    tracing::Span::current().record("error.type", "store_error");
                    let history = Arc::make_mut(&mut state.history);
                    let ours = history
                        .iter()
                        .position(|m| m.seq >= first_seq)
                        .unwrap_or(history.len());
                    history.truncate(ours);
                    state.next_seq = first_seq;
                    state.persisted = was_persisted;
                    // A timeout may have come after the commit.
                    if matches!(e, StoreError::Unavailable(_)) {
                        state.reread_window = true;
                    }
                    Err(e)
                }
            }
        }
        .instrument(span)
        .await
    }
}

/// A write that failed with `error` (a timeout, say) may have committed all
/// the same: the store is asked for `messages` for up to [`READ_BACK_FOR`],
/// and the write succeeded if it holds them as written. Otherwise (or the
/// store still cannot answer) it failed with `error`: a client told its
/// turn failed must not find its answer stored.
async fn read_back(
    store: &dyn SessionStore,
    messages: &[StoredMessage],
    error: StoreError,
) -> Result<(), StoreError> {
    let Some(first) = messages.first() else {
        return Err(error);
    };
    let deadline = tokio::time::Instant::now() + READ_BACK_FOR;
    loop {
        let after = first.seq.checked_sub(1);
        let stored = store
            .load_messages_after(&first.session_id, after, messages.len())
            .await;
        match stored {
            Ok(stored) if stored == messages => {
                tracing::info!(session = %first.session_id, "a write reported failed was stored");
                return Ok(());
            }
            Ok(_) => return Err(error),
            Err(_) if tokio::time::Instant::now() + READ_BACK_RETRY < deadline => {
                tokio::time::sleep(READ_BACK_RETRY).await;
            }
            Err(_) => return Err(error),
        }
    }
}

/// Trims the live history to what the next turn's window can reach, unless
/// a running turn still shares it (its own end trims then); gives back the
/// message `give_back` names, moved out if the trim let it go.
fn trim(state: &mut LiveState, window: usize, give_back: Option<u64>) -> Option<StoredMessage> {
    let mut given = None;
    if let Some(history) = Arc::get_mut(&mut state.history) {
        let start = retained_start(history, window);
        given = history.drain(..start).find(|m| Some(m.seq) == give_back);
        // Growth doubles the capacity, and a full window then keeps up to
        // twice its messages' room for good; a few spare places are enough
        // for the next turn's question and reply.
        history.shrink_to(history.len() + HISTORY_SPARE);
    }
    let seq = give_back?;
    given.or_else(|| state.history.iter().find(|m| m.seq == seq).cloned())
}

/// A turn's question, written with the turn's records when the turn ends
/// within [`QUESTION_WRITE_DELAY`], else alone once the delay is over or
/// the turn asks for it sooner ([`QuestionFlush`]).
pub(super) struct QuestionWrite {
    waiting: Arc<Mutex<Option<PendingWrite>>>,
    alone: JoinHandle<Option<Result<(), StoreError>>>,
    now: Arc<Notify>,
    appending: Arc<tokio::sync::Mutex<()>>,
}

/// Has a turn's question written now rather than with the turn's end: a
/// tool call's ledger row names its turn by the question, which must be in
/// the store first.
pub(super) struct QuestionFlush {
    now: Arc<Notify>,
    appending: Arc<tokio::sync::Mutex<()>>,
}

impl QuestionFlush {
    /// Starts the question's write if it waits, and returns once it is
    /// over (stored or failed: the turn's end reports a failure).
    pub(super) async fn flush(&self) {
        self.now.notify_one();
        // The question's write holds the append lock from its admission
        // to its end, so this waits for the write the notice started.
        drop(self.appending.lock().await);
    }
}

impl QuestionWrite {
    /// A new session's first message is written at once, creating its
    /// record: from its first message on, the session exists for the
    /// sessions API (listed, deletable, refused with 409 while the turn
    /// runs).
    /// `turn` is the turn's span, the parent of the write's.
    pub(super) fn defer(write: PendingWrite, turn: tracing::Span) -> QuestionWrite {
        let now = Arc::new(Notify::new());
        let appending = write.session.appending.clone();
        if !write.was_persisted {
            return QuestionWrite {
                waiting: Arc::default(),
                alone: tokio::spawn(async move { Some(write.commit(None).await) }.instrument(turn)),
                now,
                appending,
            };
        }
        let waiting = Arc::new(Mutex::new(Some(write)));
        let slot = waiting.clone();
        let asked = now.clone();
        let alone = tokio::spawn(
            async move {
                tokio::select! {
                    () = tokio::time::sleep(QUESTION_WRITE_DELAY) => {}
                    () = asked.notified() => {}
                }
                let write = slot.lock().take()?;
                // Boxed: most turns end within the delay and take the
                // write with them, so the task, live through every turn,
                // carries a pointer instead of the write's whole state.
                Some(Box::pin(write.commit(None)).await)
            }
            .instrument(turn),
        );
        QuestionWrite {
            waiting,
            alone,
            now,
            appending,
        }
    }

    /// What has the question written at once.
    pub(super) fn flush_handle(&self) -> QuestionFlush {
        QuestionFlush {
            now: self.now.clone(),
            appending: self.appending.clone(),
        }
    }

    /// Stores the turn's `records` (and the summary's due time): in the
    /// question's write if it has not started, else after it, and not at
    /// all if it failed. Gives the last record back once stored
    /// ([`PendingWrite::commit_giving_back_last`]).
    pub(super) async fn finish(
        self,
        lease: &SessionLease,
        records: Vec<StoredMessage>,
        summary_due: Option<Timestamp>,
    ) -> Result<Option<StoredMessage>, StoreError> {
        let waiting = self.waiting.lock().take();
        if let Some(mut write) = waiting {
            self.alone.abort();
            write.extend(records);
            return write.commit_giving_back_last(summary_due).await;
        }
        match self.alone.await {
            Ok(Some(Ok(()))) => {
                lease
                    .store_messages_giving_back_last(records, summary_due)
                    .await
            }
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

#[cfg(test)]
mod tests {
    use agentwire_core::content::Metadata;
    use agentwire_core::ids::SessionId;
    use agentwire_core::session::MessageBody;

    use super::*;

    fn message(seq: u64, body: MessageBody) -> StoredMessage {
        let session = SessionId::parse("s").expect("a session id");
        let mut message = crate::record(&session, body, Metadata::new(), Timestamp(0));
        message.seq = seq;
        message
    }

    fn turn(seq: u64) -> [StoredMessage; 2] {
        let text = |t: &str| t.to_owned();
        [
            message(
                seq,
                MessageBody::User {
                    text: text("q"),
                    parts: Vec::new(),
                    attachment: None,
                },
            ),
            message(
                seq + 1,
                MessageBody::Reply {
                    text: text("a"),
                    parts: Vec::new(),
                    end: Default::default(),
                },
            ),
        ]
    }

    #[test]
    fn a_trimmed_window_keeps_a_few_spare_places_not_its_growth() {
        let window = 100;
        let mut state = LiveState::unstored(Timestamp(0));
        for seq in (0..400).step_by(2) {
            admit(&mut state, turn(seq).to_vec());
            trim(&mut state, window, None);
            let history = &state.history;
            assert!(history.len() <= window, "{}", history.len());
            assert!(
                history.capacity() <= history.len() + HISTORY_SPARE,
                "{} places for {} messages",
                history.capacity(),
                history.len()
            );
        }
        assert!(state.history.first().is_some_and(|m| m.seq >= 300));
    }
}

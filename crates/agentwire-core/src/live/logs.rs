//! The turn log the replicas share ([`SharedLogs`]), and the control bus
//! between them.
//!
//! A session's turn runs on the replica holding its lease; its connections
//! may be anywhere. So the replica running a turn publishes the turn's log
//! entries, in batches, to the shared log, and a replica with a client on
//! the session mirrors them into its own [`crate::log::SessionLog`]: the
//! client reads them there exactly as it would on the running replica, at
//! the same `(epoch, seq)` positions. The other way, a replica forwards what
//! its clients say to the running turn (a cancel, a client tool's answer)
//! over the control bus to the replica holding the lease.
//!
//! Batches are consecutive entries of one turn; a turn's `TurnStarted`
//! always opens a batch, so a reader can find where the turn holding any
//! entry began. Appends are fenced: only the holder of the session's lease,
//! with its fence, appends, and a turn's terminal batch gives the lease up in
//! the same step, so whoever sees the terminal finds the session free.
//!
//! How an adapter stores entries and carries controls is its own: the
//! types here know no wire format (`agentwire-live` writes them as JSON
//! from mirror structs of its own).

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::{Fence, LiveError};
use crate::ids::SessionId;
use crate::log::{Epoch, LogEntry, TurnId};
use crate::tools::ClientAnswer;

/// The most entries one batch carries.
pub const MAX_BATCH: usize = 64;

/// Where a session's shared log stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedHead {
    pub epoch: Epoch,
    /// The seq of the latest entry; 0 before the first.
    pub head: u64,
    /// The turn that has started and not ended, as far as the log knows:
    /// it may run on another replica, or be an orphan of a dead one.
    pub running: Option<TurnId>,
}

/// Entries read from a shared log, oldest first, and where it stood.
#[derive(Debug, Clone, PartialEq)]
pub struct LogPage {
    pub head: SharedHead,
    pub entries: Vec<LogEntry>,
}

/// One batch for [`SharedLogs::append`].
#[derive(Clone, Copy)]
pub struct Append<'a> {
    /// The lease the appending turn holds.
    pub fence: Fence,
    /// The epoch of the appending replica's log. A shared log of another
    /// epoch (its past lost: Redis restarted) is replaced: the producer's
    /// log is the one its clients read.
    pub epoch: Epoch,
    /// Consecutive entries of one turn, from the shared head + 1 (entries
    /// the shared log has already are skipped, so a retry is harmless).
    pub entries: &'a [LogEntry],
    /// Gives the lease up with this batch: it holds the turn's terminal.
    pub release: bool,
}

/// What [`SharedLogs::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    Done,
    /// The lease is no longer held with that fence: nothing was appended,
    /// and the turn must stop.
    Fenced,
}

/// What a replica tells the one running a session's turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Cancel the running turn if it is still `turn`.
    Cancel { turn: TurnId },
    /// A client's answer to a pending client tool call of the running turn.
    Answer {
        call_id: String,
        answer: ClientAnswer,
    },
}

/// The turn logs and the control bus the replicas of a deployment share.
#[async_trait]
pub trait SharedLogs: Send + Sync + 'static {
    /// Where the session's shared log stands; a log that does not exist yet
    /// (or was lost) is created empty with the `proposed` epoch.
    async fn open(&self, session: &SessionId, proposed: Epoch) -> Result<SharedHead, LiveError>;

    /// Appends a batch under the session's lease.
    async fn append(&self, session: &SessionId, batch: Append<'_>) -> Result<Appended, LiveError>;

    /// The entries after `after` (some: a page), at once.
    async fn read_after(&self, session: &SessionId, after: u64) -> Result<LogPage, LiveError>;

    /// The entries from the `TurnStarted` of the turn that holds entry
    /// `seq` on; empty when the log no longer holds that entry.
    async fn read_turn_of(&self, session: &SessionId, seq: u64) -> Result<LogPage, LiveError>;

    /// A reader that waits for new entries of one session: what a replica
    /// mirroring a turn that runs elsewhere keeps while it does.
    async fn follow(&self, session: &SessionId) -> Result<Box<dyn LogFollower>, LiveError>;

    /// Sends `control` to the replica holding the session's lease; `false`
    /// when nobody holds it. Once sent, a control reaches that replica's
    /// [`SharedLogs::take_controls`] at least once while it holds the
    /// lease, even if it is cut off from the shared state when it is sent
    /// (it is handed over with the next renewal that gets through); the
    /// engine's handling of both kinds is idempotent.
    async fn send(&self, session: &SessionId, control: &Control) -> Result<bool, LiveError>;

    /// The controls other replicas send to this one's turns; `None` after
    /// the first call (one consumer: the engine).
    fn take_controls(&self) -> Option<mpsc::Receiver<(SessionId, Control)>>;
}

/// Everything a replica shares with the others: leases, logs and rate
/// limits, from one adapter (the log's appends are fenced by its leases).
pub trait SharedLive: super::TurnLeases + SharedLogs + super::SharedRates {}
impl<T: super::TurnLeases + SharedLogs + super::SharedRates> SharedLive for T {}

/// See [`SharedLogs::follow`].
#[async_trait]
pub trait LogFollower: Send {
    /// The entries after `after`, waiting up to `wait` for the first of
    /// them; an empty page when none came.
    async fn read_after(&mut self, after: u64, wait: Duration) -> Result<LogPage, LiveError>;
}

/// The seq of a batch's last entry and whether a turn is still running
/// after it: what an adapter stores beside the batch.
pub fn batch_end(entries: &[LogEntry]) -> Option<(u64, Option<TurnId>)> {
    let last = entries.last()?;
    let running = (!last.event.is_terminal()).then_some(last.turn);
    Some((last.seq, running))
}

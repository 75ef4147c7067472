//! When session summaries are written ([`SummaryScheduler`]); a
//! [`Summarizer`] writes them.
//!
//! After every completed turn the engine asks the scheduler to summarise the
//! session once it has been idle for the agent's `after_idle`; a later turn
//! pushes the due time back (a debounce). The due time is written to the
//! store first, with the turn's records, so the schedule survives a restart:
//! [`SummaryScheduler::start`] reads every pending one back and runs the
//! overdue ones at once.
//!
//! One background task owns the schedule: a queue sorted by due time, fed by
//! an unbounded command channel, waiting on a tokio timer for the earliest
//! entry. A turn of a session the task has queued does not wake it: it
//! moves the session's due time in [`LatestDue`], and the task, when the
//! queued time comes, finds it pushed back and waits again (a turn's
//! command and wake-up, its timer reset and queue update, were a few
//! percent of a streamed turn's instructions, for a summary ten minutes
//! away). Due times are wall-clock [`Timestamp`]s from the [`Clock`] (they
//! are stored and survive restarts); only the waiting uses tokio's timers.
//! Each due summary runs on its own task, at most [`MAX_RUNNING`] at once;
//! [`SummaryScheduler::shutdown`] cancels the loop and aborts them (an
//! aborted summary keeps its due time in the store and runs after the next
//! start).
//!
//! The same task purges agent memory ([`MemoryPurge`]): every `every`, what
//! was forgotten more than `grace` ago is deleted for good, with its
//! history. A purge is one idempotent delete, so replicas that run it at
//! once need no claim: the second deletes nothing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use agentwire_core::AgentMemory;
use agentwire_core::ids::SessionId;
use agentwire_core::session::{MessageRole, SessionSummary};
use agentwire_core::store::{SessionStore, StoreError};
use agentwire_core::summary::SummaryPolicy;
use agentwire_core::time::{Clock, Timestamp};

/// What the scheduler's task deletes of agent memory, and when.
#[derive(Clone)]
pub struct MemoryPurge {
    pub store: Arc<dyn AgentMemory>,
    /// How long a forgotten memory stays (hidden) before it is deleted.
    pub grace: Duration,
    /// How often the purge runs; the first run is at start.
    pub every: Duration,
}

impl MemoryPurge {
    async fn run(self, clock: Arc<dyn Clock>) {
        let before = Timestamp(clock.now().0.saturating_sub(nanos(self.grace)));
        match self.store.purge_forgotten(before).await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "forgotten memories deleted"),
            Err(error) => tracing::warn!(%error, "purging forgotten memories failed"),
        }
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Summaries written at once; further due ones wait for a free slot.
pub const MAX_RUNNING: usize = 4;

/// How long a claimed summary is this process's to write: longer than any
/// summarizer takes. A process that dies holding a claim leaves the summary
/// due, for the next start to write.
const CLAIM_FOR: Duration = Duration::from_secs(10 * 60);

/// Schedules and writes summaries. Cheap to clone; clones share one
/// background task, which stops on [`shutdown`](Self::shutdown) or once
/// every clone is dropped.
#[derive(Clone)]
pub struct SummaryScheduler {
    shared: Arc<Shared>,
}

struct Shared {
    clock: Arc<dyn Clock>,
    policies: Arc<HashMap<String, SummaryPolicy>>,
    latest: LatestDue,
    commands: mpsc::UnboundedSender<Command>,
    cancel: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

enum Command {
    Schedule(SessionId, Timestamp),
    Forget(SessionId),
}

/// The latest due time of each session the task has queued (and not yet
/// taken), as the session's turns store it: its queue entry may be older.
type LatestDue = Arc<Mutex<HashMap<SessionId, Timestamp>>>;

impl SummaryScheduler {
    /// Starts the background task with every summary the store has pending.
    /// `policies` maps agent names to their policy; a session of an agent
    /// without one is never summarised. Must run inside a tokio runtime.
    pub async fn start(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        policies: HashMap<String, SummaryPolicy>,
        purge: Option<MemoryPurge>,
    ) -> Result<SummaryScheduler, StoreError> {
        let pending = store.pending_summaries().await?;
        if !pending.is_empty() {
            tracing::info!(
                pending = pending.len(),
                "scheduling the session summaries pending from before the restart"
            );
        }
        let mut queue = Queue::default();
        for (id, due) in pending {
            queue.insert(id, due);
        }
        let (commands, receiver) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let policies = Arc::new(policies);
        let latest = LatestDue::default();
        let worker = Worker {
            store: store.clone(),
            clock: clock.clone(),
            policies: policies.clone(),
            latest: latest.clone(),
            purge,
        };
        let task = tokio::spawn(worker.run(queue, receiver, cancel.clone()));
        Ok(SummaryScheduler {
            shared: Arc::new(Shared {
                clock,
                policies,
                latest,
                commands,
                cancel,
                task: Mutex::new(Some(task)),
            }),
        })
    }

    /// When a turn of `agent` completing now makes its session's summary
    /// due: the agent's idle time from now; `None` when the agent has no
    /// summary policy. The engine stores it with the turn's records, then
    /// calls [`SummaryScheduler::queue`].
    pub fn due_after_turn(&self, agent: &str) -> Option<Timestamp> {
        let shared = &self.shared;
        let policy = shared.policies.get(agent)?;
        Some(shared.clock.now().plus(policy.after_idle))
    }

    /// Queues the summary of `session`, whose due time `due` is stored,
    /// replacing any earlier one.
    pub fn queue(&self, session: &SessionId, due: Timestamp) {
        let mut latest = self.shared.latest.lock();
        if let Some(queued) = latest.get_mut(session) {
            *queued = due;
            return;
        }
        latest.insert(session.clone(), due);
        drop(latest);
        // A stopped task has nothing to run it; the stored due time is
        // picked up by the next start.
        let _ = self
            .shared
            .commands
            .send(Command::Schedule(session.clone(), due));
    }

    /// Drops the queued summary of `session` (it was deleted).
    pub fn forget(&self, session: &SessionId) {
        self.shared.latest.lock().remove(session);
        let _ = self.shared.commands.send(Command::Forget(session.clone()));
    }

    /// Stops the background task and aborts the summaries being written;
    /// returns once it has stopped.
    pub async fn shutdown(&self) {
        self.shared.cancel.cancel();
        let task = self.shared.task.lock().take();
        if let Some(task) = task
            && let Err(e) = task.await
            && e.is_panic()
        {
            tracing::error!("the summary scheduler panicked");
        }
    }
}

/// Due summaries by time, at most one per session.
#[derive(Default)]
struct Queue {
    by_due: BTreeSet<(Timestamp, SessionId)>,
    due_of: HashMap<SessionId, Timestamp>,
}

impl Queue {
    /// Queues `id` at `due`, replacing its earlier entry.
    fn insert(&mut self, id: SessionId, due: Timestamp) {
        if let Some(old) = self.due_of.insert(id.clone(), due) {
            self.by_due.remove(&(old, id.clone()));
        }
        self.by_due.insert((due, id));
    }

    fn remove(&mut self, id: &SessionId) {
        if let Some(due) = self.due_of.remove(id) {
            self.by_due.remove(&(due, id.clone()));
        }
    }

    fn earliest(&self) -> Option<Timestamp> {
        self.by_due.first().map(|(due, _)| *due)
    }

    /// Takes the earliest entry if it is due at `now`.
    fn pop_due(&mut self, now: Timestamp) -> Option<(SessionId, Timestamp)> {
        let (due, _) = self.by_due.first()?;
        if *due > now {
            return None;
        }
        let (due, id) = self.by_due.pop_first()?;
        self.due_of.remove(&id);
        Some((id, due))
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        debug_assert_eq!(self.by_due.len(), self.due_of.len());
        self.by_due.len()
    }
}

/// What the background task and each summary job need.
#[derive(Clone)]
struct Worker {
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    policies: Arc<HashMap<String, SummaryPolicy>>,
    latest: LatestDue,
    purge: Option<MemoryPurge>,
}

impl Worker {
    async fn run(
        self,
        mut queue: Queue,
        mut commands: mpsc::UnboundedReceiver<Command>,
        cancel: CancellationToken,
    ) {
        let mut running = JoinSet::new();
        let mut next_purge = tokio::time::Instant::now();
        loop {
            let wake = queue.earliest().map(|due| self.instant_of(due));
            let may_start = wake.is_some() && running.len() < MAX_RUNNING;
            let purge = self.purge.as_ref().map(|_| next_purge);
            tokio::select! {
                () = cancel.cancelled() => break,
                () = sleep_until(purge) => {
                    let purge = self.purge.clone().expect("a purge is configured");
                    next_purge = tokio::time::Instant::now() + purge.every;
                    running.spawn(purge.run(self.clock.clone()));
                }
                command = commands.recv() => match command {
                    Some(Command::Schedule(id, due)) => queue.insert(id, due),
                    Some(Command::Forget(id)) => queue.remove(&id),
                    // Every scheduler handle is gone.
                    None => break,
                },
                () = sleep_until(wake), if may_start => {
                    let now = self.clock.now();
                    while running.len() < MAX_RUNNING {
                        let Some((id, queued)) = queue.pop_due(now) else { break };
                        match self.take_due(&id, queued, now) {
                            Due::Now(due) => {
                                running.spawn(self.clone().summarize(id, due));
                            }
                            Due::Later(due) => queue.insert(id, due),
                        }
                    }
                }
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    if joined.is_err_and(|e| e.is_panic()) {
                        tracing::error!("a session summary panicked");
                    }
                }
            }
        }
        running.abort_all();
        while running.join_next().await.is_some() {}
    }

    /// Whether the summary of `id`, queued for `queued`, is due at `now`:
    /// its turns may have pushed it back since. Taken when due, so the
    /// session's next turn queues it again.
    fn take_due(&self, id: &SessionId, queued: Timestamp, now: Timestamp) -> Due {
        let mut latest = self.latest.lock();
        match latest.get(id).copied() {
            Some(due) if due > now => Due::Later(due),
            Some(due) => {
                latest.remove(id);
                Due::Now(due)
            }
            // Pending from before the start, not pushed back since.
            None => Due::Now(queued),
        }
    }

    /// The tokio instant at which the wall-clock `due` arrives.
    fn instant_of(&self, due: Timestamp) -> tokio::time::Instant {
        let wait = due.0.saturating_sub(self.clock.now().0).max(0);
        tokio::time::Instant::now() + Duration::from_nanos(wait as u64)
    }

    /// Writes the summary of `id`, due at `due`. Store failures leave the due
    /// time in the store, so the next start tries again.
    async fn summarize(self, id: SessionId, due: Timestamp) {
        if let Err(e) = self.try_summarize(&id, due).await {
            tracing::warn!(session = %id, error = %e, "session summary not written");
        }
    }

    async fn try_summarize(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        // Several replicas may have the same summary queued (each loads the
        // pending ones when it starts): the one that claims it writes it.
        let now = self.clock.now();
        if !self
            .store
            .claim_summary(id, due, now, now.plus(CLAIM_FOR))
            .await?
        {
            tracing::debug!(session = %id, "the session's summary is another's to write");
            return Ok(());
        }
        let Some(record) = self.store.load_session(id).await? else {
            // Deleted since it was scheduled.
            return Ok(());
        };
        let Some(policy) = self.policies.get(&record.agent) else {
            tracing::debug!(session = %id, "no summary policy for the session's agent");
            return self.store.clear_summary_due(id, due).await;
        };
        let messages = self.store.load_messages(id).await?;
        let conversational = messages
            .iter()
            .any(|m| matches!(m.role(), MessageRole::User | MessageRole::Assistant));
        if !conversational {
            return self.store.clear_summary_due(id, due).await;
        }
        match policy.summarizer.summarize(&messages).await {
            Ok(text) => {
                let summary = SessionSummary {
                    text,
                    created_at: self.clock.now(),
                };
                self.store.store_summary(id, &summary, due).await?;
                tracing::debug!(session = %id, "session summary written");
                Ok(())
            }
            Err(reason) => {
                // Not retried: the next completed turn schedules another.
                tracing::warn!(session = %id, error = %reason, "summarizer failed");
                self.store.clear_summary_due(id, due).await
            }
        }
    }
}

/// What [`Worker::take_due`] found.
enum Due {
    /// Write it now; the due time the store holds.
    Now(Timestamp),
    /// Pushed back to this time.
    Later(Timestamp),
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> SessionId {
        SessionId::parse(s).unwrap()
    }

    #[test]
    fn the_queue_keeps_one_entry_per_session_and_pops_in_due_order() {
        let mut q = Queue::default();
        q.insert(sid("a"), Timestamp(30));
        q.insert(sid("b"), Timestamp(10));
        q.insert(sid("c"), Timestamp(20));
        // Rescheduling replaces: `b` moves behind `a`.
        q.insert(sid("b"), Timestamp(40));
        assert_eq!(q.len(), 3);
        assert_eq!(q.earliest(), Some(Timestamp(20)));
        assert_eq!(q.pop_due(Timestamp(19)), None);
        assert_eq!(q.pop_due(Timestamp(35)), Some((sid("c"), Timestamp(20))));
        assert_eq!(q.pop_due(Timestamp(35)), Some((sid("a"), Timestamp(30))));
        assert_eq!(q.pop_due(Timestamp(35)), None);
        q.remove(&sid("b"));
        assert_eq!(q.len(), 0);
        assert_eq!(q.earliest(), None);
    }

    #[test]
    fn equal_due_times_are_kept_apart() {
        let mut q = Queue::default();
        q.insert(sid("a"), Timestamp(5));
        q.insert(sid("b"), Timestamp(5));
        assert_eq!(q.len(), 2);
        let mut popped = vec![
            q.pop_due(Timestamp(5)).unwrap().0,
            q.pop_due(Timestamp(5)).unwrap().0,
        ];
        popped.sort();
        assert_eq!(popped, [sid("a"), sid("b")]);
    }
}

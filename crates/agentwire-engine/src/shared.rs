//! A session's log shared by the replicas ([`agentwire_core::live::SharedLogs`]):
//! the running replica publishes its turn's entries, the others mirror them
//! for their clients, and what a client says to a turn that runs elsewhere
//! (a cancel, a client tool's answer) is forwarded to where it runs.
//!
//! The local [`SessionLog`] stays the only thing a connection reads: on the
//! running replica it is the turn's own log; elsewhere it is a mirror,
//! filled by a follower (one per session and replica, however many sockets
//! read it) at the same `(epoch, seq)` positions, so a client rejoins on
//! any replica with the position it had. Before a turn starts, its replica
//! catches its log up with the shared one, so seqs go on from the shared
//! head, whoever ran the last turn.
//!
//! A turn whose replica died leaves its shared log open with nobody holding
//! its lease. A follower that has seen nothing for a while, or the next
//! message on any replica, takes the lease and ends that turn with one
//! `Failed` ([`TURN_INTERRUPTED`]) entry, so every turn keeps its one
//! terminal.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Acquired, Engine, Fence, Inner, SessionLease, SubmitError};
use crate::LiveCounters;
use agentwire_core::error::ErrorCode;
use agentwire_core::ids::SessionId;
use agentwire_core::live::{
    Append, Appended, Control, LiveError, LogFollower, MAX_BATCH, SharedHead, SharedLogs,
};
use agentwire_core::log::{Epoch, LogEntry, LogReader, SessionLog, TurnId};
use agentwire_core::session::{MessageBody, ReplyEnd};
use agentwire_core::tools::ClientAnswer;
use agentwire_core::turn::{Reply, TURN_INTERRUPTED, TurnEvent, TurnFailure};

/// Whether ending an orphaned turn gives the lease up with its terminal (a
/// follower that took the lease for it) or keeps it (a turn about to start).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterOrphan {
    Release,
    Keep,
}

/// What the store holds of a turn whose replica died ([`SessionLease::stored_end_of`]).
enum StoredEnd {
    /// Its end, as that replica stored it: the turn's terminal.
    Ended(TurnEvent),
    /// Its question, and no end: it was interrupted.
    Open,
    /// Not even its question: nothing of it is stored.
    QuestionLost,
}

/// How far publishing a turn got ([`SessionLease::publish_turn`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Published {
    /// Up to its terminal, and the lease went with it.
    Whole,
    /// Another replica holds the lease now.
    Fenced,
    /// The shared log could not be reached (or this replica's log overtook
    /// the publisher); the lease may still be ours.
    Failed,
}

/// How long a follower waits for entries in one read when leases never
/// expire (they always do where logs are shared; a bound all the same).
const DEFAULT_WAIT: Duration = Duration::from_secs(2);

/// How long a control is tried while the shared state cannot be reached:
/// as long as the session's mailbox keeps one.
const CONTROL_LIFE: Duration = Duration::from_secs(60);

/// How long after a failed shared-log call the next is tried.
const RETRY_AFTER: Duration = Duration::from_millis(200);

impl Inner {
    /// A new session's log: at the shared log's epoch and head when logs are
    /// shared (creating the shared one with a fresh epoch when it has none),
    /// holding the running turn's entries when one runs.
    pub(super) async fn open_log(&self, id: &SessionId) -> Result<Arc<SessionLog>, LiveError> {
        let proposed = Epoch(self.ids.log_epoch());
        match &self.logs {
            None => Ok(SessionLog::new(proposed)),
            Some(logs) => {
                let shared = logs.open(id, proposed).await?;
                let log = SessionLog::starting_at(shared.epoch, shared.head);
                // A turn running elsewhere (or left open by a dead replica)
                // is read back from its start, so this log knows it runs.
                if let Some(turn) = shared.running {
                    let page = logs.read_after(id, turn.0 - 1).await?;
                    if page.head.epoch == shared.epoch && log.backfill(&page.entries) {
                        let mirrored = page.entries.len() as u64;
                        LiveCounters::add(&self.live_counters.entries_mirrored, mirrored);
                    }
                }
                Ok(log)
            }
        }
    }
}

impl Engine {
    /// The engine, whose turns take their leases from `live` and publish
    /// their logs to it, and whose sessions mirror turns running on other
    /// replicas; controls other replicas send are delivered here. Call
    /// before the engine is cloned, within a tokio runtime.
    pub fn with_shared_live(mut self, live: Arc<dyn agentwire_core::live::SharedLive>) -> Engine {
        let controls = live.take_controls();
        {
            let inner = Arc::get_mut(&mut self.inner)
                .expect("with_shared_live is called before the engine is shared");
            inner.leases = live.clone();
            inner.rates = Some(live.clone());
            inner.logs = Some(live);
        }
        if let Some(mut controls) = controls {
            let inner = Arc::downgrade(&self.inner);
            tokio::spawn(async move {
                while let Some((session, control)) = controls.recv().await {
                    let Some(inner) = inner.upgrade() else {
                        return;
                    };
                    inner.deliver(&session, control);
                }
            });
        }
        self
    }
}

impl Inner {
    /// A control from another replica, for a turn running here.
    fn deliver(&self, id: &SessionId, control: Control) {
        LiveCounters::add(&self.live_counters.controls_received, 1);
        let Some(session) = self.live.lock().get(id).cloned() else {
            return;
        };
        match control {
            Control::Cancel { turn } => {
                let state = session.state.lock();
                if let Some((running, token)) = &state.turn_cancel
                    && *running == turn
                {
                    token.cancel();
                }
            }
            Control::Answer { call_id, answer } => {
                session.client_tools.answer(&call_id, answer);
            }
        }
    }
}

impl SessionLease {
    fn shared_logs(&self) -> Option<&Arc<dyn SharedLogs>> {
        self.inner.logs.as_ref()
    }

    /// The turn the log shows running when it is not this replica's own:
    /// mirrored from the replica that runs it. This replica may still be
    /// ending a turn of its own meanwhile (it lost the lease while it
    /// stored): the log's turn is then another's all the same.
    fn foreign_turn(&self) -> Option<TurnId> {
        self.shared_logs()?;
        let running = self.session.log.running()?;
        let own = self.session.state.lock().own_turn;
        (own != Some(running)).then_some(running)
    }

    /// Cancels a turn that runs on another replica (when `turn` names it, or
    /// is `None`): forwarded; its `Cancelled` comes back through the log.
    pub(super) fn cancel_foreign_turn(&self, turn: Option<TurnId>) -> Option<TurnId> {
        let running = self.foreign_turn()?;
        if turn.is_some_and(|t| t != running) {
            return None;
        }
        self.forward(Control::Cancel { turn: running });
        Some(running)
    }

    /// Delivers a client's answer to a call pending on the session's turn,
    /// here or, forwarded, on the replica running it. `false` when no such
    /// call is pending.
    pub fn answer_client_call(&self, call_id: &str, answer: ClientAnswer) -> bool {
        if self.session.client_tools.answer(call_id, answer.clone()) {
            return true;
        }
        if self.foreign_turn().is_none() || !self.session.log.awaits_client_call(call_id) {
            return false;
        }
        self.forward(Control::Answer {
            call_id: call_id.to_owned(),
            answer,
        });
        true
    }

    /// Sends `control` to the turn's replica, trying again while the shared
    /// state cannot be reached from here, for as long as the turn runs (up
    /// to [`CONTROL_LIFE`]): once sent, the control waits in the session's
    /// mailbox until the turn's replica takes it (the adapter's promise), so
    /// only a cut on this side could lose it, and a cut shorter than that
    /// does not.
    fn forward(&self, control: Control) {
        let Some(logs) = self.shared_logs().cloned() else {
            return;
        };
        let id = self.id().clone();
        let inner = self.inner.clone();
        let log = self.session.log.clone();
        let (epoch, turn) = (log.epoch(), log.running());
        tokio::spawn(async move {
            let counters = &inner.live_counters;
            let deadline = tokio::time::Instant::now() + CONTROL_LIFE;
            loop {
                match logs.send(&id, &control).await {
                    Ok(_) => return LiveCounters::add(&counters.controls_sent, 1),
                    Err(e) => {
                        LiveCounters::add(&counters.errors, 1);
                        if tokio::time::Instant::now() + RETRY_AFTER >= deadline {
                            tracing::warn!(session = %id, error = %e, "forwarding a control failed");
                            return;
                        }
                    }
                }
                tokio::time::sleep(RETRY_AFTER).await;
                if log.epoch() == epoch && log.running() != turn {
                    // The turn ended (as far as this replica has seen):
                    // the control has nothing left to reach. A log that
                    // started again (lost track) says nothing of it.
                    return;
                }
            }
        });
    }

    /// Brings the local log up to the shared one: the entries it lacks, or,
    /// when the shared log is of another past or no longer reaches back to
    /// ours, a fresh start at its head (readers of the old one are told
    /// they lagged, and reload). A shared log that has lost everything
    /// (no epoch) leaves ours as it is: our next append restores it.
    pub(super) async fn catch_up(&self) -> Result<(), LiveError> {
        let Some(logs) = self.shared_logs() else {
            return Ok(());
        };
        let log = &self.session.log;
        loop {
            let page = logs
                .read_after(self.id(), log.head())
                .await
                .inspect_err(|_| self.count_error())?;
            if page.entries.is_empty() {
                if page.head.epoch != Epoch(0) && log.head() < page.head.head {
                    // The shared log no longer reaches back to ours.
                    log.reset(page.head.epoch, page.head.head);
                }
                return Ok(());
            }
            if !self.mirror(page.head, &page.entries) {
                return Ok(());
            }
        }
    }

    /// Mirrors `entries` read from the shared log at `head`; whether the
    /// log is still in step with it (else it started again at its head).
    fn mirror(&self, head: SharedHead, entries: &[LogEntry]) -> bool {
        let log = &self.session.log;
        if head.epoch == Epoch(0) {
            return false;
        }
        let before = log.head();
        if head.epoch != log.epoch() || log.mirror(entries).is_err() {
            log.reset(head.epoch, head.head);
            return false;
        }
        let mirrored = log.head() - before;
        LiveCounters::add(&self.inner.live_counters.entries_mirrored, mirrored);
        true
    }

    fn count_error(&self) {
        LiveCounters::add(&self.inner.live_counters.errors, 1);
    }

    /// How long publishing retries an unreachable shared log.
    fn retry_budget(&self) -> Duration {
        let leases = &self.inner.leases;
        leases.renew_every().unwrap_or(leases.ttl())
    }

    /// For a client rejoining at `after` (of the shared log's epoch): when
    /// the local log does not reach back to the start of the turn holding
    /// `after`, that turn read back from the shared log, so it can be
    /// replayed here.
    pub(super) async fn backfill_for_rejoin(&self, after: u64) -> Result<(), LiveError> {
        let Some(logs) = self.shared_logs() else {
            return Ok(());
        };
        let log = &self.session.log;
        let replayable = log.holds(after) && log.rejoin_reader(after).is_some();
        if after == 0 || after > log.head() || replayable {
            return Ok(());
        }
        let page = logs.read_turn_of(self.id(), after).await?;
        if page.head.epoch == log.epoch() && log.backfill(&page.entries) {
            let counters = &self.inner.live_counters;
            LiveCounters::add(&counters.entries_mirrored, page.entries.len() as u64);
        }
        Ok(())
    }

    /// Follows the turn the log shows running on another replica, unless
    /// this replica already does: mirrors its entries until its terminal,
    /// and ends it if its replica is gone.
    pub(super) fn follow_foreign_turn(&self) {
        let Some(logs) = self.shared_logs().cloned() else {
            return;
        };
        if self.foreign_turn().is_none() || self.session.following.swap(true, Ordering::SeqCst) {
            return;
        }
        let lease = self.clone_lease();
        tokio::spawn(async move {
            lease.follow(&*logs).await;
            lease.session.following.store(false, Ordering::SeqCst);
            if lease.is_sole() {
                lease.keep_for_rejoin();
            }
        });
    }

    async fn follow(&self, logs: &dyn SharedLogs) {
        // Each empty wait tries the lease (`end_orphan`): at half a
        // renewal period, a dead replica's turn ends within about
        // `ttl + renew_every / 2` of its last renewal.
        let wait = self
            .inner
            .leases
            .renew_every()
            .map_or(DEFAULT_WAIT, |every| every / 2);
        // Opened on first use and again after a failure: the shared state
        // may be unreachable when the follow starts, or drop it midway.
        let mut follower: Option<Box<dyn LogFollower>> = None;
        let mut failing_since = None;
        while self.foreign_turn().is_some() {
            let head = self.session.log.head();
            let read = match follower.as_mut() {
                Some(open) => open.read_after(head, wait).await,
                None => match logs.follow(self.id()).await {
                    Ok(opened) => {
                        follower = Some(opened);
                        continue;
                    }
                    Err(e) => Err(e),
                },
            };
            match read {
                Ok(page) if page.entries.is_empty() => {
                    failing_since = None;
                    self.end_orphan().await;
                }
                Ok(page) => {
                    failing_since = None;
                    if !self.mirror(page.head, &page.entries) {
                        return;
                    }
                }
                Err(e) => {
                    self.count_error();
                    tracing::warn!(session = %self.id(), error = %e, "following a turn failed");
                    follower = None;
                    let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= self.inner.leases.ttl() {
                        // Lost track of the turn: a new epoch, so that its
                        // readers lag (and are closed, to come back and
                        // reload from the store) and no position of the
                        // old one is taken for the new.
                        let log = &self.session.log;
                        log.reset(Epoch(self.inner.ids.log_epoch()), log.head());
                        return;
                    }
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
        }
    }

    /// Ends the turn the log shows open if nobody holds its lease (its
    /// replica died): takes the lease, catches up, appends the turn's
    /// `Failed` terminal and gives the lease up with it.
    pub(super) async fn end_orphan(&self) {
        let Some(logs) = self.shared_logs() else {
            return;
        };
        if self.begin_turn().is_err() {
            return;
        }
        let granted = match self.ask_for_lease().await {
            Ok(Acquired::Granted(granted)) => granted,
            Ok(Acquired::Held) | Err(_) => {
                self.end_turn();
                return;
            }
        };
        LiveCounters::add(&self.inner.live_counters.leases_granted, 1);
        let fence = granted.fence;
        if let Err(e) = self.end_orphan_holding(&**logs, granted).await {
            tracing::warn!(session = %self.id(), error = %e, "ending an orphaned turn failed");
            self.release_turn_lease(fence).await;
        }
        self.end_turn();
    }

    /// Under the lease: the orphan's end stored, as a failed turn's is,
    /// then appended to the log with the lease's release.
    async fn end_orphan_holding(
        &self,
        logs: &dyn SharedLogs,
        granted: agentwire_core::live::TurnLease,
    ) -> Result<(), SubmitError> {
        let fence = granted.fence;
        self.catch_up().await?;
        if self.session.log.running().is_none() {
            self.release_turn_lease(fence).await;
            return Ok(());
        }
        // What the dead replica stored is read first, and it is fenced off.
        self.read_window_after(granted).await?;
        self.session.state.lock().write_fence = Some(fence);
        self.end_orphaned_turn(logs, fence, AfterOrphan::Release)
            .await
    }

    /// Ends a turn the log shows open (its replica died) under the lease this
    /// replica holds with `fence`, the session taken over (fenced in the
    /// store, its window read again): with the end that replica stored
    /// before it died, when it got that far, else with its failure stored
    /// as a failed turn's is; then that terminal appended to the shared log
    /// and mirrored here. One turn never has both a stored reply and an
    /// interruption: once the store is fenced nothing of the dead replica's
    /// can land after what was read.
    async fn end_orphaned_turn(
        &self,
        logs: &dyn SharedLogs,
        fence: Fence,
        after: AfterOrphan,
    ) -> Result<(), SubmitError> {
        let log = &self.session.log;
        let Some(turn) = log.running() else {
            return Ok(());
        };
        let event = match self.stored_end_of(turn) {
            StoredEnd::Ended(stored) => {
                tracing::warn!(session = %self.id(), "ending a turn whose replica is gone, as it stored it");
                stored
            }
            StoredEnd::Open => {
                tracing::warn!(session = %self.id(), "ending a turn whose replica is gone");
                self.store_interruption().await
            }
            StoredEnd::QuestionLost => {
                // Nothing of the turn reached the store: its failure
                // stored alone would read as the previous turn's.
                tracing::warn!(session = %self.id(), "ending a turn whose replica is gone before storing its question");
                TurnEvent::Failed(TurnFailure::new(ErrorCode::Internal, TURN_INTERRUPTED))
            }
        };
        let terminal = [LogEntry {
            seq: log.head() + 1,
            turn,
            event: Arc::new(event),
        }];
        let batch = Append {
            fence,
            epoch: log.epoch(),
            entries: &terminal,
            release: after == AfterOrphan::Release,
        };
        if logs.append(self.id(), batch).await? == Appended::Done {
            LiveCounters::add(&self.inner.live_counters.orphans_ended, 1);
            // Ours now: a failure to mirror cannot happen (we caught up
            // under the lease), and would only make readers reload.
            let _ = log.mirror(&terminal);
        }
        Ok(())
    }

    /// What the store holds of `turn`, read from the session's window as
    /// it was when the session was taken over: its end (the first reply or
    /// failure after its question), or only its question, or not even that.
    fn stored_end_of(&self, turn: TurnId) -> StoredEnd {
        let Some(question) = self.session.log.question_of(turn) else {
            // A turn logged by a replica of the previous release.
            return StoredEnd::Open;
        };
        let history = self.session.state.lock().history.clone();
        if !history.iter().any(|message| message.seq == question) {
            return StoredEnd::QuestionLost;
        }
        let end = history
            .iter()
            .filter(|message| message.seq > question)
            .find_map(|message| match &message.body {
                MessageBody::Reply { text, parts, end } => {
                    let reply = Reply {
                        text: text.clone(),
                        parts: parts.clone(),
                    };
                    Some(match end {
                        ReplyEnd::Cancelled => TurnEvent::Cancelled(reply),
                        _ => TurnEvent::Completed(reply),
                    })
                }
                MessageBody::Failure { code, message } => {
                    Some(TurnEvent::Failed(TurnFailure::new(*code, message.clone())))
                }
                _ => None,
            });
        end.map_or(StoredEnd::Open, StoredEnd::Ended)
    }

    /// Stores an orphaned turn's end as a failed turn's is; the failure.
    async fn store_interruption(&self) -> TurnEvent {
        let failure = TurnFailure::new(ErrorCode::Internal, TURN_INTERRUPTED);
        let ending = super::records::Ending::Ran(Err(failure.clone()));
        let (record, _) =
            super::records::terminal_record(self.id(), ending, self.inner.clock.now());
        if let Err(e) = self.store_messages(vec![record], None).await {
            // The turn ends all the same: its clients must not wait on it.
            tracing::warn!(session = %self.id(), error = %e, "storing an orphaned turn's end failed");
        }
        TurnEvent::Failed(failure)
    }

    /// Before a turn starts here under its lease: a turn of a dead replica
    /// still open in the log is ended first, stored and logged, as a
    /// follower would have ended it.
    pub(super) async fn end_orphan_before_turn(&self, fence: Fence) -> Result<(), SubmitError> {
        let Some(logs) = self.shared_logs() else {
            return Ok(());
        };
        self.end_orphaned_turn(&**logs, fence, AfterOrphan::Keep)
            .await
    }

    /// Waits for this replica's previous turn to finish publishing, so the
    /// next turn's entries follow it in the shared log.
    pub(super) async fn publishing_slot(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        self.shared_logs()?;
        Some(self.session.publishing.clone().lock_owned().await)
    }

    /// Starts publishing the turn `turn` (and whatever the log holds after
    /// `after` before it: an orphan's terminal) to the shared log.
    pub(super) fn publish(
        &self,
        fence: Fence,
        after: u64,
        turn: TurnId,
        slot: tokio::sync::OwnedMutexGuard<()>,
    ) {
        let Some(logs) = self.shared_logs().cloned() else {
            return;
        };
        let reader = self.session.log.publishing_reader(after);
        let lease = self.clone_lease();
        tokio::spawn(async move {
            let published = lease.publish_turn(&*logs, fence, reader, turn).await;
            if published != Published::Whole {
                lease.withdraw_unpublished();
            }
            // The next turn here need not wait for a release that may be
            // as slow as the failure that called for it.
            drop(slot);
            if published == Published::Failed {
                lease.release_turn_lease(fence).await;
            }
        });
    }

    /// What other replicas will never see, this replica's clients must not
    /// see either: the log goes on from the shared one's entries. A turn
    /// whose start was published is followed there to its end once it has
    /// stopped here (its lease lost); one that never reached the shared
    /// log cannot be, and its readers are told they lagged (a new epoch),
    /// to come back and reload.
    fn withdraw_unpublished(&self) {
        let log = &self.session.log;
        match log.withdraw_unpublished() {
            true => self.follow_foreign_turn(),
            false => log.reset(Epoch(self.inner.ids.log_epoch()), log.head()),
        }
    }

    /// Publishes up to the turn's terminal, letting this replica's clients
    /// read each batch once the shared log holds it.
    async fn publish_turn(
        &self,
        logs: &dyn SharedLogs,
        fence: Fence,
        mut reader: LogReader,
        turn: TurnId,
    ) -> Published {
        let epoch = reader.epoch();
        let mut next: Option<LogEntry> = None;
        loop {
            let first = match next.take() {
                Some(entry) => entry,
                None => match reader.next_exact().await {
                    Ok(entry) => entry,
                    Err(e) => {
                        tracing::warn!(session = %self.id(), error = %e, "publishing a turn fell behind");
                        return Published::Failed;
                    }
                },
            };
            let mut ends = ends_turn(&first, turn);
            let mut batch = vec![first];
            while !ends && batch.len() < MAX_BATCH {
                match reader.try_next_exact() {
                    // A turn's start opens a batch of its own.
                    Ok(Some(entry)) if matches!(*entry.event, TurnEvent::TurnStarted { .. }) => {
                        next = Some(entry);
                        break;
                    }
                    Ok(Some(entry)) => {
                        ends = ends_turn(&entry, turn);
                        batch.push(entry);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(session = %self.id(), error = %e, "publishing a turn fell behind");
                        return Published::Failed;
                    }
                }
            }
            let append = Append {
                fence,
                epoch,
                entries: &batch,
                release: ends,
            };
            let counters = &self.inner.live_counters;
            let appended = self.append_retrying(logs, append).await;
            match &appended {
                Ok(Appended::Done) => LiveCounters::add(&counters.batches_published, 1),
                Ok(Appended::Fenced) => LiveCounters::add(&counters.batches_fenced, 1),
                Err(_) => LiveCounters::add(&counters.errors, 1),
            }
            match appended {
                Ok(Appended::Done) => {
                    let last = batch.last().map_or(0, |entry| entry.seq);
                    self.session.log.mark_published(last);
                    if ends {
                        return Published::Whole;
                    }
                }
                Ok(Appended::Fenced) => {
                    tracing::warn!(session = %self.id(), "publishing a turn was fenced off");
                    return Published::Fenced;
                }
                Err(e) => {
                    tracing::warn!(session = %self.id(), error = %e, "publishing a turn failed");
                    return Published::Failed;
                }
            }
        }
    }

    /// Appends, trying again while the shared state is unreachable, for as
    /// long as one renewal period: the next turn here waits for this one's
    /// publication, and a lease that cannot be renewed is lost soon anyway.
    async fn append_retrying(
        &self,
        logs: &dyn SharedLogs,
        append: Append<'_>,
    ) -> Result<Appended, SubmitError> {
        let deadline = tokio::time::Instant::now() + self.retry_budget();
        loop {
            let attempt = tokio::time::timeout_at(deadline, logs.append(self.id(), append)).await;
            match attempt {
                Ok(Ok(appended)) => return Ok(appended),
                Ok(Err(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_AFTER).await;
                }
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => {
                    return Err(LiveError::Unavailable("shared log: timed out".to_owned()).into());
                }
            }
        }
    }
}

fn ends_turn(entry: &LogEntry, turn: TurnId) -> bool {
    entry.turn == turn && entry.event.is_terminal()
}

impl SessionLease {
    /// Whether this session's log is shared with other replicas.
    pub(super) fn shares_logs(&self) -> bool {
        self.inner.logs.is_some()
    }
}

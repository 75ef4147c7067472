//! Shared live state in one process's memory ([`MemoryLive`]): what several
//! engines in one test use as their "Redis", so the replica rules
//! (leases that expire, the shared log, the control bus) are tested without
//! a server, and the conformance suites have a reference to pass.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use agentwire_core::ids::SessionId;
use agentwire_core::live::{Acquired, Fence, LiveError, TurnLease, TurnLeases};
use agentwire_core::live::{
    Append, Appended, Control, LogFollower, LogPage, SharedHead, SharedLogs, batch_end,
};
use agentwire_core::log::{Epoch, LogEntry, TurnId};

/// Batches a session's shared log keeps, as Redis's stream does.
const KEPT_BATCHES: usize = 256;

/// The state every [`MemoryLive`] made from it shares.
#[derive(Default)]
pub struct MemoryLiveState {
    sessions: Mutex<HashMap<SessionId, SharedSession>>,
    next_fence: AtomicU64,
    appended: Notify,
    replicas: Mutex<HashMap<String, mpsc::Sender<(SessionId, Control)>>>,
    /// Set: every call fails as an unreachable server's would.
    down: std::sync::atomic::AtomicBool,
    /// Each rate bucket's theoretical arrival time (GCRA).
    buckets: Mutex<HashMap<String, Instant>>,
}

#[derive(Default)]
struct SharedSession {
    /// Holder, fence and expiry.
    lease: Option<(String, Fence, Instant)>,
    /// The fence of the latest grant, whoever it went to.
    last_grant: Option<Fence>,
    epoch: Option<Epoch>,
    head: u64,
    running: Option<TurnId>,
    /// Batches with the seq of their last entry. Kept as entries: the
    /// JSON a shared adapter stores them in is its own (`agentwire-live`).
    batches: std::collections::VecDeque<(u64, Vec<LogEntry>)>,
}

impl SharedSession {
    fn lease_holder(&self) -> Option<&(String, Fence, Instant)> {
        self.lease
            .as_ref()
            .filter(|(_, _, expiry)| *expiry > Instant::now())
    }

    fn shared_head(&self) -> SharedHead {
        SharedHead {
            epoch: self.epoch.unwrap_or(Epoch(0)),
            head: self.head,
            running: self.running,
        }
    }

    /// From the `TurnStarted` of the turn holding `seq`; empty when that is
    /// not held.
    fn turn_of(&self, seq: u64) -> Vec<LogEntry> {
        let holding = self.entries_after(seq.saturating_sub(1));
        let entries = match holding.first().filter(|entry| entry.seq == seq) {
            Some(entry) => self.entries_after(entry.turn.0 - 1),
            None => Vec::new(),
        };
        let starts_turn = entries.first().is_some_and(|e| {
            matches!(
                *e.event,
                agentwire_core::turn::TurnEvent::TurnStarted { .. }
            )
        });
        if starts_turn { entries } else { Vec::new() }
    }

    fn entries_after(&self, after: u64) -> Vec<LogEntry> {
        self.batches
            .iter()
            .filter(|(last, _)| *last > after)
            .flat_map(|(_, batch)| batch.iter().cloned())
            .filter(|entry| entry.seq > after)
            .collect()
    }
}

impl MemoryLiveState {
    pub fn new() -> Arc<MemoryLiveState> {
        Arc::default()
    }

    /// Makes every call fail (`true`) or answer again, as stopping and
    /// starting a server would; stopping also forgets everything, as a
    /// Redis without persistence does.
    pub fn set_down(&self, down: bool) {
        if down {
            self.sessions.lock().clear();
        }
        self.down.store(down, Ordering::SeqCst);
    }

    /// A page of `session`'s log: where it stands and what `entries` reads
    /// from it (nothing, for a session never seen).
    fn page(
        &self,
        session: &SessionId,
        entries: impl FnOnce(&SharedSession) -> Vec<LogEntry>,
    ) -> LogPage {
        let sessions = self.sessions.lock();
        match sessions.get(session) {
            Some(shared) => LogPage {
                head: shared.shared_head(),
                entries: entries(shared),
            },
            None => LogPage {
                head: unknown_head(),
                entries: Vec::new(),
            },
        }
    }

    fn check(&self) -> Result<(), LiveError> {
        match self.down.load(Ordering::SeqCst) {
            true => Err(LiveError::Unavailable("memory: down".to_owned())),
            false => Ok(()),
        }
    }
}

/// One replica's view of a [`MemoryLiveState`].
pub struct MemoryLive {
    state: Arc<MemoryLiveState>,
    replica: String,
    ttl: Duration,
    controls: Mutex<Option<mpsc::Receiver<(SessionId, Control)>>>,
}

impl MemoryLive {
    /// Replica `replica` of the deployment sharing `state`; its leases live
    /// `ttl` unless renewed.
    pub fn new(state: &Arc<MemoryLiveState>, replica: &str, ttl: Duration) -> MemoryLive {
        let (tx, rx) = mpsc::channel(256);
        state.replicas.lock().insert(replica.to_owned(), tx);
        MemoryLive {
            state: state.clone(),
            replica: replica.to_owned(),
            ttl,
            controls: Mutex::new(Some(rx)),
        }
    }

    fn holds(&self, session: &SharedSession, fence: Fence) -> bool {
        session
            .lease_holder()
            .is_some_and(|(holder, held, _)| *holder == self.replica && *held == fence)
    }
}

#[async_trait]
impl TurnLeases for MemoryLive {
    async fn acquire(
        &self,
        session: &SessionId,
        known: Option<Fence>,
    ) -> Result<Acquired, LiveError> {
        self.state.check()?;
        let mut sessions = self.state.sessions.lock();
        let shared = sessions.entry(session.clone()).or_default();
        if shared.lease_holder().is_some() {
            return Ok(Acquired::Held);
        }
        let fence = Fence(self.state.next_fence.fetch_add(1, Ordering::Relaxed) + 1);
        shared.lease = Some((self.replica.clone(), fence, Instant::now() + self.ttl));
        let changed_hands = known.is_none() || shared.last_grant != known;
        shared.last_grant = Some(fence);
        Ok(Acquired::Granted(TurnLease {
            fence,
            changed_hands,
        }))
    }

    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<bool, LiveError> {
        self.state.check()?;
        let mut sessions = self.state.sessions.lock();
        let Some(shared) = sessions.get_mut(session) else {
            return Ok(false);
        };
        if !self.holds(shared, fence) {
            return Ok(false);
        }
        shared.lease = Some((self.replica.clone(), fence, Instant::now() + self.ttl));
        Ok(true)
    }

    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError> {
        self.state.check()?;
        let mut sessions = self.state.sessions.lock();
        if let Some(shared) = sessions.get_mut(session)
            && self.holds(shared, fence)
        {
            shared.lease = None;
        }
        Ok(())
    }

    fn renew_every(&self) -> Option<Duration> {
        Some(self.ttl / 3)
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn ping(&self) -> Result<(), LiveError> {
        self.state.check()
    }
}

#[async_trait]
impl SharedLogs for MemoryLive {
    async fn open(&self, session: &SessionId, proposed: Epoch) -> Result<SharedHead, LiveError> {
        self.state.check()?;
        let mut sessions = self.state.sessions.lock();
        let shared = sessions.entry(session.clone()).or_default();
        shared.epoch.get_or_insert(proposed);
        Ok(shared.shared_head())
    }

    async fn append(&self, session: &SessionId, batch: Append<'_>) -> Result<Appended, LiveError> {
        self.state.check()?;
        let Some((last, running)) = batch_end(batch.entries) else {
            return Ok(Appended::Done);
        };
        let first = batch.entries[0].seq;
        let mut sessions = self.state.sessions.lock();
        let shared = sessions.entry(session.clone()).or_default();
        if !self.holds(shared, batch.fence) {
            return Ok(Appended::Fenced);
        }
        let in_step = shared.epoch == Some(batch.epoch) && first <= shared.head + 1;
        if !in_step {
            // Another past: the producer's log wins.
            shared.epoch = Some(batch.epoch);
            shared.batches.clear();
            shared.head = first - 1;
        }
        if last > shared.head {
            let fresh: Vec<LogEntry> = batch
                .entries
                .iter()
                .filter(|entry| entry.seq > shared.head)
                .cloned()
                .collect();
            shared.batches.push_back((last, fresh));
            while shared.batches.len() > KEPT_BATCHES {
                shared.batches.pop_front();
            }
            shared.head = last;
            shared.running = running;
        }
        if batch.release {
            shared.lease = None;
        }
        drop(sessions);
        self.state.appended.notify_waiters();
        Ok(Appended::Done)
    }

    async fn read_after(&self, session: &SessionId, after: u64) -> Result<LogPage, LiveError> {
        self.state.check()?;
        Ok(self
            .state
            .page(session, |shared| shared.entries_after(after)))
    }

    async fn read_turn_of(&self, session: &SessionId, seq: u64) -> Result<LogPage, LiveError> {
        self.state.check()?;
        Ok(self.state.page(session, |shared| shared.turn_of(seq)))
    }

    async fn follow(&self, session: &SessionId) -> Result<Box<dyn LogFollower>, LiveError> {
        self.state.check()?;
        Ok(Box::new(MemoryFollower {
            state: self.state.clone(),
            session: session.clone(),
        }))
    }

    async fn send(&self, session: &SessionId, control: &Control) -> Result<bool, LiveError> {
        self.state.check()?;
        let holder = {
            let sessions = self.state.sessions.lock();
            sessions
                .get(session)
                .and_then(|shared| shared.lease_holder().map(|(holder, _, _)| holder.clone()))
        };
        let Some(holder) = holder else {
            return Ok(false);
        };
        let tx = self.state.replicas.lock().get(&holder).cloned();
        Ok(match tx {
            Some(tx) => tx.try_send((session.clone(), control.clone())).is_ok(),
            None => false,
        })
    }

    fn take_controls(&self) -> Option<mpsc::Receiver<(SessionId, Control)>> {
        self.controls.lock().take()
    }
}

#[async_trait]
impl agentwire_core::live::SharedRates for MemoryLive {
    async fn spend(&self, key: &str, per_minute: u32) -> Result<Option<Duration>, LiveError> {
        self.state.check()?;
        let mut buckets = self.state.buckets.lock();
        let (tat, wait) = gcra(&buckets, key, per_minute);
        if wait.is_none() {
            let interval =
                Duration::from_micros(agentwire_core::live::token_interval_us(per_minute));
            buckets.insert(key.to_owned(), tat + interval);
        }
        Ok(wait)
    }

    async fn check(&self, key: &str, per_minute: u32) -> Result<Option<Duration>, LiveError> {
        self.state.check()?;
        Ok(gcra(&self.state.buckets.lock(), key, per_minute).1)
    }
}

/// Bucket `key`'s theoretical arrival time (at least now), and the wait
/// for its next token when it has none.
fn gcra(
    buckets: &HashMap<String, Instant>,
    key: &str,
    per_minute: u32,
) -> (Instant, Option<Duration>) {
    let interval = Duration::from_micros(agentwire_core::live::token_interval_us(per_minute));
    let tolerance = interval * (per_minute.max(1) - 1);
    let now = Instant::now();
    let tat = buckets.get(key).copied().unwrap_or(now).max(now);
    let allowed_from = tat.checked_sub(tolerance).unwrap_or(now);
    (tat, (allowed_from > now).then(|| allowed_from - now))
}

/// The head of a session the shared state has never seen.
fn unknown_head() -> SharedHead {
    SharedHead {
        epoch: Epoch(0),
        head: 0,
        running: None,
    }
}

struct MemoryFollower {
    state: Arc<MemoryLiveState>,
    session: SessionId,
}

#[async_trait]
impl LogFollower for MemoryFollower {
    async fn read_after(&mut self, after: u64, wait: Duration) -> Result<LogPage, LiveError> {
        let deadline = Instant::now() + wait;
        loop {
            let appended = self.state.appended.notified();
            let mut appended = std::pin::pin!(appended);
            appended.as_mut().enable();
            self.state.check()?;
            let page = self
                .state
                .page(&self.session, |shared| shared.entries_after(after));
            if !page.entries.is_empty() {
                return Ok(page);
            }
            if tokio::time::timeout_at(deadline, appended).await.is_err() {
                return Ok(page);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::live::{conformance, logs_conformance};

    fn session(n: u8) -> SessionId {
        SessionId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}")).unwrap()
    }

    #[tokio::test]
    async fn memory_live_passes_the_conformance_suites() {
        let state = MemoryLiveState::new();
        let one = MemoryLive::new(&state, "one", Duration::from_secs(10));
        let two = MemoryLive::new(&state, "two", Duration::from_secs(10));
        conformance::one_holder_at_a_time(&one, &two, &session(4)).await;
        conformance::sessions_are_independent(&one, &session(5), &session(6)).await;
        logs_conformance::appends_are_fenced_and_read_back(&one, &two, &session(7)).await;
        logs_conformance::turns_are_found_and_epochs_replaced(&one, &two, &session(8)).await;
        logs_conformance::followers_wait_for_appends(&one, &two, &session(9)).await;
        logs_conformance::controls_reach_the_holder(&one, &two, &session(10)).await;
        logs_conformance::rates_are_shared(&one, &two, "turns:alice").await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_memory_lease_expires_unless_renewed() {
        let state = MemoryLiveState::new();
        let one = MemoryLive::new(&state, "one", Duration::from_secs(3));
        let two = MemoryLive::new(&state, "two", Duration::from_secs(3));
        let Acquired::Granted(lease) = one.acquire(&session(11), None).await.unwrap() else {
            panic!("granted");
        };
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(one.renew(&session(11), lease.fence).await.unwrap());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            two.acquire(&session(11), None).await.unwrap(),
            Acquired::Held
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        let Acquired::Granted(taken) = two.acquire(&session(11), None).await.unwrap() else {
            panic!("the expired lease is taken over");
        };
        assert!(taken.changed_hands && taken.fence > lease.fence);
        assert!(!one.renew(&session(11), lease.fence).await.unwrap());
    }
}

//! A turn's lease on its session ([`agentwire_core::live::TurnLeases`]): taken after
//! the session's own flag, before anything is stored; renewed while the turn
//! runs when the leases expire; given up before the terminal is appended, so
//! a client that answers `done` at once finds the session free (where logs
//! are shared, with the terminal's publication instead: `shared`).

use std::sync::Arc;
use std::time::Duration;

use super::{Acquired, Fence, SessionLease, SubmitError};
use crate::LiveCounters;
use agentwire_core::live::{LiveError, TurnLease};
use agentwire_core::session::{StoredMessage, retained_start};

/// How long an event waits for a turn running on another replica.
const EVENT_WAIT: Duration = Duration::from_secs(30);

/// How often it tries the lease meanwhile.
const EVENT_RETRY: Duration = Duration::from_millis(200);

impl SessionLease {
    /// Takes the session's lease for the turn `begin_turn` admitted here;
    /// on refusal the session is free here again. A lease that changed
    /// hands means another replica wrote: the live history is read again.
    pub(super) async fn acquire_turn_lease(&self) -> Result<Fence, SubmitError> {
        let counters = &self.inner.live_counters;
        let granted = match self.ask_for_lease().await {
            Ok(Acquired::Granted(granted)) => {
                LiveCounters::add(&counters.leases_granted, 1);
                granted
            }
            Ok(Acquired::Held) => {
                LiveCounters::add(&counters.leases_refused, 1);
                self.end_turn();
                return Err(SubmitError::TurnInProgress {
                    session: self.id().clone(),
                });
            }
            Err(e) => {
                LiveCounters::add(&counters.errors, 1);
                self.end_turn();
                return Err(e.into());
            }
        };
        if let Err(e) = self.read_window_after(granted).await {
            self.release_turn_lease(granted.fence).await;
            self.end_turn();
            return Err(e.into());
        }
        // The turn's entries go on from the shared log's head.
        if let Err(e) = self.catch_up().await {
            self.release_turn_lease(granted.fence).await;
            self.end_turn();
            return Err(e.into());
        }
        // Fences only mean something to a store where they are shared
        // (this process's own restart from 1).
        if self.shares_logs() {
            self.session.state.lock().write_fence = Some(granted.fence);
        }
        if let Err(e) = self.end_orphan_before_turn(granted.fence).await {
            self.release_turn_lease(granted.fence).await;
            self.end_turn();
            return Err(e);
        }
        Ok(granted.fence)
    }

    /// Stores `messages` that belong to no turn (an event the client
    /// reported) as a turn's records are: where leases are shared, under
    /// the session's lease, so they take the seqs after every replica's
    /// writes and a replica that lost the session cannot write them. A turn
    /// running here lends its lease. While a turn runs on another replica,
    /// or Redis cannot be reached, the write goes to a task of its own that
    /// tries the lease again for up to [`EVENT_WAIT`] (logging a failure),
    /// so the caller, a connection's loop, does not wait for either.
    pub(super) async fn store_outside_turn(
        &self,
        messages: Vec<StoredMessage>,
    ) -> Result<(), SubmitError> {
        if !self.shares_logs() {
            return Ok(self.store_messages(messages, None).await?);
        }
        match self.store_under_lease(messages.clone()).await {
            Err(SubmitError::TurnInProgress { .. } | SubmitError::Live(_)) => {}
            done => return done,
        }
        let lease = self.clone_lease();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + EVENT_WAIT;
            loop {
                tokio::time::sleep(EVENT_RETRY).await;
                match lease.store_under_lease(messages.clone()).await {
                    Err(SubmitError::TurnInProgress { .. } | SubmitError::Live(_))
                        if tokio::time::Instant::now() < deadline => {}
                    Err(e) => {
                        return tracing::warn!(session = %lease.id(), error = %e, "storing an event failed");
                    }
                    Ok(()) => return,
                }
            }
        });
        Ok(())
    }

    /// One try of [`SessionLease::store_outside_turn`] where leases are
    /// shared: `TurnInProgress` while another replica's turn holds the lease.
    async fn store_under_lease(&self, messages: Vec<StoredMessage>) -> Result<(), SubmitError> {
        if self.begin_turn().is_err() {
            // A turn of this replica's holds the lease: its fence is the
            // write's.
            return Ok(self.store_messages(messages, None).await?);
        }
        let fence = self.acquire_turn_lease().await?;
        let stored = self.store_messages(messages, None).await;
        self.release_turn_lease(fence).await;
        self.end_turn();
        Ok(stored?)
    }

    /// Asks for the session's lease, naming the last grant this process
    /// heard of for it; a grant answered here is heard of.
    pub(super) async fn ask_for_lease(&self) -> Result<Acquired, LiveError> {
        let known = self.session.state.lock().known_grant;
        let asked = self.inner.leases.acquire(self.id(), known).await;
        if let Ok(Acquired::Granted(granted)) = &asked {
            self.session.state.lock().known_grant = Some(granted.fence);
        }
        asked
    }

    /// Under a lease just granted: taken over from another holder, that
    /// holder is fenced off in the store first, then what it wrote is read;
    /// after a write of unknown outcome, what this replica may have written
    /// is read.
    pub(super) async fn read_window_after(
        &self,
        granted: TurnLease,
    ) -> Result<(), agentwire_core::store::StoreError> {
        if granted.changed_hands {
            self.take_over(granted.fence).await
        } else if self.session.state.lock().reread_window {
            self.reload_history().await
        } else {
            Ok(())
        }
    }

    /// Gives the turn's lease up. A failure is logged, not returned: the
    /// lease then expires by itself.
    pub(super) async fn release_turn_lease(&self, fence: Fence) {
        if let Err(e) = self.inner.leases.release(self.id(), fence).await {
            tracing::warn!(session = %self.id(), error = %e, "releasing a turn lease failed");
        }
    }

    /// Resolves once the turn's lease is lost: a renewal said it is no
    /// longer ours, or none succeeded for the lease's whole life. Never,
    /// when leases do not expire.
    ///
    /// Renewals go out on a fixed beat, not a sleep after each answer, so
    /// a slow one does not push the next past the lease's end; and the
    /// lease counts as renewed from when a renewal was *sent*: Redis set
    /// its expiry at some moment after that, so this side's deadline never
    /// falls later than the one other replicas see.
    pub(super) async fn lease_lost(&self, fence: Fence) {
        let leases = &self.inner.leases;
        let Some(every) = leases.renew_every() else {
            return std::future::pending().await;
        };
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut held_until = tokio::time::Instant::now() + leases.ttl();
        loop {
            beat.tick().await;
            let sent_at = tokio::time::Instant::now();
            let renewal = tokio::time::timeout_at(held_until, leases.renew(self.id(), fence));
            match renewal.await {
                Ok(Ok(true)) => held_until = sent_at + leases.ttl(),
                Ok(Ok(false)) => break,
                Ok(Err(e)) => {
                    LiveCounters::add(&self.inner.live_counters.errors, 1);
                    tracing::warn!(session = %self.id(), error = %e, "renewing a turn lease failed");
                }
                Err(_) => {}
            }
            if tokio::time::Instant::now() >= held_until {
                break;
            }
        }
        LiveCounters::add(&self.inner.live_counters.leases_lost, 1);
    }

    /// Fences the replica that held the session before off in the store,
    /// then reads what it wrote. When either fails, the next turn reads the
    /// window again: this replica knows of this grant now, so its next
    /// lease will not say the session changed hands.
    pub(super) async fn take_over(
        &self,
        fence: Fence,
    ) -> Result<(), agentwire_core::store::StoreError> {
        let taken = match self.shares_logs() {
            true => match self.inner.store.fence_session(self.id(), fence).await {
                Ok(()) => self.reload_history().await,
                Err(e) => Err(e),
            },
            false => self.reload_history().await,
        };
        if taken.is_err() {
            self.session.state.lock().reread_window = true;
        }
        taken
    }

    /// Reads the session's window from the store again, under its append
    /// lock, replacing what this process held: another replica's turns
    /// wrote since.
    async fn reload_history(&self) -> Result<(), agentwire_core::store::StoreError> {
        let _appending = self.session.appending.lock().await;
        let store = &self.inner.store;
        let window = self.session.window;
        let mut history = store.load_recent_messages(self.id(), window.max(1)).await?;
        let Some(last) = history.last() else {
            // Not stored yet (or deleted): nothing newer than what is here.
            self.session.state.lock().reread_window = false;
            return Ok(());
        };
        let next_seq = last.seq + 1;
        let last_active_at = last.created_at;
        history.drain(..retained_start(&history, window));
        let mut state = self.session.state.lock();
        state.reread_window = false;
        state.persisted = true;
        state.next_seq = next_seq;
        state.last_active_at = state.last_active_at.max(last_active_at);
        state.history = Arc::new(history);
        Ok(())
    }
}

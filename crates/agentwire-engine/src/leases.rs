//! A turn's lease on its session ([`agentwire_core::live::TurnLeases`]): taken after
//! the session's own flag, before anything is stored; renewed while the turn
//! runs when the leases expire; given up before the terminal is appended, so
//! a client that answers `done` at once finds the session free (where logs
//! are shared, with the terminal's publication instead: `shared`).

use std::sync::Arc;

use super::{Acquired, Fence, SessionLease, SubmitError};
use crate::LiveCounters;
use agentwire_core::session::retained_start;

impl SessionLease {
    /// Takes the session's lease for the turn `begin_turn` admitted here;
    /// on refusal the session is free here again. A lease that changed
    /// hands means another replica wrote: the live history is read again.
    pub(super) async fn acquire_turn_lease(&self) -> Result<Fence, SubmitError> {
        let counters = &self.inner.live_counters;
        let granted = match self.inner.leases.acquire(self.id()).await {
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
        // Taken over from another replica: fence it off in the store first,
        // then read what it wrote.
        if granted.changed_hands
            && let Err(e) = self.take_over(granted.fence).await
        {
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

    /// Gives the turn's lease up. A failure is logged, not returned: the
    /// lease then expires by itself.
    pub(super) async fn release_turn_lease(&self, fence: Fence) {
        if let Err(e) = self.inner.leases.release(self.id(), fence).await {
            tracing::warn!(session = %self.id(), error = %e, "releasing a turn lease failed");
        }
    }

    /// Resolves once the turn's lease is lost: a renewal said it is no
    /// longer ours, or renewals failed for the lease's whole life. Never,
    /// when leases do not expire.
    pub(super) async fn lease_lost(&self, fence: Fence) {
        let leases = &self.inner.leases;
        let Some(every) = leases.renew_every() else {
            return std::future::pending().await;
        };
        let mut renewed_at = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(every).await;
            match leases.renew(self.id(), fence).await {
                Ok(true) => renewed_at = tokio::time::Instant::now(),
                Ok(false) => break,
                Err(e) => {
                    LiveCounters::add(&self.inner.live_counters.errors, 1);
                    tracing::warn!(session = %self.id(), error = %e, "renewing a turn lease failed");
                    if renewed_at.elapsed() >= leases.ttl() {
                        break;
                    }
                }
            }
        }
        LiveCounters::add(&self.inner.live_counters.leases_lost, 1);
    }

    pub(super) async fn take_over(
        &self,
        fence: Fence,
    ) -> Result<(), agentwire_core::store::StoreError> {
        if self.shares_logs() {
            self.inner.store.fence_session(self.id(), fence).await?;
        }
        self.reload_history().await
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
            return Ok(());
        };
        let next_seq = last.seq + 1;
        let last_active_at = last.created_at;
        history.drain(..retained_start(&history, window));
        let mut state = self.session.state.lock();
        state.persisted = true;
        state.next_seq = next_seq;
        state.last_active_at = state.last_active_at.max(last_active_at);
        state.history = Arc::new(history);
        Ok(())
    }
}

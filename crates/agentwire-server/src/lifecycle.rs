//! Connection accounting and the drain.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::abuse::AddressHold;

/// Server-wide connection state.
#[derive(Default)]
pub struct Lifecycle {
    /// Sockets open now, including upgrades not yet completed.
    open: AtomicUsize,
    /// Requests of the request/response front doors whose turn runs: the
    /// drain waits for them as for sockets. Not sockets, so not held to
    /// `max_connections` (their turns are held to the caller's turn rate
    /// and the inbound budget).
    requests: AtomicUsize,
    /// Signalled whenever `open` or `requests` drops to zero.
    all_closed: Notify,
    /// Set on SIGTERM: `/readyz` fails and plain upgrades are refused.
    draining: AtomicBool,
    /// Set once the drain is over: every upgrade is refused.
    shut_down: AtomicBool,
    /// Cancelled at the start of the drain: idle sockets close, busy ones
    /// close once their turn ends.
    pub(crate) drain: CancellationToken,
    /// Cancelled when the drain times out: every socket closes now.
    pub(crate) force_close: CancellationToken,
    /// When the drain gives up on running turns; set as it begins.
    drain_deadline: OnceLock<Instant>,
}

/// One counted connection; dropping it uncounts it, and its address's
/// share of `server.limits.max_connections_per_address`.
pub(crate) struct ConnectionSlot {
    state: Arc<AppState>,
    _address: AddressHold,
}

/// One counted request; dropping it uncounts it.
pub(crate) struct RequestSlot {
    state: Arc<AppState>,
}

impl Lifecycle {
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// How long the drain still waits for running turns; `None` before it
    /// began.
    pub(crate) fn drain_time_left(&self) -> Option<Duration> {
        let deadline = self.drain_deadline.get()?;
        Some(deadline.saturating_duration_since(Instant::now()))
    }
}

/// Counts a new connection unless `server.limits.max_connections` are open;
/// `address` is its share of its address's limit.
pub(crate) fn try_open(state: &Arc<AppState>, address: AddressHold) -> Option<ConnectionSlot> {
    let max = state.settings().limits.max_connections;
    state
        .lifecycle()
        .open
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| ConnectionSlot {
            state: state.clone(),
            _address: address,
        })
}

/// Counts a request whose turn runs, so the drain waits for it (and at its
/// timeout cancels the turn) before the server stops.
pub(crate) fn hold_request(state: &Arc<AppState>) -> RequestSlot {
    state.lifecycle().requests.fetch_add(1, Ordering::AcqRel);
    RequestSlot {
        state: state.clone(),
    }
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        let lifecycle = &self.state.lifecycle();
        if lifecycle.requests.fetch_sub(1, Ordering::AcqRel) == 1 {
            lifecycle.all_closed.notify_waiters();
        }
    }
}

impl ConnectionSlot {
    pub(crate) fn state(&self) -> &Arc<AppState> {
        &self.state
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let lifecycle = &self.state.lifecycle();
        if lifecycle.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            lifecycle.all_closed.notify_waiters();
        }
    }
}

/// The SIGTERM path: refuse new sockets, let turns and calls finish, close
/// everything.
pub(crate) async fn drain(state: &AppState) {
    let lifecycle = &state.lifecycle();
    let timeout = state.settings().limits.drain_timeout;
    let _ = lifecycle.drain_deadline.set(Instant::now() + timeout);
    lifecycle.draining.store(true, Ordering::Release);
    lifecycle.drain.cancel();
    tracing::info!(open = lifecycle.open_connections(), "draining");
    if tokio::time::timeout(timeout, wait_drained(state))
        .await
        .is_err()
    {
        tracing::warn!(
            open = lifecycle.open_connections(),
            "drain timed out; cancelling turns"
        );
        state.engine().cancel_all_turns();
        lifecycle.force_close.cancel();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            wait_all_closed(lifecycle),
        )
        .await;
    }
    lifecycle.shut_down.store(true, Ordering::Release);
    tracing::info!("drained");
}

/// Every socket closed and every voice call over: a parked call waits for
/// its resume (which a draining server still admits) or its window.
async fn wait_drained(state: &AppState) {
    wait_all_closed(state.lifecycle()).await;
    while state.calls().active() > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A resume during the wait opened a socket again.
    wait_all_closed(state.lifecycle()).await;
}

async fn wait_all_closed(lifecycle: &Lifecycle) {
    loop {
        let notified = lifecycle.all_closed.notified();
        let requests = lifecycle.requests.load(Ordering::Acquire);
        if lifecycle.open_connections() == 0 && requests == 0 {
            return;
        }
        notified.await;
    }
}

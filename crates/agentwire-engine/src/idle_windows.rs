//! Idle sessions' windows leave memory. A connection open on a session keeps
//! it live, and with it its window: the messages the next turn shows the
//! model, up to the agent's `context_messages`, whatever their size. A
//! session idle for the configured time lets its window go, and its next
//! turn reads the window from the store, as after a takeover
//! ([`SessionLease::acquire_turn_lease`](super::SessionLease)), and its log
//! settles ([`SessionLog::settle`](agentwire_core::log::SessionLog::settle)):
//! the turns it keeps for a rejoin, held compactly. So an idle connection
//! costs little more than a fresh one, however long its conversation; a
//! session that talks keeps its window and reads nothing.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Engine, Inner, LiveSession};
use agentwire_core::time::Timestamp;

/// The sweep's period bounds: often enough that a window outlives its idle
/// time by a fraction of it, rarely enough to cost nothing.
const SWEEP_AT_MOST_EVERY: Duration = Duration::from_secs(1);
const SWEEP_AT_LEAST_EVERY: Duration = Duration::from_secs(30);

impl Engine {
    /// Lets go of the window of every live session that has had no message
    /// for `idle_for` and runs no turn or write; returns how many it let go.
    pub fn release_idle_windows(&self, idle_for: Duration) -> usize {
        let now = self.inner.clock.now();
        // Swept under the map's lock, without taking references to the
        // sessions: a lease dropped meanwhile must still see itself as the
        // last one (`SessionLease::drop` counts references).
        let live = self.inner.live.lock();
        let released = live
            .values()
            .filter(|session| session.release_window_if_idle(now, idle_for))
            .count();
        drop(live);
        self.inner
            .windows_released
            .fetch_add(released as u64, Ordering::Relaxed);
        released
    }

    /// Windows let go since the engine started (`/metrics`).
    pub fn windows_released(&self) -> u64 {
        self.inner.windows_released.load(Ordering::Relaxed)
    }

    /// The engine, with a task that lets idle sessions' windows go
    /// ([`Engine::release_idle_windows`]) until the engine is dropped. Call
    /// last when building the engine: the task's weak reference keeps
    /// `with_media` and its kind from finding the engine unshared. Needs a
    /// tokio runtime.
    pub fn releasing_idle_windows(self, idle_for: Duration) -> Engine {
        let every = (idle_for / 2).clamp(SWEEP_AT_MOST_EVERY, SWEEP_AT_LEAST_EVERY);
        tokio::spawn(sweep(Arc::downgrade(&self.inner), idle_for, every));
        self
    }
}

async fn sweep(engine: Weak<Inner>, idle_for: Duration, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = engine.upgrade() else {
            return;
        };
        Engine { inner }.release_idle_windows(idle_for);
    }
}

impl LiveSession {
    /// Empties the window of a session idle since `idle_for` before `now`,
    /// marking it to be read again, and settles its log; whether it did.
    fn release_window_if_idle(&self, now: Timestamp, idle_for: Duration) -> bool {
        // A pending write reads its messages from the window.
        let Ok(_appending) = self.appending.try_lock() else {
            return false;
        };
        let mut state = self.state.lock();
        let idle = !state.turn_running
            && state.persisted
            && !state.deleted
            && !state.history.is_empty()
            && state.last_active_at.plus(idle_for) <= now;
        if idle {
            state.history = Arc::new(Vec::new());
            state.reread_window = true;
            drop(state);
            self.log.settle();
        }
        idle
    }
}

//! Live state that the replicas of one deployment share: who runs each
//! session's turn ([`TurnLeases`]), and the turn logs and controls between
//! them ([`SharedLogs`], `logs`).
//!
//! One process needs none of it shared: [`LocalLeases`] keeps the leases in
//! memory and is the default. Several processes over one database take
//! their leases from a shared adapter (`agentwire-live`'s Redis one), so
//! the one-turn-per-session rule holds across them: a session's turn runs on
//! one replica at a time, and a message for it on any other is refused as
//! `TURN_IN_PROGRESS`.
//!
//! A lease expires unless its holder renews it, so a crashed replica's
//! sessions come free; its [`Fence`] grows with every grant, so a write can
//! be checked against the latest one (a replica paused past its lease must
//! not write after its successor has).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::ids::SessionId;

mod counters;
mod logs;
#[cfg(any(test, feature = "testing"))]
pub mod logs_conformance;
#[cfg(any(test, feature = "testing"))]
mod memory;
mod rates;

pub use counters::LiveCounters;
pub use logs::{
    Append, Appended, Control, LogFollower, LogPage, MAX_BATCH, SharedHead, SharedLive, SharedLogs,
    batch_end,
};
#[cfg(any(test, feature = "testing"))]
pub use memory::{MemoryLive, MemoryLiveState};
pub use rates::{SharedRates, token_interval_us};

/// A lease's number: every grant of a session's lease gets a larger one
/// than the grants before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fence(pub u64);

/// The lease on a session's turn, as granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLease {
    pub fence: Fence,
    /// Another process held the lease since this one last did (or that
    /// cannot be known): what this process holds of the session in memory
    /// may be older than the store, and is read again.
    pub changed_hands: bool,
}

/// What [`TurnLeases::acquire`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    Granted(TurnLease),
    /// Another turn holds the session, here or on another replica.
    Held,
}

/// The shared live state could not be reached. Callers answer it as an
/// internal error (and `/readyz` reports it); it never means "held".
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("live state unavailable: {0}")]
    Unavailable(String),
}

/// Who runs each session's turn.
#[async_trait]
pub trait TurnLeases: Send + Sync + 'static {
    /// Takes the session's lease unless someone holds it.
    async fn acquire(&self, session: &SessionId) -> Result<Acquired, LiveError>;

    /// Extends the lease granted with `fence`. `Ok(false)`: it is not held
    /// with that fence any more (it expired, and may have been taken): the
    /// turn must stop.
    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<bool, LiveError>;

    /// Gives the lease up, if it is still the one granted with `fence`.
    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError>;

    /// How often a held lease must be renewed; `None`: it never expires
    /// (one process, whose leases end with it).
    fn renew_every(&self) -> Option<Duration>;

    /// How long a lease lives without a renewal. A turn whose renewals have
    /// failed this long has lost its lease.
    fn ttl(&self) -> Duration;

    /// Whether the shared state answers; for `/readyz`.
    async fn ping(&self) -> Result<(), LiveError>;
}

/// The leases of one process, in memory: held while a turn runs, gone when
/// it ends (and with the process). What the engine uses unless it is given
/// shared ones.
#[derive(Default)]
pub struct LocalLeases {
    held: Mutex<HashMap<SessionId, Fence>>,
    /// One counter for every session: fences only need to grow per session.
    next_fence: AtomicU64,
}

impl LocalLeases {
    pub fn new() -> LocalLeases {
        LocalLeases::default()
    }
}

#[async_trait]
impl TurnLeases for LocalLeases {
    async fn acquire(&self, session: &SessionId) -> Result<Acquired, LiveError> {
        let mut held = self.held.lock();
        if held.contains_key(session) {
            return Ok(Acquired::Held);
        }
        let fence = Fence(self.next_fence.fetch_add(1, Ordering::Relaxed) + 1);
        held.insert(session.clone(), fence);
        Ok(Acquired::Granted(TurnLease {
            fence,
            changed_hands: false,
        }))
    }

    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<bool, LiveError> {
        Ok(self.held.lock().get(session) == Some(&fence))
    }

    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError> {
        let mut held = self.held.lock();
        if held.get(session) == Some(&fence) {
            held.remove(session);
        }
        Ok(())
    }

    fn renew_every(&self) -> Option<Duration> {
        None
    }

    fn ttl(&self) -> Duration {
        Duration::MAX
    }

    async fn ping(&self) -> Result<(), LiveError> {
        Ok(())
    }
}

/// The conformance suite every [`TurnLeases`] adapter passes, for the
/// adapters' own tests. `sessions` hands out ids no other test uses;
/// `other` is a second process's view of the same shared state (for
/// [`LocalLeases`], the same value: one process).
#[cfg(any(test, feature = "testing"))]
pub mod conformance {
    use super::*;

    fn granted(acquired: Acquired) -> TurnLease {
        match acquired {
            Acquired::Granted(lease) => lease,
            Acquired::Held => panic!("expected the lease to be granted"),
        }
    }

    /// A held lease refuses a second holder, here and in `other`; renewal
    /// keeps it; release frees it; every grant's fence is larger.
    pub async fn one_holder_at_a_time(
        leases: &dyn TurnLeases,
        other: &dyn TurnLeases,
        session: &SessionId,
    ) {
        let first = granted(leases.acquire(session).await.unwrap());
        assert_eq!(leases.acquire(session).await.unwrap(), Acquired::Held);
        assert_eq!(other.acquire(session).await.unwrap(), Acquired::Held);
        assert!(leases.renew(session, first.fence).await.unwrap());
        assert_eq!(other.acquire(session).await.unwrap(), Acquired::Held);
        // A stale fence neither renews nor releases the lease.
        let stale = Fence(first.fence.0 - 1);
        assert!(!leases.renew(session, stale).await.unwrap());
        leases.release(session, stale).await.unwrap();
        assert_eq!(other.acquire(session).await.unwrap(), Acquired::Held);
        leases.release(session, first.fence).await.unwrap();
        assert!(!leases.renew(session, first.fence).await.unwrap());
        let second = granted(other.acquire(session).await.unwrap());
        assert!(second.fence > first.fence, "{second:?} after {first:?}");
        other.release(session, second.fence).await.unwrap();
        let third = granted(leases.acquire(session).await.unwrap());
        assert!(third.fence > second.fence, "{third:?} after {second:?}");
        leases.release(session, third.fence).await.unwrap();
    }

    /// Sessions do not share a lease.
    pub async fn sessions_are_independent(leases: &dyn TurnLeases, a: &SessionId, b: &SessionId) {
        let on_a = granted(leases.acquire(a).await.unwrap());
        let on_b = granted(leases.acquire(b).await.unwrap());
        leases.release(a, on_a.fence).await.unwrap();
        assert_eq!(leases.acquire(b).await.unwrap(), Acquired::Held);
        leases.release(b, on_b.fence).await.unwrap();
        assert!(leases.ping().await.is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: u8) -> SessionId {
        SessionId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}")).unwrap()
    }

    #[tokio::test]
    async fn local_leases_pass_the_conformance_suite() {
        let leases = LocalLeases::new();
        conformance::one_holder_at_a_time(&leases, &leases, &session(1)).await;
        conformance::sessions_are_independent(&leases, &session(2), &session(3)).await;
        assert!(
            leases.held.lock().is_empty(),
            "released leases are forgotten"
        );
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
        let Acquired::Granted(lease) = one.acquire(&session(11)).await.unwrap() else {
            panic!("granted");
        };
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(one.renew(&session(11), lease.fence).await.unwrap());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(two.acquire(&session(11)).await.unwrap(), Acquired::Held);
        tokio::time::advance(Duration::from_secs(2)).await;
        let Acquired::Granted(taken) = two.acquire(&session(11)).await.unwrap() else {
            panic!("the expired lease is taken over");
        };
        assert!(taken.changed_hands && taken.fence > lease.fence);
        assert!(!one.renew(&session(11), lease.fence).await.unwrap());
    }
}

//! Live state that the replicas of one deployment share: who runs each
//! session's turn ([`TurnLeases`]), the turn logs and controls between
//! them ([`SharedLogs`], `logs`), and where each voice call lives
//! ([`CallRoutes`], `routes`).
//!
//! One process needs none of it shared: the engine's own leases keep them in
//! memory and are the default. Several processes over one database take
//! their leases from a shared adapter (`agentwire-live`'s Redis one), so
//! the one-turn-per-session rule holds across them: a session's turn runs on
//! one replica at a time, and a message for it on any other is refused as
//! `TURN_IN_PROGRESS`.
//!
//! A lease expires unless its holder renews it, so a crashed replica's
//! sessions come free; its [`Fence`] grows with every grant, so a write can
//! be checked against the latest one (a replica paused past its lease must
//! not write after its successor has).

use std::time::Duration;

use async_trait::async_trait;

use crate::ids::SessionId;

mod logs;
#[cfg(any(test, feature = "testing"))]
pub mod logs_conformance;
mod rates;
mod routes;

pub use logs::{
    Append, Appended, Control, LogFollower, LogPage, MAX_BATCH, SharedHead, SharedLive, SharedLogs,
    batch_end,
};
pub use rates::{SharedRates, token_interval_us};
#[cfg(any(test, feature = "testing"))]
pub use routes::conformance as routes_conformance;
pub use routes::{CallRoute, CallRoutes, MemoryCallRoutes, Renewal};

/// A lease's number: every grant of a session's lease gets a larger one
/// than the grants before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fence(pub u64);

/// The lease on a session's turn, as granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLease {
    pub fence: Fence,
    /// The lease was granted to someone since the grant the caller named
    /// as the last it knows of (or that cannot be known): what this
    /// process holds of the session in memory may be older than the store,
    /// and is read again.
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
    /// Takes the session's lease unless someone holds it. `known` is the
    /// fence of the last grant this process heard of for the session,
    /// the one its memory of the session follows: the grant says the
    /// lease changed hands unless no grant came between. A grant the
    /// process never heard of (an ask whose answer was lost, which took
    /// the lease when its bytes landed late) counts as another holder's.
    async fn acquire(
        &self,
        session: &SessionId,
        known: Option<Fence>,
    ) -> Result<Acquired, LiveError>;

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

/// The conformance suite every [`TurnLeases`] adapter passes, for the
/// adapters' own tests. `sessions` hands out ids no other test uses;
/// `other` is a second process's view of the same shared state (for
/// one process's leases, the same value).
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
        let first = granted(leases.acquire(session, None).await.unwrap());
        assert_eq!(leases.acquire(session, None).await.unwrap(), Acquired::Held);
        assert_eq!(other.acquire(session, None).await.unwrap(), Acquired::Held);
        assert!(leases.renew(session, first.fence).await.unwrap());
        assert_eq!(other.acquire(session, None).await.unwrap(), Acquired::Held);
        // A stale fence neither renews nor releases the lease.
        let stale = Fence(first.fence.0 - 1);
        assert!(!leases.renew(session, stale).await.unwrap());
        leases.release(session, stale).await.unwrap();
        assert_eq!(other.acquire(session, None).await.unwrap(), Acquired::Held);
        leases.release(session, first.fence).await.unwrap();
        assert!(!leases.renew(session, first.fence).await.unwrap());
        let second = granted(other.acquire(session, None).await.unwrap());
        assert!(second.fence > first.fence, "{second:?} after {first:?}");
        other.release(session, second.fence).await.unwrap();
        let third = granted(leases.acquire(session, None).await.unwrap());
        assert!(third.fence > second.fence, "{third:?} after {second:?}");
        leases.release(session, third.fence).await.unwrap();
    }

    /// Sessions do not share a lease.
    pub async fn sessions_are_independent(leases: &dyn TurnLeases, a: &SessionId, b: &SessionId) {
        let on_a = granted(leases.acquire(a, None).await.unwrap());
        let on_b = granted(leases.acquire(b, None).await.unwrap());
        leases.release(a, on_a.fence).await.unwrap();
        assert_eq!(leases.acquire(b, None).await.unwrap(), Acquired::Held);
        leases.release(b, on_b.fence).await.unwrap();
        assert!(leases.ping().await.is_ok());
    }
}

//! Where a session's voice call lives ([`CallRoutes`]): the replica that
//! holds a call's provider link records its address, so a `resume=S` that
//! lands on another replica can hop there (the call cannot move: a
//! realtime provider's session belongs to the process that opened it).
//!
//! A route is claimed when a call opens and renewed while it lives, under a
//! [`Fence`] that grows with every claim: the latest call on a session
//! wins, and a replica whose claim was replaced (or that was paused past
//! the route's life while another claimed it) can neither renew nor delete
//! the newer one. A route nobody renews expires, so a dead replica's calls
//! stop being found.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::{Fence, LiveError};
use crate::ids::SessionId;

/// Where a session's call is, as the replica holding it claimed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRoute {
    /// `host:port` the other replicas reach the holder at.
    pub address: String,
    /// The call's owner pseudonym: a replica relays only its owner's
    /// resume.
    pub owner: String,
}

/// What [`CallRoutes::renew`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The route is still this claim's, for another [`CallRoutes::ttl`].
    Kept,
    /// It expired and nobody claimed the session since: the holder may
    /// claim it again (its call is still the latest).
    Gone,
    /// A later claim replaced it: the holder must not claim it back.
    Replaced,
}

/// The routes of the deployment's voice calls.
#[async_trait]
pub trait CallRoutes: Send + Sync + 'static {
    /// Points `session`'s call at `route` for [`CallRoutes::ttl`],
    /// replacing any route there; the fence is larger than every one
    /// handed out for the session before.
    async fn claim(&self, session: &SessionId, route: &CallRoute) -> Result<Fence, LiveError>;

    /// Extends the route claimed with `fence`, if it is still that claim.
    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<Renewal, LiveError>;

    /// Removes the route, if it is still the one claimed with `fence`.
    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError>;

    /// The session's route, unless it expired or was released.
    async fn find(&self, session: &SessionId) -> Result<Option<CallRoute>, LiveError>;

    /// How long a route lives without a renewal; renew every third of it.
    fn ttl(&self) -> Duration;
}

/// [`CallRoutes`] in this process: the embedded default, where every call
/// is this replica's, and several replicas in one process in tests.
pub struct MemoryCallRoutes {
    ttl: Duration,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// The last fence handed out, for any session: fences grow across
    /// sessions too, which is all the rule asks.
    last: u64,
    routes: HashMap<SessionId, Held>,
}

/// A session's route, its claim's fence and when it expires.
struct Held {
    fence: u64,
    route: CallRoute,
    until: Instant,
}

impl MemoryCallRoutes {
    pub fn new(ttl: Duration) -> MemoryCallRoutes {
        MemoryCallRoutes {
            ttl,
            table: Mutex::new(Table::default()),
        }
    }
}

#[async_trait]
impl CallRoutes for MemoryCallRoutes {
    async fn claim(&self, session: &SessionId, route: &CallRoute) -> Result<Fence, LiveError> {
        let mut table = self.table.lock();
        let now = Instant::now();
        // Expired routes go here, so the table holds live calls only.
        table.routes.retain(|_, held| held.until > now);
        table.last += 1;
        let held = Held {
            fence: table.last,
            route: route.clone(),
            until: now + self.ttl,
        };
        table.routes.insert(session.clone(), held);
        Ok(Fence(table.last))
    }

    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<Renewal, LiveError> {
        let mut table = self.table.lock();
        let now = Instant::now();
        match table.routes.get_mut(session) {
            Some(held) if held.fence != fence.0 && held.until > now => Ok(Renewal::Replaced),
            Some(held) if held.fence == fence.0 && held.until > now => {
                held.until = now + self.ttl;
                Ok(Renewal::Kept)
            }
            // Expired: whoever held it, the session's latest claim is gone.
            Some(_) | None => Ok(Renewal::Gone),
        }
    }

    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError> {
        let mut table = self.table.lock();
        if table
            .routes
            .get(session)
            .is_some_and(|held| held.fence == fence.0)
        {
            table.routes.remove(session);
        }
        Ok(())
    }

    async fn find(&self, session: &SessionId) -> Result<Option<CallRoute>, LiveError> {
        let table = self.table.lock();
        let now = Instant::now();
        Ok(table
            .routes
            .get(session)
            .filter(|held| held.until > now)
            .map(|held| held.route.clone()))
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// The suite every [`CallRoutes`] adapter passes. `other` is a second
/// replica's view of the same routes (for the memory one, the same value);
/// `sessions` are ids no other test uses; the adapters' TTL is `ttl`, short
/// (the expiry case waits for it).
#[cfg(any(test, feature = "testing"))]
pub mod conformance {
    use super::*;

    fn route(address: &str, owner: &str) -> CallRoute {
        CallRoute {
            address: address.to_owned(),
            owner: owner.to_owned(),
        }
    }

    /// A claim is found by every replica; a later claim replaces it, and
    /// the replaced claim neither renews nor removes the newer one.
    pub async fn the_latest_claim_wins(
        routes: &dyn CallRoutes,
        other: &dyn CallRoutes,
        session: &SessionId,
    ) {
        assert_eq!(other.find(session).await.unwrap(), None);
        let first = routes
            .claim(session, &route("10.0.0.1:8080", "alice"))
            .await
            .unwrap();
        assert_eq!(
            other.find(session).await.unwrap(),
            Some(route("10.0.0.1:8080", "alice"))
        );
        assert_eq!(routes.renew(session, first).await.unwrap(), Renewal::Kept);
        let second = other
            .claim(session, &route("10.0.0.2:8080", "alice"))
            .await
            .unwrap();
        assert!(second > first, "{second:?} after {first:?}");
        assert_eq!(
            routes.renew(session, first).await.unwrap(),
            Renewal::Replaced
        );
        routes.release(session, first).await.unwrap();
        assert_eq!(
            routes.find(session).await.unwrap(),
            Some(route("10.0.0.2:8080", "alice"))
        );
        other.release(session, second).await.unwrap();
        assert_eq!(routes.find(session).await.unwrap(), None);
        let third = routes
            .claim(session, &route("10.0.0.1:8080", "alice"))
            .await
            .unwrap();
        assert!(third > second, "{third:?} after {second:?}");
        routes.release(session, third).await.unwrap();
    }

    /// Sessions do not share a route.
    pub async fn sessions_are_independent(routes: &dyn CallRoutes, a: &SessionId, b: &SessionId) {
        let on_a = routes
            .claim(a, &route("10.0.0.1:8080", "alice"))
            .await
            .unwrap();
        let on_b = routes
            .claim(b, &route("10.0.0.2:8080", "bob"))
            .await
            .unwrap();
        routes.release(a, on_a).await.unwrap();
        assert_eq!(routes.find(a).await.unwrap(), None);
        assert_eq!(
            routes.find(b).await.unwrap(),
            Some(route("10.0.0.2:8080", "bob"))
        );
        routes.release(b, on_b).await.unwrap();
    }

    /// A route not renewed for its TTL is gone for every replica; its
    /// holder's renewal says so, and the holder may claim it again.
    pub async fn an_unrenewed_route_expires(
        routes: &dyn CallRoutes,
        other: &dyn CallRoutes,
        session: &SessionId,
    ) {
        let ttl = routes.ttl();
        let held = routes
            .claim(session, &route("10.0.0.1:8080", "alice"))
            .await
            .unwrap();
        // Renewed, it outlives its TTL.
        for _ in 0..4 {
            tokio::time::sleep(ttl / 3).await;
            assert_eq!(routes.renew(session, held).await.unwrap(), Renewal::Kept);
        }
        assert!(other.find(session).await.unwrap().is_some());
        tokio::time::sleep(ttl + ttl / 3).await;
        assert_eq!(other.find(session).await.unwrap(), None);
        assert_eq!(routes.renew(session, held).await.unwrap(), Renewal::Gone);
        let again = routes
            .claim(session, &route("10.0.0.1:8080", "alice"))
            .await
            .unwrap();
        assert!(again > held, "{again:?} after {held:?}");
        routes.release(session, again).await.unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(name: &str) -> SessionId {
        SessionId::parse(name).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn memory_routes_pass_the_conformance_suite() {
        let routes = MemoryCallRoutes::new(Duration::from_millis(300));
        conformance::the_latest_claim_wins(&routes, &routes, &session("r-1")).await;
        conformance::sessions_are_independent(&routes, &session("r-2"), &session("r-3")).await;
        conformance::an_unrenewed_route_expires(&routes, &routes, &session("r-4")).await;
    }
}

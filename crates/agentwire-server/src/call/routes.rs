//! A call's route across replicas: while a call lives, the replica holding
//! it keeps a route ([`CallRoutes`]) naming its address and the call's
//! owner, so a `resume=` that lands on another replica can hop here
//! (`hop.rs`). The route is kept by a task of its own: the call's task
//! never waits on the shared state.

use std::sync::Arc;

use agentwire_core::live::{CallRoute, CallRoutes, Renewal};
use agentwire_core::{Fence, SessionId};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::AppState;

/// How this replica reaches the other replicas' calls and they reach its
/// own (`replica.*` with shared live state).
pub struct ReplicaLinks {
    pub routes: Arc<dyn CallRoutes>,
    /// `host:port` the other replicas reach this one's listener at.
    pub advertise: String,
    /// Signs and checks hops between replicas.
    pub secret: HopSecret,
}

/// The secret the replicas of a deployment share (`replica.secret`).
pub struct HopSecret(Vec<u8>);

impl HopSecret {
    pub fn new(secret: impl Into<Vec<u8>>) -> HopSecret {
        HopSecret(secret.into())
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for HopSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HopSecret(…)")
    }
}

/// Keeps a call's route while held; dropping it ends the keeper, which
/// removes the route (if it is still this call's).
pub(crate) struct RouteGuard {
    _stop: DropGuard,
}

/// Starts keeping `session`'s route for `owner`'s call, when the replicas
/// are linked; `None` otherwise (the call is reachable here only).
pub(crate) fn keep(state: &AppState, session: &SessionId, owner: &str) -> Option<RouteGuard> {
    let links = state.replicas()?;
    let stop = CancellationToken::new();
    let route = CallRoute {
        address: links.advertise.clone(),
        owner: owner.to_owned(),
    };
    tokio::spawn(keeper(
        links.routes.clone(),
        session.clone(),
        route,
        stop.clone(),
    ));
    Some(RouteGuard {
        _stop: stop.drop_guard(),
    })
}

/// Claims the route, renews it every third of its life until `stop`, then
/// releases it. A route that expired (the shared state was out of reach
/// for its life) is claimed again; one another call claimed since is left
/// to it.
async fn keeper(
    routes: Arc<dyn CallRoutes>,
    session: SessionId,
    route: CallRoute,
    stop: CancellationToken,
) {
    let every = routes.ttl() / 3;
    let mut fence: Option<Fence> = None;
    loop {
        fence = match fence {
            None => claim(routes.as_ref(), &session, &route).await,
            Some(held) => match routes.renew(&session, held).await {
                Ok(Renewal::Kept) => Some(held),
                Ok(Renewal::Gone) => claim(routes.as_ref(), &session, &route).await,
                Ok(Renewal::Replaced) => {
                    tracing::info!("a later voice call on the session took its route");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a voice call's route could not be renewed");
                    Some(held)
                }
            },
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    if let Some(fence) = fence
        && let Err(e) = routes.release(&session, fence).await
    {
        // It expires by itself.
        tracing::info!(error = %e, "a voice call's route could not be released");
    }
}

/// A claim, or `None` (logged) when the shared state did not answer: the
/// keeper tries again at its next round.
async fn claim(routes: &dyn CallRoutes, session: &SessionId, route: &CallRoute) -> Option<Fence> {
    match routes.claim(session, route).await {
        Ok(fence) => Some(fence),
        Err(e) => {
            tracing::warn!(error = %e, "a voice call's route could not be claimed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentwire_core::live::MemoryCallRoutes;

    use super::*;

    const TTL: Duration = Duration::from_secs(3);

    fn route(address: &str) -> CallRoute {
        CallRoute {
            address: address.to_owned(),
            owner: "alice".to_owned(),
        }
    }

    /// A keeper for `session`'s call at `address`, and its stop.
    fn start(
        routes: &Arc<MemoryCallRoutes>,
        session: &SessionId,
        address: &str,
    ) -> (tokio::task::JoinHandle<()>, CancellationToken) {
        let stop = CancellationToken::new();
        let task = tokio::spawn(keeper(
            routes.clone(),
            session.clone(),
            route(address),
            stop.clone(),
        ));
        (task, stop)
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_route_outlives_its_ttl_and_goes_when_the_call_ends() {
        let routes = Arc::new(MemoryCallRoutes::new(TTL));
        let session = SessionId::parse("kept").unwrap();
        let (task, stop) = start(&routes, &session, "10.0.0.1:8080");
        tokio::time::sleep(TTL * 4).await;
        assert_eq!(
            routes.find(&session).await.unwrap(),
            Some(route("10.0.0.1:8080"))
        );
        stop.cancel();
        task.await.unwrap();
        assert_eq!(routes.find(&session).await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replaced_route_is_left_to_the_later_call() {
        let routes = Arc::new(MemoryCallRoutes::new(TTL));
        let session = SessionId::parse("replaced").unwrap();
        let (older, _stop) = start(&routes, &session, "10.0.0.1:8080");
        tokio::time::sleep(TTL / 6).await;
        // The owner's next call, on another replica, claims the session.
        let (later, stop_later) = start(&routes, &session, "10.0.0.2:8080");
        // The older keeper finds it replaced at its next renewal and stops,
        // without taking it back or removing it.
        older.await.unwrap();
        tokio::time::sleep(TTL * 2).await;
        assert_eq!(
            routes.find(&session).await.unwrap(),
            Some(route("10.0.0.2:8080"))
        );
        stop_later.cancel();
        later.await.unwrap();
    }
}

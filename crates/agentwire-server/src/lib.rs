//! The HTTP and WebSocket server.
//!
//! # Layout
//!
//! - [`router`] builds the axum router tests and the binary share.
//! - [`serve`] runs it on an already bound listener until `shutdown`
//!   resolves, then drains.
//!
//! Grouped by dialect and by HTTP route:
//!
//! - `omnia`: the Omnia dialect on `/ws`: `upgrade` (its checks, in the
//!   Omnia reference's order), `connection` (frames, rates, turns, client
//!   tools; its voice calls' frames in `connection/voice`), `media`
//!   (`upload_request`).
//! - `call`: voice calls: the task that owns a call's provider link, the
//!   call cap, parked calls and their resume.
//! - `gnosari`: the Gnosari dialect on `/ws/agent/{agent}`,
//!   `/ws/team/{team}` and `/ws/team/{team}/agent/{agent}`: `upgrade` (its
//!   credential forms and gates), `connection` (screening, ordered turns),
//!   `assets` (`POST /assets`).
//! - `routes`: `sessions` (`/api/v1/sessions*`, the caller's sessions of
//!   both dialects), `media` (`/media/*`, on the [`MediaStore`] port in
//!   [`MediaService`]), `ops` (`/healthz`, `/readyz`, `/metrics`),
//!   `agents` (`/api/v1/agents`), `console` (the web console's embedded
//!   files at `/` and `/console/*`, and `/console/ws`).
//! - `connection`: what every front door shares once a caller is in: the
//!   driver (one task per socket whatever the dialect: the loop over turn
//!   events, frames, keepalive, credential deadline, drain and force-close,
//!   one flush per wake-up, the close; a dialect plugs in as a `Dialect`),
//!   the `Link` a dialect acts through, and `admission`, the one path from
//!   a client's frame to a turn.
//! - `state`: [`AppState`], what every handler reads; `settings` (the
//!   `server.*` config), `entries` (agents and teams as the wire shows them).
//! - `upgrade`: what every upgrade shares (capacity, origin, `Refusal`,
//!   opening a counted socket).
//! - `socket`: the driver's parts: sends with the write timeout, close
//!   codes, keepalive, credential deadline.
//! - `websocket`: the upgrade handshake and the socket it yields, which
//!   owns the raw stream so every close follows RFC 6455's closing rules,
//!   and permessage-deflate (`websocket/deflate`).
//! - `lifecycle`: connection accounting and the drain; `identity`: callers
//!   and owner pseudonyms; `budget`: the inbound bytes in flight.
//!
//! # Invariants
//!
//! This crate is the only one that knows axum. It never builds a backend: it
//! receives the engine and agents ready-made from the binary.

mod a2a;
pub mod abuse;
mod budget;
pub mod call;
mod connection;
mod entries;
mod facade;
mod functions;
#[doc(hidden)]
pub mod fuzzing;
mod gnosari;
mod identity;
mod lifecycle;
mod mcp;
mod memory_metrics;
mod metrics;
mod omnia;
mod query;
mod rate;
mod routes;
mod settings;
mod socket;
mod state;
mod trace;
mod upgrade;
mod websocket;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use axum::serve::{ListenerExt, TapIo};
use tokio::net::{TcpListener, TcpStream};

pub use abuse::{AbuseGuard, AbuseLimits};
pub use budget::InboundBudget;
pub use entries::{
    A2aCard, A2aSkill, AgentEntry, Facades, FunctionSpec, McpTool, PackReport, PackStatus, Schema,
    TeamEntry, TeamMember,
};
pub use identity::IdentitySettings;
pub use lifecycle::Lifecycle;
pub use memory_metrics::{MeasuredEmbedder, MeasuredMemory, MemoryMetrics};
pub use metrics::Metrics;
pub use settings::{Limits, ServerSettings, WebSocketSettings};
pub use state::{AppState, MediaService};
pub use websocket::{Compression, MAX_WINDOW_BITS, MIN_WINDOW_BITS, Takeover};

/// The router: `/ws` (Omnia), `/ws/agent/{agent}`, `/ws/team/{team}` and
/// `/ws/team/{team}/agent/{agent}` (Gnosari), the media routes and the
/// operational routes.
pub fn router(state: Arc<AppState>) -> Router {
    let console = state.settings().console;
    Router::new()
        .route("/ws", get(omnia::upgrade::ws_upgrade))
        .route(call::hop::HOP_PATH, get(omnia::upgrade::hop_upgrade))
        .route(
            gnosari::upgrade::AGENT_ROUTE,
            get(gnosari::upgrade::ws_upgrade),
        )
        .route(
            gnosari::upgrade::TEAM_ROUTE,
            get(gnosari::upgrade::ws_upgrade),
        )
        .route(
            gnosari::upgrade::MEMBER_ROUTE,
            get(gnosari::upgrade::ws_upgrade),
        )
        .route("/healthz", get(routes::ops::healthz))
        .route("/readyz", get(routes::ops::readyz))
        .route("/metrics", get(routes::ops::metrics))
        .merge(routes::media::routes())
        .merge(gnosari::assets::routes())
        .merge(routes::sessions::routes())
        .merge(routes::memories::routes())
        .merge(routes::agents::routes())
        .merge(routes::asyncapi::routes())
        .merge(a2a::routes())
        .merge(functions::routes())
        .merge(mcp::routes())
        .merge(routes::console::routes(console))
        .with_state(state)
}

/// Serves on `listener` until `shutdown` resolves, then drains: new upgrades
/// are refused, running turns finish (for at most the drain timeout), every
/// socket closes with 1001, and the function returns.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state.clone());
    let drained = {
        let state = state.clone();
        async move {
            shutdown.await;
            lifecycle::drain(&state).await;
        }
    };
    // The peer's address reaches the handlers for the per-address limits.
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(accepting(listener), app)
        .with_graceful_shutdown(drained)
        .await
}

/// `listener` with the settings every accepted socket gets: `TCP_NODELAY`,
/// so a turn's last frames leave at once instead of waiting (Nagle) for the
/// client's delayed ACK of the ones before, about 40 ms.
fn accepting(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
    listener.tap_io(set_nodelay)
}

fn set_nodelay(stream: &mut TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::warn!(%error, "setting TCP_NODELAY failed");
    }
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;
    use tokio::net::{TcpListener, TcpStream};

    #[tokio::test]
    async fn accepted_sockets_have_nodelay_set() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::accepting(listener);
        let client = TcpStream::connect(addr).await.unwrap();
        assert!(!client.nodelay().unwrap(), "a fresh socket has Nagle on");
        let (accepted, _) = listener.accept().await;
        assert!(
            accepted.nodelay().unwrap(),
            "TCP_NODELAY on the accepted socket"
        );
    }
}

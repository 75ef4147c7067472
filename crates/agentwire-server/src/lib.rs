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
//!   (`upload_request`, the `storage_ref` check).
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
//! - `driver`: the connection driver, one task per socket whatever the
//!   dialect: the loop over turn events, frames, keepalive, credential
//!   deadline, drain and force-close, one flush per wake-up, the close; a
//!   dialect plugs in as a `Dialect` (decode, encode, refuse).
//! - `upgrade`: what every upgrade shares (capacity, origin, `Refusal`,
//!   opening a counted socket).
//! - `socket`: the driver's parts: sends with the write timeout, close
//!   codes, keepalive, credential deadline.
//! - `websocket`: the upgrade handshake and the socket it yields, which
//!   owns the raw stream so every close follows RFC 6455's closing rules.
//! - `lifecycle`: connection accounting and the drain; `identity`: callers
//!   and owner pseudonyms; `budget`: the inbound bytes in flight.
//!
//! # Invariants
//!
//! This crate is the only one that knows axum. It never builds a backend: it
//! receives the engine and agents ready-made from the binary.

pub mod abuse;
mod budget;
pub mod call;
mod connection;
#[doc(hidden)]
pub mod fuzzing;
mod gnosari;
mod identity;
mod lifecycle;
mod metrics;
mod omnia;
mod query;
mod rate;
mod routes;
mod socket;
mod trace;
mod upgrade;
mod websocket;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{AccessLevel, Agent, Engine, MediaStore, PromptScreen};
use axum::Router;
use axum::routing::get;
use axum::serve::{ListenerExt, TapIo};
use tokio::net::{TcpListener, TcpStream};

pub use abuse::{AbuseGuard, AbuseLimits};
pub use budget::InboundBudget;
pub use identity::IdentitySettings;
pub use lifecycle::Lifecycle;
pub use metrics::Metrics;

/// Server settings that come from `server.*` in the config.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Origins allowed to open a socket, compared case-insensitively. Empty
    /// means same-origin: the `Origin` host must equal the `Host` header.
    pub allowed_origins: Vec<String>,
    /// Admit callers without a credential. With no authenticator configured,
    /// `false` refuses every upgrade.
    pub allow_unauthenticated: bool,
    pub limits: Limits,
    /// Prompt-injection screening of visitor messages; `None` is off. Only
    /// the Gnosari endpoint screens (the Omnia contract has no rejection).
    pub screening: Option<PromptScreen>,
    /// Serve the web console at `/` and `/console/*` (`server.console`).
    pub console: bool,
}

/// Per-server and per-connection limits (`server.limits.*`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open sockets beyond which upgrades get 503.
    pub max_connections: usize,
    /// Sustained client frames per second per connection.
    pub messages_per_second: u32,
    /// Frames a connection may send at once above the sustained rate.
    pub message_burst: u32,
    /// Sustained binary media bytes per second per connection. Binary frames
    /// count here and never against the message rate.
    pub media_bytes_per_second: u64,
    /// Binary media bytes a connection may send at once.
    pub media_burst_bytes: u64,
    /// Largest frame or message a client may send; larger closes with 1009.
    pub max_payload_bytes: usize,
    /// Bytes of client frames the whole server holds at once, from the read
    /// until their turn ends ([`InboundBudget`]); a frame that would exceed
    /// it is refused with `RATE_LIMITED`.
    pub inbound_bytes_in_flight: usize,
    pub ping_interval: Duration,
    /// Silence from the client (no frame of any kind) after which the socket closes.
    pub pong_timeout: Duration,
    /// How long running turns get to finish after SIGTERM before they are cancelled.
    pub drain_timeout: Duration,
    /// What one address, agent or caller may cost ([`abuse`]).
    pub abuse: AbuseLimits,
    /// Voice calls the server holds at once; one more is refused with
    /// `RATE_LIMITED` "audio session limit reached".
    pub max_calls: usize,
    /// How long a call whose socket dropped stays parked for a `resume=`.
    pub call_park_window: Duration,
}

/// How an agent is shown on the wire.
pub struct AgentEntry {
    pub agent: Arc<Agent>,
    /// Show server-side tool calls and results to Omnia clients. Only the
    /// scripted demo and test handlers do: the runtime keeps server tools to
    /// itself. Gnosari clients always see server tools, as that contract says.
    pub shows_server_tools: bool,
    /// Whether callers without a credential may use the agent.
    pub access_level: AccessLevel,
    /// Argon2id PHC string: the agent's password (Gnosari password access).
    pub password_argon2: Option<String>,
    /// The memory container the agent is scoped to: a connection naming
    /// another is refused with 403.
    pub memory_facet: Option<String>,
    /// Announced as `connected.ai_disclosure`; `None` says nothing.
    pub requires_ai_disclosure: Option<bool>,
    /// Voice calls on the Omnia endpoint; `None`: audio frames are answered
    /// `MEDIA_NOT_ENABLED`.
    pub voice: Option<call::Voice>,
}

/// A team on the Gnosari endpoints: `/ws/team/{name}` (its orchestrator
/// answers) and `/ws/team/{name}/agent/{member}`.
pub struct TeamEntry {
    pub name: String,
    /// Whether callers without a credential may use the team. A private
    /// member makes its own endpoint (and, as orchestrator, the team's)
    /// private as well.
    pub access_level: AccessLevel,
    /// Argon2id PHC string: the team's password, for both endpoints.
    pub password_argon2: Option<String>,
    /// Answers on `/ws/team/{name}`; its agent's name keys the team's sessions.
    pub orchestrator: TeamMember,
    /// Each answers on `/ws/team/{name}/agent/{id or name}`.
    pub members: Vec<TeamMember>,
}

/// One agent of a team, as an endpoint serves it.
pub struct TeamMember {
    /// Matched first in the path.
    pub id: String,
    /// Matched second in the path; the `agent_name` of its events.
    pub name: String,
    /// The member's own level, applied on top of the team's.
    pub access_level: AccessLevel,
    /// What the engine runs. Its name keys the sessions, so a session opened
    /// on one endpoint resumes on that endpoint only.
    pub agent: Arc<Agent>,
}

impl TeamEntry {
    /// The member `identifier` names: by id, then by name.
    pub fn member(&self, identifier: &str) -> Option<&TeamMember> {
        self.members
            .iter()
            .find(|m| m.id == identifier)
            .or_else(|| self.members.iter().find(|m| m.name == identifier))
    }
}

/// Everything a request handler needs. Built once by the binary.
pub struct AppState {
    pub engine: Engine,
    pub agents: HashMap<String, Arc<AgentEntry>>,
    /// Teams by name; empty unless the binary sets them after [`AppState::new`].
    pub teams: HashMap<String, Arc<TeamEntry>>,
    pub settings: ServerSettings,
    pub metrics: Metrics,
    /// The inbound byte budget every connection draws from.
    pub inbound: InboundBudget,
    pub lifecycle: Lifecycle,
    /// `None`: media storage is off (`storage.media.backend: none`).
    pub media: Option<MediaService>,
    pub identity: IdentitySettings,
    /// Failed authentications, sockets per address, turns per caller.
    pub abuse: Arc<AbuseGuard>,
    /// Voice calls open now.
    pub calls: call::Calls,
}

/// Media storage as the server uses it: the store and where clients reach
/// this server.
pub struct MediaService {
    pub store: Arc<dyn MediaStore>,
    /// The largest item the store takes (`storage.media.max_bytes`): the
    /// cap `POST /assets` reads a file part up to.
    pub max_bytes: u64,
    /// The base of upload URLs handed to clients (`server.public_url`, or
    /// `http://<bound address>`), without a trailing slash.
    pub public_base_url: String,
}

impl AppState {
    pub fn new(
        engine: Engine,
        agents: HashMap<String, Arc<AgentEntry>>,
        settings: ServerSettings,
        media: Option<MediaService>,
        identity: IdentitySettings,
    ) -> AppState {
        let inbound = InboundBudget::new(settings.limits.inbound_bytes_in_flight);
        let shared = engine.shared_rates().cloned();
        let abuse = Arc::new(AbuseGuard::new(settings.limits.abuse, shared));
        AppState {
            abuse,
            engine,
            agents,
            teams: HashMap::new(),
            settings,
            metrics: Metrics::default(),
            inbound,
            lifecycle: Lifecycle::default(),
            media,
            identity,
            calls: call::Calls::default(),
        }
    }
}

/// The router: `/ws` (Omnia), `/ws/agent/{agent}`, `/ws/team/{team}` and
/// `/ws/team/{team}/agent/{agent}` (Gnosari), the media routes and the
/// operational routes.
pub fn router(state: Arc<AppState>) -> Router {
    let console = state.settings.console;
    Router::new()
        .route("/ws", get(omnia::upgrade::ws_upgrade))
        .route("/ws/agent/{agent}", get(gnosari::upgrade::ws_upgrade))
        .route("/ws/team/{team}", get(gnosari::upgrade::team_upgrade))
        .route(
            "/ws/team/{team}/agent/{agent}",
            get(gnosari::upgrade::team_member_upgrade),
        )
        .route("/healthz", get(routes::ops::healthz))
        .route("/readyz", get(routes::ops::readyz))
        .route("/metrics", get(routes::ops::metrics))
        .merge(routes::media::routes())
        .merge(gnosari::assets::routes())
        .merge(routes::sessions::routes())
        .merge(routes::agents::routes())
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

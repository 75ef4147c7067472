//! [`AppState`]: what every handler reads, built once by the binary and
//! read through narrow accessors.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_core::{AgentMemory, MediaStore};
use agentwire_engine::Engine;

use crate::abuse::AbuseGuard;
use crate::budget::InboundBudget;
use crate::call;
use crate::entries::{AgentEntry, TeamEntry};
use crate::identity::IdentitySettings;
use crate::lifecycle::Lifecycle;
use crate::memory_metrics::MemoryMetrics;
use crate::metrics::Metrics;
use crate::settings::ServerSettings;

/// Everything a request handler needs. Built once by the binary.
pub struct AppState {
    engine: Engine,
    agents: HashMap<String, Arc<AgentEntry>>,
    teams: HashMap<String, Arc<TeamEntry>>,
    settings: ServerSettings,
    metrics: Metrics,
    /// The inbound byte budget every connection draws from.
    inbound: InboundBudget,
    lifecycle: Lifecycle,
    /// `None`: media storage is off (`storage.media.backend: none`).
    media: Option<MediaService>,
    identity: IdentitySettings,
    /// Failed authentications, sockets per address, turns per caller.
    abuse: Arc<AbuseGuard>,
    /// Voice calls open now.
    calls: call::Calls,
    /// How calls are reached across replicas; `None`: here only.
    replicas: Option<call::ReplicaLinks>,
    /// The agents' memories, for the owners' API, and what they did, for
    /// `/metrics`; `None`: not served.
    memories: Option<(Arc<dyn AgentMemory>, Arc<MemoryMetrics>)>,
    /// Where clients reach this server ([`AppState::public_base_url`]).
    public_base_url: String,
    /// The MCP door's tool calls in flight, and its authorization server.
    mcp: crate::mcp::McpState,
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
            replicas: None,
            memories: None,
            public_base_url: String::new(),
            mcp: crate::mcp::McpState::default(),
        }
    }

    /// The OAuth authorization server (the JWT issuer) that `/mcp`'s
    /// protected-resource metadata names; `None`: no document is served.
    pub fn with_authorization_server(mut self, issuer: Option<String>) -> AppState {
        self.mcp.authorization_server = issuer;
        self
    }

    /// The agents' memories (the session store's, measured by `metrics`),
    /// for `/api/v1/memories` and `/metrics`.
    pub fn with_memories(
        mut self,
        memories: Arc<dyn AgentMemory>,
        metrics: Arc<MemoryMetrics>,
    ) -> AppState {
        self.memories = Some((memories, metrics));
        self
    }

    /// Links to the other replicas, so a call's resume that lands on one
    /// of them reaches the call here, and one landing here reaches theirs.
    pub fn with_replicas(mut self, links: call::ReplicaLinks) -> AppState {
        self.replicas = Some(links);
        self
    }

    /// The teams the Gnosari team routes serve, by name.
    pub fn with_teams(mut self, teams: HashMap<String, Arc<TeamEntry>>) -> AppState {
        self.teams = teams;
        self
    }

    /// Where clients reach this server, for upload URLs: known once the
    /// listener is bound when `server.public_url` is unset.
    pub fn set_public_base_url(&mut self, url: String) {
        if let Some(media) = &mut self.media {
            media.public_base_url.clone_from(&url);
        }
        self.public_base_url = url;
    }

    /// Where clients reach this server (`server.public_url`, or
    /// `http://<bound address>`), without a trailing slash: the A2A cards'
    /// URLs.
    pub(crate) fn public_base_url(&self) -> &str {
        &self.public_base_url
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The agent `name` on `/ws?agent=` and `/ws/agent/{name}`.
    pub(crate) fn agent(&self, name: &str) -> Option<&Arc<AgentEntry>> {
        self.agents.get(name)
    }

    /// Every agent, by name.
    pub(crate) fn agents(&self) -> impl Iterator<Item = (&String, &Arc<AgentEntry>)> {
        self.agents.iter()
    }

    /// The team `name` on `/ws/team/{name}`.
    pub(crate) fn team(&self, name: &str) -> Option<&Arc<TeamEntry>> {
        self.teams.get(name)
    }

    pub(crate) fn mcp(&self) -> &crate::mcp::McpState {
        &self.mcp
    }

    pub(crate) fn settings(&self) -> &ServerSettings {
        &self.settings
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(crate) fn inbound(&self) -> &InboundBudget {
        &self.inbound
    }

    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// `None`: media storage is off.
    pub(crate) fn media(&self) -> Option<&MediaService> {
        self.media.as_ref()
    }

    pub(crate) fn identity(&self) -> &IdentitySettings {
        &self.identity
    }

    pub(crate) fn abuse(&self) -> &Arc<AbuseGuard> {
        &self.abuse
    }

    pub(crate) fn memories(&self) -> Option<&Arc<dyn AgentMemory>> {
        self.memories.as_ref().map(|(memories, _)| memories)
    }

    pub(crate) fn memory_metrics(&self) -> Option<&MemoryMetrics> {
        self.memories.as_ref().map(|(_, metrics)| metrics.as_ref())
    }

    pub(crate) fn calls(&self) -> &call::Calls {
        &self.calls
    }

    pub(crate) fn replicas(&self) -> Option<&call::ReplicaLinks> {
        self.replicas.as_ref()
    }
}

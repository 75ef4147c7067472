//! Wiring: the one place that knows every adapter and picks them from the
//! config. A backend that cannot start is a startup error, never a fallback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use agentwire_core::live::CallRoutes;
use agentwire_core::realtime::RealtimeProvider;
use agentwire_core::{AgentMemory, Clock, Handler, MediaStore, SessionInit, SessionStore};
use agentwire_engine::{Agent, Engine, MemoryPurge, SummaryScheduler};
use agentwire_handlers::{DemoHandler, EchoHandler, TestHandler};
use agentwire_media::{MediaLimits, ObjectMediaStore};
use agentwire_providers::MockRealtime;
use agentwire_runtime::{Peer, Roster};
use agentwire_server::call::{HopSecret, ReplicaLinks, Voice};
use agentwire_server::{
    AgentEntry, AppState, IdentitySettings, Limits, MeasuredMemory, MediaService, MemoryMetrics,
    ServerSettings, TeamEntry,
};
#[cfg(feature = "postgres")]
use agentwire_store::PgStore;
use agentwire_store::{MemoryLimits, MemoryStore, SqliteStore};
use agentwire_tools::sandbox::AgentSandboxes;
use anyhow::Context as _;

use crate::config::{
    AgentConfig, AuthConfig, Config, HandlerKind, LiveConfig, MediaBackend, MediaConfig,
    ReplicaConfig, SessionStorage, VoiceKind, VoiceProviderConfig,
};
use crate::system::{RandomIds, SystemClock};

mod facades;
mod memory;
mod pack;
mod runtime;
mod sandboxes;
mod session_init;
mod summaries;
mod team;

/// The application, built and not yet reachable: everything that can fail
/// at startup (the session database, media storage, credentials, providers)
/// has been tried before a port is bound, so a client never reaches a server
/// that cannot run and nothing logs "listening" for one.
pub struct App {
    state: AppState,
    public_url: Option<String>,
    /// The SQLite session store, closed by [`crate::serve`] after the drain.
    sqlite: Option<SqliteStore>,
    /// The sandboxes' instances, stopped by [`crate::serve`] after the drain.
    sandboxes: Option<Arc<agentwire_tools::sandbox::SandboxPool>>,
    /// The calls' routes and `replica`, linked once the bound address is
    /// known (the default advertised one).
    replica: Option<(Arc<dyn CallRoutes>, ReplicaConfig)>,
}

impl App {
    /// The SQLite session store, if the sessions are in one: closed on a
    /// clean shutdown, so its file alone holds every row.
    pub fn sqlite(&self) -> Option<SqliteStore> {
        self.sqlite.clone()
    }

    /// The sandbox pool, if any sandbox is configured: stopped on shutdown.
    pub fn sandboxes(&self) -> Option<Arc<agentwire_tools::sandbox::SandboxPool>> {
        self.sandboxes.clone()
    }

    /// The state to serve from the listener bound at `local_addr`: the base of
    /// upload URLs when `server.public_url` is unset.
    pub fn into_state(mut self, local_addr: SocketAddr) -> Arc<AppState> {
        let url = public_base_url(self.public_url.as_deref(), local_addr);
        self.state.set_public_base_url(url);
        let mut state = self.state;
        if let Some((routes, replica)) = self.replica {
            state = link_replicas(state, routes, replica, local_addr);
        }
        Arc::new(state)
    }
}

/// The replicas linked for voice calls, advertising `replica.advertise` or
/// the bound address. A listener on every interface without an advertised
/// address (`--listen 0.0.0.0:…` over a file that named one interface)
/// cannot be reached by that address: calls then stay on this replica.
fn link_replicas(
    state: AppState,
    routes: Arc<dyn CallRoutes>,
    replica: ReplicaConfig,
    local_addr: SocketAddr,
) -> AppState {
    let advertise = match replica.advertise {
        Some(advertise) => advertise,
        None if local_addr.ip().is_unspecified() => {
            tracing::error!(%local_addr, "replica.advertise is required on every interface; voice calls resume on this replica only");
            return state;
        }
        None => local_addr.to_string(),
    };
    tracing::info!(%advertise, "voice calls reachable from the other replicas");
    state.with_replicas(ReplicaLinks {
        routes,
        advertise,
        secret: HopSecret::new(replica.secret.expose()),
    })
}

/// Builds the application: opens the session store and every adapter.
pub async fn build(config: Config) -> anyhow::Result<App> {
    build_with(config, Wrappers::default()).await
}

/// A session store around the opened one.
pub type WrapSessions = Box<dyn FnOnce(Arc<dyn SessionStore>) -> Arc<dyn SessionStore> + Send>;
/// A media store around the opened one.
pub type WrapMedia = Box<dyn FnOnce(Arc<dyn MediaStore>) -> Arc<dyn MediaStore> + Send>;

/// What [`build_with`] puts around the adapters it opens, before anything
/// uses them: for tests that make a port fail on demand
/// (`agentwire_core::testing::FailingSessionStore`). The binary wraps
/// nothing.
#[derive(Default)]
pub struct Wrappers {
    pub sessions: Option<WrapSessions>,
    pub media: Option<WrapMedia>,
}

/// [`build`], with the opened session and media stores passed through
/// `wrappers` once, at startup.
pub async fn build_with(config: Config, wrappers: Wrappers) -> anyhow::Result<App> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let media = media_service(&config.media, clock.clone(), wrappers.media)?;
    let any_password = config.agents.iter().any(|a| a.password_argon2.is_some())
        || config.teams.iter().any(|t| t.password_argon2.is_some());
    let identity = identity_settings(&config.auth, any_password, clock.clone())?;
    // Every use of memory goes through one measured handle, filled once the
    // session store is open.
    let memory = Arc::new(memory::SessionStoreMemory::default());
    let memory_metrics = Arc::new(MemoryMetrics::default());
    let measured: Arc<dyn AgentMemory> = Arc::new(MeasuredMemory::new(
        memory.clone(),
        memory_metrics.clone(),
        clock.clone(),
    ));
    let runtime_parts =
        runtime::RuntimeParts::build(&config, measured.clone(), &memory_metrics, clock.clone())?;
    let sandboxes = sandboxes::pool(&config)?;
    let agents = agent_entries(&config, &runtime_parts, sandboxes.as_ref())?;
    let teams = team::build(&config, &agents, &runtime_parts)?;
    let opened = open_store(&config.sessions, &agents, &teams, clock.clone()).await?;
    memory.open(opened.memories);
    let embedder = runtime_parts.embedder();
    memory::write_agent_facts(
        measured.as_ref(),
        &config,
        embedder,
        clock.as_ref(),
        &RandomIds,
    )
    .await?;
    let (store, sqlite) = (opened.sessions, opened.sqlite);
    let store = match wrappers.sessions {
        Some(wrap) => wrap(store),
        None => store,
    };
    let mut summary_policies = summaries::policies(&config.agents, &runtime_parts)?;
    summaries::add_team_policies(&mut summary_policies, &config.teams, &teams, &runtime_parts)?;
    // Every summary due from before a restart is queued here. The task stops
    // with `Engine::shutdown`, or when the engine is dropped.
    let purge = MemoryPurge {
        store: measured.clone(),
        grace: config.memory.forget_grace,
        every: config.memory.purge_every,
    };
    let summaries =
        SummaryScheduler::start(store.clone(), clock.clone(), summary_policies, Some(purge))
            .await
            .context("storage.sessions: cannot read the pending session summaries")?;
    let engine = Engine::with_summaries(store, clock, Arc::new(RandomIds), summaries);
    let (engine, routes) = match open_live(&config.live).await? {
        Some(live) => (engine.with_shared_live(live.shared), Some(live.routes)),
        None => (engine, None),
    };
    let engine = match &media {
        Some(media) => engine.with_media(media.store.clone()),
        None => engine,
    };
    // Last: the sweep's task holds the engine weakly from here on.
    let engine = engine.releasing_idle_windows(config.limits.idle_window_ttl);
    let settings = server_settings(&config);
    let state = AppState::new(engine, agents, settings, media, identity)
        .with_teams(teams)
        .with_memories(measured, memory_metrics)
        .with_authorization_server(config.auth.settings.jwt.as_ref().map(|j| j.issuer.clone()));
    Ok(App {
        state,
        public_url: config.public_url,
        sqlite,
        sandboxes,
        replica: routes.zip(config.replica),
    })
}

/// The media store (`storage.media`), through `wrap`, as the server
/// serves it; `None` with `backend: none`.
fn media_service(
    config: &MediaConfig,
    clock: Arc<dyn Clock>,
    wrap: Option<WrapMedia>,
) -> anyhow::Result<Option<MediaService>> {
    let store = match (open_media(config, clock)?, wrap) {
        (Some(store), Some(wrap)) => Some(wrap(store)),
        (store, _) => store,
    };
    Ok(store.map(|store| MediaService {
        store,
        max_bytes: config.max_bytes,
        // Known once the listener is bound: `App::into_state`.
        public_base_url: String::new(),
    }))
}

/// The configured agents by name, each with its handler; runtime agents
/// find their delegation and handoff targets among them.
fn agent_entries(
    config: &Config,
    runtime_parts: &runtime::RuntimeParts,
    sandboxes: Option<&Arc<agentwire_tools::sandbox::SandboxPool>>,
) -> anyhow::Result<HashMap<String, Arc<AgentEntry>>> {
    let voice_providers = voice_providers(&config.voice_providers);
    let roster = Roster::new();
    let mut peers = Vec::new();
    let agents = config
        .agents
        .iter()
        .map(|agent| {
            let parts = AgentParts {
                runtime: runtime_parts,
                voice_providers: &voice_providers,
                sandboxes,
            };
            let entry = agent_entry(agent, &parts, &roster, &mut peers)?;
            Ok((agent.name.clone(), Arc::new(entry)))
        })
        .collect::<anyhow::Result<HashMap<_, _>>>()?;
    roster.fill(peers);
    Ok(agents)
}

/// `server.*` as the server reads it: origins, admission and limits.
fn server_settings(config: &Config) -> ServerSettings {
    let limits = &config.limits;
    ServerSettings {
        allowed_origins: config.allowed_origins.clone(),
        allow_unauthenticated: config.allow_unauthenticated,
        limits: Limits {
            max_connections: limits.max_connections,
            messages_per_second: limits.messages_per_second,
            message_burst: limits.message_burst,
            media_bytes_per_second: limits.media_bytes_per_second,
            media_burst_bytes: limits.media_burst_bytes,
            max_payload_bytes: limits.max_payload_bytes,
            inbound_bytes_in_flight: limits.inbound_bytes_in_flight,
            ping_interval: limits.ping_interval,
            pong_timeout: limits.pong_timeout,
            drain_timeout: limits.drain_timeout,
            abuse: limits.abuse,
            max_calls: limits.max_calls,
            call_park_window: limits.call_park_window,
        },
        screening: config.screening.screen(),
        console: config.console,
        websocket: config.websocket,
    }
}

/// Where clients reach this server: `server.public_url`, else the bound
/// address. Never `localhost`, which means the client's own machine to the
/// client.
fn public_base_url(public_url: Option<&str>, local_addr: SocketAddr) -> String {
    match public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            if local_addr.ip().is_unspecified() {
                tracing::warn!(
                    address = %local_addr,
                    "media upload URLs use the unspecified bind address; set server.public_url"
                );
            }
            format!("http://{local_addr}")
        }
    }
}

fn open_media(
    config: &MediaConfig,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Option<Arc<dyn MediaStore>>> {
    let limits = MediaLimits {
        max_bytes: config.max_bytes,
        ttl: config.ttl,
    };
    Ok(match &config.backend {
        MediaBackend::None => None,
        MediaBackend::Local { path } => Some(Arc::new(
            ObjectMediaStore::local(path, limits, clock).context("storage.media.path")?,
        )),
        #[cfg(feature = "s3")]
        MediaBackend::S3 {
            endpoint,
            bucket,
            region,
        } => {
            let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            let (Some(access_key_id), Some(secret_access_key)) =
                (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
            else {
                anyhow::bail!(
                    "storage.media: backend s3 needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
                );
            };
            let settings = agentwire_media::S3Settings {
                endpoint: endpoint.clone(),
                bucket: bucket.clone(),
                region: region
                    .clone()
                    .or_else(|| env("AWS_REGION"))
                    .or_else(|| env("AWS_DEFAULT_REGION"))
                    .unwrap_or_else(|| "us-east-1".to_owned()),
                access_key_id,
                secret_access_key,
                session_token: env("AWS_SESSION_TOKEN"),
            };
            Some(Arc::new(
                ObjectMediaStore::s3(&settings, limits, clock).context("storage.media")?,
            ))
        }
        #[cfg(not(feature = "s3"))]
        MediaBackend::S3 { .. } => anyhow::bail!("storage.media.backend: s3 is not built in"),
    })
}

/// The authenticator, when any validator is configured or any agent has a
/// password (which only the authenticator can check).
fn identity_settings(
    auth: &AuthConfig,
    any_password: bool,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<IdentitySettings> {
    let authenticator = if auth.is_configured() || any_password {
        Some(
            agentwire_auth::build(auth.settings.clone(), clock)
                .map_err(anyhow::Error::msg)
                .context("auth")?,
        )
    } else {
        None
    };
    Ok(IdentitySettings {
        authenticator,
        pseudonym_key: auth
            .pseudonym_key
            .as_ref()
            .map(|k| k.expose().as_bytes().to_vec()),
    })
}

/// The session store, opened: the sessions, the agents' memories on the
/// same database, and the SQLite store again to close on shutdown.
struct OpenedStore {
    sessions: Arc<dyn SessionStore>,
    memories: Arc<dyn AgentMemory>,
    sqlite: Option<SqliteStore>,
}

impl OpenedStore {
    fn of<S: SessionStore + AgentMemory>(store: S) -> OpenedStore {
        let store = Arc::new(store);
        OpenedStore {
            sessions: store.clone(),
            memories: store,
            sqlite: None,
        }
    }
}

/// The session store. A memory store is bounded by
/// `storage.memory_max_sessions` and drops sessions past their agent's
/// `context_ttl`, for every engine agent: the configured ones and each team
/// endpoint's.
async fn open_store(
    storage: &SessionStorage,
    agents: &HashMap<String, Arc<AgentEntry>>,
    teams: &HashMap<String, Arc<TeamEntry>>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<OpenedStore> {
    let opened = match storage {
        SessionStorage::Memory { max_sessions } => {
            let team_agents = teams
                .values()
                .flat_map(|team| std::iter::once(&team.orchestrator).chain(&team.members))
                .map(|member| &member.agent);
            let context_ttl = agents
                .values()
                .map(|entry| &entry.agent)
                .chain(team_agents)
                .map(|agent| (agent.name.clone(), agent.context_ttl))
                .collect();
            let limits = MemoryLimits {
                max_sessions: *max_sessions,
                context_ttl,
            };
            OpenedStore::of(MemoryStore::with_limits(limits, clock))
        }
        SessionStorage::Sqlite(path) => {
            let store = SqliteStore::open(path).await.with_context(|| {
                format!(
                    "storage.sessions: cannot open SQLite database {}",
                    path.display()
                )
            })?;
            let sqlite = Some(store.clone());
            return Ok(OpenedStore {
                sqlite,
                ..OpenedStore::of(store)
            });
        }
        // The error names the database by its redacted URL, and the
        // store's errors never carry the password.
        #[cfg(feature = "postgres")]
        SessionStorage::Postgres(options) => {
            OpenedStore::of(PgStore::connect(options).await.with_context(|| {
                format!(
                    "storage.sessions: cannot open PostgreSQL database {}",
                    options.url
                )
            })?)
        }
    };
    Ok(opened)
}

/// `agentwire migrate`: applies the session database's missing migrations;
/// what it did, in a line for the operator.
pub async fn migrate(storage: &SessionStorage) -> anyhow::Result<String> {
    match storage {
        SessionStorage::Memory { .. } => {
            Ok("storage.sessions: memory: there is no schema to migrate".to_owned())
        }
        SessionStorage::Sqlite(path) => {
            SqliteStore::open(path).await.with_context(|| {
                format!(
                    "storage.sessions: cannot open SQLite database {}",
                    path.display()
                )
            })?;
            Ok(format!(
                "SQLite database {}: schema up to date",
                path.display()
            ))
        }
        #[cfg(feature = "postgres")]
        SessionStorage::Postgres(options) => {
            let applied = PgStore::migrate(options).await.with_context(|| {
                format!(
                    "storage.sessions: cannot migrate PostgreSQL database {}",
                    options.url
                )
            })?;
            Ok(match applied.is_empty() {
                true => format!("PostgreSQL database {}: schema up to date", options.url),
                false => format!(
                    "PostgreSQL database {}: applied migrations {applied:?}",
                    options.url
                ),
            })
        }
    }
}

/// The live state shared with the other replicas.
struct OpenedLive {
    /// Turn leases, turn logs, the control bus, rate limits.
    shared: Arc<dyn agentwire_core::live::SharedLive>,
    /// Where voice calls live.
    routes: Arc<dyn CallRoutes>,
}

/// The live state shared with the other replicas for `live: redis://…`;
/// `None` for `memory` (the engine's own, in this process).
async fn open_live(live: &LiveConfig) -> anyhow::Result<Option<OpenedLive>> {
    match live {
        LiveConfig::Memory => Ok(None),
        #[cfg(feature = "redis")]
        LiveConfig::Redis(redis) => {
            let settings = agentwire_live::RedisSettings {
                url: redis.url.clone(),
                key_prefix: redis.key_prefix.clone(),
                lease_ttl: redis.lease_ttl,
                timeout: redis.timeout,
                replica_id: crate::system::replica_id(),
                tls_roots: redis.tls_roots.clone(),
            };
            let replica = settings.replica_id.clone();
            let leases = agentwire_live::RedisLive::connect(settings)
                .await
                .with_context(|| {
                    format!(
                        "live: cannot open Redis {}",
                        agentwire_store::redact_url(&redis.url)
                    )
                })?;
            tracing::info!(replica = %replica, "live state on Redis");
            let live = Arc::new(leases);
            Ok(Some(OpenedLive {
                shared: live.clone(),
                routes: live,
            }))
        }
        #[cfg(not(feature = "redis"))]
        LiveConfig::Redis(_) => {
            anyhow::bail!("live: redis is not built into this binary (cargo feature `redis`)")
        }
    }
}

/// What an agent's entry is built from, besides its config.
struct AgentParts<'a> {
    runtime: &'a runtime::RuntimeParts,
    voice_providers: &'a HashMap<String, Arc<dyn RealtimeProvider>>,
    sandboxes: Option<&'a Arc<agentwire_tools::sandbox::SandboxPool>>,
}

/// The agent's entry; its handler joins `peers`, the roster of delegation
/// and handoff targets.
fn agent_entry(
    config: &AgentConfig,
    parts: &AgentParts<'_>,
    roster: &Arc<Roster>,
    peers: &mut Vec<(String, Peer)>,
) -> anyhow::Result<AgentEntry> {
    let (runtime_parts, voice_providers) = (parts.runtime, parts.voice_providers);
    let sandboxes = sandboxes::for_agent(parts.sandboxes, config);
    let built = agent_handler(config, runtime_parts, roster, sandboxes.clone())?;
    peers.push((config.name.clone(), built.peer));
    // A compiled pack first, then the sandboxes (which take the
    // declaration the pack's init passes on).
    let session_inits = (built.init.into_iter())
        .chain(sandboxes.map(|sandboxes| sandboxes as Arc<dyn SessionInit>))
        .collect();
    Ok(AgentEntry {
        agent: Arc::new(Agent {
            name: config.name.clone(),
            context_ttl: config.context_ttl,
            ack_timeout: config.ack_timeout,
            client_tool_timeout: config.client_tool_timeout,
            handler: built.handler,
            session_init: session_init::combine(session_inits),
        }),
        shows_server_tools: matches!(config.handler, HandlerKind::Demo | HandlerKind::Test),
        access_level: config.access_level,
        password_argon2: config.password_argon2.clone(),
        memory_facet: config.memory_facet.clone(),
        memory_tier: config
            .runtime
            .as_ref()
            .and_then(|r| r.memory.as_ref())
            .map(|m| m.tier),
        requires_ai_disclosure: config.requires_ai_disclosure,
        voice: config
            .voice
            .as_ref()
            .and_then(|name| voice_providers.get(name))
            .map(|provider| Voice {
                provider: provider.clone(),
                instructions: config
                    .runtime
                    .as_ref()
                    .and_then(|r| r.instructions.clone())
                    .unwrap_or_default(),
                tools: config
                    .runtime
                    .as_ref()
                    .map(|r| runtime_parts.server_tools(r))
                    .unwrap_or_default(),
                client_tools: config
                    .runtime
                    .as_ref()
                    .map(|r| runtime_parts.client_tools(r))
                    .unwrap_or_default(),
                caller_tools: config
                    .runtime
                    .as_ref()
                    .map(|r| runtime_parts.caller_tools(&config.name, r))
                    .unwrap_or_default(),
            }),
        facades: facades::build(&config.facades)?,
        pack: built.status,
    })
}

/// An agent's handler, as a delegation (or handoff) target too, with its
/// session init and pack status for a pack agent.
struct BuiltHandler {
    handler: Arc<dyn Handler>,
    peer: Peer,
    init: Option<Arc<dyn agentwire_core::SessionInit>>,
    status: Option<Arc<agentwire_server::PackStatus>>,
}

fn agent_handler(
    config: &AgentConfig,
    runtime_parts: &runtime::RuntimeParts,
    roster: &Arc<Roster>,
    sandboxes: Option<Arc<AgentSandboxes>>,
) -> anyhow::Result<BuiltHandler> {
    let handler: Arc<dyn Handler> = match (&config.handler, &config.runtime) {
        (HandlerKind::Test, _) => Arc::new(TestHandler),
        (HandlerKind::Echo, _) => Arc::new(EchoHandler),
        (HandlerKind::Demo, _) => Arc::new(DemoHandler),
        (HandlerKind::Runtime, Some(runtime)) => {
            if let Some(pack_config) = &runtime.pack {
                let agent = pack::PackAgentConfig {
                    name: &config.name,
                    runtime,
                    pack: pack_config,
                    sandboxes,
                };
                let built = pack::agent(runtime_parts, agent, roster)
                    .with_context(|| format!("agents: {}: pack", config.name))?;
                return Ok(BuiltHandler {
                    handler: built.handler,
                    peer: built.peer,
                    init: built.init,
                    status: Some(built.status),
                });
            }
            let handler = runtime_parts.handler(&config.name, runtime, roster)?;
            let handler = Arc::new(match sandboxes {
                Some(sandboxes) => handler.with_session_tools(sandboxes),
                None => handler,
            });
            return Ok(BuiltHandler {
                handler: handler.clone(),
                peer: Peer::Runtime(handler),
                init: None,
                status: None,
            });
        }
        (HandlerKind::Runtime, None) => {
            anyhow::bail!("agents: {}: runtime fields were validated", config.name)
        }
    };
    Ok(BuiltHandler {
        peer: Peer::Handler {
            name: config.name.clone(),
            handler: handler.clone(),
        },
        handler,
        init: None,
        status: None,
    })
}

/// The configured voice providers, by name.
fn voice_providers(configs: &[VoiceProviderConfig]) -> HashMap<String, Arc<dyn RealtimeProvider>> {
    configs
        .iter()
        .map(|config| {
            let provider: Arc<dyn RealtimeProvider> = match &config.kind {
                VoiceKind::Mock(script) => Arc::new(MockRealtime::new(script.clone())),
                VoiceKind::OpenAiRealtime(provider) => Arc::new(provider.clone()),
                VoiceKind::Cascade(provider) => Arc::new(provider.clone()),
            };
            (config.name.clone(), provider)
        })
        .collect()
}

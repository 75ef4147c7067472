//! The configuration file: YAML with `${VAR}` / `${VAR:default}` substitution
//! in its values, parsed strictly (unknown keys are errors) and validated into
//! typed settings before any port is bound.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

mod auth;
mod duration;
mod env;
mod live;
mod media;
mod mock;
mod postgres;
mod print;
pub mod reference;
mod runtime;
mod screening;
mod summary;
mod team;
mod team_file;
mod telemetry;
mod voice;

pub use auth::AuthConfig;
pub use duration::parse_duration;
pub use live::{LiveConfig, RedisConfig};
pub use media::{MediaBackend, MediaConfig};
pub use print::{REDACTED, effective_yaml, load_effective_yaml};
pub use runtime::{HttpToolSettingsDebug, NamedTool, RuntimeAgentConfig, ToolConfig};
pub use screening::ScreeningConfig;
pub use summary::{DEFAULT_SUMMARY_AFTER_IDLE, SummaryConfig};
pub use team::{FileAgent, FileTool, TeamConfig, TeamFile, TeamMembers};
pub use telemetry::{OtlpProtocol, TracesConfig};
pub use voice::{VoiceKind, VoiceProviderConfig};

/// The built-in configuration served when no `--config` is given: three
/// scripted agents on an SQLite file under `./data/`.
pub const DEMO_CONFIG: &str = include_str!("../demo.yaml");

/// A configuration that parsed and validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub public_url: Option<String>,
    pub allowed_origins: Vec<String>,
    pub allow_unauthenticated: bool,
    /// `server.console`: serve the web console (default true).
    pub console: bool,
    pub limits: LimitsConfig,
    pub sessions: SessionStorage,
    /// `live` and `redis`: the state replicas share.
    pub live: LiveConfig,
    /// `storage.media`.
    pub media: MediaConfig,
    /// `auth.*`: validators and the pseudonym key.
    pub auth: AuthConfig,
    /// `screening`: prompt-injection screening of visitor messages.
    pub screening: ScreeningConfig,
    pub providers: Vec<agentwire_providers::ProviderSettings>,
    /// `voice_providers[]`: what agents' voice calls run on.
    pub voice_providers: Vec<VoiceProviderConfig>,
    pub tools: Vec<NamedTool>,
    pub agents: Vec<AgentConfig>,
    /// `teams[]`: `/ws/team/{team}` and its members.
    pub teams: Vec<TeamConfig>,
    /// `telemetry.traces`; `None` when traces are off.
    pub traces: Option<TracesConfig>,
}

#[derive(Debug, Clone)]
pub struct LimitsConfig {
    pub max_connections: usize,
    pub messages_per_second: u32,
    pub message_burst: u32,
    pub media_bytes_per_second: u64,
    pub media_burst_bytes: u64,
    pub max_payload_bytes: usize,
    /// Bytes of client frames the server holds at once (read, not yet
    /// through their turn); beyond: `RATE_LIMITED`.
    pub inbound_bytes_in_flight: usize,
    pub ping_interval: Duration,
    pub pong_timeout: Duration,
    pub drain_timeout: Duration,
    /// Failed authentications, sockets per address, turns per caller.
    pub abuse: agentwire_server::AbuseLimits,
    /// Voice calls open at once.
    pub max_calls: usize,
    /// How long a dropped call waits for its `resume=`.
    pub call_park_window: Duration,
}

/// The inbound budget without `server.limits.inbound_bytes_in_flight`:
/// 256 MiB, or room for four frames of `max_payload_bytes` if that is more.
pub const DEFAULT_INBOUND_BYTES_IN_FLIGHT: usize = 256 * 1024 * 1024;

fn default_inbound_bytes_in_flight(max_payload_bytes: usize) -> usize {
    DEFAULT_INBOUND_BYTES_IN_FLIGHT.max(max_payload_bytes.saturating_mul(4))
}

/// Where sessions live (`storage.sessions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStorage {
    Sqlite(PathBuf),
    /// A `postgres://` URL and `storage.postgres`; the URL's `Debug` and
    /// `Display` hide its password.
    #[cfg(feature = "postgres")]
    Postgres(Box<agentwire_store::PgOptions>),
    /// `max_sessions`: `storage.memory_max_sessions`.
    Memory {
        max_sessions: usize,
    },
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum HandlerKind {
    Test,
    Echo,
    Demo,
    Runtime,
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub name: String,
    pub handler: HandlerKind,
    pub context_ttl: Duration,
    pub ack_timeout: Duration,
    pub client_tool_timeout: Duration,
    /// Set exactly for `handler: runtime`.
    pub runtime: Option<RuntimeAgentConfig>,
    /// `access_level`; without it `private` for an agent with a password,
    /// else `public` when unauthenticated callers are allowed and `private`
    /// otherwise.
    pub access_level: agentwire_core::AccessLevel,
    pub password_argon2: Option<String>,
    pub memory_facet: Option<String>,
    pub requires_ai_disclosure: Option<bool>,
    /// `summary_after_idle` and `summarizer`.
    pub summary: SummaryConfig,
    /// `voice`: a name from `voice_providers[]`.
    pub voice: Option<String>,
}

/// A configuration that cannot be served. `key` names the offending setting
/// (`server.limits.ping_interval`, `agents[1].name`) or the variable.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Fails at the first of `fields` (a name and whether it is given) that is
/// given, saying `why` it does not apply.
fn refuse_given(
    key: &dyn Fn(&str) -> String,
    fields: &[(&'static str, bool)],
    why: &str,
) -> Result<(), ConfigError> {
    match fields.iter().find(|(_, given)| *given) {
        Some((field, _)) => Err(ConfigError::new(key(field), why)),
        None => Ok(()),
    }
}

/// Parses and validates a configuration text. `lookup` resolves `${VAR}`
/// in its values.
pub fn parse(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let (tree, written) = env::parse(text, &lookup).map_err(|e| match e {
        env::LoadError::Yaml(e) => ConfigError::new("config", format!("invalid YAML: {e}")),
        env::LoadError::At(e) => e,
    })?;
    let raw: raw::File = env::deserialize(tree, "config")?;
    validate(raw, &lookup).map_err(|e| written.redact(e))
}

/// Reads and parses `path`, resolving `${VAR}` from the process environment.
pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new("--config", format!("cannot read {}: {e}", path.display()))
    })?;
    parse(&text, |name| std::env::var(name).ok())
}

/// Each section in turn, in the order the file's reference lists them: a
/// later one may name an earlier one's entries.
fn validate(
    raw: raw::File,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let server = validate_server(raw.server)?;
    let (sessions, media) = validate_storage(raw.storage)?;
    let live = validate_live(&raw.live, raw.redis, &media)?;
    let traces = telemetry::validate(raw.telemetry, lookup)?;
    let auth = auth::validate(raw.auth)?;
    let screening = screening::validate(raw.screening)?;
    let allow_unauthenticated = server
        .allow_unauthenticated
        .unwrap_or(!auth.is_configured());
    let providers = validate_providers(raw.providers, lookup)?;
    let tools = validate_tools(raw.tools)?;
    let voice_providers = validate_voice_providers(raw.voice_providers, &providers, lookup)?;
    let agents = validate_agents(
        raw.agents,
        &Declared {
            providers: &providers,
            tools: &tools,
            voice_providers: &voice_providers,
        },
        allow_unauthenticated,
    )?;
    let teams = team::validate_teams(
        raw.teams,
        &agents,
        &providers,
        &tools,
        allow_unauthenticated,
        lookup,
    )?;
    Ok(Config {
        listen: server.listen,
        public_url: server.public_url,
        allowed_origins: server.allowed_origins,
        allow_unauthenticated,
        console: server.console,
        limits: server.limits,
        sessions,
        live,
        media,
        auth,
        screening,
        providers,
        voice_providers,
        tools,
        agents,
        teams,
        traces,
    })
}

/// `server`, checked.
struct ServerSection {
    listen: SocketAddr,
    public_url: Option<String>,
    allowed_origins: Vec<String>,
    /// Without it, whether `auth` is configured decides.
    allow_unauthenticated: Option<bool>,
    console: bool,
    limits: LimitsConfig,
}

fn validate_server(server: raw::Server) -> Result<ServerSection, ConfigError> {
    let listen = server.listen.parse().map_err(|_| {
        ConfigError::new(
            "server.listen",
            format!("not a socket address: {:?}", server.listen),
        )
    })?;
    if let Some(url) = &server.public_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ConfigError::new(
            "server.public_url",
            "must start with http:// or https://",
        ));
    }
    Ok(ServerSection {
        listen,
        public_url: server.public_url,
        allowed_origins: server.allowed_origins,
        allow_unauthenticated: server.allow_unauthenticated,
        console: server.console,
        limits: validate_limits(server.limits)?,
    })
}

/// `storage`: the sessions' store and the media's.
fn validate_storage(storage: raw::Storage) -> Result<(SessionStorage, MediaConfig), ConfigError> {
    let sessions = parse_session_storage(
        &storage.sessions,
        storage.memory_max_sessions,
        storage.postgres,
    )?;
    Ok((sessions, media::validate(storage.media)?))
}

/// `live` and `redis`: replicas share their media too, so not on one
/// machine's disk.
fn validate_live(
    live: &str,
    redis: live::RawRedis,
    media: &MediaConfig,
) -> Result<LiveConfig, ConfigError> {
    let live = live::validate(live, redis)?;
    if let (LiveConfig::Redis(_), MediaBackend::Local { .. }) = (&live, &media.backend) {
        return Err(ConfigError::new(
            "storage.media.backend",
            "`local` cannot be shared by replicas: with `live: redis://…` use `s3` (or `none`)",
        ));
    }
    Ok(live)
}

/// `providers[]`, with unique names.
fn validate_providers(
    raw: Vec<runtime::RawProvider>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<agentwire_providers::ProviderSettings>, ConfigError> {
    let providers = raw
        .into_iter()
        .enumerate()
        .map(|(i, provider)| runtime::validate_provider(i, provider, lookup))
        .collect::<Result<Vec<_>, _>>()?;
    runtime::check_unique("providers", providers.iter().map(|p| p.name.as_str()))?;
    Ok(providers)
}

/// `tools[]`, with unique names.
fn validate_tools(raw: Vec<runtime::RawTool>) -> Result<Vec<NamedTool>, ConfigError> {
    let tools = raw
        .into_iter()
        .enumerate()
        .map(|(i, tool)| runtime::validate_tool(i, tool))
        .collect::<Result<Vec<_>, _>>()?;
    runtime::check_unique("tools", tools.iter().map(|t| t.name.as_str()))?;
    Ok(tools)
}

/// `voice_providers[]`, with unique names.
fn validate_voice_providers(
    raw: Vec<voice::RawVoiceProvider>,
    providers: &[agentwire_providers::ProviderSettings],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<VoiceProviderConfig>, ConfigError> {
    let voice_providers = raw
        .into_iter()
        .enumerate()
        .map(|(i, provider)| voice::validate(i, provider, providers, lookup))
        .collect::<Result<Vec<_>, _>>()?;
    runtime::check_unique(
        "voice_providers",
        voice_providers.iter().map(|p| p.name.as_str()),
    )?;
    Ok(voice_providers)
}

/// What the agents may name: the checked `providers[]`, `tools[]` and
/// `voice_providers[]`.
struct Declared<'a> {
    providers: &'a [agentwire_providers::ProviderSettings],
    tools: &'a [NamedTool],
    voice_providers: &'a [VoiceProviderConfig],
}

/// `agents[]`: at least one, names unique, and the delegations and
/// handoffs between them.
fn validate_agents(
    raw: Vec<raw::Agent>,
    declared: &Declared<'_>,
    allow_unauthenticated: bool,
) -> Result<Vec<AgentConfig>, ConfigError> {
    if raw.is_empty() {
        return Err(ConfigError::new("agents", "at least one agent is required"));
    }
    let agents = raw
        .into_iter()
        .enumerate()
        .map(|(i, agent)| validate_agent(i, agent, declared, allow_unauthenticated))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, agent) in agents.iter().enumerate() {
        if agents[..i].iter().any(|a| a.name == agent.name) {
            return Err(ConfigError::new(
                format!("agents[{i}].name"),
                format!("duplicate agent name {:?}", agent.name),
            ));
        }
    }
    team::check_agent_links(&agents)?;
    Ok(agents)
}

fn validate_limits(raw: raw::Limits) -> Result<LimitsConfig, ConfigError> {
    let positive = |key: &str, value: u64| {
        if value == 0 {
            Err(ConfigError::new(
                format!("server.limits.{key}"),
                "must be greater than 0",
            ))
        } else {
            Ok(())
        }
    };
    positive("max_connections", raw.max_connections as u64)?;
    positive("messages_per_second", u64::from(raw.messages_per_second))?;
    positive("message_burst", u64::from(raw.message_burst))?;
    positive("media_bytes_per_second", raw.media_bytes_per_second)?;
    positive("media_burst_bytes", raw.media_burst_bytes)?;
    positive("max_payload_bytes", raw.max_payload_bytes as u64)?;
    positive("max_calls", raw.max_calls as u64)?;
    for (key, value) in [
        ("ping_interval", raw.ping_interval),
        ("pong_timeout", raw.pong_timeout),
        ("drain_timeout", raw.drain_timeout),
        ("call_park_window", raw.call_park_window),
    ] {
        positive(key, value.0.as_nanos() as u64)?;
    }
    let inbound_bytes_in_flight = raw
        .inbound_bytes_in_flight
        .unwrap_or_else(|| default_inbound_bytes_in_flight(raw.max_payload_bytes));
    if inbound_bytes_in_flight < raw.max_payload_bytes {
        return Err(ConfigError::new(
            "server.limits.inbound_bytes_in_flight",
            "must be at least server.limits.max_payload_bytes, or a frame the payload limit allows is always refused",
        ));
    }
    if raw.pong_timeout.0 <= raw.ping_interval.0 {
        return Err(ConfigError::new(
            "server.limits.pong_timeout",
            "must be longer than server.limits.ping_interval, or healthy idle clients are closed",
        ));
    }
    if let Some(max) = raw.max_connections_per_address {
        positive("max_connections_per_address", max as u64)?;
    }
    if let Some(turns) = raw.turns_per_minute_per_caller {
        positive("turns_per_minute_per_caller", u64::from(turns))?;
    }
    Ok(LimitsConfig {
        abuse: agentwire_server::AbuseLimits {
            auth_failures_per_address_per_minute: raw.auth_failures_per_address_per_minute,
            auth_failures_per_agent_per_minute: raw.auth_failures_per_agent_per_minute,
            max_connections_per_address: raw.max_connections_per_address,
            turns_per_minute_per_caller: raw.turns_per_minute_per_caller,
        },
        max_connections: raw.max_connections,
        messages_per_second: raw.messages_per_second,
        message_burst: raw.message_burst,
        media_bytes_per_second: raw.media_bytes_per_second,
        media_burst_bytes: raw.media_burst_bytes,
        max_payload_bytes: raw.max_payload_bytes,
        inbound_bytes_in_flight,
        ping_interval: raw.ping_interval.0,
        pong_timeout: raw.pong_timeout.0,
        drain_timeout: raw.drain_timeout.0,
        max_calls: raw.max_calls,
        call_park_window: raw.call_park_window.0,
    })
}

/// `storage.sessions`, and `storage.memory_max_sessions` for `memory`
/// (ignored with SQLite, which evicts nothing), `storage.postgres` for a
/// `postgres://` URL (ignored otherwise).
fn parse_session_storage(
    value: &str,
    memory_max_sessions: Option<usize>,
    postgres: postgres::RawPostgres,
) -> Result<SessionStorage, ConfigError> {
    if postgres::is_postgres_url(value) {
        #[cfg(feature = "postgres")]
        return postgres::validate(value, postgres)
            .map(|options| SessionStorage::Postgres(Box::new(options)));
        #[cfg(not(feature = "postgres"))]
        return postgres::validate(value, postgres).map(|never| match never {});
    }
    if value == "memory" {
        let max_sessions = memory_max_sessions.unwrap_or(agentwire_store::DEFAULT_MAX_SESSIONS);
        if max_sessions == 0 {
            return Err(ConfigError::new(
                "storage.memory_max_sessions",
                "must be at least 1",
            ));
        }
        return Ok(SessionStorage::Memory { max_sessions });
    }
    match value.strip_prefix("sqlite://") {
        Some(path) if !path.is_empty() => Ok(SessionStorage::Sqlite(PathBuf::from(path))),
        _ => Err(ConfigError::new(
            "storage.sessions",
            format!(
                "expected `sqlite://PATH`, `postgres://…` or `memory`, got {:?}",
                agentwire_store::redact_url(value)
            ),
        )),
    }
}

/// An agent's or a team's name: 1 to 128 ASCII letters, digits, `.`, `_`, `-`.
fn valid_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn validate_agent(
    index: usize,
    raw: raw::Agent,
    declared: &Declared<'_>,
    allow_unauthenticated: bool,
) -> Result<AgentConfig, ConfigError> {
    let key = |field: &str| format!("agents[{index}].{field}");
    let voice = voice::validate_agent_voice(index, raw.voice.clone(), declared.voice_providers)?;
    if !valid_agent_name(&raw.name) {
        return Err(ConfigError::new(
            key("name"),
            "1 to 128 ASCII letters, digits, '.', '_' or '-'",
        ));
    }
    let access_level = match raw.access_level {
        Some(auth::RawAccessLevel::Public) => agentwire_core::AccessLevel::Public,
        Some(auth::RawAccessLevel::Private) => agentwire_core::AccessLevel::Private,
        // A password is there to be asked for: such an agent is not open by default.
        None if raw.password_argon2.is_some() => agentwire_core::AccessLevel::Private,
        None if allow_unauthenticated => agentwire_core::AccessLevel::Public,
        None => agentwire_core::AccessLevel::Private,
    };
    if let Some(phc) = &raw.password_argon2 {
        agentwire_auth::check_password_hash(phc)
            .map_err(|e| ConfigError::new(key("password_argon2"), e))?;
    }
    if let Some(facet) = &raw.memory_facet
        && !auth::valid_memory_facet(facet)
    {
        return Err(ConfigError::new(
            key("memory_facet"),
            "1 to 128 of A-Z a-z 0-9 . _ : / -, starting with a letter or digit",
        ));
    }
    let runtime = runtime::validate_agent_runtime(index, &raw, declared.providers, declared.tools)?;
    let summary = summary::validate(
        index,
        raw.summary_after_idle,
        raw.summarizer,
        declared.providers,
    )?;
    Ok(AgentConfig {
        name: raw.name,
        handler: raw.handler,
        context_ttl: raw.context_ttl.0,
        ack_timeout: raw.ack_timeout.0,
        client_tool_timeout: raw.client_tool_timeout.0,
        runtime,
        access_level,
        password_argon2: raw.password_argon2,
        memory_facet: raw.memory_facet,
        requires_ai_disclosure: raw.requires_ai_disclosure,
        summary,
        voice,
    })
}

/// The file's shape, exactly as written. Defaults live here; meaning lives in
/// the validated types above.
mod raw {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::HandlerKind;
    use super::duration::ConfigDuration;

    /// The configuration file.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub(super) struct File {
        /// The listener, origins and per-connection limits.
        #[serde(default)]
        pub(super) server: Server,
        /// Where sessions and media live.
        #[serde(default)]
        pub(super) storage: Storage,
        /// Where the state replicas share lives (who runs each session's
        /// turn): `memory` (this process alone; the default) or a Redis URL,
        /// `redis://[:PASSWORD@]HOST:PORT[/DB]`, `rediss://…` (TLS, the
        /// server's certificate checked against the system's roots or
        /// `redis.tls_ca_file`) or `redis+unix:///PATH`, shared by every
        /// replica of the deployment.
        #[serde(default = "default_live")]
        pub(super) live: String,
        /// With a Redis URL in `live`: its keys, lease and timeouts; ignored
        /// otherwise.
        #[serde(default)]
        pub(super) redis: super::live::RawRedis,
        /// Caller identity: API keys, JWTs, the pseudonym key. Default: none
        /// (every agent public unless it has a password).
        pub(super) auth: Option<super::auth::RawAuth>,
        /// Prompt-injection screening on the Gnosari endpoints. Default: on,
        /// with the built-in phrase list.
        pub(super) screening: Option<super::screening::RawScreening>,
        /// The models runtime agents and summarizers use. Default: none.
        #[serde(default)]
        pub(super) providers: Vec<super::runtime::RawProvider>,
        /// Realtime voice providers, named by agents' `voice`. Default: none.
        #[serde(default)]
        pub(super) voice_providers: Vec<super::voice::RawVoiceProvider>,
        /// Tools, declared once and named by agents. Default: none.
        #[serde(default)]
        pub(super) tools: Vec<super::runtime::RawTool>,
        /// The agents served; at least one.
        #[serde(default)]
        pub(super) agents: Vec<Agent>,
        /// Teams of agents on `/ws/team/{team}`. Default: none.
        #[serde(default)]
        pub(super) teams: Vec<super::team::RawTeam>,
        /// OpenTelemetry export. Default: off.
        pub(super) telemetry: Option<super::telemetry::RawTelemetry>,
    }

    fn default_live() -> String {
        super::live::DEFAULT_LIVE.to_owned()
    }

    /// `server`: the listener and what it admits.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Server {
        /// The address to listen on, `HOST:PORT`; `--listen` overrides it.
        pub(super) listen: String,
        /// The server's public base URL (`http://` or `https://`), for URLs
        /// handed to clients (media upload URLs); set it behind a proxy.
        /// Default: `http://` and the bound address.
        pub(super) public_url: Option<String>,
        /// Origins allowed to open a socket (`https://app.example.com`).
        /// Empty: the same-origin check (the Origin's host is the Host); a
        /// request without Origin is allowed.
        pub(super) allowed_origins: Vec<String>,
        /// Whether callers without a credential are admitted. Default: `true`
        /// without `auth`, `false` with it.
        pub(super) allow_unauthenticated: Option<bool>,
        /// Serve the web console at `/` and `/console/*`. Default: `true`.
        pub(super) console: bool,
        /// Per-connection and server-wide limits.
        pub(super) limits: Limits,
    }

    impl Default for Server {
        fn default() -> Server {
            Server {
                listen: "127.0.0.1:8080".to_owned(),
                public_url: None,
                allowed_origins: Vec::new(),
                allow_unauthenticated: None,
                console: true,
                limits: Limits::default(),
            }
        }
    }

    /// `server.limits`.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Limits {
        /// Open sockets; beyond, upgrades answer 503 `connection limit reached`.
        pub(super) max_connections: usize,
        /// Client frames per second per connection, sustained; beyond:
        /// `RATE_LIMITED`.
        pub(super) messages_per_second: u32,
        /// Client frames per connection in a burst.
        pub(super) message_burst: u32,
        /// Binary (media) bytes per second per connection, sustained.
        pub(super) media_bytes_per_second: u64,
        /// Binary (media) bytes per connection in a burst.
        pub(super) media_burst_bytes: u64,
        /// The largest client frame in bytes; a larger one closes the socket
        /// with 1009.
        pub(super) max_payload_bytes: usize,
        /// Client bytes held server-wide, from read to the end of their turn;
        /// beyond: `RATE_LIMITED`. At least `max_payload_bytes`. Default: 256
        /// MiB, or 4 × `max_payload_bytes` if that is more.
        pub(super) inbound_bytes_in_flight: Option<usize>,
        /// How often the server pings an idle socket.
        pub(super) ping_interval: ConfigDuration,
        /// Silence (no frame of any kind) after which a socket closes with
        /// 1001; longer than `ping_interval`.
        pub(super) pong_timeout: ConfigDuration,
        /// How long running turns get after SIGTERM before they are cancelled.
        pub(super) drain_timeout: ConfigDuration,
        /// Failed authentications (a refused API key or JWT, a wrong
        /// password) a client address may make per minute, and at once;
        /// beyond, its upgrades that carry a credential get 429 with
        /// `Retry-After` until a failure has been forgiven. 0: no limit.
        pub(super) auth_failures_per_address_per_minute: u32,
        /// Failed authentications per minute against one agent or team,
        /// from any address: the bound on a guesser spread over many
        /// addresses. 0: no limit.
        pub(super) auth_failures_per_agent_per_minute: u32,
        /// Open sockets per client address (the TCP peer: behind a load
        /// balancer, the balancer's); beyond, upgrades answer 429. Default:
        /// no limit.
        pub(super) max_connections_per_address: Option<usize>,
        /// Turns a caller (its owner, else its address) may start per
        /// minute, and at once, across all its connections; beyond:
        /// `RATE_LIMITED` "turn rate limit exceeded". Default: no limit.
        pub(super) turns_per_minute_per_caller: Option<u32>,
        /// Voice calls the server holds at once; one more is refused with
        /// `RATE_LIMITED` "audio session limit reached".
        pub(super) max_calls: usize,
        /// How long a voice call whose socket closed without `hangup` (or
        /// an IsLast frame) stays parked, its provider link open, for a
        /// `resume=SESSION` by the same owner. Anonymous calls are never
        /// parked.
        pub(super) call_park_window: ConfigDuration,
    }

    impl Default for Limits {
        fn default() -> Limits {
            Limits {
                max_connections: 500,
                messages_per_second: 50,
                message_burst: 100,
                media_bytes_per_second: 2 * 1024 * 1024,
                media_burst_bytes: 16 * 1024 * 1024,
                max_payload_bytes: 16 * 1024 * 1024,
                inbound_bytes_in_flight: None,
                ping_interval: ConfigDuration::secs(30),
                pong_timeout: ConfigDuration::secs(60),
                drain_timeout: ConfigDuration::secs(30),
                auth_failures_per_address_per_minute: 20,
                auth_failures_per_agent_per_minute: 200,
                max_connections_per_address: None,
                turns_per_minute_per_caller: None,
                max_calls: 8,
                call_park_window: ConfigDuration::secs(15),
            }
        }
    }

    /// `storage`.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Storage {
        /// The session store: `sqlite://PATH` (a file, created if missing),
        /// `postgres://USER:PASSWORD@HOST:PORT/DB` (a PostgreSQL database,
        /// migrated at startup; libpq URL syntax, `?host=/dir` for a Unix
        /// socket, TLS as `?sslmode=` (`disable`, `prefer` by default,
        /// `require`, `verify-ca`, `verify-full`) and `&sslrootcert=` (a
        /// PEM file of CAs, or `system`) say) or `memory` (lost on
        /// restart). The password is redacted wherever the URL is shown;
        /// use `${VAR}` for it.
        pub(super) sessions: String,
        /// With `memory`: the most sessions kept; ignored with SQLite.
        /// Default: 10000.
        pub(super) memory_max_sessions: Option<usize>,
        /// With a `postgres://` URL: the pool and its timeouts; ignored
        /// otherwise.
        pub(super) postgres: super::postgres::RawPostgres,
        /// Media storage for uploads.
        pub(super) media: super::media::RawMedia,
    }

    impl Default for Storage {
        fn default() -> Storage {
            Storage {
                sessions: "sqlite://./data/agentwire.db".to_owned(),
                memory_max_sessions: None,
                postgres: super::postgres::RawPostgres::default(),
                media: super::media::RawMedia::default(),
            }
        }
    }

    /// One entry of `agents[]`.
    #[derive(Deserialize, Serialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Agent {
        /// The agent's name in URLs (`/ws?agent=NAME`, `/ws/agent/NAME`): 1
        /// to 128 ASCII letters, digits, `.`, `_` or `-`; unique.
        pub(super) name: String,
        /// What answers: `test` (the scripted flows, by
        /// `metadata.mock_scenario`), `echo`, `demo` (keyword replies) or
        /// `runtime` (a model from `providers[]`, with tools).
        pub(super) handler: HandlerKind,
        /// How long after its last message a session can be resumed.
        #[serde(default = "default_context_ttl")]
        pub(super) context_ttl: ConfigDuration,
        /// A client tool call not acknowledged in time is denied.
        #[serde(default = "default_ack_timeout")]
        pub(super) ack_timeout: ConfigDuration,
        /// An acknowledged client tool call not answered in time is denied.
        #[serde(default = "default_client_tool_timeout")]
        pub(super) client_tool_timeout: ConfigDuration,
        /// `runtime`: the system prompt. Default: none.
        pub(super) instructions: Option<String>,
        /// `runtime`: the `providers[]` entry that answers; required.
        pub(super) provider: Option<String>,
        /// `runtime`: names from `tools[]` the model may call. Default: none.
        pub(super) tools: Option<Vec<String>>,
        /// `runtime`: tool-call rounds per turn; then `MAX_ROUNDS_EXCEEDED`.
        /// Default: `10`.
        pub(super) max_rounds: Option<u32>,
        /// `runtime`: the latest stored messages the model sees, cut at a
        /// user message. Default: `100`.
        pub(super) context_messages: Option<usize>,
        /// `runtime`: a template (`{{ metadata.plan }}`) rendered with the
        /// message's metadata and appended to the user's text for the model.
        /// Default: none.
        pub(super) message_metadata_template: Option<String>,
        /// `runtime`: agents it may ask through the `delegate_agent` tool.
        /// Default: none.
        pub(super) delegations: Option<Vec<String>>,
        /// `runtime`: runtime agents it may hand the turn to. Default: none.
        pub(super) handoffs: Option<Vec<String>>,
        /// `public` (no credential needed) or `private`. Default: `private`
        /// with a password, else `public` when unauthenticated callers are
        /// allowed, else `private`.
        pub(super) access_level: Option<super::auth::RawAccessLevel>,
        /// An Argon2id PHC hash of the agent's password (`agentwire
        /// hash-password`), for Gnosari password access. Default: none.
        pub(super) password_argon2: Option<String>,
        /// The memory facet the agent's sessions are scoped to: used when a
        /// connection names none (`?memory_facet=` on `/ws`), and a
        /// connection naming another answers 403. Default: none (any facet).
        pub(super) memory_facet: Option<String>,
        /// Announced to clients as `connected.ai_disclosure`. Default: not
        /// announced.
        pub(super) requires_ai_disclosure: Option<bool>,
        /// How long after its last completed turn a session's summary is
        /// written. Default: `10m`.
        pub(super) summary_after_idle: Option<ConfigDuration>,
        /// The `providers[]` entry that writes summaries. Default: a runtime
        /// agent's own provider, else an extractive summary.
        pub(super) summarizer: Option<String>,
        /// Voice calls on the Omnia endpoint: a name from
        /// `voice_providers[]`. Default: none (audio frames are answered
        /// `MEDIA_NOT_ENABLED`).
        pub(super) voice: Option<String>,
    }

    fn default_context_ttl() -> ConfigDuration {
        ConfigDuration::secs(24 * 3600)
    }

    fn default_ack_timeout() -> ConfigDuration {
        ConfigDuration::secs(5)
    }

    fn default_client_tool_timeout() -> ConfigDuration {
        ConfigDuration::secs(60)
    }
}

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
mod facades;
mod live;
mod media;
mod memory;
mod mock;
mod pack;
mod postgres;
mod print;
mod raw;
pub mod reference;
mod replica;
mod runtime;
mod sandboxes;
mod screening;
mod summary;
mod team;
mod team_file;
mod telemetry;
mod voice;
mod websocket;

pub use auth::AuthConfig;
pub use duration::parse_duration;
pub use facades::{A2aConfig, AgentFacades, FunctionConfig, McpConfig, SkillConfig};
pub use live::{LiveConfig, RedisConfig};
pub use media::{MediaBackend, MediaConfig};
pub use memory::{DEFAULT_FORGET_GRACE, DEFAULT_PURGE_EVERY, MemoryConfig};
pub use pack::{
    CompileMode, PackConfig, PackFailure, PackMode, PackPlan, PackSource, PlanTool, PlanVariable,
    compile as compile_pack, diagnostic_line,
};
pub use print::{REDACTED, effective_yaml, load_effective_yaml};
pub use replica::ReplicaConfig;
pub use runtime::{HttpToolSettingsDebug, NamedTool, RuntimeAgentConfig, ToolConfig};
pub use screening::ScreeningConfig;
pub use summary::{DEFAULT_SUMMARY_AFTER_IDLE, SummaryConfig};
pub use team::{FileAgent, FileTool, TeamConfig, TeamFile, TeamMembers, TeamMemory};
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
    /// `server.websocket`: compression and the conformance echo.
    pub websocket: agentwire_server::WebSocketSettings,
    pub sessions: SessionStorage,
    /// `live` and `redis`: the state replicas share.
    pub live: LiveConfig,
    /// `replica`: how replicas reach each other's voice calls; `None`:
    /// they do not.
    pub replica: Option<ReplicaConfig>,
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
    /// `sandboxes[]`: MCP servers sessions start for themselves.
    pub sandboxes: Vec<agentwire_tools::sandbox::SandboxSettings>,
    pub agents: Vec<AgentConfig>,
    /// `teams[]`: `/ws/team/{team}` and its members.
    pub teams: Vec<TeamConfig>,
    /// `telemetry.traces`; `None` when traces are off.
    pub traces: Option<TracesConfig>,
    /// `memory`: forgetting.
    pub memory: MemoryConfig,
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
    /// How long an idle live session keeps its window in memory.
    pub idle_window_ttl: Duration,
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
    /// `a2a`, `mcp`, `function` over `facades`: the other front doors.
    pub facades: facades::AgentFacades,
    /// `sandboxes`: names from `sandboxes[]` its sessions may declare
    /// (runtime agents only).
    pub sandboxes: Vec<String>,
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
    let replica = replica::validate(raw.replica, &live, server.listen)?;
    let traces = telemetry::validate(raw.telemetry, lookup)?;
    let auth = auth::validate(raw.auth)?;
    let screening = screening::validate(raw.screening)?;
    let memory = memory::validate_memory(raw.memory, lookup)?;
    let allow_unauthenticated = server
        .allow_unauthenticated
        .unwrap_or(!auth.is_configured());
    let providers = validate_providers(raw.providers, lookup)?;
    let tools = validate_tools(raw.tools)?;
    let sandboxes = sandboxes::validate(raw.sandboxes)?;
    let voice_providers = validate_voice_providers(raw.voice_providers, &providers, lookup)?;
    let agents = validate_agents(
        raw.agents,
        &Declared {
            providers: &providers,
            tools: &tools,
            voice_providers: &voice_providers,
            facades: &raw.facades,
            sandboxes: &sandboxes,
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
        websocket: server.websocket,
        sessions,
        live,
        replica,
        media,
        auth,
        screening,
        providers,
        voice_providers,
        tools,
        sandboxes,
        agents,
        teams,
        traces,
        memory,
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
    websocket: agentwire_server::WebSocketSettings,
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
        websocket: websocket::validate(server.websocket)?,
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
    facades: &'a facades::RawFacades,
    sandboxes: &'a [agentwire_tools::sandbox::SandboxSettings],
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
        ("idle_window_ttl", raw.idle_window_ttl),
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
        idle_window_ttl: raw.idle_window_ttl.0,
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
    if raw.pack.is_some() && raw.voice.is_some() {
        return Err(ConfigError::new(
            key("voice"),
            "not with `pack`: a voice call has no pack to run",
        ));
    }
    let runtime = runtime::validate_agent_runtime(index, &raw, declared.providers, declared.tools)?;
    let sandboxes = sandboxes::validate_agent(index, &raw, declared.sandboxes)?;
    // A pack compiled now says what `connected.ai_disclosure` announces
    // (when the agent's own setting does not; they cannot differ).
    let requires_ai_disclosure = match runtime.as_ref().and_then(|r| r.pack.as_ref()) {
        Some(PackConfig {
            mode: PackMode::AtStartup(plan),
            ..
        }) => raw.requires_ai_disclosure.or(plan.ai_disclosure),
        _ => raw.requires_ai_disclosure,
    };
    let summary = summary::validate(
        index,
        raw.summary_after_idle,
        raw.summarizer,
        declared.providers,
    )?;
    let facades = facades::validate_agent(
        index,
        &raw.name,
        facades::RawAgentFacades {
            a2a: raw.a2a,
            mcp: raw.mcp,
            function: raw.function,
        },
        declared.facades,
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
        requires_ai_disclosure,
        summary,
        voice,
        facades,
        sandboxes,
    })
}

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
mod media;
mod mock;
mod runtime;
mod screening;
mod summary;
mod team;
mod team_file;

pub use auth::AuthConfig;
pub use duration::parse_duration;
pub use media::{MediaBackend, MediaConfig};
pub use runtime::{HttpToolSettingsDebug, NamedTool, RuntimeAgentConfig, ToolConfig};
pub use screening::ScreeningConfig;
pub use summary::{DEFAULT_SUMMARY_AFTER_IDLE, SummaryConfig};
pub use team::{FileAgent, FileTool, TeamConfig, TeamFile, TeamMembers};

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
    pub limits: LimitsConfig,
    pub sessions: SessionStorage,
    /// `storage.media`.
    pub media: MediaConfig,
    /// `auth.*`: validators and the pseudonym key.
    pub auth: AuthConfig,
    /// `screening`: prompt-injection screening of visitor messages.
    pub screening: ScreeningConfig,
    pub providers: Vec<agentwire_providers::ProviderSettings>,
    pub tools: Vec<NamedTool>,
    pub agents: Vec<AgentConfig>,
    /// `teams[]`: `/ws/team/{team}` and its members.
    pub teams: Vec<TeamConfig>,
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
    /// `max_sessions`: `storage.memory_max_sessions`.
    Memory {
        max_sessions: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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

/// Parses and validates a configuration text. `lookup` resolves `${VAR}`
/// in its values.
pub fn parse(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let (tree, written) = env::parse(text, &lookup).map_err(|e| match e {
        env::LoadError::Yaml(e) => ConfigError::new("config", format!("invalid YAML: {e}")),
        env::LoadError::At(e) => e,
    })?;
    let raw: raw::File = serde_path_to_error::deserialize(tree).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." {
            "config".to_owned()
        } else {
            path
        };
        written.redact(ConfigError::new(key, e.into_inner().to_string()))
    })?;
    validate(raw, &lookup).map_err(|e| written.redact(e))
}

/// Reads and parses `path`, resolving `${VAR}` from the process environment.
pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new("--config", format!("cannot read {}: {e}", path.display()))
    })?;
    parse(&text, |name| std::env::var(name).ok())
}

fn validate(
    raw: raw::File,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let server = raw.server;
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
    let limits = validate_limits(server.limits)?;
    let sessions = parse_session_storage(&raw.storage.sessions, raw.storage.memory_max_sessions)?;
    let media = media::validate(raw.storage.media)?;
    let auth = auth::validate(raw.auth)?;
    let screening = screening::validate(raw.screening)?;
    let allow_unauthenticated = server
        .allow_unauthenticated
        .unwrap_or(!auth.is_configured());
    let providers = raw
        .providers
        .into_iter()
        .enumerate()
        .map(|(i, provider)| runtime::validate_provider(i, provider, lookup))
        .collect::<Result<Vec<_>, _>>()?;
    runtime::check_unique("providers", providers.iter().map(|p| p.name.as_str()))?;
    let tools = raw
        .tools
        .into_iter()
        .enumerate()
        .map(|(i, tool)| runtime::validate_tool(i, tool))
        .collect::<Result<Vec<_>, _>>()?;
    runtime::check_unique("tools", tools.iter().map(|t| t.name.as_str()))?;
    if raw.agents.is_empty() {
        return Err(ConfigError::new("agents", "at least one agent is required"));
    }
    let agents = raw
        .agents
        .into_iter()
        .enumerate()
        .map(|(i, agent)| validate_agent(i, agent, &providers, &tools, allow_unauthenticated))
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
    let teams = team::validate_teams(
        raw.teams,
        &agents,
        &providers,
        &tools,
        allow_unauthenticated,
        lookup,
    )?;
    Ok(Config {
        listen,
        public_url: server.public_url,
        allowed_origins: server.allowed_origins,
        allow_unauthenticated,
        limits,
        sessions,
        media,
        auth,
        screening,
        providers,
        tools,
        agents,
        teams,
    })
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
    for (key, value) in [
        ("ping_interval", raw.ping_interval),
        ("pong_timeout", raw.pong_timeout),
        ("drain_timeout", raw.drain_timeout),
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
    Ok(LimitsConfig {
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
    })
}

/// `storage.sessions`, and `storage.memory_max_sessions` for `memory`
/// (ignored with SQLite, which evicts nothing).
fn parse_session_storage(
    value: &str,
    memory_max_sessions: Option<usize>,
) -> Result<SessionStorage, ConfigError> {
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
            format!("expected `sqlite://PATH` or `memory`, got {value:?}"),
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
    providers: &[agentwire_providers::ProviderSettings],
    tools: &[NamedTool],
    allow_unauthenticated: bool,
) -> Result<AgentConfig, ConfigError> {
    let key = |field: &str| format!("agents[{index}].{field}");
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
    let runtime_fields = runtime::RawAgentRuntime {
        instructions: raw.instructions,
        provider: raw.provider,
        tools: raw.tools,
        max_rounds: raw.max_rounds,
        context_messages: raw.context_messages,
        message_metadata_template: raw.message_metadata_template,
        delegations: raw.delegations,
        handoffs: raw.handoffs,
    };
    let is_runtime = raw.handler == HandlerKind::Runtime;
    let runtime =
        runtime::validate_agent_runtime(index, is_runtime, runtime_fields, providers, tools)?;
    let summary = summary::validate(index, raw.summary_after_idle, raw.summarizer, providers)?;
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
    })
}

/// The file's shape, exactly as written. Defaults live here; meaning lives in
/// the validated types above.
mod raw {
    use serde::Deserialize;

    use super::HandlerKind;
    use super::duration::ConfigDuration;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct File {
        #[serde(default)]
        pub(super) server: Server,
        #[serde(default)]
        pub(super) storage: Storage,
        pub(super) auth: Option<super::auth::RawAuth>,
        pub(super) screening: Option<super::screening::RawScreening>,
        #[serde(default)]
        pub(super) providers: Vec<super::runtime::RawProvider>,
        #[serde(default)]
        pub(super) tools: Vec<super::runtime::RawTool>,
        #[serde(default)]
        pub(super) agents: Vec<Agent>,
        #[serde(default)]
        pub(super) teams: Vec<super::team::RawTeam>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Server {
        pub(super) listen: String,
        pub(super) public_url: Option<String>,
        pub(super) allowed_origins: Vec<String>,
        pub(super) allow_unauthenticated: Option<bool>,
        pub(super) limits: Limits,
    }

    impl Default for Server {
        fn default() -> Server {
            Server {
                listen: "127.0.0.1:8080".to_owned(),
                public_url: None,
                allowed_origins: Vec::new(),
                allow_unauthenticated: None,
                limits: Limits::default(),
            }
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Limits {
        pub(super) max_connections: usize,
        pub(super) messages_per_second: u32,
        pub(super) message_burst: u32,
        pub(super) media_bytes_per_second: u64,
        pub(super) media_burst_bytes: u64,
        pub(super) max_payload_bytes: usize,
        pub(super) inbound_bytes_in_flight: Option<usize>,
        pub(super) ping_interval: ConfigDuration,
        pub(super) pong_timeout: ConfigDuration,
        pub(super) drain_timeout: ConfigDuration,
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
            }
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, default)]
    pub(super) struct Storage {
        pub(super) sessions: String,
        pub(super) memory_max_sessions: Option<usize>,
        pub(super) media: super::media::RawMedia,
    }

    impl Default for Storage {
        fn default() -> Storage {
            Storage {
                sessions: "sqlite://./data/agentwire.db".to_owned(),
                memory_max_sessions: None,
                media: super::media::RawMedia::default(),
            }
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Agent {
        pub(super) name: String,
        pub(super) handler: HandlerKind,
        #[serde(default = "default_context_ttl")]
        pub(super) context_ttl: ConfigDuration,
        #[serde(default = "default_ack_timeout")]
        pub(super) ack_timeout: ConfigDuration,
        #[serde(default = "default_client_tool_timeout")]
        pub(super) client_tool_timeout: ConfigDuration,
        pub(super) instructions: Option<String>,
        pub(super) provider: Option<String>,
        pub(super) tools: Option<Vec<String>>,
        pub(super) max_rounds: Option<u32>,
        pub(super) context_messages: Option<usize>,
        pub(super) message_metadata_template: Option<String>,
        pub(super) delegations: Option<Vec<String>>,
        pub(super) handoffs: Option<Vec<String>>,
        pub(super) access_level: Option<super::auth::RawAccessLevel>,
        pub(super) password_argon2: Option<String>,
        pub(super) memory_facet: Option<String>,
        pub(super) requires_ai_disclosure: Option<bool>,
        pub(super) summary_after_idle: Option<ConfigDuration>,
        pub(super) summarizer: Option<String>,
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

//! The config file's shape, exactly as written. Defaults live here;
//! meaning lives in the validated types of `config`.

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
    /// With a Redis URL in `live`: how the replicas reach each other's
    /// voice calls. Default: they do not (a call resumes only on the
    /// replica holding it).
    #[serde(default)]
    pub(super) replica: super::replica::RawReplica,
    /// Caller identity: API keys, JWTs, the pseudonym key. Default: none
    /// (every agent public unless it has a password).
    pub(super) auth: Option<super::auth::RawAuth>,
    /// Prompt-injection screening on the Gnosari endpoints. Default: on,
    /// with the built-in phrase list.
    pub(super) screening: Option<super::screening::RawScreening>,
    /// Agent memory: how long forgotten memories are kept.
    pub(super) memory: Option<super::memory::RawMemory>,
    /// The models runtime agents and summarizers use. Default: none.
    #[serde(default)]
    pub(super) providers: Vec<super::runtime::RawProvider>,
    /// Realtime voice providers, named by agents' `voice`. Default: none.
    #[serde(default)]
    pub(super) voice_providers: Vec<super::voice::RawVoiceProvider>,
    /// Tools, declared once and named by agents. Default: none.
    #[serde(default)]
    pub(super) tools: Vec<super::runtime::RawTool>,
    /// Sandboxes: MCP servers a session starts for itself with the
    /// mounts it declares (Omnia's `declare`), named by agents'
    /// `sandboxes`. Default: none.
    #[serde(default)]
    pub(super) sandboxes: Vec<super::sandboxes::RawSandbox>,
    /// The agents served; at least one.
    #[serde(default)]
    pub(super) agents: Vec<Agent>,
    /// Teams of agents on `/ws/team/{team}`. Default: none.
    #[serde(default)]
    pub(super) teams: Vec<super::team::RawTeam>,
    /// OpenTelemetry export. Default: off.
    pub(super) telemetry: Option<super::telemetry::RawTelemetry>,
    /// Which front doors besides the WebSocket serve agents that do not
    /// say (`agents[].a2a`, `.mcp`, `.function`). Default: none.
    #[serde(default)]
    pub(super) facades: super::facades::RawFacades,
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
    /// The WebSocket protocol below the dialects: compression, the
    /// conformance echo.
    pub(super) websocket: super::websocket::RawWebSocket,
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
            websocket: super::websocket::RawWebSocket::default(),
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
    /// How long a session with a connection open on it keeps its window
    /// (the messages its next turn shows the model) in memory without a
    /// message; then the window leaves memory and the next turn reads it
    /// from the store. An idle connection then costs what a fresh one
    /// does, however long its conversation.
    pub(super) idle_window_ttl: ConfigDuration,
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
            idle_window_ttl: ConfigDuration::secs(30),
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
    /// `runtime`: the system prompt. Default: none. Not with `pack`.
    pub(super) instructions: Option<String>,
    /// `runtime`: a PromptPack the agent runs: its file's path, or a block
    /// with `path`, `prompt`, `variables`, `tools` and `compile`. It gives
    /// the instructions, model parameters, tool policy and the tools' specs
    /// (see the book's PromptPack page). Default: none.
    pub(super) pack: Option<super::pack::RawPack>,
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
    /// `runtime`: agent memory across sessions. Default: off.
    pub(super) memory: Option<super::memory::RawAgentMemory>,
    /// `runtime`: names from `sandboxes[]` its sessions may declare;
    /// their tools are offered named by handle (`<handle>__<tool>`).
    /// Default: none (a declaration is refused with
    /// `SessionInitUnsupported`).
    pub(super) sandboxes: Option<Vec<String>>,
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
    /// The agent on A2A, and its card: the block turns A2A on for the
    /// agent (unless `enabled: false`). Without it: `facades.a2a`, with a
    /// card made from the agent's name.
    pub(super) a2a: Option<super::facades::RawAgentA2a>,
    /// The agent as a tool on `/mcp`: the block turns it on (unless
    /// `enabled: false`). Without it: `facades.mcp`.
    pub(super) mcp: Option<super::facades::RawAgentMcp>,
    /// The agent as a REST function: the block turns it on (unless
    /// `enabled: false`). Without it: `facades.functions`.
    pub(super) function: Option<super::facades::RawAgentFunction>,
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

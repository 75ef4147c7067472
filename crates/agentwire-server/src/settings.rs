//! Server settings: what `server.*` in the config sets.

use std::time::Duration;

use agentwire_core::PromptScreen;

use crate::abuse::AbuseLimits;
use crate::websocket::Compression;

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
    /// The WebSocket protocol below the dialects (`server.websocket`).
    pub websocket: WebSocketSettings,
}

/// `server.websocket.*`: what every WebSocket route shares, below the
/// dialects.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebSocketSettings {
    /// permessage-deflate (RFC 7692).
    pub compression: Compression,
    /// Every socket echoes each text and binary message back as it came,
    /// in place of its dialect (after the same upgrade checks): for
    /// conformance suites (Autobahn), which expect an echo server.
    pub echo_frames: bool,
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

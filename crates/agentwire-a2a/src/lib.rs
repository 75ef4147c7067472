//! The A2A protocol on its JSON-RPC binding, both generations a client may
//! speak: v1.0 (`A2A-Version: 1.0`; PascalCase methods, ProtoJSON enums,
//! `StreamResponse` wrappers) and v0.3 (no header, or `0.3`; slash-named
//! methods, kebab-case states, `kind` discriminators).
//!
//! A request is decoded into version-neutral values ([`rpc::Request`],
//! [`message::InboundMessage`]); what the server answers is built from
//! neutral values too ([`task::Task`], [`task::Event`]) and written in
//! the request's version by [`task::Writer`]. The agent card is
//! [`card::AgentCard`]. A turn's events become task events in
//! [`turn::TaskStream`].
//!
//! Pure: the core's types, serde and serde_json; no IO.

pub mod card;
pub mod message;
pub mod rpc;
pub mod task;
pub mod turn;
pub mod version;

pub use version::Version;

/// The card extension that says every streamed event carries its position
/// in the session's turn log (`metadata["agentwire.position"]` and the SSE
/// event id), and that `SubscribeToTask` replays from a position given as
/// `Last-Event-ID`.
pub const POSITION_EXTENSION: &str = "https://agentwire.dev/a2a/stream-position/v1";

/// The metadata key of an event's position: `<epoch>-<seq>`.
pub const POSITION_KEY: &str = "agentwire.position";

//! The Model Context Protocol's server side, as agentwire speaks it on
//! Streamable HTTP (`/mcp`): every agent a caller may use is a tool,
//! `ask_<agent>`, whose call is a turn.
//!
//! Pure message shapes, as `agentwire-a2a` is for A2A: the JSON-RPC
//! envelope (`rpc`), the protocol versions and the handshake
//! (`protocol`), the tools and their results (`tools`), and the SSE event
//! ids that name a position in a turn's log (`stream`). The server crate
//! does the HTTP.

pub mod protocol;
pub mod rpc;
pub mod stream;
pub mod tools;

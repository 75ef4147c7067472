//! The Gnosari WebSocket chat dialect (`/ws/agent/{agent}`): the client's
//! message frames and the server's events, as the "WebSocket Chat" contract
//! writes them.
//!
//! The crate is pure: it turns text into values and values into text, and
//! leaves sockets, sessions, screening and limits to the server. The core's
//! types are not `Serialize` (`scripts/check-deps.sh` checks it), so every
//! JSON shape is owned here, in private serde structs that borrow what they
//! write.
//!
//! - [`inbound`]: `{message, session_id?, client_message_id?, metadata?,
//!   attachments?}`, parsed once and validated with messages that name the
//!   offending field.
//! - [`outbound`]: the flat events (`agent_started`, `token`, `tool_call`,
//!   `tool_result`, `agent_completed`, `session_summary_scheduled`, `error`)
//!   and the `message_rejected` envelope, with the contract's key order.
//! - [`turn`]: [`TurnEncoder`], which maps one turn's engine events to
//!   events, remembering tool names so `tool_result` can carry them.

pub mod inbound;
pub mod outbound;
pub mod turn;

pub use inbound::{FrameError, InboundMessage, decode_cancel, decode_inbound};
pub use outbound::{
    ErrorEvent, GoingAway, RejectReason, StreamInfo, encode_agent_completed, encode_agent_started,
    encode_error, encode_going_away, encode_message_rejected, encode_session_summary_scheduled,
    encode_stream_info, encode_token, encode_tool_call, encode_tool_result, format_timestamp,
    with_seq,
};
pub use turn::TurnEncoder;

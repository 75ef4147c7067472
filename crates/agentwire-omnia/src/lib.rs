//! The Omnia agent-facade dialect: the JSON text frames of its WebSocket
//! protocol and the binary OMNI media codec.
//!
//! The crate is pure: it turns bytes into values and values into bytes, and
//! leaves sockets, sessions and limits on connections to the server. The
//! core's types are not `Serialize` (`scripts/check-deps.sh` checks it), so
//! every JSON shape is owned here, in private serde structs that borrow
//! from the core values they write.
//!
//! - [`inbound`]: client text frames, validated against the contract's
//!   limits, with the reference's exact error texts.
//! - [`outbound`]: server text frames in the reference's key order.
//! - [`rest`]: JSON bodies of the `/media/*` HTTP routes.
//! - [`binary`]: the OMNI frame header, metadata and outbound chunking.
//! - [`timestamp`]: the `timestamp` every server frame carries.
//! - [`turn`]: a connection's turn events as frames, with the per-turn state.

mod base64;
pub mod binary;
pub mod inbound;
mod json;
pub mod outbound;
pub mod rest;
pub mod timestamp;
pub mod turn;

pub use binary::{
    BinaryDecodeError, BinaryFrame, BinaryMetadata, CHUNK_SIZE, CHUNKING_THRESHOLD, FLAG_CHUNKED,
    FLAG_COMPRESSED, FLAG_IS_LAST, HEADER_LEN, MAGIC, MESSAGE_TYPE_MEDIA_CHUNK, PROTOCOL_VERSION,
    decode_binary, encode_binary, encode_media_frames, media_id_str,
};
pub use inbound::{
    ClientFrame, ClientMessage, FrameError, UNKNOWN_TYPE, UploadRequest, decode_client_text,
};
pub use outbound::{
    Capabilities, Connected, EventLog, GoingAway, UploadReady, encode_cancelled, encode_chunk,
    encode_connected, encode_done, encode_error, encode_going_away, encode_init_refusal,
    encode_interrupt, encode_media_chunk, encode_session_config, encode_tool_call,
    encode_tool_result, encode_turn_started, encode_upload_ready, encode_user_chunk, with_seq,
};
pub use rest::{encode_media_info, encode_upload_credentials};
pub use timestamp::format_timestamp;
pub use turn::{Encoded, EncoderOptions, TurnEncoder};

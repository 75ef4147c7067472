//! Client → server text frames.
//!
//! A frame is parsed once into `RawFrame`, a flat struct holding every
//! field any frame type can carry, and then dispatched on `type`. That keeps
//! decoding single-pass (no buffering, as an internally tagged enum would
//! need) and lets a type mismatch anywhere in the object be reported the
//! same way: the reference answers all of them with "invalid message format".

use std::borrow::Cow;
use std::fmt;

use agentwire_core::{ContentPart, InvalidSessionId, MediaContent, Metadata, PartKind};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

use crate::json::{Object, non_empty};

/// A decoded client text frame.
#[derive(Debug, Clone)]
pub enum ClientFrame {
    Message(ClientMessage),
    /// Never refused here: the server checks media storage first and then
    /// the fields, in the reference's order.
    UploadRequest {
        session_id: Option<String>,
        request: Option<UploadRequest>,
    },
    ToolResult {
        session_id: Option<String>,
        call_id: String,
        result: Option<serde_json::Value>,
        error: Option<String>,
    },
    ToolCallAck {
        call_id: String,
    },
    ToolCallNack {
        call_id: String,
        reason: String,
    },
    Hangup,
    DisclosureAck,
    CredentialRefresh {
        token: String,
    },
    /// `{"type":"cancel"}`: stop the running turn. Only for connections
    /// that asked for positions (`stream=2`, advertised as
    /// `capabilities.cancel`); the server answers it as an unknown type on
    /// any other, as before.
    Cancel,
}

/// A user message that passed every limit. Empty strings have been folded
/// into `None`, as Go's `omitempty` reads them, except `session_id`: an
/// empty one is as malformed as any other invalid id.
#[derive(Debug, Clone)]
pub struct ClientMessage {
    pub session_id: Option<String>,
    pub content: Option<String>,
    pub parts: Vec<ContentPart>,
    pub metadata: Metadata,
    /// Forwarded unread, so it stays raw JSON.
    pub declare: Option<Box<RawValue>>,
}

/// Missing fields default to `""` and `0` so the server can report them in
/// the reference's order ("filename is required", ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UploadRequest {
    pub filename: String,
    pub mime_type: String,
    pub size_bytes: i64,
}

/// A client text frame that cannot be accepted. Always answered with
/// INVALID_MESSAGE and no session_id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FrameError {
    pub message: Cow<'static, str>,
}

impl FrameError {
    const fn new(message: &'static str) -> FrameError {
        FrameError {
            message: Cow::Borrowed(message),
        }
    }
}

const INVALID_FORMAT: FrameError = FrameError::new("invalid message format");
/// What a frame of a type the server does not take gets.
pub const UNKNOWN_TYPE: FrameError = FrameError::new("unknown message type");
const EMPTY_MESSAGE: FrameError = FrameError::new("message requires content or parts");
const TOO_MANY_KEYS: FrameError = FrameError::new("metadata has more than 32 keys");
const BAD_KEY: FrameError =
    FrameError::new("metadata key must be 1 to 64 characters of letters, digits, _, . or -");
const VALUE_TOO_LONG: FrameError = FrameError::new("metadata value exceeds 8 KiB");
const METADATA_TOO_LONG: FrameError = FrameError::new("metadata exceeds 32 KiB in total");
const DECLARE_TOO_LONG: FrameError = FrameError::new("declare exceeds 16 KiB");
const UNKNOWN_PART_TYPE: FrameError = FrameError::new("unknown content part type");
const TEXT_PART_WITHOUT_TEXT: FrameError = FrameError::new("text part requires text");
const MEDIA_WITHOUT_MIME: FrameError = FrameError::new("media part requires media with mime_type");
const MEDIA_SOURCE_COUNT: FrameError =
    FrameError::new("media requires exactly one of data, url or storage_ref");
const TOOL_RESULT_CALL_ID: FrameError = FrameError::new("tool_result.call_id is required");
const ACK_CALL_ID: FrameError = FrameError::new("tool_call_ack.call_id is required");
const NACK_CALL_ID: FrameError = FrameError::new("tool_call_nack.call_id is required");
const NACK_REASON: FrameError = FrameError::new("tool_call_nack.reason is required");
const REFRESH_TOKEN: FrameError = FrameError::new("credential_refresh.token is required");

/// Limits from the contract's "Message metadata" table.
const MAX_METADATA_KEYS: usize = 32;
const MAX_METADATA_KEY_LEN: usize = 64;
const MAX_METADATA_VALUE_LEN: usize = 8 * 1024;
const MAX_METADATA_TOTAL_LEN: usize = 32 * 1024;
const MAX_DECLARE_LEN: usize = 16 * 1024;

pub fn decode_client_text(text: &str) -> Result<ClientFrame, FrameError> {
    let Object(raw) =
        serde_json::from_str::<Object<RawFrame<'_>>>(text).map_err(|_| INVALID_FORMAT)?;
    match raw.kind.ok_or(INVALID_FORMAT)? {
        FrameType::Message => decode_message(raw).map(ClientFrame::Message),
        FrameType::UploadRequest => Ok(decode_upload_request(raw)),
        FrameType::ToolResult => decode_tool_result(raw),
        FrameType::ToolCallAck => decode_ack(raw),
        FrameType::ToolCallNack => decode_nack(raw),
        FrameType::Hangup => Ok(ClientFrame::Hangup),
        FrameType::DisclosureAck => Ok(ClientFrame::DisclosureAck),
        FrameType::CredentialRefresh => decode_credential_refresh(raw),
        FrameType::Cancel => Ok(ClientFrame::Cancel),
        FrameType::Unknown => Err(UNKNOWN_TYPE),
    }
}

fn decode_message(raw: RawFrame<'_>) -> Result<ClientMessage, FrameError> {
    let content = non_empty(raw.content);
    let raw_parts = raw.parts.unwrap_or_default();
    if content.is_none() && raw_parts.is_empty() {
        return Err(EMPTY_MESSAGE);
    }
    let parts = raw_parts
        .into_iter()
        .map(|Object(part)| decode_part(part))
        .collect::<Result<Vec<_>, _>>()?;
    let metadata = raw.metadata.unwrap_or_default();
    check_metadata(&metadata)?;
    let declare = raw.declare.map(decode_declare).transpose()?;
    // `""` names no session; joining the connection's own in its place
    // would answer a client bug with a silent success.
    if raw.session_id.as_deref() == Some("") {
        return Err(FrameError {
            message: Cow::Owned(InvalidSessionId.to_string()),
        });
    }
    Ok(ClientMessage {
        session_id: raw.session_id,
        content,
        parts,
        metadata,
        declare,
    })
}

/// Reserved keys (`mock_scenario`, `content_type`, `omnia.*`) are not
/// special here: they obey and count towards the same limits.
fn check_metadata(metadata: &Metadata) -> Result<(), FrameError> {
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(TOO_MANY_KEYS);
    }
    let mut total = 0;
    for (key, value) in metadata {
        if !is_valid_metadata_key(key) {
            return Err(BAD_KEY);
        }
        if value.len() > MAX_METADATA_VALUE_LEN {
            return Err(VALUE_TOO_LONG);
        }
        total += key.len() + value.len();
    }
    if total > MAX_METADATA_TOTAL_LEN {
        return Err(METADATA_TOO_LONG);
    }
    Ok(())
}

/// Only ASCII is allowed, so the byte length is the character count.
fn is_valid_metadata_key(key: &str) -> bool {
    (1..=MAX_METADATA_KEY_LEN).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The size limit applies to the JSON text as the client sent it. What it
/// holds (an object of known types) is the runtime's to check: a refused
/// declaration is `SESSION_DECLARATION_REFUSED`, not a malformed frame.
fn decode_declare(declare: &RawValue) -> Result<Box<RawValue>, FrameError> {
    if declare.get().len() > MAX_DECLARE_LEN {
        return Err(DECLARE_TOO_LONG);
    }
    Ok(declare.to_owned())
}

/// Only the fields a part's type uses are kept: a text part's `media` and a
/// media part's `text` are dropped like unknown keys.
fn decode_part(part: RawPart) -> Result<ContentPart, FrameError> {
    let kind = part
        .kind
        .as_deref()
        .and_then(part_kind)
        .ok_or(UNKNOWN_PART_TYPE)?;
    if kind == PartKind::Text {
        let text = non_empty(part.text).ok_or(TEXT_PART_WITHOUT_TEXT)?;
        return Ok(ContentPart::text(text));
    }
    let Object(media) = part.media.ok_or(MEDIA_WITHOUT_MIME)?;
    decode_media(media).map(|media| ContentPart::media(kind, media))
}

fn part_kind(name: &str) -> Option<PartKind> {
    match name {
        "text" => Some(PartKind::Text),
        "image" => Some(PartKind::Image),
        "audio" => Some(PartKind::Audio),
        "video" => Some(PartKind::Video),
        "file" => Some(PartKind::File),
        _ => None,
    }
}

fn decode_media(media: RawMedia) -> Result<MediaContent, FrameError> {
    let mime_type = non_empty(media.mime_type).ok_or(MEDIA_WITHOUT_MIME)?;
    let data = non_empty(media.data);
    let url = non_empty(media.url);
    let storage_ref = non_empty(media.storage_ref);
    let sources = [data.is_some(), url.is_some(), storage_ref.is_some()];
    if sources.into_iter().filter(|&set| set).count() != 1 {
        return Err(MEDIA_SOURCE_COUNT);
    }
    Ok(MediaContent {
        data,
        url,
        storage_ref,
        mime_type,
        filename: non_empty(media.filename),
        size_bytes: media.size_bytes,
        width: media.width,
        height: media.height,
        detail: non_empty(media.detail),
        duration_ms: media.duration_ms,
        sample_rate: media.sample_rate,
        channels: media.channels,
    })
}

fn decode_upload_request(raw: RawFrame<'_>) -> ClientFrame {
    let request = raw.upload_request.map(|Object(u)| UploadRequest {
        filename: u.filename.unwrap_or_default(),
        mime_type: u.mime_type.unwrap_or_default(),
        size_bytes: u.size_bytes.unwrap_or_default(),
    });
    ClientFrame::UploadRequest {
        session_id: non_empty(raw.session_id),
        request,
    }
}

/// An empty `error` means success, as in the reference, where only a
/// non-empty error marks the call failed.
fn decode_tool_result(raw: RawFrame<'_>) -> Result<ClientFrame, FrameError> {
    let Object(result) = raw.tool_result.ok_or(TOOL_RESULT_CALL_ID)?;
    let call_id = non_empty(result.call_id).ok_or(TOOL_RESULT_CALL_ID)?;
    Ok(ClientFrame::ToolResult {
        session_id: non_empty(raw.session_id),
        call_id,
        result: result.result,
        error: non_empty(result.error),
    })
}

fn decode_ack(raw: RawFrame<'_>) -> Result<ClientFrame, FrameError> {
    let call_id = raw
        .tool_call_ack
        .and_then(|Object(ack)| non_empty(ack.call_id))
        .ok_or(ACK_CALL_ID)?;
    Ok(ClientFrame::ToolCallAck { call_id })
}

fn decode_nack(raw: RawFrame<'_>) -> Result<ClientFrame, FrameError> {
    let Object(nack) = raw.tool_call_nack.ok_or(NACK_CALL_ID)?;
    let call_id = non_empty(nack.call_id).ok_or(NACK_CALL_ID)?;
    let reason = non_empty(nack.reason).ok_or(NACK_REASON)?;
    Ok(ClientFrame::ToolCallNack { call_id, reason })
}

fn decode_credential_refresh(raw: RawFrame<'_>) -> Result<ClientFrame, FrameError> {
    let token = non_empty(raw.token).ok_or(REFRESH_TOKEN)?;
    Ok(ClientFrame::CredentialRefresh { token })
}

/// Every field any client frame carries. Unknown keys are ignored; a field
/// of the wrong JSON type fails the whole parse.
#[derive(Deserialize)]
struct RawFrame<'a> {
    #[serde(rename = "type")]
    kind: Option<FrameType>,
    content: Option<String>,
    parts: Option<Vec<Object<RawPart>>>,
    session_id: Option<String>,
    metadata: Option<Metadata>,
    /// Borrowed from the frame text: copied only once the message is valid.
    #[serde(borrow)]
    declare: Option<&'a RawValue>,
    upload_request: Option<Object<RawUploadRequest>>,
    tool_result: Option<Object<RawToolResult>>,
    tool_call_ack: Option<Object<RawCallRef>>,
    tool_call_nack: Option<Object<RawNack>>,
    token: Option<String>,
}

#[derive(Deserialize)]
struct RawPart {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    media: Option<Object<RawMedia>>,
}

#[derive(Deserialize)]
struct RawMedia {
    data: Option<String>,
    url: Option<String>,
    storage_ref: Option<String>,
    mime_type: Option<String>,
    filename: Option<String>,
    size_bytes: Option<u64>,
    width: Option<u32>,
    height: Option<u32>,
    detail: Option<String>,
    duration_ms: Option<u64>,
    sample_rate: Option<u32>,
    channels: Option<u32>,
}

#[derive(Deserialize)]
struct RawUploadRequest {
    filename: Option<String>,
    mime_type: Option<String>,
    size_bytes: Option<i64>,
}

#[derive(Deserialize)]
struct RawToolResult {
    call_id: Option<String>,
    result: Option<serde_json::Value>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct RawCallRef {
    call_id: Option<String>,
}

#[derive(Deserialize)]
struct RawNack {
    call_id: Option<String>,
    reason: Option<String>,
}

/// The `type` discriminator. Read from a JSON string only, without
/// allocating; an unrecognised name is a value, not a parse failure, because
/// it gets its own error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameType {
    Message,
    UploadRequest,
    ToolResult,
    ToolCallAck,
    ToolCallNack,
    Hangup,
    DisclosureAck,
    CredentialRefresh,
    Cancel,
    Unknown,
}

impl FrameType {
    fn from_name(name: &str) -> FrameType {
        match name {
            "message" => FrameType::Message,
            "upload_request" => FrameType::UploadRequest,
            "tool_result" => FrameType::ToolResult,
            "tool_call_ack" => FrameType::ToolCallAck,
            "tool_call_nack" => FrameType::ToolCallNack,
            "hangup" => FrameType::Hangup,
            "disclosure_ack" => FrameType::DisclosureAck,
            "credential_refresh" => FrameType::CredentialRefresh,
            "cancel" => FrameType::Cancel,
            _ => FrameType::Unknown,
        }
    }
}

impl<'de> Deserialize<'de> for FrameType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FrameTypeVisitor)
    }
}

struct FrameTypeVisitor;

impl Visitor<'_> for FrameTypeVisitor {
    type Value = FrameType;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message type string")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<FrameType, E> {
        Ok(FrameType::from_name(name))
    }
}

#[cfg(test)]
mod tests;

//! Client → server text frames.
//!
//! A frame is parsed once into `RawFrame`, a flat struct holding every
//! field any frame type can carry, and then dispatched on `type`. That keeps
//! decoding single-pass (no buffering, as an internally tagged enum would
//! need) and lets a type mismatch anywhere in the object be reported the
//! same way: the reference answers all of them with "invalid message format".

use std::borrow::Cow;
use std::fmt;

use agentwire_core::{ContentPart, MediaContent, Metadata, PartKind};
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
}

/// A user message that passed every limit. Empty strings have been folded
/// into `None`, as Go's `omitempty` reads them.
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
const UNKNOWN_TYPE: FrameError = FrameError::new("unknown message type");
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
    Ok(ClientMessage {
        session_id: non_empty(raw.session_id),
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

/// The contract types `declare` as an object; anything else is a type
/// mismatch. The size limit applies to the JSON text as the client sent it.
fn decode_declare(declare: &RawValue) -> Result<Box<RawValue>, FrameError> {
    if !declare.get().starts_with('{') {
        return Err(INVALID_FORMAT);
    }
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
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn decode(value: serde_json::Value) -> Result<ClientFrame, FrameError> {
        decode_client_text(&value.to_string())
    }

    fn message(value: serde_json::Value) -> ClientMessage {
        match decode(value) {
            Ok(ClientFrame::Message(m)) => m,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    fn error_of(value: serde_json::Value) -> String {
        match decode(value) {
            Err(e) => e.message.into_owned(),
            Ok(frame) => panic!("expected an error, got {frame:?}"),
        }
    }

    fn text_error(text: &str) -> String {
        decode_client_text(text).unwrap_err().to_string()
    }

    fn with_metadata(metadata: serde_json::Value) -> serde_json::Value {
        json!({"type": "message", "content": "hi", "metadata": metadata})
    }

    // ---- parsing ----

    #[test]
    fn syntax_errors_and_non_objects_are_invalid_format() {
        for text in [
            "",
            "{",
            "not json",
            "[]",
            r#"["message","hi"]"#,
            "null",
            "42",
            r#""message""#,
            r#"{"type":"hangup"} x"#,
        ] {
            assert_eq!(text_error(text), "invalid message format", "{text}");
        }
    }

    #[test]
    fn type_mismatches_are_invalid_format() {
        for value in [
            json!({"type": "message", "content": 5}),
            json!({"type": "message", "content": "hi", "metadata": {"k": 1}}),
            json!({"type": "message", "content": "hi", "metadata": []}),
            json!({"type": "message", "parts": {"type": "text"}}),
            json!({"type": "message", "parts": [["text", "hi"]]}),
            json!({"type": "message", "parts": [{"type": "image", "media": {"mime_type": "image/png", "url": "u", "width": -1}}]}),
            json!({"type": "message", "content": "hi", "session_id": 7}),
            json!({"type": "message", "content": "hi", "declare": "sandbox"}),
            json!({"type": "message", "content": "hi", "declare": []}),
            json!({"type": {"message": null}, "content": "hi"}),
            json!({"type": "tool_result", "tool_result": ["tc-1"]}),
            json!({"type": "upload_request", "upload_request": {"size_bytes": "10"}}),
            json!({"type": "credential_refresh", "token": true}),
        ] {
            assert_eq!(error_of(value.clone()), "invalid message format", "{value}");
        }
    }

    #[test]
    fn missing_type_is_invalid_format_and_unknown_type_is_named() {
        assert_eq!(error_of(json!({"content": "hi"})), "invalid message format");
        assert_eq!(
            error_of(json!({"type": null, "content": "hi"})),
            "invalid message format"
        );
        assert_eq!(
            error_of(json!({"type": "user_message", "content": "hi"})),
            "unknown message type"
        );
        assert_eq!(error_of(json!({"type": ""})), "unknown message type");
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let m = message(
            json!({"type": "message", "content": "hi", "consent_grants": ["x"], "extra": {"a": 1}}),
        );
        assert_eq!(m.content.as_deref(), Some("hi"));
    }

    // ---- message ----

    #[test]
    fn message_keeps_its_fields() {
        let m = message(json!({
            "type": "message",
            "content": "Hello",
            "session_id": "sess-1",
            "metadata": {"user_id": "user-123"},
            "declare": {"sandboxes": {"box": {"mounts": []}}}
        }));
        assert_eq!(m.session_id.as_deref(), Some("sess-1"));
        assert_eq!(m.content.as_deref(), Some("Hello"));
        assert!(m.parts.is_empty());
        assert_eq!(
            m.metadata.get("user_id").map(String::as_str),
            Some("user-123")
        );
        assert_eq!(
            m.declare.unwrap().get(),
            r#"{"sandboxes":{"box":{"mounts":[]}}}"#
        );
    }

    #[test]
    fn empty_strings_are_absent() {
        let m =
            message(json!({"type": "message", "content": "hi", "session_id": "", "declare": null}));
        assert_eq!(m.session_id, None);
        assert!(m.declare.is_none());
    }

    #[test]
    fn message_needs_content_or_parts() {
        for value in [
            json!({"type": "message"}),
            json!({"type": "message", "content": ""}),
            json!({"type": "message", "content": "", "parts": []}),
            json!({"type": "message", "content": null, "parts": null}),
        ] {
            assert_eq!(error_of(value), "message requires content or parts");
        }
    }

    #[test]
    fn parts_alone_are_enough() {
        let m = message(json!({
            "type": "message",
            "session_id": "sess-abc123",
            "parts": [
                {"type": "text", "text": "What's in this image?"},
                {"type": "image", "media": {"url": "https://example.com/photo.jpg", "mime_type": "image/jpeg", "width": 1024, "detail": "low"}}
            ]
        }));
        assert_eq!(m.content, None);
        assert_eq!(m.parts[0], ContentPart::text("What's in this image?"));
        let media = MediaContent {
            url: Some("https://example.com/photo.jpg".into()),
            mime_type: "image/jpeg".into(),
            width: Some(1024),
            detail: Some("low".into()),
            ..MediaContent::default()
        };
        assert_eq!(m.parts[1], ContentPart::media(PartKind::Image, media));
    }

    #[test]
    fn every_media_kind_and_source_is_accepted() {
        for (kind, expected) in [
            ("image", PartKind::Image),
            ("audio", PartKind::Audio),
            ("video", PartKind::Video),
            ("file", PartKind::File),
        ] {
            for source in ["data", "url", "storage_ref"] {
                let m = message(
                    json!({"type": "message", "parts": [{"type": kind, "media": {source: "x", "mime_type": "a/b", "size_bytes": 3, "duration_ms": 1, "sample_rate": 16000, "channels": 1, "filename": "f", "height": 2}}]}),
                );
                assert_eq!(m.parts[0].kind, Some(expected));
                let media = m.parts[0].media.as_ref().unwrap();
                assert_eq!(media.mime_type, "a/b");
                assert_eq!(media.size_bytes, Some(3));
                assert_eq!(media.sample_rate, Some(16000));
            }
        }
    }

    #[test]
    fn content_part_errors() {
        let part = |p: serde_json::Value| json!({"type": "message", "content": "hi", "parts": [p]});
        assert_eq!(
            error_of(part(json!({"type": "sticker"}))),
            "unknown content part type"
        );
        assert_eq!(
            error_of(part(json!({"text": "hi"}))),
            "unknown content part type"
        );
        assert_eq!(
            error_of(part(json!({"type": "text"}))),
            "text part requires text"
        );
        assert_eq!(
            error_of(part(json!({"type": "text", "text": ""}))),
            "text part requires text"
        );
        assert_eq!(
            error_of(part(json!({"type": "image"}))),
            "media part requires media with mime_type"
        );
        assert_eq!(
            error_of(part(json!({"type": "image", "media": {"url": "u"}}))),
            "media part requires media with mime_type"
        );
        assert_eq!(
            error_of(part(
                json!({"type": "image", "media": {"url": "u", "mime_type": ""}})
            )),
            "media part requires media with mime_type"
        );
        let exactly_one = "media requires exactly one of data, url or storage_ref";
        assert_eq!(
            error_of(part(
                json!({"type": "audio", "media": {"mime_type": "audio/mp3"}})
            )),
            exactly_one
        );
        assert_eq!(
            error_of(part(
                json!({"type": "audio", "media": {"mime_type": "audio/mp3", "url": ""}})
            )),
            exactly_one
        );
        assert_eq!(
            error_of(part(
                json!({"type": "audio", "media": {"mime_type": "audio/mp3", "url": "u", "data": "d"}})
            )),
            exactly_one
        );
        assert_eq!(
            error_of(part(
                json!({"type": "audio", "media": {"mime_type": "audio/mp3", "url": "u", "data": "d", "storage_ref": "s"}})
            )),
            exactly_one
        );
    }

    // ---- metadata limits ----

    fn keys(n: usize) -> serde_json::Value {
        (0..n)
            .map(|i| (format!("k{i:02}"), json!("v")))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    #[test]
    fn metadata_key_count_boundary() {
        assert_eq!(message(with_metadata(keys(32))).metadata.len(), 32);
        assert_eq!(
            error_of(with_metadata(keys(33))),
            "metadata has more than 32 keys"
        );
    }

    #[test]
    fn metadata_key_shape_and_length_boundary() {
        let bad_key = "metadata key must be 1 to 64 characters of letters, digits, _, . or -";
        assert!(decode(with_metadata(json!({"a".repeat(64): "v"}))).is_ok());
        assert_eq!(
            error_of(with_metadata(json!({"a".repeat(65): "v"}))),
            bad_key
        );
        assert_eq!(error_of(with_metadata(json!({"": "v"}))), bad_key);
        for key in ["has space", "slash/", "colon:", "é", "key\n"] {
            assert_eq!(error_of(with_metadata(json!({key: "v"}))), bad_key, "{key}");
        }
        assert!(decode(with_metadata(json!({"Aa0_.-": "v"}))).is_ok());
    }

    #[test]
    fn reserved_keys_are_allowed_and_counted() {
        let m = message(with_metadata(
            json!({"mock_scenario": "stream", "content_type": "image", "omnia.x": "1"}),
        ));
        assert_eq!(m.metadata.len(), 3);
        let mut many = keys(30);
        many["mock_scenario"] = json!("x");
        many["omnia.trace"] = json!("y");
        assert!(decode(with_metadata(many.clone())).is_ok());
        many["content_type"] = json!("z");
        assert_eq!(
            error_of(with_metadata(many)),
            "metadata has more than 32 keys"
        );
    }

    #[test]
    fn metadata_value_length_boundary() {
        assert!(decode(with_metadata(json!({"k": "x".repeat(8192)}))).is_ok());
        assert_eq!(
            error_of(with_metadata(json!({"k": "x".repeat(8193)}))),
            "metadata value exceeds 8 KiB"
        );
        // Bytes, not characters: 4097 two-byte characters are 8194 bytes.
        assert_eq!(
            error_of(with_metadata(json!({"k": "é".repeat(4097)}))),
            "metadata value exceeds 8 KiB"
        );
    }

    #[test]
    fn metadata_total_length_boundary() {
        // Four two-byte keys: 8 bytes of keys plus values summing to 32760.
        let total = |last: usize| json!({"k1": "x".repeat(8190), "k2": "x".repeat(8190), "k3": "x".repeat(8190), "k4": "x".repeat(last)});
        assert!(decode(with_metadata(total(8190))).is_ok());
        assert_eq!(
            error_of(with_metadata(total(8191))),
            "metadata exceeds 32 KiB in total"
        );
    }

    // ---- declare ----

    fn declare_of_len(len: usize) -> String {
        let padding = "x".repeat(len - r#"{"p":""}"#.len());
        let text = format!(r#"{{"type":"message","content":"hi","declare":{{"p":"{padding}"}}}}"#);
        assert!(text.contains(&format!(r#"{{"p":"{padding}"}}"#)));
        text
    }

    #[test]
    fn declare_size_boundary() {
        let ok = decode_client_text(&declare_of_len(16_384)).unwrap();
        let ClientFrame::Message(m) = ok else {
            panic!("message expected")
        };
        assert_eq!(m.declare.unwrap().get().len(), 16_384);
        assert_eq!(
            text_error(&declare_of_len(16_385)),
            "declare exceeds 16 KiB"
        );
    }

    #[test]
    fn declare_surrounded_by_whitespace_is_still_an_object() {
        let text = "{\"type\":\"message\",\"content\":\"hi\",\"declare\":  \n {\"a\": 1} \t }";
        let ClientFrame::Message(m) = decode_client_text(text).unwrap() else {
            panic!("message expected")
        };
        assert_eq!(m.declare.unwrap().get(), "{\"a\": 1}");
    }

    // ---- other frame types ----

    #[test]
    fn upload_request_is_never_refused_here() {
        match decode(
            json!({"type": "upload_request", "session_id": "s", "upload_request": {"filename": "photo.jpg", "mime_type": "image/jpeg", "size_bytes": 102400}}),
        ) {
            Ok(ClientFrame::UploadRequest {
                session_id,
                request,
            }) => {
                assert_eq!(session_id.as_deref(), Some("s"));
                assert_eq!(
                    request,
                    Some(UploadRequest {
                        filename: "photo.jpg".into(),
                        mime_type: "image/jpeg".into(),
                        size_bytes: 102_400
                    })
                );
            }
            other => panic!("{other:?}"),
        }
        match decode(json!({"type": "upload_request"})) {
            Ok(ClientFrame::UploadRequest {
                session_id: None,
                request: None,
            }) => {}
            other => panic!("{other:?}"),
        }
        match decode(json!({"type": "upload_request", "upload_request": {"size_bytes": -5}})) {
            Ok(ClientFrame::UploadRequest {
                request: Some(r), ..
            }) => {
                assert_eq!(
                    r,
                    UploadRequest {
                        size_bytes: -5,
                        ..UploadRequest::default()
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tool_result_carries_result_or_error() {
        match decode(
            json!({"type": "tool_result", "session_id": "s", "tool_result": {"call_id": "tc-1", "result": {"temperature": "72F"}, "error": ""}}),
        ) {
            Ok(ClientFrame::ToolResult {
                session_id,
                call_id,
                result,
                error,
            }) => {
                assert_eq!(session_id.as_deref(), Some("s"));
                assert_eq!(call_id, "tc-1");
                assert_eq!(result, Some(json!({"temperature": "72F"})));
                assert_eq!(error, None);
            }
            other => panic!("{other:?}"),
        }
        match decode(
            json!({"type": "tool_result", "tool_result": {"call_id": "tc-1", "error": "failed"}}),
        ) {
            Ok(ClientFrame::ToolResult {
                result: None,
                error: Some(e),
                ..
            }) => assert_eq!(e, "failed"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tool_frames_require_their_ids() {
        let missing = "tool_result.call_id is required";
        assert_eq!(error_of(json!({"type": "tool_result"})), missing);
        assert_eq!(
            error_of(json!({"type": "tool_result", "tool_result": {}})),
            missing
        );
        assert_eq!(
            error_of(json!({"type": "tool_result", "tool_result": {"call_id": ""}})),
            missing
        );
        assert_eq!(
            error_of(json!({"type": "tool_call_ack"})),
            "tool_call_ack.call_id is required"
        );
        assert_eq!(
            error_of(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": ""}})),
            "tool_call_ack.call_id is required"
        );
        assert_eq!(
            error_of(json!({"type": "tool_call_nack"})),
            "tool_call_nack.call_id is required"
        );
        assert_eq!(
            error_of(json!({"type": "tool_call_nack", "tool_call_nack": {"reason": "no"}})),
            "tool_call_nack.call_id is required"
        );
        assert_eq!(
            error_of(json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": "tc-1"}})),
            "tool_call_nack.reason is required"
        );
        assert_eq!(
            error_of(
                json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": "tc-1", "reason": ""}})
            ),
            "tool_call_nack.reason is required"
        );
    }

    #[test]
    fn ack_and_nack_decode() {
        assert!(matches!(
            decode(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": "tc-1"}})),
            Ok(ClientFrame::ToolCallAck { call_id }) if call_id == "tc-1"
        ));
        assert!(matches!(
            decode(json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": "tc-1", "reason": "tool not supported"}})),
            Ok(ClientFrame::ToolCallNack { call_id, reason }) if call_id == "tc-1" && reason == "tool not supported"
        ));
    }

    #[test]
    fn control_frames_decode() {
        assert!(matches!(
            decode(json!({"type": "hangup", "session_id": "s"})),
            Ok(ClientFrame::Hangup)
        ));
        assert!(matches!(
            decode(json!({"type": "disclosure_ack"})),
            Ok(ClientFrame::DisclosureAck)
        ));
        assert!(matches!(
            decode(json!({"type": "credential_refresh", "token": "jwt"})),
            Ok(ClientFrame::CredentialRefresh { token }) if token == "jwt"
        ));
        assert_eq!(
            error_of(json!({"type": "credential_refresh"})),
            "credential_refresh.token is required"
        );
        assert_eq!(
            error_of(json!({"type": "credential_refresh", "token": ""})),
            "credential_refresh.token is required"
        );
    }

    #[test]
    fn escaped_strings_decode() {
        let m = message(
            json!({"type": "message", "content": "a\"b\\c\u{1F600}\n", "declare": {"k": "\u{e9}\\\""}}),
        );
        assert_eq!(m.content.as_deref(), Some("a\"b\\c\u{1F600}\n"));
        assert!(m.declare.is_some());
    }

    // ---- robustness ----

    const VALID_FRAMES: &[&str] = &[
        r#"{"type":"message","content":"Hello","session_id":"s","metadata":{"user_id":"u"},"declare":{"a":[1,2]}}"#,
        r#"{"type":"message","parts":[{"type":"text","text":"t"},{"type":"image","media":{"url":"u","mime_type":"image/png","width":4}}]}"#,
        r#"{"type":"upload_request","upload_request":{"filename":"f","mime_type":"m","size_bytes":1}}"#,
        r#"{"type":"tool_result","tool_result":{"call_id":"c","result":{"x":null}}}"#,
        r#"{"type":"tool_call_ack","tool_call_ack":{"call_id":"c"}}"#,
        r#"{"type":"tool_call_nack","tool_call_nack":{"call_id":"c","reason":"r"}}"#,
        r#"{"type":"credential_refresh","token":"t"}"#,
        r#"{"type":"hangup"}"#,
    ];

    #[test]
    fn every_valid_frame_decodes() {
        for text in VALID_FRAMES {
            assert!(decode_client_text(text).is_ok(), "{text}");
        }
    }

    /// One edit at a character position: replace, insert or delete.
    fn mutate(text: &str, edits: &[(usize, u8, char)]) -> String {
        let mut chars: Vec<char> = text.chars().collect();
        for &(position, op, c) in edits {
            let i = position % (chars.len() + 1);
            match op % 3 {
                0 if i < chars.len() => chars[i] = c,
                1 => chars.insert(i, c),
                _ if i < chars.len() => {
                    chars.remove(i);
                }
                _ => chars.push(c),
            }
        }
        chars.into_iter().collect()
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(text in any::<String>()) {
            let _ = decode_client_text(&text);
        }

        #[test]
        fn never_panics_on_json_like_text(text in r#"[{}\[\]":,a-z0-9 \\-]{0,64}"#) {
            let _ = decode_client_text(&text);
        }

        #[test]
        fn never_panics_on_mutated_frames(
            index in 0..VALID_FRAMES.len(),
            edits in prop::collection::vec(
                (any::<usize>(), any::<u8>(), prop::sample::select(vec!['{', '}', '[', ']', '"', ':', ',', '\\', '0', 'x', ' ', 'é', '\u{0}'])),
                1..6,
            ),
        ) {
            let _ = decode_client_text(&mutate(VALID_FRAMES[index], &edits));
        }
    }
}

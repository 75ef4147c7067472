//! Server → client text frames.
//!
//! Keys follow the reference envelope's order (`type, session_id, content,
//! role, parts, tool_call, tool_result, error, upload_ready, upload_complete,
//! media_chunk, session_config, connected, timestamp`); this module writes
//! the subset its encoders need, in that order. Empty fields are left out, as
//! Go's `omitempty` does, except the ones clients rely on seeing every time.
//! Frames are serialized straight from borrowed views of the core types;
//! `chunk` and a text-only `done`, a streamed turn's frames, are written by
//! hand ([`text_frame`]), byte for byte the same.

use agentwire_core::{
    AudioFormat, ContentPart, ErrorCode, InitRefusal, MediaContent, PartKind, Reply, Timestamp,
    ToolCall, ToolOutcome,
};
use serde::{Serialize, Serializer};

use crate::base64::Base64;
use crate::json;
use crate::timestamp::{self, Rfc3339};

/// What the server tells a client it can do, in `connected.capabilities`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub binary_frames: bool,
    pub max_payload_size: u64,
    pub protocol_version: u32,
}

/// The first frame on every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected<'a> {
    pub session_id: &'a str,
    pub capabilities: Capabilities,
    /// Whether the session the client named in `resume` was re-attached;
    /// `None` (the field absent) when it named none.
    pub resumed: Option<bool>,
    pub memory_facet: Option<&'a str>,
    /// Written only when the pack declares it: absent is not `false`.
    pub ai_disclosure: Option<bool>,
    /// `capabilities.event_log`, for clients that asked for log positions
    /// (`stream=2`); `None` leaves it out.
    pub event_log: Option<EventLog<'a>>,
}

/// Where the session's log stands, in `connected.capabilities.event_log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EventLog<'a> {
    /// The log's epoch; absent while the connection's session has none yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<&'a str>,
    /// The seq of the log's latest entry (0: none yet).
    pub head: u64,
    /// On a rejoin: whether what the client missed follows (`false`: reload
    /// the history from the sessions API). Absent on a fresh connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<bool>,
}

pub fn encode_connected(c: &Connected<'_>, ts: Timestamp) -> String {
    to_json(&Envelope {
        connected: Some(ConnectedOut {
            capabilities: CapabilitiesOut {
                binary_frames: c.capabilities.binary_frames,
                max_payload_size: c.capabilities.max_payload_size,
                protocol_version: c.capabilities.protocol_version,
                cancel: c.event_log.is_some(),
                event_log: c.event_log,
            },
            resumed: c.resumed,
            memory_facet: c.memory_facet,
            ai_disclosure: c.ai_disclosure,
        }),
        ..Envelope::new("connected", c.session_id, ts)
    })
}

/// The first frame of every turn for clients that asked for log positions
/// (`stream=2`): the turn's id (its own seq) and the log's epoch, which a
/// rejoin names.
pub fn encode_turn_started(
    session_id: &str,
    turn_id: u64,
    epoch: &str,
    agent: &str,
    ts: Timestamp,
) -> String {
    to_json(&Envelope {
        turn_started: Some(TurnStartedOut {
            turn_id,
            epoch,
            agent,
        }),
        ..Envelope::new("turn_started", session_id, ts)
    })
}

/// A planned close ahead (the server drains), for clients that asked for
/// log positions: the time left before the socket closes, how long to wait
/// (jittered) before reconnecting, and the position to rejoin from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoingAway<'a> {
    pub session_id: &'a str,
    pub time_left_ms: u64,
    pub retry_after_ms: u64,
    pub epoch: &'a str,
    pub after: u64,
}

pub fn encode_going_away(notice: &GoingAway<'_>, ts: Timestamp) -> String {
    to_json(&Envelope {
        going_away: Some(GoingAwayOut {
            time_left_ms: notice.time_left_ms,
            retry_after_ms: notice.retry_after_ms,
            resume: ResumeOut {
                session_id: notice.session_id,
                after: notice.after,
                epoch: notice.epoch,
            },
        }),
        ..Envelope::new("going_away", notice.session_id, ts)
    })
}

#[derive(Serialize)]
struct GoingAwayOut<'a> {
    time_left_ms: u64,
    retry_after_ms: u64,
    resume: ResumeOut<'a>,
}

#[derive(Serialize)]
struct ResumeOut<'a> {
    session_id: &'a str,
    after: u64,
    epoch: &'a str,
}

/// The streamed turn's hot path (one frame per text delta), so it is
/// written by hand, byte for byte what the serialised [`Envelope`] would be.
pub fn encode_chunk(session_id: &str, content: &str, ts: Timestamp) -> String {
    text_frame("chunk", session_id, content, ts)
}

/// What the caller said in a voice call, transcribed: a `chunk` with
/// `role: "user"` (an assistant `chunk` has no role).
pub fn encode_user_chunk(session_id: &str, content: &str, ts: Timestamp) -> String {
    to_json(&Envelope {
        content,
        role: "user",
        ..Envelope::new("chunk", session_id, ts)
    })
}

/// `done` carries the full reply. With parts, clients read `parts` and may
/// ignore `content`; the text is still written when there is any, so
/// text-only clients see it. An empty reply (the duplex turn seal) is a bare
/// `done`.
pub fn encode_done(session_id: &str, reply: &Reply, ts: Timestamp) -> String {
    if reply.parts.is_empty() {
        return text_frame("done", session_id, &reply.text, ts);
    }
    to_json(&Envelope {
        content: &reply.text,
        parts: &reply.parts,
        ..Envelope::new("done", session_id, ts)
    })
}

/// The `done` of a cancelled turn, for clients that asked for positions:
/// `content` is the reply as far as it was streamed, and `cancelled: true`.
pub fn encode_cancelled(session_id: &str, partial: &Reply, ts: Timestamp) -> String {
    to_json(&Envelope {
        content: &partial.text,
        parts: &partial.parts,
        cancelled: true,
        ..Envelope::new("done", session_id, ts)
    })
}

pub fn encode_tool_call(session_id: &str, call: &ToolCall, ts: Timestamp) -> String {
    to_json(&Envelope {
        tool_call: Some(ToolCallOut {
            id: &call.id,
            name: &call.name,
            arguments: meaningful_arguments(&call.arguments),
            consent_message: call.consent_message.as_deref().filter(|m| !m.is_empty()),
            categories: &call.categories,
        }),
        ..Envelope::new("tool_call", session_id, ts)
    })
}

/// The server direction names the call `id` (the client direction says
/// `call_id`). A failed and a denied call look the same to the client: both
/// carry `error`.
pub fn encode_tool_result(
    session_id: &str,
    id: &str,
    outcome: &ToolOutcome,
    ts: Timestamp,
) -> String {
    let (result, error) = match outcome {
        ToolOutcome::Ok(value) => (Some(value).filter(|v| !v.is_null()), None),
        ToolOutcome::Error(e) | ToolOutcome::Denied(e) => {
            (None, Some(e.as_str()).filter(|e| !e.is_empty()))
        }
    };
    to_json(&Envelope {
        tool_result: Some(ToolResultOut { id, result, error }),
        ..Envelope::new("tool_result", session_id, ts)
    })
}

/// `session_id` is `None` for errors about a frame that never reached a
/// session (unparseable frames, rate limits): see the reference §3.9.
pub fn encode_error(
    session_id: Option<&str>,
    code: ErrorCode,
    message: &str,
    ts: Timestamp,
) -> String {
    to_json(&Envelope {
        error: Some(ErrorOut {
            code: code.as_str(),
            message,
            details: None,
        }),
        ..Envelope::new("error", session_id.unwrap_or_default(), ts)
    })
}

/// The `error` for a session that did not open: `SESSION_DECLARATION_REFUSED`
/// with `details{type, handle, reason, message}`, or `pack_compile_failed`
/// with `details{error, warnings}`.
pub fn encode_init_refusal(
    session_id: Option<&str>,
    refusal: &InitRefusal,
    ts: Timestamp,
) -> String {
    let details = match refusal {
        InitRefusal::Declaration(refused) => DetailsOut::Declaration {
            kind: &refused.kind,
            handle: &refused.handle,
            reason: refused.reason.as_str(),
            message: &refused.message,
        },
        InitRefusal::Compile(failure) => DetailsOut::Compile {
            error: &failure.error,
            warnings: &failure.warnings,
        },
    };
    to_json(&Envelope {
        error: Some(ErrorOut {
            code: refusal.code().as_str(),
            message: refusal.message(),
            details: Some(details),
        }),
        ..Envelope::new("error", session_id.unwrap_or_default(), ts)
    })
}

/// What `upload_ready` tells the client: where and how to send the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReady<'a> {
    pub upload_id: &'a str,
    pub upload_url: &'a str,
    pub storage_ref: &'a str,
    /// When the upload URL expires.
    pub expires_at: Timestamp,
    /// `PUT` for every backend; `None` leaves the field out.
    pub method: Option<&'a str>,
    /// Headers the upload must carry, in order; empty leaves the field out.
    pub headers: &'a [(String, String)],
}

/// The answer to `upload_request` (DOC: with `method` and `headers`, D8).
pub fn encode_upload_ready(session_id: &str, ready: &UploadReady<'_>, ts: Timestamp) -> String {
    to_json(&Envelope {
        upload_ready: Some(UploadReadyOut::new(ready)),
        ..Envelope::new("upload_ready", session_id, ts)
    })
}

/// The `upload_ready` object, also the body of `POST /media/request-upload`
/// (snake_case keys, D9).
#[derive(Serialize)]
pub(crate) struct UploadReadyOut<'a> {
    upload_id: &'a str,
    upload_url: &'a str,
    storage_ref: &'a str,
    expires_at: Rfc3339,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(
        skip_serializing_if = "<[(String, String)]>::is_empty",
        serialize_with = "serialize_headers"
    )]
    headers: &'a [(String, String)],
}

impl<'a> UploadReadyOut<'a> {
    pub(crate) fn new(ready: &UploadReady<'a>) -> UploadReadyOut<'a> {
        UploadReadyOut {
            upload_id: ready.upload_id,
            upload_url: ready.upload_url,
            storage_ref: ready.storage_ref,
            expires_at: Rfc3339(ready.expires_at),
            method: ready.method,
            headers: ready.headers,
        }
    }
}

/// Headers as a JSON object, in the given order.
fn serialize_headers<S: Serializer>(
    headers: &&[(String, String)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(headers.iter().map(|(k, v)| (k, v)))
}

/// The JSON fallback for media when the client did not ask for binary
/// frames: the payload travels base64-encoded in `media_chunk.data`.
pub fn encode_media_chunk(
    session_id: &str,
    media_id: &str,
    sequence: u32,
    is_last: bool,
    data: &[u8],
    mime_type: &str,
    ts: Timestamp,
) -> String {
    to_json(&Envelope {
        media_chunk: Some(MediaChunkOut {
            media_id,
            sequence,
            is_last,
            data: Base64(data),
            mime_type,
        }),
        ..Envelope::new("media_chunk", session_id, ts)
    })
}

/// Barge-in on a realtime session: the client drops buffered audio output.
pub fn encode_interrupt(session_id: &str, ts: Timestamp) -> String {
    to_json(&Envelope::new("interrupt", session_id, ts))
}

/// The audio format negotiated for a realtime session.
pub fn encode_session_config(session_id: &str, format: &AudioFormat, ts: Timestamp) -> String {
    to_json(&Envelope {
        session_config: Some(SessionConfigOut {
            codec: &format.codec,
            sample_rate: format.sample_rate,
            channels: format.channels,
        }),
        ..Envelope::new("session_config", session_id, ts)
    })
}

/// `session_config`: every field is always written.
#[derive(Serialize)]
struct SessionConfigOut<'a> {
    codec: &'a str,
    sample_rate: u32,
    channels: u32,
}

/// `frame`, any frame this module writes, with a top-level `seq` (the
/// position of the log entry it encodes) just before its `timestamp`, which
/// every frame ends with: positions are additive, for clients that asked for
/// them (`stream=2`). Inside strings quotes are escaped, so the last
/// `,"timestamp":` is the key.
pub fn with_seq(mut frame: String, seq: u64) -> String {
    const KEY: &str = ",\"timestamp\":";
    if let Some(at) = frame.rfind(KEY) {
        frame.insert_str(at, &format!(",\"seq\":{seq}"));
    }
    frame
}

fn to_json(envelope: &Envelope<'_>) -> String {
    // Sized for the envelope's fixed fields and its text up front: a chunk
    // frame is then written without growing the buffer.
    let mut out = Vec::with_capacity(FRAME_OVERHEAD + envelope.content.len());
    // Every shape here has string keys and no fallible Display, so
    // serialization cannot fail, and serde_json writes UTF-8 only.
    serde_json::to_writer(&mut out, envelope).expect("frame serialization is infallible");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Bytes of a text frame besides its content: type, session id, timestamp
/// and punctuation, with room to spare.
const FRAME_OVERHEAD: usize = 160;

/// `{"type":kind,"session_id":…,"content":…,"timestamp":…}` with the empty
/// fields left out, as [`Envelope`] writes it, into a `String` sized exactly
/// for it: the socket takes the frame's buffer as it is only when it holds no
/// spare capacity (a `Vec` with room to spare costs `Bytes` a second
/// allocation).
fn text_frame(kind: &'static str, session_id: &str, content: &str, ts: Timestamp) -> String {
    let mut ts_buf = [0; timestamp::MAX_LEN];
    let ts = Rfc3339(ts).write_into(&mut ts_buf);
    // `"key":"value"` is the key, the escaped value and five quotes and colon.
    let field = |key: &str, escaped: usize| key.len() + escaped + 5;
    let optional = |key: &str, value: &str| match value.is_empty() {
        true => 0,
        false => field(key, json::escaped_len(value)) + 1,
    };
    let len = 2
        + field("type", kind.len())
        + optional("session_id", session_id)
        + optional("content", content)
        + 1
        + field("timestamp", ts.len());
    let mut out = String::with_capacity(len);
    out.push_str("{\"type\":\"");
    out.push_str(kind);
    out.push('"');
    for (key, value) in [("session_id", session_id), ("content", content)] {
        if !value.is_empty() {
            out.push_str(",\"");
            out.push_str(key);
            out.push_str("\":\"");
            json::push_escaped(&mut out, value);
            out.push('"');
        }
    }
    out.push_str(",\"timestamp\":\"");
    out.push_str(ts);
    out.push_str("\"}");
    debug_assert_eq!(out.len(), len, "a hand-written frame is sized exactly");
    out
}

/// Arguments clients should see: `null` and `{}` are left out, as Go's
/// `omitempty` does for an empty map.
fn meaningful_arguments(arguments: &serde_json::Value) -> Option<&serde_json::Value> {
    match arguments {
        serde_json::Value::Null => None,
        serde_json::Value::Object(map) if map.is_empty() => None,
        other => Some(other),
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    session_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    content: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    role: &'a str,
    #[serde(
        skip_serializing_if = "<[ContentPart]>::is_empty",
        serialize_with = "serialize_parts"
    )]
    parts: &'a [ContentPart],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call: Option<ToolCallOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result: Option<ToolResultOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upload_ready: Option<UploadReadyOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_chunk: Option<MediaChunkOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_config: Option<SessionConfigOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    connected: Option<ConnectedOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_started: Option<TurnStartedOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    going_away: Option<GoingAwayOut<'a>>,
    #[serde(skip_serializing_if = "is_false")]
    cancelled: bool,
    timestamp: Rfc3339,
}

#[derive(Serialize)]
struct TurnStartedOut<'a> {
    turn_id: u64,
    epoch: &'a str,
    agent: &'a str,
}

impl<'a> Envelope<'a> {
    fn new(kind: &'static str, session_id: &'a str, ts: Timestamp) -> Envelope<'a> {
        Envelope {
            kind,
            session_id,
            content: "",
            role: "",
            parts: &[],
            tool_call: None,
            tool_result: None,
            error: None,
            upload_ready: None,
            media_chunk: None,
            session_config: None,
            connected: None,
            turn_started: None,
            going_away: None,
            cancelled: false,
            timestamp: Rfc3339(ts),
        }
    }
}

fn serialize_parts<S: Serializer>(
    parts: &&[ContentPart],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(parts.iter().map(PartOut::new))
}

#[derive(Serialize)]
struct PartOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    media: Option<MediaOut<'a>>,
}

impl<'a> PartOut<'a> {
    fn new(part: &'a ContentPart) -> PartOut<'a> {
        PartOut {
            kind: part_kind_name(part),
            text: present_str(part.text.as_deref()),
            media: part.media.as_ref().map(MediaOut::new),
        }
    }
}

/// The wire requires a type; a part built without one is named by what it
/// carries.
fn part_kind_name(part: &ContentPart) -> &'static str {
    let kind = part.kind.unwrap_or(if part.media.is_some() {
        PartKind::File
    } else {
        PartKind::Text
    });
    match kind {
        PartKind::Text => "text",
        PartKind::Image => "image",
        PartKind::Audio => "audio",
        PartKind::Video => "video",
        PartKind::File => "file",
    }
}

#[derive(Serialize)]
struct MediaOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    storage_ref: Option<&'a str>,
    mime_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<u32>,
}

impl<'a> MediaOut<'a> {
    fn new(media: &'a MediaContent) -> MediaOut<'a> {
        MediaOut {
            data: present_str(media.data.as_deref()),
            url: present_str(media.url.as_deref()),
            storage_ref: present_str(media.storage_ref.as_deref()),
            mime_type: &media.mime_type,
            filename: present_str(media.filename.as_deref()),
            size_bytes: present_number(media.size_bytes),
            width: present_number(media.width),
            height: present_number(media.height),
            detail: present_str(media.detail.as_deref()),
            duration_ms: present_number(media.duration_ms),
            sample_rate: present_number(media.sample_rate),
            channels: present_number(media.channels),
        }
    }
}

/// `omitempty` for optional strings: `Some("")` is left out too.
fn present_str(value: Option<&str>) -> Option<&str> {
    value.filter(|s| !s.is_empty())
}

/// `omitempty` for optional numbers: zero is left out too.
fn present_number<T: Copy + Default + PartialEq>(value: Option<T>) -> Option<T> {
    value.filter(|n| *n != T::default())
}

#[derive(Serialize)]
struct ToolCallOut<'a> {
    id: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consent_message: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    categories: &'a [String],
}

#[derive(Serialize)]
struct ToolResultOut<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<DetailsOut<'a>>,
}

/// `error.details`: why a session did not open.
#[derive(Serialize)]
#[serde(untagged)]
enum DetailsOut<'a> {
    Declaration {
        #[serde(rename = "type")]
        kind: &'a str,
        handle: &'a str,
        reason: &'a str,
        message: &'a str,
    },
    Compile {
        error: &'a str,
        warnings: &'a [String],
    },
}

#[derive(Serialize)]
struct MediaChunkOut<'a> {
    media_id: &'a str,
    sequence: u32,
    is_last: bool,
    data: Base64<'a>,
    mime_type: &'a str,
}

#[derive(Serialize)]
struct ConnectedOut<'a> {
    capabilities: CapabilitiesOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_facet: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ai_disclosure: Option<bool>,
}

#[derive(Serialize)]
struct CapabilitiesOut<'a> {
    binary_frames: bool,
    max_payload_size: u64,
    protocol_version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_log: Option<EventLog<'a>>,
    /// `{"type":"cancel"}` is taken: only with positions.
    #[serde(skip_serializing_if = "is_false")]
    cancel: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[cfg(test)]
mod tests;

//! Server → client text frames.
//!
//! Keys follow the reference envelope's order (`type, session_id, content,
//! role, parts, tool_call, tool_result, error, upload_ready, upload_complete,
//! media_chunk, session_config, connected, timestamp`); this module writes
//! the subset its encoders need, in that order. Empty fields are left out, as
//! Go's `omitempty` does, except the ones clients rely on seeing every time.
//! Frames are serialized straight from borrowed views of the core types.

use agentwire_core::{
    AudioFormat, ContentPart, ErrorCode, MediaContent, PartKind, Reply, Timestamp, ToolCall,
    ToolOutcome,
};
use serde::{Serialize, Serializer};

use crate::base64::Base64;
use crate::timestamp::Rfc3339;

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
    /// Written only when true: an absent field means a fresh session.
    pub resumed: bool,
    pub memory_facet: Option<&'a str>,
    /// Written only when the pack declares it: absent is not `false`.
    pub ai_disclosure: Option<bool>,
}

pub fn encode_connected(c: &Connected<'_>, ts: Timestamp) -> String {
    to_json(&Envelope {
        connected: Some(ConnectedOut {
            capabilities: CapabilitiesOut {
                binary_frames: c.capabilities.binary_frames,
                max_payload_size: c.capabilities.max_payload_size,
                protocol_version: c.capabilities.protocol_version,
            },
            resumed: c.resumed,
            memory_facet: c.memory_facet,
            ai_disclosure: c.ai_disclosure,
        }),
        ..Envelope::new("connected", c.session_id, ts)
    })
}

pub fn encode_chunk(session_id: &str, content: &str, ts: Timestamp) -> String {
    to_json(&Envelope {
        content,
        ..Envelope::new("chunk", session_id, ts)
    })
}

/// `done` carries the full reply. With parts, clients read `parts` and may
/// ignore `content`; the text is still written when there is any, so
/// text-only clients see it. An empty reply (the duplex turn seal) is a bare
/// `done`.
pub fn encode_done(session_id: &str, reply: &Reply, ts: Timestamp) -> String {
    to_json(&Envelope {
        content: &reply.text,
        parts: &reply.parts,
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

fn to_json(envelope: &Envelope<'_>) -> String {
    // Every shape here has string keys and no fallible Display, so
    // serialization cannot fail.
    serde_json::to_string(envelope).expect("frame serialization is infallible")
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
    timestamp: Rfc3339,
}

impl<'a> Envelope<'a> {
    fn new(kind: &'static str, session_id: &'a str, ts: Timestamp) -> Envelope<'a> {
        Envelope {
            kind,
            session_id,
            content: "",
            parts: &[],
            tool_call: None,
            tool_result: None,
            error: None,
            upload_ready: None,
            media_chunk: None,
            session_config: None,
            connected: None,
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
    capabilities: CapabilitiesOut,
    #[serde(skip_serializing_if = "is_false")]
    resumed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_facet: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ai_disclosure: Option<bool>,
}

#[derive(Serialize)]
struct CapabilitiesOut {
    binary_frames: bool,
    max_payload_size: u64,
    protocol_version: u32,
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[cfg(test)]
mod tests {
    use agentwire_core::ToolSide;
    use serde_json::{Value, json};

    use super::*;

    /// 2026-07-24T16:47:30.5Z
    const TS: Timestamp = Timestamp(1_784_911_650_500_000_000);
    const TS_JSON: &str = r#""timestamp":"2026-07-24T16:47:30.5Z"}"#;

    fn parse(frame: &str) -> Value {
        serde_json::from_str(frame).expect("frames are valid JSON")
    }

    /// The object's keys in the order written (`serde_json::Map` sorts them).
    struct KeysInOrder(Vec<String>);

    impl<'de> serde::Deserialize<'de> for KeysInOrder {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct KeyVisitor;
            impl<'de> serde::de::Visitor<'de> for KeyVisitor {
                type Value = KeysInOrder;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<KeysInOrder, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(key) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        keys.push(key);
                    }
                    Ok(KeysInOrder(keys))
                }
            }
            d.deserialize_map(KeyVisitor)
        }
    }

    fn keys(json: &str) -> Vec<String> {
        serde_json::from_str::<KeysInOrder>(json).unwrap().0
    }

    fn capabilities() -> Capabilities {
        Capabilities {
            binary_frames: false,
            max_payload_size: 16_777_216,
            protocol_version: 1,
        }
    }

    #[test]
    fn connected_always_carries_capabilities_and_omits_defaults() {
        let frame = encode_connected(
            &Connected {
                session_id: "s1",
                capabilities: capabilities(),
                resumed: false,
                memory_facet: None,
                ai_disclosure: None,
            },
            TS,
        );
        assert_eq!(
            frame,
            r#"{"type":"connected","session_id":"s1","connected":{"capabilities":{"binary_frames":false,"max_payload_size":16777216,"protocol_version":1}},"timestamp":"2026-07-24T16:47:30.5Z"}"#
        );
    }

    #[test]
    fn connected_writes_resumed_facet_and_disclosure_when_set() {
        let frame = encode_connected(
            &Connected {
                session_id: "s1",
                capabilities: Capabilities {
                    binary_frames: true,
                    ..capabilities()
                },
                resumed: true,
                memory_facet: Some("proj-1"),
                ai_disclosure: Some(false),
            },
            TS,
        );
        let v = parse(&frame);
        assert_eq!(v["connected"]["capabilities"]["binary_frames"], true);
        assert_eq!(v["connected"]["resumed"], true);
        assert_eq!(v["connected"]["memory_facet"], "proj-1");
        assert_eq!(v["connected"]["ai_disclosure"], false);
        assert_eq!(
            keys(&frame),
            ["type", "session_id", "connected", "timestamp"]
        );
    }

    #[test]
    fn chunk_has_envelope_order() {
        let frame = encode_chunk("s1", "Hello", TS);
        assert!(frame.starts_with(r#"{"type":"chunk","session_id":"s1","content":"Hello","#));
        assert!(frame.ends_with(TS_JSON));
    }

    #[test]
    fn empty_session_id_and_content_are_omitted() {
        let frame = encode_chunk("", "", TS);
        assert_eq!(frame, format!(r#"{{"type":"chunk",{TS_JSON}"#));
    }

    #[test]
    fn strings_are_json_escaped() {
        let frame = encode_chunk("s1", "a \"quote\"\n<b>", TS);
        assert_eq!(parse(&frame)["content"], "a \"quote\"\n<b>");
    }

    #[test]
    fn text_done_carries_content_only() {
        let frame = encode_done("s1", &Reply::text("echo: hi"), TS);
        assert_eq!(
            frame,
            format!(r#"{{"type":"done","session_id":"s1","content":"echo: hi",{TS_JSON}"#)
        );
    }

    #[test]
    fn empty_done_is_a_bare_seal() {
        let frame = encode_done("s1", &Reply::default(), TS);
        assert_eq!(keys(&frame), ["type", "session_id", "timestamp"]);
    }

    #[test]
    fn done_with_parts_writes_parts_and_non_empty_content() {
        let reply = Reply {
            text: String::new(),
            parts: vec![ContentPart::text("I see your image")],
        };
        let frame = encode_done("s1", &reply, TS);
        assert_eq!(
            frame,
            format!(
                r#"{{"type":"done","session_id":"s1","parts":[{{"type":"text","text":"I see your image"}}],{TS_JSON}"#
            )
        );

        let reply = Reply {
            text: "caption".into(),
            ..reply
        };
        assert_eq!(
            keys(&encode_done("s1", &reply, TS)),
            ["type", "session_id", "content", "parts", "timestamp"]
        );
    }

    #[test]
    fn media_parts_follow_the_contract_shape() {
        let full = MediaContent {
            data: Some("iVBORw0=".into()),
            url: None,
            storage_ref: Some(String::new()),
            mime_type: "image/png".into(),
            filename: Some("a.png".into()),
            size_bytes: Some(89),
            width: Some(4),
            height: Some(4),
            detail: Some("low".into()),
            duration_ms: Some(1000),
            sample_rate: Some(44_100),
            channels: Some(2),
        };
        let reply = Reply {
            text: String::new(),
            parts: vec![
                ContentPart::media(PartKind::Image, full),
                ContentPart::media(PartKind::Audio, MediaContent::default()),
            ],
        };
        let frame = encode_done("s1", &reply, TS);
        let v = parse(&frame);
        let media = &v["parts"][0]["media"];
        // The media object is flat, so it ends at the first closing brace.
        let start = frame.find(r#""media":{"#).unwrap() + r#""media":"#.len();
        let end = start + frame[start..].find('}').unwrap() + 1;
        assert_eq!(
            keys(&frame[start..end]),
            [
                "data",
                "mime_type",
                "filename",
                "size_bytes",
                "width",
                "height",
                "detail",
                "duration_ms",
                "sample_rate",
                "channels"
            ]
        );
        assert_eq!(v["parts"][0]["type"], "image");
        assert_eq!(media["size_bytes"], 89);
        // mime_type is always written, even empty.
        assert_eq!(
            v["parts"][1],
            json!({"type":"audio","media":{"mime_type":""}})
        );
    }

    #[test]
    fn untyped_parts_are_named_by_their_content() {
        let reply = Reply {
            text: String::new(),
            parts: vec![
                ContentPart {
                    kind: None,
                    text: Some("t".into()),
                    media: None,
                },
                ContentPart {
                    kind: None,
                    text: None,
                    media: Some(MediaContent::default()),
                },
            ],
        };
        let v = parse(&encode_done("s1", &reply, TS));
        assert_eq!(v["parts"][0]["type"], "text");
        assert_eq!(v["parts"][1]["type"], "file");
    }

    fn tool_call(arguments: Value) -> ToolCall {
        ToolCall {
            id: "tool-1".into(),
            name: "get_location".into(),
            arguments,
            side: ToolSide::Client,
            consent_message: Some("Allow location access?".into()),
            categories: vec!["location".into()],
        }
    }

    #[test]
    fn tool_call_carries_consent_fields() {
        let frame = encode_tool_call("s1", &tool_call(json!({"query":"current"})), TS);
        assert_eq!(
            frame,
            format!(
                r#"{{"type":"tool_call","session_id":"s1","tool_call":{{"id":"tool-1","name":"get_location","arguments":{{"query":"current"}},"consent_message":"Allow location access?","categories":["location"]}},{TS_JSON}"#
            )
        );
    }

    #[test]
    fn tool_call_omits_empty_arguments_and_consent() {
        for arguments in [json!({}), Value::Null] {
            let call = ToolCall {
                consent_message: Some(String::new()),
                categories: Vec::new(),
                ..tool_call(arguments)
            };
            let v = parse(&encode_tool_call("s1", &call, TS));
            assert_eq!(v["tool_call"], json!({"id":"tool-1","name":"get_location"}));
        }
    }

    #[test]
    fn tool_result_success_carries_result() {
        let outcome = ToolOutcome::Ok(json!("found results"));
        let frame = encode_tool_result("s1", "tool-1", &outcome, TS);
        assert_eq!(
            frame,
            format!(
                r#"{{"type":"tool_result","session_id":"s1","tool_result":{{"id":"tool-1","result":"found results"}},{TS_JSON}"#
            )
        );
    }

    #[test]
    fn tool_result_failure_and_denial_carry_error() {
        for outcome in [
            ToolOutcome::Error("boom".into()),
            ToolOutcome::Denied("client did not acknowledge tool call within timeout".into()),
        ] {
            let v = parse(&encode_tool_result("s1", "tool-1", &outcome, TS));
            let expected = match &outcome {
                ToolOutcome::Error(e) | ToolOutcome::Denied(e) => e.clone(),
                ToolOutcome::Ok(_) => unreachable!(),
            };
            assert_eq!(v["tool_result"], json!({"id":"tool-1","error":expected}));
        }
    }

    #[test]
    fn tool_result_null_success_is_just_the_id() {
        let v = parse(&encode_tool_result(
            "s1",
            "t",
            &ToolOutcome::Ok(Value::Null),
            TS,
        ));
        assert_eq!(v["tool_result"], json!({"id":"t"}));
    }

    #[test]
    fn error_without_session_has_no_session_id() {
        let frame = encode_error(
            None,
            ErrorCode::InvalidMessage,
            "invalid message format",
            TS,
        );
        assert_eq!(
            frame,
            format!(
                r#"{{"type":"error","error":{{"code":"INVALID_MESSAGE","message":"invalid message format"}},{TS_JSON}"#
            )
        );
    }

    #[test]
    fn error_with_session_and_custom_code() {
        let frame = encode_error(
            Some("s1"),
            ErrorCode::Custom("TEST_ERROR"),
            "something went wrong",
            TS,
        );
        assert!(
            frame.starts_with(r#"{"type":"error","session_id":"s1","error":{"code":"TEST_ERROR","#)
        );
        // code and message are always written.
        let v = parse(&encode_error(Some("s1"), ErrorCode::Internal, "", TS));
        assert_eq!(v["error"], json!({"code":"INTERNAL_ERROR","message":""}));
    }

    #[test]
    fn media_chunk_writes_every_field_and_base64_data() {
        let frame = encode_media_chunk(
            "s1",
            "test-media",
            0,
            true,
            b"test audio data",
            "audio/mp3",
            TS,
        );
        assert_eq!(
            frame,
            format!(
                r#"{{"type":"media_chunk","session_id":"s1","media_chunk":{{"media_id":"test-media","sequence":0,"is_last":true,"data":"dGVzdCBhdWRpbyBkYXRh","mime_type":"audio/mp3"}},{TS_JSON}"#
            )
        );
        let v = parse(&encode_media_chunk("s1", "", 3, false, b"", "", TS));
        assert_eq!(
            v["media_chunk"],
            json!({"media_id":"","sequence":3,"is_last":false,"data":"","mime_type":""})
        );
    }

    #[test]
    fn interrupt_and_session_config_shapes() {
        let ts = Timestamp(0);
        assert_eq!(
            encode_interrupt("s1", ts),
            r#"{"type":"interrupt","session_id":"s1","timestamp":"1970-01-01T00:00:00Z"}"#
        );
        let format = AudioFormat {
            codec: "pcm".into(),
            sample_rate: 24000,
            channels: 1,
        };
        assert_eq!(
            encode_session_config("s1", &format, ts),
            r#"{"type":"session_config","session_id":"s1","session_config":{"codec":"pcm","sample_rate":24000,"channels":1},"timestamp":"1970-01-01T00:00:00Z"}"#
        );
    }

    #[test]
    fn upload_ready_golden() {
        let headers = [("Content-Type".to_owned(), "image/jpeg".to_owned())];
        let ready = UploadReady {
            upload_id: "0123456789abcdef0123456789abcdef",
            upload_url: "https://agents.example.com/media/upload/0123456789abcdef0123456789abcdef",
            storage_ref: "omnia://sessions/s1/media/0123456789abcdef0123456789abcdef",
            expires_at: TS,
            method: Some("PUT"),
            headers: &headers,
        };
        assert_eq!(
            encode_upload_ready("s1", &ready, TS),
            format!(
                r#"{{"type":"upload_ready","session_id":"s1","upload_ready":{{"upload_id":"0123456789abcdef0123456789abcdef","upload_url":"https://agents.example.com/media/upload/0123456789abcdef0123456789abcdef","storage_ref":"omnia://sessions/s1/media/0123456789abcdef0123456789abcdef","expires_at":"2026-07-24T16:47:30.5Z","method":"PUT","headers":{{"Content-Type":"image/jpeg"}}}},{TS_JSON}"#
            )
        );
        // Absent method and headers are left out.
        let bare = UploadReady {
            method: None,
            headers: &[],
            ..ready
        };
        let v = parse(&encode_upload_ready("s1", &bare, TS));
        assert_eq!(
            v["upload_ready"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["expires_at", "storage_ref", "upload_id", "upload_url"]
        );
    }
}

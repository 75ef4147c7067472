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
        json!({"type": {"message": null}, "content": "hi"}),
        json!({"type": "tool_result", "tool_result": ["tc-1"]}),
        json!({"type": "upload_request", "upload_request": {"size_bytes": "10"}}),
        json!({"type": "credential_refresh", "token": true}),
    ] {
        assert_eq!(error_of(value.clone()), "invalid message format", "{value}");
    }
}

/// A `declare` that is not an object is the runtime's to refuse
/// (`SESSION_DECLARATION_REFUSED`, `InvalidDeclaration`), so it passes the
/// frame as sent.
#[test]
fn a_declare_of_any_json_type_is_forwarded_unread() {
    for declare in [json!("sandbox"), json!([]), json!(7)] {
        let text = json!({"type": "message", "content": "hi", "declare": declare}).to_string();
        let ClientFrame::Message(m) = decode_client_text(&text).unwrap() else {
            panic!("a message");
        };
        assert_eq!(m.declare.unwrap().get(), declare.to_string());
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
    let m = message(json!({
        "type": "message", "content": "", "parts": [{"type": "text", "text": "hi"}],
        "declare": null
    }));
    assert_eq!(m.content, None);
    assert!(m.declare.is_none());
}

#[test]
fn an_empty_session_id_is_malformed_like_any_invalid_id() {
    let refused = decode(json!({"type": "message", "content": "hi", "session_id": ""}));
    let Err(e) = refused else {
        panic!("accepted: {refused:?}")
    };
    assert_eq!(e.message, agentwire_core::InvalidSessionId.to_string());
    assert_eq!(
        e.message,
        "invalid session_id: 1 to 128 ASCII letters, digits, '.', '_', ':' or '-'"
    );
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

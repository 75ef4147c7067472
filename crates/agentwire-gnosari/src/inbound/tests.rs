use proptest::prelude::*;
use serde_json::json;

use super::*;

fn decode(value: serde_json::Value) -> Result<InboundMessage, FrameError> {
    decode_inbound(&value.to_string())
}

fn error_of(value: serde_json::Value) -> FrameError {
    match decode(value) {
        Err(e) => e,
        Ok(m) => panic!("expected an error, got {m:?}"),
    }
}

#[test]
fn a_bare_message_opens_a_new_session() {
    let m = decode(json!({"message": "What's the weather like today?"})).unwrap();
    assert_eq!(
        m,
        InboundMessage {
            message: "What's the weather like today?".into(),
            session_id: None,
            client_message_id: None,
            metadata: Metadata::new(),
            attachments: Vec::new(),
        }
    );
    assert_eq!(m.check_attachments(), Ok(None));
}

#[test]
fn every_field_is_read() {
    let m = decode(json!({
        "message": "hi",
        "session_id": "session-123",
        "client_message_id": "c-1",
        "metadata": {"plan": "pro", "seats": 3, "beta": true, "tags": ["a"], "none": null},
        "attachments": [],
    }))
    .unwrap();
    assert_eq!(m.session_id.as_deref(), Some("session-123"));
    assert_eq!(m.client_message_id.as_deref(), Some("c-1"));
    let metadata: Vec<(&str, &str)> = m
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        metadata,
        [
            ("beta", "true"),
            ("none", "null"),
            ("plan", "pro"),
            ("seats", "3"),
            ("tags", "[\"a\"]")
        ]
    );
    assert!(m.attachments.is_empty());
}

#[test]
fn null_and_empty_are_absent_and_unknown_fields_are_ignored() {
    let m = decode(json!({
        "message": "hi", "session_id": null, "client_message_id": "", "metadata": null,
        "attachments": null, "type": "message", "future_field": {"x": [1, 2]}
    }))
    .unwrap();
    assert_eq!(m.session_id, None);
    assert_eq!(m.client_message_id, None);
    assert!(m.metadata.is_empty() && m.attachments.is_empty());
    assert_eq!(
        decode(json!({"message": "hi", "session_id": ""}))
            .unwrap()
            .session_id,
        None
    );
}

#[test]
fn escaped_strings_are_unescaped() {
    let m = decode_inbound(r#"{"message":"a \"q\" \u00e9\n","session_id":"s\u002d1"}"#).unwrap();
    assert_eq!(m.message, "a \"q\" é\n");
    assert_eq!(m.session_id.as_deref(), Some("s-1"));
}

#[test]
fn non_objects_and_bad_json_are_named() {
    for text in [
        "",
        "   ",
        "[]",
        r#"["hi"]"#,
        "null",
        "42",
        r#""hi""#,
        "hello",
    ] {
        assert_eq!(
            decode_inbound(text).unwrap_err().message,
            NOT_AN_OBJECT,
            "{text:?}"
        );
    }
    for text in [
        "{",
        r#"{"message":"hi""#,
        r#"{"message":"hi"} x"#,
        "{message: 1}",
    ] {
        assert_eq!(
            decode_inbound(text).unwrap_err().message,
            INVALID_JSON,
            "{text:?}"
        );
    }
    assert_eq!(
        decode_inbound(r#"{"message":"a","message":"b"}"#)
            .unwrap_err()
            .message,
        DUPLICATE_FIELD
    );
}

#[test]
fn the_message_is_required_and_must_be_text() {
    assert_eq!(error_of(json!({})).message, MESSAGE_REQUIRED);
    assert_eq!(error_of(json!({"message": null})).message, MESSAGE_REQUIRED);
    assert_eq!(error_of(json!({"content": "hi"})).message, MESSAGE_REQUIRED);
    assert_eq!(error_of(json!({"message": 5})).message, MESSAGE_NOT_STRING);
    assert_eq!(
        error_of(json!({"message": ["hi"]})).message,
        MESSAGE_NOT_STRING
    );
    assert_eq!(error_of(json!({"message": ""})).message, MESSAGE_EMPTY);
    assert_eq!(error_of(json!({"message": " \n\t"})).message, MESSAGE_EMPTY);
}

#[test]
fn wrong_field_types_are_named() {
    let cases = [
        (
            json!({"message": "hi", "session_id": 7}),
            SESSION_ID_NOT_STRING,
        ),
        (
            json!({"message": "hi", "session_id": {}}),
            SESSION_ID_NOT_STRING,
        ),
        (
            json!({"message": "hi", "client_message_id": 7}),
            CLIENT_MESSAGE_ID_NOT_STRING,
        ),
        (
            json!({"message": "hi", "metadata": []}),
            METADATA_NOT_OBJECT,
        ),
        (
            json!({"message": "hi", "metadata": "plan=pro"}),
            METADATA_NOT_OBJECT,
        ),
        (
            json!({"message": "hi", "attachments": "b3f1"}),
            ATTACHMENTS_NOT_ARRAY,
        ),
        (
            json!({"message": "hi", "attachments": [1]}),
            ATTACHMENTS_NOT_ARRAY,
        ),
        (
            json!({"message": "hi", "attachments": {"id": "b3f1"}}),
            ATTACHMENTS_NOT_ARRAY,
        ),
    ];
    for (frame, message) in cases {
        assert_eq!(error_of(frame.clone()).message, message, "{frame}");
    }
}

#[test]
fn errors_after_the_client_message_id_carry_it() {
    let e = error_of(json!({"client_message_id": "c-9", "message": 5}));
    assert_eq!(e.message, MESSAGE_NOT_STRING);
    assert_eq!(e.client_message_id.as_deref(), Some("c-9"));
    let e = error_of(json!({"client_message_id": "c-9", "message": "hi", "metadata": 1}));
    assert_eq!(e.client_message_id.as_deref(), Some("c-9"));
    let e = error_of(json!({"client_message_id": 1, "message": "hi"}));
    assert_eq!(e.client_message_id, None);
    assert_eq!(e.to_string(), CLIENT_MESSAGE_ID_NOT_STRING);
}

#[test]
fn client_message_ids_are_bounded() {
    assert!(decode(json!({"message": "hi", "client_message_id": "x".repeat(256)})).is_ok());
    assert_eq!(
        error_of(json!({"message": "hi", "client_message_id": "x".repeat(257)})).message,
        CLIENT_MESSAGE_ID_TOO_LONG
    );
}

#[test]
fn metadata_limits() {
    let keys = |n: usize| {
        (0..n)
            .map(|i| (format!("k{i}"), json!("v")))
            .collect::<serde_json::Map<_, _>>()
    };
    assert!(decode(json!({"message": "hi", "metadata": keys(32)})).is_ok());
    assert_eq!(
        error_of(json!({"message": "hi", "metadata": keys(33)})).message,
        METADATA_TOO_MANY_KEYS
    );
    assert_eq!(
        error_of(json!({"message": "hi", "metadata": {"": "v"}})).message,
        METADATA_BAD_KEY
    );
    assert_eq!(
        error_of(json!({"message": "hi", "metadata": {"k".repeat(65): "v"}})).message,
        METADATA_BAD_KEY
    );
    assert!(decode(json!({"message": "hi", "metadata": {"é".repeat(64): "v"}})).is_ok());
    assert_eq!(
        error_of(json!({"message": "hi", "metadata": {"a": "x".repeat(32 * 1024)}})).message,
        METADATA_TOO_LONG
    );
}

#[test]
fn one_attachment_with_a_session_is_accepted() {
    let m = decode(json!({
        "message": "What does this policy cover?", "session_id": "s1",
        "client_message_id": "c-2", "attachments": ["B3F1C2A4-9e21-4a3c-8f10-7d4e6a1b9c02"]
    }))
    .unwrap();
    assert_eq!(m.attachments, ["B3F1C2A4-9e21-4a3c-8f10-7d4e6a1b9c02"]);
    let id = m.check_attachments().unwrap().unwrap();
    assert_eq!(id.as_str(), "b3f1c2a49e214a3c8f107d4e6a1b9c02");
}

#[test]
fn attachment_shape_errors_carry_the_client_message_id() {
    const ID: &str = "b3f1c2a4-9e21-4a3c-8f10-7d4e6a1b9c02";
    for (frame, expected) in [
        (
            json!({"message": "m", "client_message_id": "c", "attachments": [ID]}),
            ATTACHMENTS_NEED_SESSION,
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s", "attachments": [ID, ID]}),
            ATTACHMENTS_TOO_MANY,
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s", "attachments": ["not-a-uuid"]}),
            ATTACHMENT_INVALID_ID,
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s", "attachments": ["b3f1c2a49e214a3c8f107d4e6a1b9c02"]}),
            ATTACHMENT_INVALID_ID,
        ),
    ] {
        let e = decode(frame).unwrap().check_attachments().unwrap_err();
        assert_eq!(e.message, expected);
        assert_eq!(e.client_message_id.as_deref(), Some("c"));
    }
}

/// Frames the mutation test starts from.
const VALID_FRAMES: &[&str] = &[
    r#"{"message":"hi"}"#,
    r#"{"message":"What's the weather?","session_id":"session-123","client_message_id":"c1"}"#,
    r#"{"message":"x","metadata":{"a":"b","n":1,"o":{"p":[true,null]}},"attachments":["u"]}"#,
    r#"{"message":"é \u00e9 \ud83d\ude00","session_id":null,"extra":[1,2,{"k":"v"}]}"#,
];

fn mutate(frame: &str, edits: &[(usize, u8, char)]) -> String {
    let mut chars: Vec<char> = frame.chars().collect();
    for &(at, op, c) in edits {
        let at = if chars.is_empty() {
            0
        } else {
            at % (chars.len() + 1)
        };
        match op % 3 {
            0 if at < chars.len() => chars[at] = c,
            1 if at < chars.len() => {
                chars.remove(at);
            }
            _ => chars.insert(at, c),
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = decode_inbound(&text);
    }

    #[test]
    fn never_panics_on_json_like_text(text in r#"[{}\[\]":,a-z0-9 \\-]{0,64}"#) {
        let _ = decode_inbound(&text);
    }

    #[test]
    fn never_panics_on_mutated_frames(
        index in 0..VALID_FRAMES.len(),
        edits in prop::collection::vec(
            (any::<usize>(), any::<u8>(), prop::sample::select(vec!['{', '}', '[', ']', '"', ':', ',', '\\', '0', 'x', ' ', 'é', '\u{0}'])),
            1..6,
        ),
    ) {
        let _ = decode_inbound(&mutate(VALID_FRAMES[index], &edits));
    }

    #[test]
    fn decoded_messages_keep_the_text(message in "\\PC*[a-z]\\PC*", id in "[A-Za-z0-9_.:-]{0,20}") {
        let frame = json!({"message": message, "client_message_id": id}).to_string();
        let decoded = decode_inbound(&frame).unwrap();
        prop_assert_eq!(decoded.message, message);
        prop_assert_eq!(decoded.client_message_id, Some(id).filter(|id| !id.is_empty()));
    }
}

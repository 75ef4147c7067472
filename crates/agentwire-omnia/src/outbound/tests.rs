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
            resumed: None,
            memory_facet: None,
            ai_disclosure: None,
            event_log: None,
        },
        TS,
    );
    assert_eq!(
        frame,
        r#"{"type":"connected","session_id":"s1","connected":{"capabilities":{"binary_frames":false,"max_payload_size":16777216,"protocol_version":1}},"timestamp":"2026-07-24T16:47:30.5Z"}"#
    );
}

/// `resume=` named a session that could not be re-attached: the contract's
/// "false when the facade opened a new one", written out.
#[test]
fn connected_says_resumed_false_when_asked_and_not_found() {
    let frame = encode_connected(
        &Connected {
            session_id: "s1",
            capabilities: capabilities(),
            resumed: Some(false),
            memory_facet: None,
            ai_disclosure: None,
            event_log: None,
        },
        TS,
    );
    assert_eq!(parse(&frame)["connected"]["resumed"], false);
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
            resumed: Some(true),
            memory_facet: Some("proj-1"),
            ai_disclosure: Some(false),
            event_log: None,
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
fn a_callers_transcript_is_a_chunk_with_the_user_role() {
    assert_eq!(
        encode_user_chunk("s1", "what is \"the\" weather", Timestamp(0)),
        r#"{"type":"chunk","session_id":"s1","content":"what is \"the\" weather","role":"user","timestamp":"1970-01-01T00:00:00Z"}"#
    );
    // The assistant's chunk has no role.
    assert!(!encode_chunk("s1", "hi", Timestamp(0)).contains("role"));
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

/// What the hand-written encoders must equal: the frame serialised from
/// the envelope by serde_json.
fn serialised(kind: &'static str, session_id: &str, content: &str, ts: Timestamp) -> String {
    to_json(&Envelope {
        content,
        ..Envelope::new(kind, session_id, ts)
    })
}

#[test]
fn hand_written_frames_are_sized_exactly() {
    for content in ["", "Hello", "a \"quote\"\n<b>\u{1}\u{7f}é", "\\"] {
        let frame = encode_chunk("s1", content, TS);
        assert_eq!(frame.capacity(), frame.len(), "{content:?}");
        let done = encode_done("s1", &Reply::text(content), TS);
        assert_eq!(done.capacity(), done.len(), "{content:?}");
    }
}

proptest::proptest! {
    #[test]
    fn hand_written_chunk_and_done_equal_serde_json(
        session_id in "\\PC{0,40}|[\\x00-\\x7f]{0,40}",
        content in "\\PC*|[\\x00-\\x7f]*|(.|\n|\r|\t|\u{0}|\u{1f}|\"|\\\\)*",
        nanos in proptest::num::i64::ANY,
    ) {
        let ts = Timestamp(nanos);
        proptest::prop_assert_eq!(
            encode_chunk(&session_id, &content, ts),
            serialised("chunk", &session_id, &content, ts)
        );
        proptest::prop_assert_eq!(
            encode_done(&session_id, &Reply::text(content.clone()), ts),
            serialised("done", &session_id, &content, ts)
        );
    }
}

#[test]
fn a_position_goes_in_every_frame_just_before_its_timestamp() {
    let call = ToolCall {
        id: "c1".into(),
        name: "lookup".into(),
        arguments: json!({"q": "\"timestamp\":\"x\""}),
        side: ToolSide::Client,
        consent_message: None,
        categories: Vec::new(),
    };
    let frames = [
        encode_chunk("s1", r#"tricky ,"timestamp":"no" text"#, TS),
        encode_done("s1", &Reply::text("all"), TS),
        encode_tool_call("s1", &call, TS),
        encode_tool_result("s1", "c1", &ToolOutcome::Ok(json!(1)), TS),
        encode_error(Some("s1"), ErrorCode::Internal, "oops", TS),
        encode_interrupt("s1", TS),
    ];
    for frame in frames {
        let positioned = with_seq(frame.clone(), 42);
        let mut value = parse(&positioned);
        assert_eq!(value["seq"], 42, "{positioned}");
        let keys: KeysInOrder = serde_json::from_str(&positioned).unwrap();
        let n = keys.0.len();
        assert_eq!(keys.0[n - 2..], ["seq", "timestamp"], "{positioned}");
        // Nothing else changed.
        value.as_object_mut().unwrap().remove("seq");
        assert_eq!(value, parse(&frame));
    }
}

use super::*;

fn full_media() -> MediaContent {
    MediaContent {
        data: Some("aGVsbG8=".into()),
        url: Some("https://example.com/a.png".into()),
        storage_ref: Some("s3://bucket/key".into()),
        mime_type: "image/png".into(),
        filename: Some("a.png".into()),
        size_bytes: Some(u64::MAX),
        width: Some(640),
        height: Some(480),
        detail: Some("high".into()),
        duration_ms: Some(1234),
        sample_rate: Some(48_000),
        channels: Some(2),
    }
}

#[test]
fn every_field_and_kind_round_trips() {
    let parts = vec![
        ContentPart::text("hi"),
        ContentPart::media(PartKind::Image, full_media()),
        ContentPart::media(PartKind::Audio, MediaContent::default()),
        ContentPart::media(PartKind::Video, full_media()),
        ContentPart::media(PartKind::File, full_media()),
        ContentPart::default(),
    ];
    let json = encode_parts(&parts).unwrap().unwrap();
    assert!(json.contains(r#""kind":"image""#));
    assert_eq!(decode_parts(Some(&json)).unwrap(), parts);
}

#[test]
fn empty_values_are_stored_as_null() {
    assert_eq!(encode_parts(&[]).unwrap(), None);
    assert_eq!(encode_metadata(&Metadata::new()).unwrap(), None);
    assert!(decode_parts(None).unwrap().is_empty());
    assert!(decode_metadata(None).unwrap().is_empty());
}

/// A row as the builds before typed flags wrote it: role, content,
/// parts and metadata columns.
struct OldRow {
    role: &'static str,
    content: &'static str,
    parts: Option<&'static str>,
    metadata: Option<&'static str>,
}

const ASSET: &str = "0123456789abcdef0123456789abcdef";
const IMAGE: &str = r#"[{"kind":"image","media":{"storage_ref":"omnia://sessions/s/media/0123456789abcdef0123456789abcdef","mime_type":"image/png"}}]"#;

fn typed(body: MessageBody, via: Via, metadata: &[(&str, &str)]) -> StoredMessage {
    StoredMessage {
        session_id: SessionId::parse("s").unwrap(),
        seq: 7,
        body,
        via,
        metadata: metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        created_at: Timestamp(42),
    }
}

fn reply(text: &str, end: ReplyEnd) -> MessageBody {
    MessageBody::Reply {
        text: text.into(),
        parts: Vec::new(),
        end,
    }
}

fn user(text: &str, attachment: Option<&str>) -> MessageBody {
    MessageBody::User {
        text: text.into(),
        parts: match attachment {
            Some(_) => decode_parts(Some(IMAGE)).unwrap(),
            None => Vec::new(),
        },
        attachment: attachment.map(|id| MediaId::parse(id).unwrap()),
    }
}

fn row(
    role: &'static str,
    content: &'static str,
    parts: Option<&'static str>,
    metadata: Option<&'static str>,
) -> OldRow {
    OldRow {
        role,
        content,
        parts,
        metadata,
    }
}

fn failure(code: ErrorCode) -> MessageBody {
    MessageBody::Failure {
        code,
        message: "failed".into(),
    }
}

/// Each kind of row with a flag in its metadata the engine and a voice
/// call wrote, and rows with a client's keys of the same names, each with
/// the typed message it is.
fn old_rows() -> Vec<(OldRow, StoredMessage)> {
    let mut rows = turn_rows();
    rows.extend(call_rows());
    rows.extend(client_key_rows());
    rows
}

/// A turn's: an attachment, a cancelled reply, a whole one, failures,
/// interim text.
fn turn_rows() -> Vec<(OldRow, StoredMessage)> {
    let attached = r#"{"gnosari_asset_id":"01234567-89ab-cdef-0123-456789abcdef","plan":"pro"}"#;
    let interim = MessageBody::Interim {
        text: "thinking".into(),
    };
    vec![
        (
            row("user", "look", Some(IMAGE), Some(attached)),
            typed(user("look", Some(ASSET)), Via::Text, &[("plan", "pro")]),
        ),
        (
            row("assistant", "so far", None, Some(r#"{"cancelled":"true"}"#)),
            typed(reply("so far", ReplyEnd::Cancelled), Via::Text, &[]),
        ),
        (
            row("assistant", "whole", None, None),
            typed(reply("whole", ReplyEnd::Complete), Via::Text, &[]),
        ),
        (
            row(
                "error",
                "failed",
                None,
                Some(r#"{"code":"PROVIDER_TIMEOUT"}"#),
            ),
            typed(failure(ErrorCode::ProviderTimeout), Via::Text, &[]),
        ),
        (
            row("error", "failed", None, Some(r#"{"code":"TEST_ERROR"}"#)),
            typed(failure(ErrorCode::Custom("TEST_ERROR")), Via::Text, &[]),
        ),
        (
            row("assistant", "thinking", None, Some(r#"{"step":"interim"}"#)),
            typed(interim, Via::Text, &[]),
        ),
    ]
}

/// A voice call's: the caller's transcript, a tool step, replies whole and
/// cut short.
fn call_rows() -> Vec<(OldRow, StoredMessage)> {
    let voice = Some(r#"{"via":"voice"}"#);
    let call = MessageBody::ToolCall {
        id: "c1".into(),
        name: "weather".into(),
        arguments: serde_json::json!({}),
        side: ToolSide::Client,
    };
    let result = MessageBody::ToolResult {
        id: "c1".into(),
        outcome: ToolOutcome::Ok(serde_json::json!(3)),
    };
    let cut = Some(r#"{"interrupted":"true","via":"voice"}"#);
    vec![
        (
            row("user", "spoken", None, voice),
            typed(user("spoken", None), Via::Voice, &[]),
        ),
        (
            row(
                "tool",
                r#"{"call":{"id":"c1","name":"weather","arguments":{},"side":"client"}}"#,
                None,
                voice,
            ),
            typed(call, Via::Voice, &[]),
        ),
        (
            row(
                "tool",
                r#"{"result":{"id":"c1","status":"ok","value":3}}"#,
                None,
                voice,
            ),
            typed(result, Via::Voice, &[]),
        ),
        (
            row("assistant", "cut", None, cut),
            typed(reply("cut", ReplyEnd::Interrupted), Via::Voice, &[]),
        ),
        (
            row("assistant", "said", None, voice),
            typed(reply("said", ReplyEnd::Complete), Via::Voice, &[]),
        ),
    ]
}

/// A client's own keys of those names, on a message they do not flag or
/// with another value than the flag's, are its metadata.
fn client_key_rows() -> Vec<(OldRow, StoredMessage)> {
    let sent = r#"{"cancelled":"true","gnosari_asset_id":"ABC","interrupted":"true","via":"text"}"#;
    let keys = [
        ("cancelled", "true"),
        ("gnosari_asset_id", "ABC"),
        ("interrupted", "true"),
        ("via", "text"),
    ];
    let odd = Some(r#"{"cancelled":"yes","via":"Voice"}"#);
    vec![
        (
            row("user", "typed", None, Some(sent)),
            typed(user("typed", None), Via::Text, &keys),
        ),
        (
            row("assistant", "odd", None, odd),
            typed(
                reply("odd", ReplyEnd::Complete),
                Via::Text,
                &[("cancelled", "yes"), ("via", "Voice")],
            ),
        ),
    ]
}

#[test]
fn rows_written_before_typed_flags_read_back_typed() {
    let session = SessionId::parse("s").unwrap();
    for (old, message) in old_rows() {
        let row = StoredRow {
            seq: 7,
            role: old.role.to_owned(),
            content: old.content.to_owned(),
            parts: old.parts.map(str::to_owned),
            metadata: old.metadata.map(str::to_owned),
            created_at: 42,
        };
        assert_eq!(row.decode(&session).unwrap(), message, "{}", old.content);
    }
}

#[test]
fn typed_flags_are_written_as_the_rows_before_them() {
    for (old, message) in old_rows() {
        let row = NewRow::encode(&message).unwrap();
        let what = old.content;
        assert_eq!(row.role, old.role, "{what}");
        assert_eq!(row.content, old.content, "{what}");
        assert_eq!(row.parts.as_deref(), old.parts, "{what}");
        assert_eq!(row.metadata.as_deref(), old.metadata, "{what}");
        assert_eq!((row.seq, row.created_at), (7, 42), "{what}");
    }
}

#[test]
fn decode_errors_do_not_quote_the_data() {
    let err = decode_parts(Some(r#"[{"kind":"secret-kind"}]"#)).unwrap_err();
    assert!(!err.contains("secret"), "{err}");
    let err = decode_metadata(Some(r#"{"k":"secret-value","n":1}"#)).unwrap_err();
    assert!(!err.contains("secret"), "{err}");
}

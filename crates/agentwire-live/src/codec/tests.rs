//! The bytes replicas exchange, pinned: a replica of an older version and
//! one of a newer one read each other's entries and controls. Every string
//! below is what the codec produced when the JSON still lived in
//! `agentwire-core` (serde derives on the domain types: commit 4c650ee ran
//! these tests on it); a change to any of them is a change to the shared
//! log's format.

use std::sync::Arc;

use agentwire_core::live::Control;
use agentwire_core::{
    AudioFormat, ClientAnswer, ContentPart, ErrorCode, LogEntry, MediaChunk, MediaContent,
    PartKind, Reply, SessionId, ToolCall, ToolOutcome, ToolSide, TurnEvent, TurnFailure, TurnId,
};
use serde_json::json;

use super::{decode_batch, decode_control, encode_batch, encode_control};

/// A representative event of every [`TurnEvent`] variant (and of every
/// variant of what they hold), with the batch of it alone as the shared
/// log stores it.
fn pinned_entries() -> Vec<(TurnEvent, &'static str)> {
    let mut pinned = pinned_text_and_tools();
    pinned.extend(pinned_media_and_ends());
    pinned
}

fn pinned_text_and_tools() -> Vec<(TurnEvent, &'static str)> {
    vec![
        (
            TurnEvent::TurnStarted {
                agent: "assistant".to_owned(),
                question: None,
            },
            r#"[{"s":7,"t":7,"e":{"TurnStarted":{"agent":"assistant"}}}]"#,
        ),
        (
            TurnEvent::TextDelta("Hello, \"world\" ✓\n".to_owned()),
            r#"[{"s":8,"t":7,"e":{"TextDelta":"Hello, \"world\" ✓\n"}}]"#,
        ),
        (
            TurnEvent::ToolCall(ToolCall {
                id: "s1".to_owned(),
                name: "weather".to_owned(),
                arguments: json!({"city": "Lisbon", "days": [1, 2]}),
                side: ToolSide::Server,
                consent_message: None,
                categories: Vec::new(),
            }),
            r#"[{"s":9,"t":7,"e":{"ToolCall":{"id":"s1","name":"weather","arguments":{"city":"Lisbon","days":[1,2]},"side":"Server","consent_message":null,"categories":[]}}}]"#,
        ),
        (
            TurnEvent::ToolCall(ToolCall {
                id: "c1".to_owned(),
                name: "get_location".to_owned(),
                arguments: json!({}),
                side: ToolSide::Client,
                consent_message: Some("Share your location?".to_owned()),
                categories: vec!["location".to_owned(), "private".to_owned()],
            }),
            r#"[{"s":10,"t":7,"e":{"ToolCall":{"id":"c1","name":"get_location","arguments":{},"side":"Client","consent_message":"Share your location?","categories":["location","private"]}}}]"#,
        ),
        (
            TurnEvent::ToolResult {
                id: "s1".to_owned(),
                outcome: ToolOutcome::Ok(json!({"c": 21})),
                side: ToolSide::Server,
            },
            r#"[{"s":11,"t":7,"e":{"ToolResult":{"id":"s1","outcome":{"Ok":{"c":21}},"side":"Server"}}}]"#,
        ),
        (
            TurnEvent::ToolResult {
                id: "s2".to_owned(),
                outcome: ToolOutcome::Error("offline".to_owned()),
                side: ToolSide::Server,
            },
            r#"[{"s":12,"t":7,"e":{"ToolResult":{"id":"s2","outcome":{"Error":"offline"},"side":"Server"}}}]"#,
        ),
        (
            TurnEvent::ToolResult {
                id: "c1".to_owned(),
                outcome: ToolOutcome::Denied("timed out".to_owned()),
                side: ToolSide::Client,
            },
            r#"[{"s":13,"t":7,"e":{"ToolResult":{"id":"c1","outcome":{"Denied":"timed out"},"side":"Client"}}}]"#,
        ),
    ]
}

fn pinned_media_and_ends() -> Vec<(TurnEvent, &'static str)> {
    vec![
        (
            TurnEvent::Media(MediaChunk {
                media_id: "m1".to_owned(),
                mime_type: "audio/wav".to_owned(),
                sequence: 3,
                is_last: false,
                data: b"RIFF\x00\xff".to_vec(),
            }),
            r#"[{"s":14,"t":7,"e":{"Media":{"media_id":"m1","mime_type":"audio/wav","sequence":3,"is_last":false,"data":"UklGRgD/"}}}]"#,
        ),
        (TurnEvent::Interrupt, r#"[{"s":15,"t":7,"e":"Interrupt"}]"#),
        (
            TurnEvent::AudioFormat(AudioFormat {
                codec: "pcm16".to_owned(),
                sample_rate: 24_000,
                channels: 1,
            }),
            r#"[{"s":16,"t":7,"e":{"AudioFormat":{"codec":"pcm16","sample_rate":24000,"channels":1}}}]"#,
        ),
        (
            TurnEvent::AgentSwitched {
                name: "researcher".to_owned(),
                delegated: true,
            },
            r#"[{"s":17,"t":7,"e":{"AgentSwitched":{"name":"researcher","delegated":true}}}]"#,
        ),
        (
            TurnEvent::Completed(full_reply()),
            concat!(
                r#"[{"s":18,"t":7,"e":{"Completed":{"text":"It is 21 C.","parts":[{"kind":"Text","text":"It is 21 C.","media":null},"#,
                r#"{"kind":"Image","text":null,"media":{"data":"UklGRg==","url":"https://example.com/a.png","storage_ref":"ref-1","mime_type":"image/png","filename":"a.png","size_bytes":4,"width":640,"height":480,"detail":"high","duration_ms":1500,"sample_rate":16000,"channels":2}},"#,
                r#"{"kind":"Audio","text":null,"media":{"data":null,"url":null,"storage_ref":null,"mime_type":"","filename":null,"size_bytes":null,"width":null,"height":null,"detail":null,"duration_ms":null,"sample_rate":null,"channels":null}},"#,
                r#"{"kind":"Video","text":null,"media":null},"#,
                r#"{"kind":"File","text":null,"media":null},"#,
                r#"{"kind":null,"text":null,"media":null}]}}}]"#,
            ),
        ),
        (
            TurnEvent::Failed(TurnFailure::new(ErrorCode::ProviderStalled, "stalled")),
            r#"[{"s":19,"t":7,"e":{"Failed":{"code":"PROVIDER_STALLED","message":"stalled"}}}]"#,
        ),
        (
            TurnEvent::Failed(TurnFailure::new(
                ErrorCode::Custom("TEST_ERROR"),
                "scripted",
            )),
            r#"[{"s":20,"t":7,"e":{"Failed":{"code":"TEST_ERROR","message":"scripted"}}}]"#,
        ),
        (
            TurnEvent::Cancelled(Reply::text("It is")),
            r#"[{"s":21,"t":7,"e":{"Cancelled":{"text":"It is","parts":[]}}}]"#,
        ),
        (
            TurnEvent::TurnStarted {
                agent: "assistant".to_owned(),
                question: Some(12),
            },
            r#"[{"s":22,"t":7,"e":{"TurnStarted":{"agent":"assistant","q":12}}}]"#,
        ),
    ]
}

/// A reply with a text part, a media part with every field set and a part
/// with nothing set.
fn full_reply() -> Reply {
    let media = MediaContent {
        data: Some("UklGRg==".to_owned()),
        url: Some("https://example.com/a.png".to_owned()),
        storage_ref: Some("ref-1".to_owned()),
        mime_type: "image/png".to_owned(),
        filename: Some("a.png".to_owned()),
        size_bytes: Some(4),
        width: Some(640),
        height: Some(480),
        detail: Some("high".to_owned()),
        duration_ms: Some(1500),
        sample_rate: Some(16_000),
        channels: Some(2),
    };
    Reply {
        text: "It is 21 C.".to_owned(),
        parts: vec![
            ContentPart::text("It is 21 C."),
            ContentPart::media(PartKind::Image, media),
            ContentPart::media(PartKind::Audio, MediaContent::default()),
            ContentPart {
                kind: Some(PartKind::Video),
                ..ContentPart::default()
            },
            ContentPart {
                kind: Some(PartKind::File),
                ..ContentPart::default()
            },
            ContentPart::default(),
        ],
    }
}

fn entries() -> Vec<(LogEntry, &'static str)> {
    pinned_entries()
        .into_iter()
        .enumerate()
        .map(|(i, (event, pinned))| {
            let entry = LogEntry {
                seq: 7 + i as u64,
                turn: TurnId(7),
                event: Arc::new(event),
            };
            (entry, pinned)
        })
        .collect()
}

#[test]
fn each_kind_of_entry_encodes_to_its_pinned_bytes_and_back() {
    for (entry, pinned) in entries() {
        let batch = std::slice::from_ref(&entry);
        assert_eq!(encode_batch(batch), pinned, "{entry:?}");
        assert_eq!(decode_batch(pinned.as_bytes()).unwrap(), vec![entry]);
    }
}

#[test]
fn a_batch_is_its_entries_in_one_array() {
    let (entries, pinned): (Vec<LogEntry>, Vec<&str>) = entries().into_iter().unzip();
    let inner: Vec<&str> = pinned.iter().map(|one| &one[1..one.len() - 1]).collect();
    let whole = format!("[{}]", inner.join(","));
    assert_eq!(encode_batch(&entries), whole);
    assert_eq!(decode_batch(whole.as_bytes()).unwrap(), entries);
}

fn pinned_controls() -> Vec<(Control, &'static str)> {
    let answer = |answer: ClientAnswer| Control::Answer {
        call_id: "c1".to_owned(),
        answer,
    };
    vec![
        (
            Control::Cancel { turn: TurnId(4) },
            r#"{"s":"00000000-0000-4000-8000-000000000001","c":{"Cancel":{"turn":4}}}"#,
        ),
        (
            answer(ClientAnswer::Ack),
            r#"{"s":"00000000-0000-4000-8000-000000000001","c":{"Answer":{"call_id":"c1","answer":"Ack"}}}"#,
        ),
        (
            answer(ClientAnswer::Nack("not now".to_owned())),
            r#"{"s":"00000000-0000-4000-8000-000000000001","c":{"Answer":{"call_id":"c1","answer":{"Nack":"not now"}}}}"#,
        ),
        (
            answer(ClientAnswer::Result(Ok(json!({"lat": 38.7, "lon": -9.1})))),
            r#"{"s":"00000000-0000-4000-8000-000000000001","c":{"Answer":{"call_id":"c1","answer":{"Result":{"Ok":{"lat":38.7,"lon":-9.1}}}}}}"#,
        ),
        (
            answer(ClientAnswer::Result(Err("no GPS".to_owned()))),
            r#"{"s":"00000000-0000-4000-8000-000000000001","c":{"Answer":{"call_id":"c1","answer":{"Result":{"Err":"no GPS"}}}}}"#,
        ),
    ]
}

#[test]
fn each_kind_of_control_encodes_to_its_pinned_bytes_and_back() {
    let session = SessionId::parse("00000000-0000-4000-8000-000000000001").unwrap();
    for (control, pinned) in pinned_controls() {
        assert_eq!(encode_control(&session, &control), pinned, "{control:?}");
        assert_eq!(
            decode_control(pinned.as_bytes()).unwrap(),
            (session.clone(), control)
        );
    }
}

#[test]
fn a_scripted_turn_survives_a_batch_round_trip() {
    let (agent, mut events) = agentwire_core::testing::multi_event_turn();
    events.insert(
        0,
        TurnEvent::TurnStarted {
            agent,
            question: None,
        },
    );
    let entries: Vec<LogEntry> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| LogEntry {
            seq: i as u64 + 10,
            turn: TurnId(10),
            event: Arc::new(event),
        })
        .collect();
    let batch = encode_batch(&entries);
    assert!(
        batch.contains("UklGRg=="),
        "media travels as base64: {batch}"
    );
    assert_eq!(decode_batch(batch.as_bytes()).unwrap(), entries);
}

#[test]
fn a_code_another_replica_names_is_learnt() {
    let batch = r#"[{"s":3,"t":1,"e":{"Failed":{"code":"NEWER_CODE","message":"m"}}}]"#;
    let entries = decode_batch(batch.as_bytes()).unwrap();
    assert_eq!(
        *entries[0].event,
        TurnEvent::Failed(TurnFailure::new(ErrorCode::Custom("NEWER_CODE"), "m"))
    );
    assert_eq!(encode_batch(&entries), batch);
}

#[test]
fn what_does_not_decode_is_an_error() {
    assert!(decode_batch(b"[{\"s\":1}]").is_err());
    assert!(decode_batch(br#"[{"s":1,"t":1,"e":{"Media":{"media_id":"m","mime_type":"a","sequence":0,"is_last":true,"data":"%%"}}}]"#).is_err());
    assert!(decode_control(br#"{"s":"","c":{"Cancel":{"turn":1}}}"#).is_err());
    assert!(decode_control(b"{}").is_err());
}

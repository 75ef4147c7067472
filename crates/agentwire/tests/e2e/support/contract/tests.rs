//! The check has teeth: frames the documents do not describe are refused,
//! and the documents name every frame type the server reads and writes.

use serde_json::{Value, json};

use super::{Dialect, Direction};

const AT: &str = "2026-07-24T16:47:30.5Z";

fn omnia(direction: Direction, frame: Value) -> Result<(), String> {
    Dialect::Omnia
        .contract()
        .check(direction, &frame.to_string())
}

fn gnosari(direction: Direction, frame: Value) -> Result<(), String> {
    Dialect::Gnosari
        .contract()
        .check(direction, &frame.to_string())
}

fn refused(result: Result<(), String>, why: &str) {
    let error = result.expect_err("the frame is refused");
    assert!(error.contains(why), "{why:?} not in: {error}");
}

#[test]
fn a_described_omnia_frame_is_accepted_both_ways() {
    let client = json!({"type": "message", "content": "hi", "metadata": {"mock_scenario": "echo"}});
    omnia(Direction::ClientToServer, client).unwrap();
    let server = json!({"type": "chunk", "session_id": "s-1", "content": "Hello", "timestamp": AT});
    omnia(Direction::ServerToClient, server).unwrap();
    let positioned = json!({"type": "done", "session_id": "s-1", "content": "Hi", "seq": 4,
        "timestamp": AT});
    omnia(Direction::ServerToClient, positioned).unwrap();
}

#[test]
fn an_omnia_frame_missing_a_required_field_is_refused() {
    refused(
        omnia(
            Direction::ServerToClient,
            json!({"type": "tool_call", "session_id": "s-1", "timestamp": AT}),
        ),
        "\"tool_call\" is a required property",
    );
    refused(
        omnia(
            Direction::ClientToServer,
            json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": "c1"}}),
        ),
        "\"reason\" is a required property",
    );
}

#[test]
fn an_omnia_error_code_outside_the_enum_is_refused() {
    let frame = json!({"type": "error", "error": {"code": "NOT_A_CODE", "message": "x"},
        "timestamp": AT});
    refused(omnia(Direction::ServerToClient, frame), "/error/code");
}

#[test]
fn an_unknown_type_or_field_is_refused() {
    refused(
        omnia(Direction::ClientToServer, json!({"type": "bogus"})),
        "no message of type \"bogus\" in omnia.asyncapi.yaml for client → server",
    );
    // A server frame is not a client frame.
    refused(
        omnia(
            Direction::ClientToServer,
            json!({"type": "chunk", "session_id": "s-1", "timestamp": AT}),
        ),
        "no message of type \"chunk\"",
    );
    refused(
        omnia(
            Direction::ServerToClient,
            json!({"type": "interrupt", "session_id": "s-1", "timestamp": AT, "extra": 1}),
        ),
        "Additional properties are not allowed",
    );
}

#[test]
fn gnosari_frames_are_held_to_their_own_document() {
    gnosari(
        Direction::ClientToServer,
        json!({"message": "hi", "session_id": null}),
    )
    .unwrap();
    gnosari(
        Direction::ServerToClient,
        json!({"type": "token", "content": "The ", "agent_name": "a"}),
    )
    .unwrap();
    // The drain notice as `agentwire-gnosari` writes it: no end-to-end
    // test drains a Gnosari socket with `stream=2` running a turn.
    let going_away = json!({"type": "going_away", "session_id": "s-1", "time_left_ms": 29_000,
        "retry_after_ms": 1_250, "resume": {"session_id": "s-1", "after": 7,
        "epoch": "00000000000000a1"}});
    gnosari(Direction::ServerToClient, going_away).unwrap();
    refused(
        gnosari(Direction::ClientToServer, json!({"session_id": "s-1"})),
        "\"message\" is a required property",
    );
    let rejected = json!({"event_type": "message_rejected", "type": "message_rejected",
        "data": {"reason": "spam", "client_message_id": null, "session_id": null},
        "timestamp": "2026-09-14T10:30:00Z"});
    refused(gnosari(Direction::ServerToClient, rejected), "/data/reason");
    // Omnia's frames are not Gnosari's.
    refused(
        gnosari(
            Direction::ServerToClient,
            json!({"type": "chunk", "session_id": "s-1", "timestamp": AT}),
        ),
        "no message of type \"chunk\" in gnosari.asyncapi.yaml",
    );
}

#[test]
fn a_frame_that_is_not_json_is_refused() {
    let result = Dialect::Omnia
        .contract()
        .check(Direction::ClientToServer, "{not json");
    refused(result, "not JSON");
}

fn sorted(mut kinds: Vec<&str>) -> Vec<&str> {
    kinds.sort_unstable();
    kinds
}

/// The types the dialect crates read and write (`agentwire-omnia`'s
/// `inbound.rs` and `outbound.rs`, `agentwire-gnosari`'s `outbound.rs`).
#[test]
fn the_documents_name_every_frame_type_of_the_dialects() {
    let omnia = Dialect::Omnia.contract();
    assert_eq!(
        sorted(omnia.kinds(Direction::ClientToServer)),
        [
            "cancel",
            "credential_refresh",
            "disclosure_ack",
            "hangup",
            "message",
            "tool_call_ack",
            "tool_call_nack",
            "tool_result",
            "upload_request"
        ]
    );
    assert_eq!(
        sorted(omnia.kinds(Direction::ServerToClient)),
        [
            "chunk",
            "connected",
            "done",
            "error",
            "going_away",
            "interrupt",
            "media_chunk",
            "session_config",
            "tool_call",
            "tool_result",
            "turn_started",
            "upload_ready"
        ]
    );
    let gnosari = Dialect::Gnosari.contract();
    assert_eq!(sorted(gnosari.kinds(Direction::ClientToServer)), ["cancel"]);
    assert_eq!(
        sorted(gnosari.kinds(Direction::ServerToClient)),
        [
            "agent_completed",
            "agent_started",
            "error",
            "going_away",
            "message_rejected",
            "session_summary_scheduled",
            "stream_info",
            "token",
            "tool_call",
            "tool_result"
        ]
    );
}

/// The `error.code` enum and `info.x-error-codes` list every code the
/// server can send: the core's, and the test handler's own.
#[test]
fn the_omnia_error_codes_are_the_servers() {
    let document: Value = serde_saphyr::from_str(&Dialect::Omnia.document_text()).unwrap();
    let mut expected: Vec<&str> = agentwire_core::ErrorCode::KNOWN
        .iter()
        .map(|code| code.as_str())
        .chain(["TEST_ERROR"])
        .collect();
    expected.sort_unstable();
    let strings = |values: &Value, field: Option<&str>| {
        let mut codes: Vec<String> = values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| field.map_or(v, |f| &v[f]).as_str().unwrap().to_owned())
            .collect();
        codes.sort_unstable();
        codes
    };
    let schemas = &document["components"]["schemas"];
    assert_eq!(strings(&schemas["ErrorCode"]["enum"], None), expected);
    assert_eq!(
        strings(&document["info"]["x-error-codes"], Some("code")),
        expected
    );
}

/// An OMNI frame: the 32-byte header, `metadata`, then `payload`.
fn omni_frame(flags: u8, metadata: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut frame = b"OMNI".to_vec();
    frame.extend([1, flags, 0, 1]);
    frame.extend((metadata.len() as u32).to_be_bytes());
    frame.extend((payload.len() as u32).to_be_bytes());
    frame.extend(7u32.to_be_bytes());
    frame.extend(*b"media-000001");
    frame.extend(metadata);
    frame.extend(payload);
    frame
}

#[test]
fn a_binary_frame_is_held_to_the_documents_layout() {
    let omnia = Dialect::Omnia.contract();
    let metadata = br#"{"session_id":"s-1","mime_type":"image/png"}"#;
    omnia
        .check_server_binary(&omni_frame(0x04, metadata, b"png"))
        .unwrap();
    let mut magic = omni_frame(0, metadata, b"png");
    magic[0] = b'X';
    refused(omnia.check_server_binary(&magic), "not OMNI");
    refused(
        omnia.check_server_binary(&omni_frame(0x80, metadata, b"png")),
        "does not name",
    );
    let mut short = omni_frame(0, metadata, b"png");
    short.pop();
    refused(omnia.check_server_binary(&short), "the header says");
    refused(
        omnia.check_server_binary(&omni_frame(0, br#"{"undocumented":1}"#, b"")),
        "metadata",
    );
    refused(
        Dialect::Gnosari
            .contract()
            .check_server_binary(&omni_frame(0, metadata, b"")),
        "no binary message",
    );
}

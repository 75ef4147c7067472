//! Inbound binary OMNI frames: decode errors with their exact messages.

use crate::support::{TestServer, assert_error};

fn frame(message_type: u16, metadata: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(b"OMNI");
    f.push(1);
    f.push(0);
    f.extend_from_slice(&message_type.to_be_bytes());
    f.extend_from_slice(&(metadata.len() as u32).to_be_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(&0u32.to_be_bytes());
    f.extend_from_slice(&[0u8; 12]);
    f.extend_from_slice(metadata);
    f.extend_from_slice(payload);
    f
}

#[tokio::test]
async fn decode_errors_have_exact_messages_and_no_session_id() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let mut bad_magic = frame(1, b"{}", b"x");
    bad_magic[0] = b'X';
    let mut bad_version = frame(1, b"{}", b"x");
    bad_version[4] = 7;
    let mut long_meta = frame(1, b"{}", b"");
    long_meta[8..12].copy_from_slice(&100u32.to_be_bytes());
    let mut long_payload = frame(1, b"{}", b"ab");
    long_payload[12..16].copy_from_slice(&100u32.to_be_bytes());
    let cases = [
        (vec![1, 2, 3], "invalid binary frame: invalid header size"),
        (bad_magic, "invalid binary frame: invalid magic bytes"),
        (
            bad_version,
            "invalid binary frame: unsupported binary protocol version: got 7, expected 1",
        ),
        (
            long_meta,
            "invalid binary frame: metadata length exceeds frame size",
        ),
        (
            long_payload,
            "invalid binary frame: payload length exceeds frame size",
        ),
        (frame(2, b"{}", b"x"), "unknown binary message type"),
        (frame(9, b"{}", b"x"), "unknown binary message type"),
    ];
    for (bytes, message) in cases {
        client.send_binary(bytes).await;
        let error = client.recv().await;
        assert_error(&error, "INVALID_MESSAGE", message);
        assert!(error.get("session_id").is_none(), "{error}");
    }
    client.say("still here").await;
    assert_eq!(client.recv().await["content"], "echo: still here");
}

#[tokio::test]
async fn audio_frames_are_refused_by_scripted_agents() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent&binary=true").await;
    let meta = br#"{"session_id":"x","mime_type":"audio/pcm","sample_rate":16000,"channels":1,"codec":"pcm"}"#;
    client.send_binary(frame(1, meta, &[0u8; 320])).await;
    let error = client.recv().await;
    assert_error(&error, "MEDIA_NOT_ENABLED", "audio not supported");
    assert_eq!(error["session_id"], connected["session_id"]);
}

#[tokio::test]
async fn binary_frames_spend_a_byte_budget_not_the_message_rate() {
    let server = TestServer::with_server_yaml(
        "  limits:\n    messages_per_second: 1\n    message_burst: 2\n    media_bytes_per_second: 1000\n    media_burst_bytes: 2000",
    )
    .await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    let payload = vec![0u8; 700];
    let frame_len = frame(1, b"{}", &payload).len();
    assert_eq!(frame_len, 734);
    for _ in 0..2 {
        client.send_binary(frame(1, b"{}", &payload)).await;
        assert_eq!(
            client.recv().await["error"]["code"],
            "MEDIA_NOT_ENABLED",
            "within the byte budget"
        );
    }
    client.send_binary(frame(1, b"{}", &payload)).await;
    let error = client.recv().await;
    assert_error(&error, "RATE_LIMITED", "media rate limit exceeded");
    assert!(error.get("session_id").is_none());
    client.say("text still has its own budget").await;
    assert_eq!(
        client.recv().await["content"],
        "echo: text still has its own budget"
    );
}

//! Media a turn sends: binary OMNI frames with `binary=true`, JSON
//! `media_chunk` otherwise; chunking around the 1 MiB threshold.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Client, FRAME_TIMEOUT, TestServer};

/// A binary frame, decoded by hand from the contract's header layout.
struct Omni {
    flags: u8,
    message_type: u16,
    sequence: u32,
    media_id: String,
    metadata: Value,
    payload: Vec<u8>,
}

fn parse(frame: &[u8]) -> Omni {
    assert_eq!(&frame[..4], b"OMNI");
    assert_eq!(frame[4], 1);
    let u32_at = |at: usize| u32::from_be_bytes(frame[at..at + 4].try_into().unwrap());
    let meta_len = u32_at(8) as usize;
    let payload_len = u32_at(12) as usize;
    let media_id = String::from_utf8(
        frame[20..32]
            .iter()
            .copied()
            .take_while(|b| *b != 0)
            .collect(),
    )
    .unwrap();
    Omni {
        flags: frame[5],
        message_type: u16::from_be_bytes([frame[6], frame[7]]),
        sequence: u32_at(16),
        media_id,
        metadata: serde_json::from_slice(&frame[32..32 + meta_len]).unwrap(),
        payload: frame[32 + meta_len..32 + meta_len + payload_len].to_vec(),
    }
}

/// Binary frames until the turn's `done`.
async fn binary_turn(client: &mut Client) -> Vec<Omni> {
    let mut frames = Vec::new();
    loop {
        let message = tokio::time::timeout(FRAME_TIMEOUT, client.next_message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match message {
            Message::Binary(bytes) => frames.push(parse(&bytes)),
            Message::Text(text) => {
                let value: Value = serde_json::from_str(text.as_str()).unwrap();
                assert_eq!(value["type"], "done", "{value}");
                return frames;
            }
            _ => {}
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

const CHUNKED: u8 = 0x02;
const IS_LAST: u8 = 0x04;

#[tokio::test]
async fn a_small_payload_is_one_binary_frame() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent&binary=true").await;
    client.script("binary-media", "x").await;
    let frames = binary_turn(&mut client).await;
    assert_eq!(frames.len(), 1);
    let f = &frames[0];
    assert_eq!((f.message_type, f.flags, f.sequence), (1, IS_LAST, 0));
    assert_eq!(f.media_id, "test-media");
    assert_eq!(f.payload, b"test audio data");
    assert_eq!(
        f.metadata,
        json!({"session_id": connected["session_id"], "mime_type": "audio/mp3"})
    );
}

#[tokio::test]
async fn exactly_one_mib_stays_one_frame_and_keeps_its_sequence() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent&binary=true").await;
    client.script("threshold-media", "x").await;
    let frames = binary_turn(&mut client).await;
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].flags, IS_LAST);
    assert_eq!(frames[0].payload, pattern(1_048_576));
    client.script("small-media", "x").await;
    let frames = binary_turn(&mut client).await;
    assert_eq!((frames.len(), frames[0].sequence), (1, 42));
}

#[tokio::test]
async fn one_byte_over_one_mib_is_chunked() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent&binary=true").await;
    client.script("over-threshold-media", "x").await;
    let frames = binary_turn(&mut client).await;
    assert_eq!(frames.len(), 17, "16 full chunks of 64 KiB and 1 byte");
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.sequence, i as u32);
        assert_eq!(f.metadata["total_chunks"], 17);
        let expected = if i == 16 { CHUNKED | IS_LAST } else { CHUNKED };
        assert_eq!(f.flags, expected, "chunk {i}");
    }
    assert_eq!(frames[16].payload.len(), 1);
    let joined: Vec<u8> = frames.into_iter().flat_map(|f| f.payload).collect();
    assert_eq!(joined, pattern(1_048_577));
}

#[tokio::test]
async fn big_media_reassembles_byte_for_byte() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent&binary=true").await;
    client.script("big-media", "x").await;
    let frames = binary_turn(&mut client).await;
    assert_eq!(frames.len(), 17);
    assert!(
        frames
            .iter()
            .all(|f| f.metadata["mime_type"] == "video/mp4")
    );
    let joined: Vec<u8> = frames.into_iter().flat_map(|f| f.payload).collect();
    assert_eq!(joined, pattern(1_081_344));
}

#[tokio::test]
async fn without_binary_media_goes_out_as_json_base64() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.script("binary-media", "x").await;
    let chunk = client.recv().await;
    assert_eq!(chunk["type"], "media_chunk");
    assert_eq!(chunk["session_id"], connected["session_id"]);
    assert_eq!(
        chunk["media_chunk"],
        json!({"media_id": "test-media", "sequence": 0, "is_last": true,
               "data": "dGVzdCBhdWRpbyBkYXRh", "mime_type": "audio/mp3"})
    );
    assert_eq!(client.recv().await["type"], "done");
}

#[tokio::test]
async fn interrupt_and_session_config_frames() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    client.script("interrupt", "x").await;
    let interrupt = client.recv().await;
    assert_eq!(interrupt["type"], "interrupt");
    assert_eq!(interrupt["session_id"], connected["session_id"]);
    client.recv().await;
    client.script("session-config", "x").await;
    let config = client.recv().await;
    assert_eq!(
        config["session_config"],
        json!({"codec": "pcm", "sample_rate": 24000, "channels": 1})
    );
}

#[tokio::test]
async fn demo_media_replies_carry_parts() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=demo").await;
    let cases = [
        ("show image", "image", "image/png"),
        ("play audio", "audio", "audio/mpeg"),
        ("play video", "video", "video/mp4"),
        ("send pdf", "file", "application/pdf"),
    ];
    for (input, kind, mime) in cases {
        client.say(input).await;
        let frames = client.recv_turn().await;
        assert_eq!(frames[0]["type"], "chunk");
        let done = frames.last().unwrap();
        let parts = done["parts"].as_array().unwrap();
        assert_eq!(parts[0]["type"], "text");
        assert_eq!(parts[1]["type"], kind, "{input}");
        assert_eq!(parts[1]["media"]["mime_type"], mime);
        let data = parts[1]["media"]["data"].as_str().unwrap();
        let size = parts[1]["media"]["size_bytes"].as_u64().unwrap();
        assert_eq!(
            decoded_len(data),
            size,
            "{input}: size_bytes matches the data"
        );
    }
    client.say("multimodal please").await;
    let done = client.recv_turn().await.pop().unwrap();
    let kinds: Vec<&str> = done["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "image", "text", "audio"]);
}

fn decoded_len(base64: &str) -> u64 {
    let padding = base64.bytes().rev().take_while(|b| *b == b'=').count();
    (base64.len() / 4 * 3 - padding) as u64
}

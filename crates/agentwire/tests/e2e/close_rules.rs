//! The WebSocket close rules of RFC 6455 (§5.5.1, §7.1.1, §7.4) on both
//! dialects, over raw TCP where the bytes matter: a client's Close is
//! answered with a Close and then TCP ends, a broken frame gets its close
//! code, an oversized frame's 1009 reaches a client that writes the whole
//! frame before reading, a client silent past the keepalive is told so
//! in a Close; and `done` is not held back by Nagle.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::support::{Client, TestServer};

/// The paths under test: Omnia and Gnosari, on scripted agents.
const ENDPOINTS: [&str; 2] = ["/ws?agent=echo", "/ws/agent/echo"];

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const FIN: u8 = 0x80;
const RSV1: u8 = 0x40;

/// A WebSocket client written by hand: frames are built byte by byte, so
/// broken ones can be sent, and the server's bytes are read as they come.
struct RawClient {
    stream: TcpStream,
    /// Bytes read but not yet taken as frames.
    pending: Vec<u8>,
}

/// One server frame: the first header byte (FIN, RSV, opcode) and the payload.
struct ServerFrame {
    first: u8,
    payload: Vec<u8>,
}

impl RawClient {
    async fn connect(addr: SocketAddr, path: &str) -> RawClient {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut pending = Vec::new();
        let head_end = loop {
            if let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 1024];
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
                .await
                .expect("handshake answer in time")
                .unwrap();
            assert!(n > 0, "connection closed during the handshake");
            pending.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(
            head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            "the accept key of RFC 6455 §1.3: {head}"
        );
        pending.drain(..head_end);
        RawClient { stream, pending }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write accepted");
    }

    /// The next whole server frame, or `None` at EOF. Panics on a reset:
    /// it would have destroyed what the server sent.
    async fn read_frame(&mut self, within: Duration) -> Option<ServerFrame> {
        let deadline = Instant::now() + within;
        loop {
            if let Some((frame, used)) = parse_server_frame(&self.pending) {
                self.pending.drain(..used);
                return Some(frame);
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut chunk))
                .await
                .expect("a server frame or EOF in time")
                .expect("no connection reset");
            if n == 0 {
                assert!(self.pending.is_empty(), "EOF inside a frame");
                return None;
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads past text frames and pings to the server's Close: its code and
    /// reason.
    async fn read_close(&mut self) -> (u16, String) {
        loop {
            let frame = self
                .read_frame(Duration::from_secs(5))
                .await
                .expect("a close frame before EOF");
            if frame.first & 0x0F == OP_CLOSE {
                assert_eq!(frame.first & FIN, FIN, "close frames are not fragmented");
                assert!(frame.payload.len() >= 2, "the close carries a code");
                let code = u16::from_be_bytes([frame.payload[0], frame.payload[1]]);
                let reason = String::from_utf8(frame.payload[2..].to_vec()).unwrap();
                return (code, reason);
            }
        }
    }

    /// The server closes TCP (after its close frame) within `within`.
    async fn expect_eof(&mut self, within: Duration) {
        if let Some(frame) = self.read_frame(within).await {
            panic!("expected EOF, got a frame with header {:#04x}", frame.first);
        }
    }
}

/// A client frame: `first` is the FIN/RSV/opcode byte; masked unless told.
fn frame(first: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mask_bit = if masked { 0x80 } else { 0 };
    let mut out = vec![first];
    match payload.len() {
        len @ 0..=125 => out.push(mask_bit | len as u8),
        len @ 126..=0xFFFF => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    if masked {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        out.extend_from_slice(&key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

fn close_payload(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(reason);
    payload
}

/// Parses one unmasked server frame off the front of `bytes`.
fn parse_server_frame(bytes: &[u8]) -> Option<(ServerFrame, usize)> {
    if bytes.len() < 2 {
        return None;
    }
    assert_eq!(bytes[1] & 0x80, 0, "server frames are not masked");
    let (len, header) = match bytes[1] & 0x7F {
        126 if bytes.len() >= 4 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
        127 if bytes.len() >= 10 => (
            u64::from_be_bytes(bytes[2..10].try_into().unwrap()) as usize,
            10,
        ),
        126 | 127 => return None,
        len => (len as usize, 2),
    };
    if bytes.len() < header + len {
        return None;
    }
    let frame = ServerFrame {
        first: bytes[0],
        payload: bytes[header..header + len].to_vec(),
    };
    Some((frame, header + len))
}

#[tokio::test]
async fn a_client_close_is_answered_with_a_close_then_tcp_ends() {
    let server = TestServer::start().await;
    for path in ENDPOINTS {
        let mut client = RawClient::connect(server.addr, path).await;
        client
            .write(&frame(FIN | OP_CLOSE, &close_payload(1000, b"bye"), true))
            .await;
        let (code, _) = client.read_close().await;
        assert_eq!(code, 1000, "{path}: the close echoes the client's code");
        client.expect_eof(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn a_silent_client_is_sent_the_keepalive_close_before_tcp_ends() {
    // A client that answers no ping: read by hand, so that nothing it does
    // (a library's late pong into a closed socket, answered by a reset)
    // can destroy what the server sent.
    let server = TestServer::with_server_yaml(
        "  limits:\n    ping_interval: 100ms\n    pong_timeout: 300ms",
    )
    .await;
    for path in ENDPOINTS {
        let mut client = RawClient::connect(server.addr, path).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (code, reason) = client.read_close().await;
        assert_eq!(
            (code, reason.as_str()),
            (1001, "keepalive timeout"),
            "{path}"
        );
        client.expect_eof(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn a_library_client_that_closes_sees_a_clean_close() {
    let server = TestServer::start().await;
    let (omnia, _) = server.connect("agent=echo").await;
    let gnosari = server.connect_gnosari("echo").await;
    for (dialect, mut client) in [("omnia", omnia), ("gnosari", gnosari)] {
        client
            .close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            }))
            .await
            .expect("close sent");
        let answer = tokio::time::timeout(Duration::from_secs(2), client.next_message())
            .await
            .expect("an answer in time");
        match answer {
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(frame.code, CloseCode::Normal, "{dialect}: {frame:?}")
            }
            other => panic!("{dialect}: expected the server's close frame, got {other:?}"),
        }
        // The handshake is complete: the stream ends without an error.
        let end = tokio::time::timeout(Duration::from_secs(2), client.next_message())
            .await
            .expect("the stream ends in time");
        assert!(end.is_none(), "{dialect}: a clean end, got {end:?}");
    }
}

#[tokio::test]
async fn each_protocol_violation_gets_its_close_code() {
    let ping_too_big = frame(FIN | OP_PING, &[b'p'; 126], true);
    let mut fragment_then_text = frame(OP_TEXT, b"half", true);
    fragment_then_text.extend(frame(FIN | OP_TEXT, b"other", true));
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "stray continuation",
            frame(FIN | OP_CONTINUATION, b"x", true),
            1002,
        ),
        (
            "reserved bit",
            frame(FIN | RSV1 | OP_TEXT, b"{}", true),
            1002,
        ),
        ("unmasked frame", frame(FIN | OP_TEXT, b"{}", false), 1002),
        ("fragmented ping", frame(OP_PING, b"p", true), 1002),
        ("ping over 125 bytes", ping_too_big, 1002),
        ("unknown data opcode", frame(FIN | 0x3, b"x", true), 1002),
        ("unknown control opcode", frame(FIN | 0xB, b"", true), 1002),
        (
            "a new message inside a fragmented one",
            fragment_then_text,
            1002,
        ),
        (
            "one-byte close payload",
            frame(FIN | OP_CLOSE, &[0x03], true),
            1002,
        ),
        (
            "invalid UTF-8 text",
            frame(FIN | OP_TEXT, &[b'{', 0xff, 0xfe, b'}'], true),
            1007,
        ),
        (
            "invalid UTF-8 close reason",
            frame(FIN | OP_CLOSE, &close_payload(1000, &[0xc3, 0x28]), true),
            1007,
        ),
    ];
    let server = TestServer::start().await;
    for path in ENDPOINTS {
        for (violation, bytes, expected) in &cases {
            let mut client = RawClient::connect(server.addr, path).await;
            client.write(bytes).await;
            let (code, _) = client.read_close().await;
            assert_eq!(code, *expected, "{path}: {violation}");
            // The client may answer with its own Close; then TCP ends.
            client
                .write(&frame(FIN | OP_CLOSE, &close_payload(code, b""), true))
                .await;
            client.expect_eof(Duration::from_secs(3)).await;
        }
    }
}

#[tokio::test]
async fn a_client_that_writes_a_whole_oversized_frame_before_reading_gets_1009() {
    const LIMIT: usize = 64 * 1024;
    let server =
        TestServer::with_server_yaml(&format!("  limits:\n    max_payload_bytes: {LIMIT}")).await;
    // Larger than what the kernel's buffers take on either side, so the
    // write only completes if the server keeps reading after its 1009.
    let payload = vec![b'a'; LIMIT + 8 * 1024 * 1024];
    let oversized = frame(FIN | OP_TEXT, &payload, true);
    for path in ENDPOINTS {
        let mut client = RawClient::connect(server.addr, path).await;
        tokio::time::timeout(Duration::from_secs(10), client.write(&oversized))
            .await
            .unwrap_or_else(|_| panic!("{path}: the whole frame written in time"));
        let (code, reason) = client.read_close().await;
        assert_eq!((code, reason.as_str()), (1009, ""), "{path}");
        client.expect_eof(Duration::from_secs(3)).await;
    }
}

/// Send to `done` (Omnia) or `agent_completed` (Gnosari) of a short
/// streamed turn, whose last frame leaves in a later write than its
/// chunks: with Nagle on, it waits for the client's delayed ACK (~40 ms).
async fn turn_latency(client: &mut Client, gnosari: bool) -> Duration {
    let sent = Instant::now();
    if gnosari {
        client
            .send_json(json!({"message": "hi", "metadata": {"mock_scenario": "stream"}}))
            .await;
        let events = client.recv_gnosari_turn().await;
        assert_eq!(
            events.last().unwrap()["type"],
            "agent_completed",
            "{events:?}"
        );
    } else {
        client.script("stream", "hi").await;
        let frames = client.recv_turn().await;
        assert_eq!(frames.last().unwrap()["type"], "done", "{frames:?}");
    }
    sent.elapsed()
}

#[tokio::test]
async fn the_last_frame_of_a_short_turn_is_not_held_back_by_nagle() {
    let server = TestServer::start().await;
    let (mut omnia, _) = server.connect("agent=test-agent").await;
    let mut gnosari = server.connect_gnosari("test-agent").await;
    for (dialect, client, is_gnosari) in [
        ("omnia", &mut omnia, false),
        ("gnosari", &mut gnosari, true),
    ] {
        // The first turns warm the connection (and leave TCP's quick-ACK
        // start, after which ACKs are delayed).
        for _ in 0..3 {
            turn_latency(client, is_gnosari).await;
        }
        let mut latencies = Vec::new();
        for _ in 0..7 {
            latencies.push(turn_latency(client, is_gnosari).await);
        }
        latencies.sort();
        let median = latencies[latencies.len() / 2];
        assert!(
            median < Duration::from_millis(20),
            "{dialect}: median turn {median:?} (all {latencies:?}); a delayed ACK is ~40 ms"
        );
    }
}

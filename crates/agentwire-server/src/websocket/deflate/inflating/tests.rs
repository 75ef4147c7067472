//! The rewriter under tungstenite, over an in-memory pipe: a client's
//! frames written by hand (masked, RSV1 where compressed), the server's
//! side as the connection sees it.

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tungstenite::error::{CapacityError, ProtocolError};
use tungstenite::protocol::WebSocketConfig;

use crate::socket::{Exit, classify_read_error};
use crate::websocket::deflate::codec::{Deflater, Inflater, SYNC_TAIL};
use crate::websocket::deflate::{Compression, MAX_WINDOW_BITS, Takeover, negotiate};
use crate::websocket::{Message, UpgradedStream};

const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CONTINUATION: u8 = 0x0;
const PING: u8 = 0x9;
const FIN: u8 = 0x80;
const RSV1: u8 = 0x40;
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A client frame: `first` is FIN, RSV and the opcode; the payload masked.
fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![first];
    match payload.len() {
        n if n < 126 => bytes.push(0x80 | n as u8),
        n if n <= 0xffff => {
            bytes.push(0x80 | 126);
            bytes.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            bytes.push(0x80 | 127);
            bytes.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    bytes.extend_from_slice(&MASK);
    bytes.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    bytes
}

fn limits(max_payload: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(max_payload))
        .max_frame_size(Some(max_payload))
}

/// The server's stream with permessage-deflate agreed (context takeover
/// both ways), and the client's end of the pipe.
async fn agreed(max_payload: usize) -> (UpgradedStream<DuplexStream>, DuplexStream) {
    let offer = [axum::http::HeaderValue::from_static("permessage-deflate")];
    let agreement = negotiate(&offer, &Compression::default());
    let (client, server) = tokio::io::duplex(1 << 20);
    let stream = UpgradedStream::open(server, limits(max_payload), agreement).await;
    (stream, client)
}

async fn plain() -> (UpgradedStream<DuplexStream>, DuplexStream) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let stream = UpgradedStream::open(server, limits(1 << 20), None).await;
    (stream, client)
}

fn client_deflater() -> Deflater {
    Deflater::new(MAX_WINDOW_BITS, Takeover::Keep)
}

async fn next(stream: &mut UpgradedStream<DuplexStream>) -> Result<Message, tungstenite::Error> {
    stream.next().await.expect("a message or an error")
}

fn close_code(error: tungstenite::Error) -> u16 {
    match classify_read_error(error) {
        Exit::Close(code, _) => code,
        _ => panic!("no close frame for this error"),
    }
}

#[tokio::test]
async fn compressed_messages_arrive_inflated_fragmented_or_not() {
    let (mut server, mut client) = agreed(1 << 20).await;
    let mut deflater = client_deflater();
    let hello = deflater.compress(b"hello, compressed world").unwrap();
    client
        .write_all(&frame(FIN | RSV1 | TEXT, &hello))
        .await
        .unwrap();
    // The next message, relying on the context of the first, in three
    // fragments with a ping between them; RSV1 on the first only.
    let again = deflater
        .compress(b"hello, compressed world, again")
        .unwrap();
    let (a, rest) = again.split_at(3);
    let (b, c) = rest.split_at(rest.len() / 2);
    client.write_all(&frame(RSV1 | TEXT, a)).await.unwrap();
    client.write_all(&frame(FIN | PING, b"ping")).await.unwrap();
    client.write_all(&frame(CONTINUATION, b)).await.unwrap();
    client
        .write_all(&frame(FIN | CONTINUATION, c))
        .await
        .unwrap();
    let bytes = deflater.compress(&[0, 1, 2, 255]).unwrap();
    client
        .write_all(&frame(FIN | RSV1 | BINARY, &bytes))
        .await
        .unwrap();

    assert_eq!(
        next(&mut server).await.unwrap(),
        Message::text("hello, compressed world")
    );
    assert_eq!(
        next(&mut server).await.unwrap(),
        Message::Ping("ping".into())
    );
    assert_eq!(
        next(&mut server).await.unwrap(),
        Message::text("hello, compressed world, again")
    );
    assert_eq!(
        next(&mut server).await.unwrap(),
        Message::binary(vec![0, 1, 2, 255])
    );
}

#[tokio::test]
async fn uncompressed_messages_pass_unchanged_with_the_extension_agreed() {
    let (mut server, mut client) = agreed(1 << 20).await;
    client
        .write_all(&frame(FIN | TEXT, b"plain"))
        .await
        .unwrap();
    client.write_all(&frame(TEXT, b"in ")).await.unwrap();
    client
        .write_all(&frame(FIN | CONTINUATION, b"two"))
        .await
        .unwrap();
    let big = vec![b'x'; 200_000];
    client.write_all(&frame(FIN | BINARY, &big)).await.unwrap();
    let compressed = client_deflater().compress(b"then compressed").unwrap();
    client
        .write_all(&frame(FIN | RSV1 | TEXT, &compressed))
        .await
        .unwrap();
    assert_eq!(next(&mut server).await.unwrap(), Message::text("plain"));
    assert_eq!(next(&mut server).await.unwrap(), Message::text("in two"));
    assert_eq!(next(&mut server).await.unwrap(), Message::binary(big));
    assert_eq!(
        next(&mut server).await.unwrap(),
        Message::text("then compressed")
    );
}

#[tokio::test]
async fn rsv1_on_a_continuation_is_a_protocol_error() {
    let (mut server, mut client) = agreed(1 << 20).await;
    let compressed = client_deflater().compress(b"fragmented").unwrap();
    let (a, b) = compressed.split_at(4);
    client.write_all(&frame(RSV1 | TEXT, a)).await.unwrap();
    client
        .write_all(&frame(FIN | RSV1 | CONTINUATION, b))
        .await
        .unwrap();
    let error = next(&mut server).await.unwrap_err();
    assert!(matches!(
        error,
        tungstenite::Error::Protocol(ProtocolError::NonZeroReservedBits)
    ));
    assert_eq!(close_code(error), 1002);
}

#[tokio::test]
async fn control_frames_are_never_compressed() {
    let (mut server, mut client) = agreed(1 << 20).await;
    client
        .write_all(&frame(FIN | RSV1 | PING, b"x"))
        .await
        .unwrap();
    let error = next(&mut server).await.unwrap_err();
    assert_eq!(close_code(error), 1002);
}

#[tokio::test]
async fn rsv1_without_the_extension_is_a_protocol_error() {
    let (mut server, mut client) = plain().await;
    let compressed = client_deflater().compress(b"unasked").unwrap();
    client
        .write_all(&frame(FIN | RSV1 | TEXT, &compressed))
        .await
        .unwrap();
    assert_eq!(close_code(next(&mut server).await.unwrap_err()), 1002);
}

#[tokio::test]
async fn data_that_does_not_inflate_closes_with_1007() {
    let (mut server, mut client) = agreed(1 << 20).await;
    client
        .write_all(&frame(FIN | RSV1 | TEXT, &[0xff, 0xff, 0xff, 0xff]))
        .await
        .unwrap();
    assert_eq!(close_code(next(&mut server).await.unwrap_err()), 1007);
}

#[tokio::test]
async fn compressed_text_that_is_not_utf8_closes_with_1007() {
    let (mut server, mut client) = agreed(1 << 20).await;
    let compressed = client_deflater().compress(&[0x66, 0xff, 0x6f]).unwrap();
    client
        .write_all(&frame(FIN | RSV1 | TEXT, &compressed))
        .await
        .unwrap();
    assert_eq!(close_code(next(&mut server).await.unwrap_err()), 1007);
}

#[tokio::test]
async fn a_zip_bomb_is_stopped_at_the_limit_not_inflated_whole() {
    const LIMIT: usize = 1 << 20;
    let (mut server, mut client) = agreed(LIMIT).await;
    // 64 MiB of zeros in about 64 KiB: under the frame limit on the wire.
    let bomb = client_deflater().compress(&vec![0u8; 64 << 20]).unwrap();
    assert!(bomb.len() < LIMIT);
    let writer = tokio::spawn(async move {
        // The server stops reading; the pipe may never take all of it.
        let _ = client.write_all(&frame(FIN | RSV1 | BINARY, &bomb)).await;
        client
    });
    let error = next(&mut server).await.unwrap_err();
    assert!(matches!(
        error,
        tungstenite::Error::Capacity(CapacityError::MessageTooLong { .. })
    ));
    assert_eq!(close_code(error), 1009);
    let inflated = server.inner.get_ref().inflated();
    assert!(
        inflated <= (LIMIT + 2 * 16 * 1024) as u64,
        "{inflated} bytes inflated for a {LIMIT}-byte limit"
    );
    writer.abort();
}

#[tokio::test]
async fn a_compressed_frame_over_the_frame_limit_is_refused_unread() {
    let (mut server, mut client) = agreed(1024).await;
    let noise = crate::websocket::deflate::incompressible(0x9e37_79b9, 4096);
    let compressed = client_deflater().compress(&noise).unwrap();
    assert!(compressed.len() > 1024);
    client
        .write_all(&frame(FIN | RSV1 | BINARY, &compressed))
        .await
        .unwrap();
    assert_eq!(close_code(next(&mut server).await.unwrap_err()), 1009);
    assert_eq!(server.inner.get_ref().inflated(), 0);
}

/// Reads one unmasked server frame: its first byte and its payload.
async fn server_frame(client: &mut DuplexStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 2];
    client.read_exact(&mut head).await.unwrap();
    let len = match head[1] & 0x7f {
        126 => usize::from(client.read_u16().await.unwrap()),
        127 => usize::try_from(client.read_u64().await.unwrap()).unwrap(),
        n => usize::from(n),
    };
    let mut payload = vec![0u8; len];
    client.read_exact(&mut payload).await.unwrap();
    (head[0], payload)
}

fn inflate(inflater: &mut Inflater, payload: &[u8]) -> Vec<u8> {
    let input = [payload, &SYNC_TAIL[..]].concat();
    let mut output = vec![0u8; 1 << 16];
    let progress = inflater.inflate(&input, &mut output).unwrap();
    inflater.end_message();
    output.truncate(progress.produced);
    output
}

#[tokio::test]
async fn what_the_server_sends_is_compressed_with_rsv1_and_pings_are_not() {
    let (mut server, mut client) = agreed(1 << 20).await;
    let chunk = r#"{"type":"chunk","content":"streamed words"}"#;
    server.send(Message::text(chunk)).await.unwrap();
    server.send(Message::text(chunk)).await.unwrap();
    server.send(Message::Ping("p".into())).await.unwrap();
    server.send(Message::binary(vec![9u8; 1000])).await.unwrap();
    let mut inflater = Inflater::new(Takeover::Keep);
    let (first, payload) = server_frame(&mut client).await;
    assert_eq!(first, FIN | RSV1 | TEXT);
    assert_eq!(inflate(&mut inflater, &payload), chunk.as_bytes());
    let (first, again) = server_frame(&mut client).await;
    assert_eq!(first, FIN | RSV1 | TEXT);
    assert!(
        again.len() < payload.len() / 3,
        "context takeover: {again:?}"
    );
    assert_eq!(inflate(&mut inflater, &again), chunk.as_bytes());
    assert_eq!(server_frame(&mut client).await, (FIN | PING, b"p".to_vec()));
    let (first, payload) = server_frame(&mut client).await;
    assert_eq!(first, FIN | RSV1 | BINARY);
    assert_eq!(inflate(&mut inflater, &payload), vec![9u8; 1000]);
}

#[tokio::test]
async fn without_context_takeover_only_large_messages_are_compressed() {
    let offer = [axum::http::HeaderValue::from_static(
        "permessage-deflate; server_no_context_takeover",
    )];
    let agreement = negotiate(&offer, &Compression::default());
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let mut server = UpgradedStream::open(server, limits(1 << 20), agreement).await;
    let small = r#"{"type":"chunk","content":"a few words"}"#;
    let large = small.repeat(100);
    server.send(Message::text(small)).await.unwrap();
    server.send(Message::text(large.clone())).await.unwrap();
    assert_eq!(
        server_frame(&mut client).await,
        (FIN | TEXT, small.as_bytes().to_vec())
    );
    let (first, payload) = server_frame(&mut client).await;
    assert_eq!(first, FIN | RSV1 | TEXT);
    assert!(payload.len() < large.len() / 10);
    let mut inflater = Inflater::new(Takeover::Reset);
    assert_eq!(inflate(&mut inflater, &payload), large.as_bytes());
}

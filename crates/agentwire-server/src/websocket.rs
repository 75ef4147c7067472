//! The WebSocket upgrade and the socket it yields, done here rather than by
//! axum's `ws` extractor: ending a connection the way RFC 6455 asks (§5.5.1,
//! §7.1.1, §7.4) needs the raw stream after a frame tungstenite refused.
//! When a client writes a frame over the payload limit, or a broken one,
//! the rest of what it sends is no longer frames tungstenite can follow;
//! dropping the socket with those bytes unread makes the kernel answer with
//! a reset, which destroys the close frame before the client reads it. So
//! the socket sends its close frame, shuts its write side and reads off what
//! is still coming (for a bounded time and byte count) before it lets go.
//! axum's `WebSocket` keeps the stream to itself.
//!
//! The socket also remembers what it saw (a client's Close, a broken read,
//! a write that did not complete in time), so [`WebSocket::finish`] ends it
//! the right way whichever path ended the connection loop.
//!
//! The upgrade negotiates permessage-deflate (`deflate`): the stream
//! compresses what it sends and, below tungstenite, inflates what it reads.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
pub(crate) use tungstenite::Message;
use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use crate::socket::CLOSE_GOING_AWAY;
use batched::BatchedWrites;
pub(crate) use deflate::Agreement;
use deflate::codec::{Deflater, Inflater};
use deflate::inflating::InflatingIo;
pub use deflate::{Compression, MAX_WINDOW_BITS, MIN_WINDOW_BITS, Takeover};

mod batched;
pub(crate) mod deflate;

/// After the server's close frame, how long the client gets to answer with
/// its own (or, after a broken frame, to stop sending) before the TCP
/// connection is closed anyway.
pub(crate) const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// After a broken frame, the longest the socket keeps reading off a client
/// that goes on sending, however steadily.
const DISCARD_MAX_TIME: Duration = Duration::from_secs(5);

/// After a broken frame, the most bytes read off (at least; see
/// [`discard_limit`]).
const DISCARD_MIN_BYTES: usize = 16 * 1024 * 1024;

/// A frame the client does not take within this long gives up on the close
/// frame too: it was a courtesy to a client that has stopped reading.
const CLOSE_SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// A slow consumer's close frame waits behind everything queued for it;
/// this long, so a client that reads again in time learns why (4008) and
/// can rejoin, and a dead one costs its socket this much longer.
const SLOW_CLOSE_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET` with `Connection: upgrade`, `Upgrade: websocket`,
/// `Sec-WebSocket-Version: 13` and a key, on HTTP/1.1: what axum's
/// extractor checks, with the connection's upgrade taken out of the request.
pub(crate) struct WebSocketUpgrade {
    key: HeaderValue,
    /// The client's `Sec-WebSocket-Extensions` headers, in order.
    extensions: Vec<HeaderValue>,
    on_upgrade: OnUpgrade,
}

/// The request is no WebSocket upgrade the server can complete.
#[derive(Debug)]
pub(crate) struct WebSocketUpgradeRejection;

impl IntoResponse for WebSocketUpgradeRejection {
    fn into_response(self) -> Response {
        StatusCode::BAD_REQUEST.into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebSocketUpgrade {
    type Rejection = WebSocketUpgradeRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let headers = &parts.headers;
        let valid = parts.version == Version::HTTP_11
            && parts.method == Method::GET
            && header_has_token(headers, header::CONNECTION, "upgrade")
            && header_is(headers, header::UPGRADE, "websocket")
            && header_is(headers, header::SEC_WEBSOCKET_VERSION, "13");
        if !valid {
            return Err(WebSocketUpgradeRejection);
        }
        let key = headers
            .get(header::SEC_WEBSOCKET_KEY)
            .ok_or(WebSocketUpgradeRejection)?
            .clone();
        let extensions = headers
            .get_all(header::SEC_WEBSOCKET_EXTENSIONS)
            .iter()
            .cloned()
            .collect();
        let on_upgrade = parts
            .extensions
            .remove::<OnUpgrade>()
            .ok_or(WebSocketUpgradeRejection)?;
        Ok(WebSocketUpgrade {
            key,
            extensions,
            on_upgrade,
        })
    }
}

fn header_is(headers: &HeaderMap, name: HeaderName, value: &str) -> bool {
    headers
        .get(name)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(value.as_bytes()))
}

fn header_has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

impl WebSocketUpgrade {
    /// Answers 101, with permessage-deflate when the client offered it in
    /// a form `compression` takes, and runs `serve` on the socket once the
    /// client has it.
    pub(crate) fn on_upgrade<F, Fut>(
        self,
        config: WebSocketConfig,
        compression: &Compression,
        serve: F,
    ) -> Response
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let accept = tungstenite::handshake::derive_accept_key(self.key.as_bytes());
        let agreement = deflate::negotiate(&self.extensions, compression);
        let on_upgrade = self.on_upgrade;
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let stream = UpgradedStream::open(TokioIo::new(upgraded), config, agreement).await;
            // A task of its own: awaited here, the connection would carry
            // this task's spent captures (`serve`, `config`) for its life.
            tokio::spawn(serve(WebSocket::new(stream)));
        });
        let mut response = Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::CONNECTION, "upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_ACCEPT, accept);
        if let Some(agreement) = &agreement {
            response = response.header(
                header::SEC_WEBSOCKET_EXTENSIONS,
                agreement.response_header(),
            );
        }
        response
            .body(axum::body::Body::empty())
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    }
}

/// What a [`WebSocket`] runs on: frames both ways, and the two things its
/// closing handshake does below the frames. The upgraded TCP connection
/// (tungstenite's stream) in the server; a pair of channels in the
/// dialects' unit tests, so a connection runs there without a server.
pub(crate) trait Transport:
    Stream<Item = Result<Message, tungstenite::Error>>
    + Sink<Message, Error = tungstenite::Error>
    + Unpin
    + Send
{
    /// Sends FIN: the client sees the connection end after the close frame.
    fn shutdown(&mut self) -> impl Future<Output = ()> + Send;

    /// After a broken frame: reads off and drops what the client still
    /// sends (bounded), so the close frame is not lost to a reset.
    fn discard_until_eof(&mut self) -> impl Future<Output = ()> + Send;
}

/// The server's transport: tungstenite over the upgraded connection, with
/// permessage-deflate when it was agreed: what the server sends is
/// compressed here, message by message, and what it reads is inflated
/// below tungstenite ([`InflatingIo`]). The frames sent between two
/// flushes gather below tungstenite too ([`BatchedWrites`]).
/// Generic over the connection so its tests run on an in-memory pipe.
pub(crate) struct UpgradedStream<Io = TokioIo<Upgraded>> {
    inner: WebSocketStream<InflatingIo<BatchedWrites<Io>>>,
    /// `None` without the extension. Boxed: a connection without it
    /// carries a pointer, not a compressor's handle.
    deflater: Option<Box<Deflater>>,
}

impl<Io: AsyncRead + AsyncWrite + Unpin> UpgradedStream<Io> {
    /// The stream over `io`. What waits for a flush is gathered below
    /// tungstenite ([`BatchedWrites`]), whatever `config`'s
    /// `write_buffer_size`.
    pub(crate) async fn open(
        io: Io,
        config: WebSocketConfig,
        agreement: Option<Agreement>,
    ) -> UpgradedStream<Io> {
        let io = BatchedWrites::new(io);
        // Each frame written through at once: tungstenite's own buffer
        // then holds one frame, not a batch, for the socket's life.
        let config = config.write_buffer_size(0);
        let (io, deflater) = match agreement {
            None => (InflatingIo::plain(io), None),
            Some(agreement) => {
                let max_frame_size = config.max_frame_size.unwrap_or(usize::MAX);
                let inflater = Inflater::new(agreement.client_takeover);
                (
                    InflatingIo::inflating(io, inflater, max_frame_size),
                    Some(Box::new(Deflater::new(
                        agreement.server_window_bits,
                        agreement.server_takeover,
                    ))),
                )
            }
        };
        let inner = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        UpgradedStream { inner, deflater }
    }

    /// A text or binary message as one compressed frame, RSV1 set (§6);
    /// anything else as it is: control frames are never compressed.
    fn compress(&mut self, message: Message) -> Result<Message, tungstenite::Error> {
        let Some(deflater) = &mut self.deflater else {
            return Ok(message);
        };
        let (payload, opcode) = match &message {
            Message::Text(text) => (text.as_bytes(), Data::Text),
            Message::Binary(bytes) => (&bytes[..], Data::Binary),
            _ => return Ok(message),
        };
        if !deflater.compresses(payload.len()) {
            return Ok(message);
        }
        let compressed = deflater
            .compress(payload)
            .map_err(|e| tungstenite::Error::Io(std::io::Error::other(e)))?;
        let mut frame = Frame::message(compressed, OpCode::Data(opcode), true);
        frame.header_mut().rsv1 = true;
        Ok(Message::Frame(frame))
    }
}

impl<Io: AsyncRead + AsyncWrite + Unpin> Stream for UpgradedStream<Io> {
    type Item = Result<Message, tungstenite::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().inner.poll_next_unpin(cx)
    }
}

impl<Io: AsyncRead + AsyncWrite + Unpin> Sink<Message> for UpgradedStream<Io> {
    type Error = tungstenite::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.get_mut().inner.poll_ready_unpin(cx)
    }

    fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), Self::Error> {
        let this = self.get_mut();
        let message = this.compress(message)?;
        this.inner.start_send_unpin(message)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.get_mut().inner.poll_flush_unpin(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.get_mut().inner.poll_close_unpin(cx)
    }
}

impl<Io: AsyncRead + AsyncWrite + Unpin + Send> Transport for UpgradedStream<Io> {
    async fn shutdown(&mut self) {
        let io = self.inner.get_mut();
        let _ = tokio::time::timeout(
            CLOSE_SEND_TIMEOUT,
            std::future::poll_fn(|cx| Pin::new(&mut *io).poll_shutdown(cx)),
        )
        .await;
    }

    async fn discard_until_eof(&mut self) {
        let limit = discard_limit(self.inner.get_config());
        // Below the inflating: what is read off is dropped unread.
        discard_until_eof(self.inner.get_mut().get_mut(), limit).await;
    }
}

/// A server-side WebSocket: frames over a [`Transport`], and what the
/// connection has seen that decides its end.
pub(crate) struct WebSocket<T = UpgradedStream> {
    inner: T,
    /// The client sent a Close; tungstenite has queued the echo (§5.5.1).
    client_closed: bool,
    /// A read failed: what follows on the wire is no longer frames
    /// tungstenite can follow, and the stream yields nothing more.
    read_failed: bool,
    /// A frame did not leave within the write timeout: the client has
    /// stopped reading.
    write_stalled: bool,
}

/// How a connection ends once the server has decided to close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Linger {
    /// Wait (up to [`CLOSE_LINGER`]) for the client's Close, as §7.1.1 asks.
    AwaitReply,
    /// The client is presumed gone (it has been silent for the keepalive's
    /// timeout): close TCP as soon as the close frame is out.
    None,
    /// The client has stopped keeping up: the close frame queues behind
    /// what it has not read (up to [`SLOW_CLOSE_SEND_TIMEOUT`]), then its
    /// Close is awaited as for [`Linger::AwaitReply`].
    BehindQueued,
}

impl<T: Transport> WebSocket<T> {
    pub(crate) fn new(inner: T) -> WebSocket<T> {
        WebSocket {
            inner,
            client_closed: false,
            read_failed: false,
            write_stalled: false,
        }
    }

    /// The next frame from the client; `None` once the connection is over.
    /// Cancel-safe, like the stream's `next`.
    pub(crate) async fn recv(&mut self) -> Option<Result<Message, tungstenite::Error>> {
        let next = self.inner.next().await;
        match &next {
            Some(Ok(Message::Close(_))) => self.client_closed = true,
            Some(Err(_)) => self.read_failed = true,
            _ => {}
        }
        next
    }

    /// Queues `message`; see `socket::queue_raw`.
    pub(crate) async fn feed(&mut self, message: Message) -> Result<(), tungstenite::Error> {
        self.inner.feed(message).await
    }

    pub(crate) async fn flush(&mut self) -> Result<(), tungstenite::Error> {
        self.inner.flush().await
    }

    /// A write did not complete in time; the close will not wait for it.
    pub(crate) fn mark_write_stalled(&mut self) {
        self.write_stalled = true;
    }

    /// A write did not complete within its timeout.
    pub(crate) fn write_stalled(&self) -> bool {
        self.write_stalled
    }

    /// The client sent its Close: it left on purpose.
    pub(crate) fn client_closed(&self) -> bool {
        self.client_closed
    }

    /// Ends the connection. After a client's Close: the echo goes out and
    /// TCP closes (the server closes first, §7.1.1). With `close`: the
    /// close frame goes out when the socket can take it, then `linger`
    /// decides whether to wait for the client's; after a broken frame the
    /// socket instead shuts its write side and reads off what the client
    /// still sends, so the close frame is not lost to a reset. Bounded in
    /// every case: a dead client costs at most a few seconds.
    pub(crate) async fn finish(&mut self, close: Option<(u16, &'static str)>, linger: Linger) {
        if self.client_closed {
            // The echo tungstenite queued; flushing it also ends its state.
            let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, self.inner.flush()).await;
            self.inner.shutdown().await;
            return;
        }
        let (code, reason) = match close {
            Some(close) => close,
            // The loop ended on the failed write: say why, should the
            // client read again.
            None if self.write_stalled => (CLOSE_GOING_AWAY, "write timeout"),
            None => return,
        };
        let frame = CloseFrame {
            code: code.into(),
            reason: reason.into(),
        };
        let (send_within, after_stall) = match linger {
            Linger::BehindQueued => (SLOW_CLOSE_SEND_TIMEOUT, true),
            Linger::AwaitReply | Linger::None => (CLOSE_SEND_TIMEOUT, false),
        };
        let sent =
            tokio::time::timeout(send_within, self.inner.send(Message::Close(Some(frame)))).await;
        if !matches!(sent, Ok(Ok(()))) || (self.write_stalled && !after_stall) {
            return;
        }
        if self.read_failed {
            self.inner.shutdown().await;
            self.inner.discard_until_eof().await;
            return;
        }
        if linger != Linger::None {
            self.await_close_reply().await;
        }
        self.inner.shutdown().await;
    }

    /// Reads (and drops) frames until the client's Close arrives, the
    /// stream ends or [`CLOSE_LINGER`] passes. Each frame is still held to
    /// the payload limit.
    async fn await_close_reply(&mut self) {
        let deadline = Instant::now() + CLOSE_LINGER;
        while let Ok(Some(Ok(message))) = tokio::time::timeout_at(deadline, self.inner.next()).await
        {
            if matches!(message, Message::Close(_)) {
                // tungstenite ends the stream once it has seen the reply;
                // one more read lets it do so.
                let _ = tokio::time::timeout_at(deadline, self.inner.next()).await;
                return;
            }
        }
    }
}

/// Bytes read off after a broken frame: twice the largest frame the client
/// may send, and at least [`DISCARD_MIN_BYTES`], so a client that wrote an
/// oversized frame in one go can finish writing it and read the 1009.
fn discard_limit(config: &WebSocketConfig) -> usize {
    config
        .max_frame_size
        .unwrap_or(0)
        .saturating_mul(2)
        .max(DISCARD_MIN_BYTES)
}

/// Reads and drops what `io` delivers until EOF, `limit` bytes, nothing for
/// [`CLOSE_LINGER`], or [`DISCARD_MAX_TIME`] in all.
async fn discard_until_eof<T: AsyncRead + Unpin>(io: &mut T, limit: usize) {
    let deadline = Instant::now() + DISCARD_MAX_TIME;
    // On the heap: this path is rare, and a buffer in the future would size
    // every connection's task for it.
    let mut buffer = vec![0u8; 16 * 1024];
    let mut read = 0usize;
    while read < limit {
        let quiet_until = (Instant::now() + CLOSE_LINGER).min(deadline);
        let next = tokio::time::timeout_at(
            quiet_until,
            std::future::poll_fn(|cx| {
                let mut buf = ReadBuf::new(&mut buffer);
                Pin::new(&mut *io)
                    .poll_read(cx, &mut buf)
                    .map_ok(|()| buf.filled().len())
            }),
        )
        .await;
        match next {
            Ok(Ok(n)) if n > 0 => read += n,
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_header_is_read_as_a_token_list() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert!(header_has_token(&headers, header::CONNECTION, "upgrade"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgraded"));
        assert!(!header_has_token(&headers, header::CONNECTION, "upgrade"));
    }

    #[test]
    fn the_discard_limit_lets_an_oversized_frame_finish() {
        let config = WebSocketConfig::default().max_frame_size(Some(64 * 1024));
        assert_eq!(discard_limit(&config), DISCARD_MIN_BYTES);
        let config = WebSocketConfig::default().max_frame_size(Some(16 * 1024 * 1024));
        assert_eq!(discard_limit(&config), 32 * 1024 * 1024);
    }
}

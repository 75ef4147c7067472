//! What every dialect's connection task shares: writing frames (with the
//! write timeout and the sent-frames metric), the close on exit, read-error
//! classification (the close code a broken frame earns), the keepalive, the
//! credential deadline, and the waits a `select!` needs on optional timers
//! and turns.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentwire_core::{Identity, IdentityOrigin};
use bytes::Bytes;
use tokio::time::{Instant, Interval, Sleep};
use tungstenite::error::ProtocolError;

use crate::websocket::deflate::codec::InflateFailed;
use crate::websocket::{Linger, Message, Transport, WebSocket};
use crate::{AppState, Limits};

/// A frame the client does not take within this long ends the connection.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) const CLOSE_GOING_AWAY: u16 = 1001;
pub(crate) const CLOSE_PROTOCOL_ERROR: u16 = 1002;
pub(crate) const CLOSE_INVALID_PAYLOAD: u16 = 1007;
pub(crate) const CLOSE_POLICY_VIOLATION: u16 = 1008;
pub(crate) const CLOSE_MESSAGE_TOO_BIG: u16 = 1009;
/// A reader that fell too far behind its session's log (or whose writes
/// stalled while a turn ran): it may reconnect and catch up.
pub(crate) const CLOSE_SLOW_CONSUMER: u16 = 4008;
/// RFC 6455's "Try Again Later": a rejoin that could not reach the
/// session's store or shared live state; the same request may succeed on
/// another replica or a moment later, and must not be answered as if the
/// session were gone.
pub(crate) const CLOSE_TRY_AGAIN_LATER: u16 = 1013;
pub(crate) const SESSION_UNAVAILABLE: &str = "session unavailable, try again";

/// How long before its expiry a token stops being used, at most.
const CREDENTIAL_MARGIN: Duration = Duration::from_secs(30);

/// Why a connection loop ended; decides the close frame, if any.
pub(crate) enum Exit {
    /// The client closed (its Close is echoed) or the socket failed
    /// (nothing more can be sent, but a stalled write still gets its
    /// close frame should the client read again).
    Gone,
    /// Close with this code and reason, then give the client a moment to
    /// answer with its own Close.
    Close(u16, &'static str),
    /// Close with this code and reason without waiting for an answer: the
    /// client is presumed gone.
    Abandon(u16, &'static str),
    /// 4008 "slow consumer": the client fell too far behind its session's
    /// log; the close frame waits behind what it has not read yet.
    SlowConsumer,
}

/// The socket could not take a frame; the connection is over.
pub(crate) struct SendFailed;

/// Counts a new connection in the metrics.
pub(crate) fn count_connection(state: &AppState) {
    state
        .metrics()
        .connections_total
        .fetch_add(1, Ordering::Relaxed);
}

/// Counts a client frame (text or binary) in the metrics.
pub(crate) fn count_received(state: &AppState) {
    state
        .metrics()
        .messages_received_total
        .fetch_add(1, Ordering::Relaxed);
}

/// Queues one text frame; see [`queue_raw`].
pub(crate) async fn queue_text<T: Transport>(
    state: &AppState,
    socket: &mut WebSocket<T>,
    text: String,
) -> Result<(), SendFailed> {
    queue_raw(state, socket, Message::Text(text.into())).await
}

/// Queues one frame, counted, within [`WRITE_TIMEOUT`]. It reaches the
/// client at the next [`flush`] (or sooner, once [`WRITE_BUFFER_BYTES`] are
/// queued): connection loops flush once per wake-up, so the frames one
/// wake-up produces (a burst of token deltas) share one write system call.
pub(crate) async fn queue_raw<T: Transport>(
    state: &AppState,
    socket: &mut WebSocket<T>,
    message: Message,
) -> Result<(), SendFailed> {
    state
        .metrics()
        .messages_sent_total
        .fetch_add(1, Ordering::Relaxed);
    match tokio::time::timeout(WRITE_TIMEOUT, socket.feed(message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(SendFailed),
        Err(_) => {
            socket.mark_write_stalled();
            Err(SendFailed)
        }
    }
}

/// Writes the queued frames out, within [`WRITE_TIMEOUT`].
pub(crate) async fn flush<T: Transport>(socket: &mut WebSocket<T>) -> Result<(), SendFailed> {
    match tokio::time::timeout(WRITE_TIMEOUT, socket.flush()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(SendFailed),
        Err(_) => {
            socket.mark_write_stalled();
            Err(SendFailed)
        }
    }
}

/// Bytes of queued frames past which a [`queue_raw`] writes through
/// without waiting for the flush; bounds what a batch holds.
pub(crate) const WRITE_BUFFER_BYTES: usize = 16 * 1024;

/// A socket's read buffer (a client's, and a voice call's hop to the
/// replica holding it), and the most one read of the socket takes.
/// Small on purpose: every open socket holds it, idle ones too, and
/// tungstenite zeroes it before each read (every poll of the socket, a
/// few per streamed turn). A client's text frame fits; a larger frame
/// grows the buffer to its size and is read in this many bytes a read.
pub(crate) const READ_BUFFER_BYTES: usize = 1024;

/// Events taken from a running turn in one wake-up, at most, before the
/// frames are flushed: a fast producer cannot starve the socket's reads.
pub(crate) const EVENT_BATCH: usize = 64;

/// Ends the connection as `exit` asks: the close frame, if any, and the
/// closing handshake (see [`WebSocket::finish`]).
pub(crate) async fn close<T: Transport>(socket: &mut WebSocket<T>, exit: Exit) {
    let (close, linger) = match exit {
        Exit::Gone => (None, Linger::None),
        Exit::Close(code, reason) => (Some((code, reason)), Linger::AwaitReply),
        Exit::Abandon(code, reason) => (Some((code, reason)), Linger::None),
        Exit::SlowConsumer => (
            Some((CLOSE_SLOW_CONSUMER, "slow consumer")),
            Linger::BehindQueued,
        ),
    };
    // Boxed: the closing handshake's future would otherwise size every
    // connection's task.
    Box::pin(socket.finish(close, linger)).await;
}

/// The close a read error earns (RFC 6455 §7.4.1): 1009 for a frame or
/// message over the payload limit (a compressed one's inflated size
/// counts), 1007 for text (or a close reason) that is not UTF-8 and for a
/// compressed message that does not inflate (RFC 7692), 1002 for any other
/// broken frame; an IO error or a dropped connection leaves nothing to
/// send.
pub(crate) fn classify_read_error(error: tungstenite::Error) -> Exit {
    use tungstenite::Error;
    match error {
        Error::Capacity(_) => Exit::Close(CLOSE_MESSAGE_TOO_BIG, ""),
        Error::Utf8(_) => Exit::Close(CLOSE_INVALID_PAYLOAD, "invalid UTF-8"),
        Error::Io(error) if error.get_ref().is_some_and(|e| e.is::<InflateFailed>()) => {
            Exit::Close(CLOSE_INVALID_PAYLOAD, "invalid compressed data")
        }
        Error::Protocol(
            ProtocolError::NonZeroReservedBits
            | ProtocolError::UnmaskedFrameFromClient
            | ProtocolError::FragmentedControlFrame
            | ProtocolError::ControlFrameTooBig
            | ProtocolError::UnknownControlFrameType(_)
            | ProtocolError::UnknownDataFrameType(_)
            | ProtocolError::UnexpectedContinueFrame
            | ProtocolError::ExpectedFragment(_)
            | ProtocolError::InvalidOpcode(_)
            | ProtocolError::InvalidCloseSequence,
        ) => Exit::Close(CLOSE_PROTOCOL_ERROR, "protocol error"),
        _ => Exit::Gone,
    }
}

/// The ping interval and the silence deadline. Any client frame resets the
/// deadline, not just pongs.
pub(crate) struct Keepalive {
    ping: Interval,
    silence: Pin<Box<Sleep>>,
    pong_timeout: Duration,
}

/// What the keepalive wants done.
pub(crate) enum KeepaliveTick {
    /// Time to send a ping.
    Ping,
    /// The client has been silent for `pong_timeout`.
    Expired,
}

impl Keepalive {
    pub(crate) fn new(limits: &Limits) -> Keepalive {
        Keepalive {
            ping: tokio::time::interval_at(
                Instant::now() + limits.ping_interval,
                limits.ping_interval,
            ),
            silence: Box::pin(tokio::time::sleep(limits.pong_timeout)),
            pong_timeout: limits.pong_timeout,
        }
    }

    /// The client sent a frame.
    pub(crate) fn heard(&mut self) {
        self.silence
            .as_mut()
            .reset(Instant::now() + self.pong_timeout);
    }

    pub(crate) async fn tick(&mut self) -> KeepaliveTick {
        tokio::select! {
            _ = self.ping.tick() => KeepaliveTick::Ping,
            () = self.silence.as_mut() => KeepaliveTick::Expired,
        }
    }

    /// Sends the ping, or gives the exit for a silent client.
    pub(crate) async fn act<T: Transport>(
        tick: KeepaliveTick,
        state: &AppState,
        socket: &mut WebSocket<T>,
    ) -> Result<(), Exit> {
        match tick {
            KeepaliveTick::Ping => queue_raw(state, socket, Message::Ping(Bytes::new()))
                .await
                .map_err(|SendFailed| Exit::Gone),
            KeepaliveTick::Expired => Err(Exit::Abandon(CLOSE_GOING_AWAY, "keepalive timeout")),
        }
    }
}

/// When a token-bearing credential must stop being used: its expiry less
/// min(30 s, half its remaining life), as a timer instant. `None` for
/// credentials without an expiry and for API keys and passwords.
pub(crate) fn credential_deadline(state: &AppState, identity: &Identity) -> Option<Instant> {
    if identity.origin != IdentityOrigin::Jwt {
        return None;
    }
    let expires_at = identity.expires_at?;
    let remaining_nanos = expires_at
        .unix_nanos()
        .saturating_sub(state.engine().clock().now().unix_nanos());
    let remaining = Duration::from_nanos(u64::try_from(remaining_nanos).unwrap_or(0));
    let margin = CREDENTIAL_MARGIN.min(remaining / 2);
    Some(Instant::now() + (remaining - margin))
}

/// The deadline timer for `identity`, if its credential has one.
pub(crate) fn credential_timer(
    state: &AppState,
    identity: Option<&Identity>,
) -> Option<Pin<Box<Sleep>>> {
    identity
        .and_then(|identity| credential_deadline(state, identity))
        .map(|at| Box::pin(tokio::time::sleep_until(at)))
}

/// Whether `timer` has run out (without waiting for it).
pub(crate) fn passed(timer: Option<&Pin<Box<Sleep>>>) -> bool {
    timer.is_some_and(|sleep| sleep.deadline() <= Instant::now())
}

/// Waits for `timer`; never resolves without one.
pub(crate) async fn until(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(sleep) => sleep.as_mut().await,
        None => std::future::pending().await,
    }
}

/// The text both dialects show when a session's turn is already running.
pub(crate) const TURN_IN_PROGRESS: &str =
    "the session's previous turn is still running; send the message again after the reply arrives";

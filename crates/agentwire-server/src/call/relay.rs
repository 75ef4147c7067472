//! The receiving replica's side of a hop (`hop.rs`): the client's socket
//! relayed to the replica holding its call, frame for frame, as a
//! [`Dialect`] of the connection driver, so the client's socket keeps
//! every rule a socket has here (the keepalive, the write timeout, the
//! drain and its force-close, the close codes of a broken frame).
//!
//! Text and binary frames pass through untouched (audio is never decoded
//! or re-encoded); pings and pongs are each leg's own (each side keeps its
//! own keepalive). One frame is in flight each way: a client frame is
//! written to the hop before the next is read, and a frame from the
//! holder is queued to the client before the next is read, so a slow side
//! slows the other through TCP, never through a buffer here, and a side
//! that stops reading for the write timeout ends the relay.
//!
//! The ends are mirrored: the holder's close frame closes the client with
//! the same code; a client that closes has its close passed on; a client
//! that is lost (its socket broke, the keepalive gave up) leaves the hop
//! dropped the same way, so the holder parks the call as for a socket of
//! its own.

use std::future::Future;

use futures_util::{SinkExt as _, StreamExt as _};
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;

use super::hop::HopSocket;
use crate::connection::driver::{self, Draining, Work};
use crate::connection::{CredentialClock, Dialect, Link};
use crate::lifecycle::ConnectionSlot;
use crate::socket::{CLOSE_GOING_AWAY, Exit, SendFailed, WRITE_TIMEOUT};
use crate::websocket::{CLOSE_LINGER, Message, Transport, WebSocket};

/// The close reasons a holder (this same server) gives, so the client gets
/// the holder's words; any other reason is passed on empty.
const KNOWN_REASONS: [&str; 7] = [
    "server shutdown",
    "credential expired",
    "slow consumer",
    "keepalive timeout",
    "write timeout",
    "protocol error",
    "invalid UTF-8",
];

/// Why the relay ends the client's socket when the holder's side is gone
/// without a close frame (it died, or the hop broke).
const HOLDER_GONE: &str = "call holder gone";

/// Relays `socket` to the call holder at the other end of `hop` until
/// either side ends.
pub(crate) fn run<T: Transport>(
    socket: WebSocket<T>,
    slot: ConnectionSlot,
    hop: HopSocket,
) -> impl Future<Output = ()> + Send {
    // The holder admitted the credential again and keeps its deadline (and
    // takes its refreshes): the relay has none of its own.
    let credential = CredentialClock::new(slot.state(), None);
    let relay = Relay {
        hop,
        ended: None,
        client: ClientEnd::Open,
    };
    driver::run(socket, slot, credential, relay)
}

struct Relay {
    hop: HopSocket,
    /// How the holder's side ended; `None` while it is open.
    ended: Option<HolderEnd>,
    client: ClientEnd,
}

/// How the hop ended on the holder's side.
enum HolderEnd {
    /// Its close frame, which the client gets.
    Closed(Option<CloseFrame>),
    /// It broke, or a write to it failed.
    Gone,
}

/// How the client's socket ended, for the hop's end.
#[derive(PartialEq, Eq)]
enum ClientEnd {
    Open,
    /// Broken, or closed by this server without the client's Close.
    Lost,
}

/// What the holder sent (`None`: the hop ended).
pub(crate) type FromHolder = Option<Result<Message, tungstenite::Error>>;

impl Dialect for Relay {
    type Side = FromHolder;

    fn turn(&mut self) -> Option<&mut agentwire_core::LogReader> {
        None
    }

    /// The holder's call is the work: busy until its side ends.
    fn is_busy(&mut self) -> bool {
        self.ended.is_none()
    }

    async fn next_work(&mut self) -> Work<FromHolder> {
        match self.ended {
            None => Work::Side(self.hop.next().await),
            Some(_) => std::future::pending().await,
        }
    }

    /// The holder's `connected` comes through the hop.
    async fn greet<T: Transport>(&mut self, _link: &mut Link<T>) -> Result<(), Exit> {
        Ok(())
    }

    async fn on_frame<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        message: Message,
    ) -> Result<(), Exit> {
        if self.ended.is_some() {
            return Ok(());
        }
        let sent = tokio::time::timeout(WRITE_TIMEOUT, self.hop.send(message)).await;
        if !matches!(sent, Ok(Ok(()))) {
            self.ended = Some(HolderEnd::Gone);
        }
        Ok(())
    }

    /// No turn runs here: the holder runs them.
    async fn on_turn_event<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        _entry: agentwire_core::LogEntry,
    ) -> Result<(), SendFailed> {
        Ok(())
    }

    async fn on_side<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        from_holder: FromHolder,
    ) -> Result<(), SendFailed> {
        match from_holder {
            Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                link.send_message(message).await
            }
            // tungstenite answered the holder's ping.
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Ok(()),
            Some(Ok(Message::Close(frame))) => {
                self.ended = Some(HolderEnd::Closed(frame));
                Ok(())
            }
            Some(Err(_)) | None => {
                self.ended = Some(HolderEnd::Gone);
                Ok(())
            }
        }
    }

    /// Asked once the holder's side ended: the client is closed the way
    /// the holder closed.
    async fn when_idle<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        _draining: Draining,
    ) -> Result<Option<Exit>, SendFailed> {
        Ok(match &self.ended {
            None => None,
            Some(HolderEnd::Closed(Some(frame))) => {
                let reason = KNOWN_REASONS
                    .into_iter()
                    .find(|known| *known == frame.reason.as_str())
                    .unwrap_or("");
                Some(Exit::Close(u16::from(frame.code), reason))
            }
            Some(HolderEnd::Closed(None)) => Some(Exit::Close(u16::from(CloseCode::Normal), "")),
            Some(HolderEnd::Gone) => Some(Exit::Close(CLOSE_GOING_AWAY, HOLDER_GONE)),
        })
    }

    async fn on_force_close<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
    ) -> Result<(), SendFailed> {
        Ok(())
    }

    fn on_lost(&mut self) {
        self.client = ClientEnd::Lost;
    }

    /// The hop ends as the client's socket did: a Close passed on (and the
    /// holder's answer awaited, briefly) when the client closed; dropped
    /// when the client was lost. After the holder's own close, its echo.
    async fn on_end(&mut self) {
        let close = match (&self.ended, &self.client) {
            (Some(HolderEnd::Gone), _) | (None, ClientEnd::Lost) => return,
            (Some(HolderEnd::Closed(_)), _) => None,
            (None, ClientEnd::Open) => Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            }),
        };
        let hop = &mut self.hop;
        let _ = tokio::time::timeout(CLOSE_LINGER, async {
            match close {
                Some(frame) => {
                    let _ = hop.close(Some(frame)).await;
                    // The holder's answer ends the stream.
                    while let Some(Ok(_)) = hop.next().await {}
                }
                // The echo tungstenite queued.
                None => {
                    let _ = hop.flush().await;
                }
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests;

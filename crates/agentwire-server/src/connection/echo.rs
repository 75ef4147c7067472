//! The echo `server.websocket.echo_frames` runs in place of a dialect: each
//! text and binary message goes back as it came. Conformance suites
//! (Autobahn's fuzzing client) expect an echo server, and neither dialect
//! is one: each answers a frame that is not its protocol with an error
//! frame, and greets first. The echo still runs on the driver, so the
//! suite exercises the socket the dialects use: its close rules, write
//! timeout, keepalive, payload limit and permessage-deflate.

use agentwire_core::LogEntry;

use super::driver::{self, Dialect, Draining};
use super::link::{CredentialClock, Link};
use crate::lifecycle::ConnectionSlot;
use crate::socket::{CLOSE_GOING_AWAY, Exit, SendFailed};
use crate::websocket::{Message, Transport, WebSocket};

/// Runs the echo on `socket` until the connection ends.
pub(crate) fn run<T: Transport>(
    socket: WebSocket<T>,
    slot: ConnectionSlot,
) -> impl Future<Output = ()> {
    let credential = CredentialClock::new(slot.state(), None);
    driver::run(socket, slot, credential, Echo)
}

/// A connection that echoes; it never runs a turn.
struct Echo;

impl Dialect for Echo {
    type Side = ();

    fn turn(&mut self) -> Option<&mut agentwire_core::LogReader> {
        None
    }

    async fn greet<T: Transport>(&mut self, _link: &mut Link<T>) -> Result<(), Exit> {
        Ok(())
    }

    async fn on_frame<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        message: Message,
    ) -> Result<(), Exit> {
        link.send_message(message)
            .await
            .map_err(|SendFailed| Exit::Gone)
    }

    async fn on_turn_event<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        _entry: LogEntry,
    ) -> Result<(), SendFailed> {
        Ok(())
    }

    async fn when_idle<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        draining: Draining,
    ) -> Result<Option<Exit>, SendFailed> {
        Ok(match draining {
            Draining::Yes => Some(Exit::Close(CLOSE_GOING_AWAY, "server shutdown")),
            Draining::No => None,
        })
    }

    async fn on_force_close<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
    ) -> Result<(), SendFailed> {
        Ok(())
    }
}

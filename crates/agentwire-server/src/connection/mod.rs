//! The connection wing: what every front door shares once a caller is in.
//!
//! - [`driver`]: one task per WebSocket, whatever the dialect: the loop
//!   over the socket, the running turn, the keepalive, the credential
//!   deadline, the drain; a [`driver::Dialect`] plugs in the wire.
//! - [`link`]: what a dialect's hooks act through.
//! - [`echo`]: the echo `server.websocket.echo_frames` puts in place of a
//!   dialect, for conformance suites.
//! - [`admission`]: the one path every message takes to a turn: rates,
//!   budget, credential, busy rule, turns per caller, media, the engine.

pub(crate) mod admission;
pub(crate) mod driver;
pub(crate) mod echo;
pub(crate) mod link;
#[cfg(test)]
pub(crate) mod testing;

pub(crate) use admission::{Admission, Busy, DialectWords, Refusal, TurnIntent};
pub(crate) use driver::{Dialect, DrainNotice, RejoinAt};
pub(crate) use link::{CredentialClock, Link};

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

/// Whether a refused rejoin lets the connection go on (`Ok`: the session is
/// another owner's, unknown or expired, and the dialect says so), or ends
/// it with 1013 "try again later": the store or the replicas' shared live
/// state could not be asked, so the session may well be there, and a
/// client told it was not would drop its conversation (or send a cancel
/// to a session it is not on).
pub(crate) fn rejoin_refused(
    error: &agentwire_engine::SubmitError,
) -> Result<(), crate::socket::Exit> {
    use agentwire_engine::SubmitError;
    match error {
        SubmitError::Store(_) | SubmitError::Live(_) => {
            tracing::warn!(error = %error, "a rejoin could not reach its session");
            Err(crate::socket::Exit::Close(
                crate::socket::CLOSE_TRY_AGAIN_LATER,
                crate::socket::SESSION_UNAVAILABLE,
            ))
        }
        _ => Ok(()),
    }
}

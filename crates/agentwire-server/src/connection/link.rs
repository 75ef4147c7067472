//! What a dialect acts through ([`Link`]): the socket it queues frames on,
//! the server's state and the caller's credential clock.

use std::pin::Pin;
use std::sync::Arc;

use agentwire_core::Identity;
use tokio::time::Sleep;

use crate::AppState;
use crate::socket::{self, SendFailed, credential_timer};
use crate::websocket::{Message, Transport, UpgradedStream, WebSocket};

/// What a dialect's hooks act through, over the socket's [`Transport`]
/// (the upgraded connection; channels in the dialects' unit tests).
pub(crate) struct Link<T = UpgradedStream> {
    pub(crate) state: Arc<AppState>,
    pub(crate) socket: WebSocket<T>,
    pub(crate) credential: CredentialClock,
}

impl<T: Transport> Link<T> {
    /// Queues a text frame; it leaves at the driver's next flush.
    pub(crate) async fn send(&mut self, text: String) -> Result<(), SendFailed> {
        socket::queue_text(&self.state, &mut self.socket, text).await
    }

    /// Queues any frame; see [`Link::send`].
    pub(crate) async fn send_message(&mut self, message: Message) -> Result<(), SendFailed> {
        socket::queue_raw(&self.state, &mut self.socket, message).await
    }
}

/// When the caller's credential must stop being used, and whether it has.
pub(crate) struct CredentialClock {
    /// `None` for credentials without an expiry.
    pub(super) deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline passed: no new work is accepted, and the connection
    /// closes once nothing is left to answer.
    pub(super) expired: bool,
}

impl CredentialClock {
    pub(crate) fn new(state: &AppState, identity: Option<&Identity>) -> CredentialClock {
        CredentialClock {
            deadline: credential_timer(state, identity),
            expired: false,
        }
    }

    /// The deadline has been seen to pass.
    pub(crate) fn expired(&self) -> bool {
        self.expired
    }

    /// The deadline has passed, seen by the loop or not.
    pub(crate) fn expired_now(&self) -> bool {
        self.expired || socket::passed(self.deadline.as_ref())
    }

    /// A fresh credential replaces the old one (Omnia's `credential_refresh`).
    pub(crate) fn renew(&mut self, state: &AppState, identity: &Identity) {
        self.deadline = credential_timer(state, Some(identity));
        self.expired = false;
    }
}

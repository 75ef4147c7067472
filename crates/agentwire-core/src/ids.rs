//! Identifiers. Session ids are cheap to clone because every frame of a turn
//! carries one.

use std::fmt;
use std::sync::Arc;

/// A session identifier: minted by the server (a lowercase UUIDv4) or named by
/// a client resuming or opening a session.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(Arc<str>);

/// The longest session id a client may name. Longer ids are refused rather
/// than stored, so a client cannot make the server keep arbitrary blobs as keys.
pub const MAX_SESSION_ID_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid session_id: 1 to 128 ASCII letters, digits, '.', '_', ':' or '-'")]
pub struct InvalidSessionId;

impl SessionId {
    /// Wraps an id the server minted itself; no validation.
    pub fn minted(id: String) -> SessionId {
        SessionId(id.into())
    }

    /// Validates an id named by a client.
    pub fn parse(id: &str) -> Result<SessionId, InvalidSessionId> {
        let valid_len = !id.is_empty() && id.len() <= MAX_SESSION_ID_LEN;
        let valid_chars = id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
        if valid_len && valid_chars {
            Ok(SessionId(id.into()))
        } else {
            Err(InvalidSessionId)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({})", &self.0)
    }
}

/// The source of fresh identifiers. Randomness is IO, so it sits behind a port.
pub trait IdSource: Send + Sync {
    /// A new session id: a lowercase UUIDv4 string.
    fn session_id(&self) -> SessionId;
    /// A new tool-call id: unguessable (at least 122 random bits, a UUIDv4).
    fn call_id(&self) -> String;
    /// A new turn-log epoch ([`crate::log::Epoch`]): random, so positions of
    /// a lost past are not mistaken for the new one's.
    fn log_epoch(&self) -> u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_validated() {
        assert!(SessionId::parse("sess-abc_1.2:3").is_ok());
        assert!(SessionId::parse("").is_err());
        assert!(SessionId::parse("has space").is_err());
        assert!(SessionId::parse(&"a".repeat(129)).is_err());
        assert!(SessionId::parse(&"a".repeat(128)).is_ok());
    }
}

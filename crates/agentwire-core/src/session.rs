//! What survives a restart: session records and their messages.

use crate::content::{ContentPart, Metadata};
use crate::ids::SessionId;
use crate::time::Timestamp;

/// A conversation. `owner` is a pseudonymous user id (a keyed hash of the
/// authenticated subject, never the subject itself); `None` is anonymous.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: SessionId,
    pub agent: String,
    pub namespace: String,
    pub owner: Option<String>,
    pub created_at: Timestamp,
    /// Advanced by every stored message; the context TTL counts from here.
    pub last_active_at: Timestamp,
}

/// Who wrote a stored message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageRole {
    User,
    Assistant,
    /// A tool call or its outcome.
    Tool,
    /// A turn that failed: the code and message the client was sent.
    Error,
    /// Something that happened on the session outside a turn, such as the
    /// client asserting it displayed the AI disclosure. Never shown to a model.
    Event,
}

impl MessageRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
            MessageRole::Tool => "tool",
            MessageRole::Error => "error",
            MessageRole::Event => "event",
        }
    }

    pub fn parse(s: &str) -> Option<MessageRole> {
        Some(match s {
            "user" => MessageRole::User,
            "assistant" => MessageRole::Assistant,
            "tool" => MessageRole::Tool,
            "error" => MessageRole::Error,
            "event" => MessageRole::Event,
            _ => return None,
        })
    }
}

/// One message of a session, in the order it was accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub session_id: SessionId,
    /// Position in the session, from 0, dense.
    pub seq: u64,
    pub role: MessageRole,
    pub content: String,
    pub parts: Vec<ContentPart>,
    pub metadata: Metadata,
    pub created_at: Timestamp,
}

/// A session's summary: a short recap written after the session went idle
/// (see [`crate::summary`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub text: String,
    pub created_at: Timestamp,
}

/// A session as an owner's listing shows it: its record and its summary, if
/// one was written.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOverview {
    pub record: SessionRecord,
    pub summary: Option<SessionSummary>,
}

/// Where a page of an owner's sessions ends. Listings are ordered by
/// `last_active_at` descending, then `id` descending; the next page holds the
/// sessions strictly after this position in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub last_active_at: Timestamp,
    pub id: SessionId,
}

impl SessionCursor {
    /// The position of `record` in a listing.
    pub fn after(record: &SessionRecord) -> SessionCursor {
        SessionCursor {
            last_active_at: record.last_active_at,
            id: record.id.clone(),
        }
    }
}

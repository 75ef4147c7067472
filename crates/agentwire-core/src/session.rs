//! What survives a restart: session records and their messages.

use crate::content::{ContentPart, Metadata};
use crate::error::ErrorCode;
use crate::ids::SessionId;
use crate::media::MediaId;
use crate::time::Timestamp;
use crate::turn::{ToolOutcome, ToolSide};

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
    /// What the session declared when it opened (Omnia's `declare`, as the
    /// client sent it); `None` when it declared nothing. A resumed session
    /// is opened with it again.
    pub declaration: Option<serde_json::Value>,
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
    pub body: MessageBody,
    /// Typed in a turn, or spoken in a voice call.
    pub via: Via,
    /// The client's metadata of a user message (as it sent it), an event's
    /// details; nothing of the server's own.
    pub metadata: Metadata,
    pub created_at: Timestamp,
}

/// How a message came into its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    /// Typed: a turn's message and its records.
    #[default]
    Text,
    /// Spoken in a voice call: the caller's transcript, the reply's, and
    /// the tool steps between them.
    Voice,
}

/// How a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyEnd {
    /// The whole answer.
    #[default]
    Complete,
    /// The turn was cancelled: the reply as far as it was streamed, as the
    /// user saw it.
    Cancelled,
    /// A spoken reply the caller cut short (a barge-in, the call's end):
    /// the transcript as far as it was spoken.
    Interrupted,
}

impl StoredMessage {
    pub fn role(&self) -> MessageRole {
        self.body.role()
    }
}

/// What a stored message says, by kind. Typed here and turned into text
/// only by a store's codec (and into JSON by each API that shows it), so no
/// reader parses another's encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageBody {
    /// What the user sent: the message's effective text and its parts.
    User {
        text: String,
        parts: Vec<ContentPart>,
        /// An uploaded item the message attached by its id; it is also one
        /// of `parts`, named by `storage_ref`.
        attachment: Option<MediaId>,
    },
    /// A turn's answer, or a call's spoken one.
    Reply {
        text: String,
        parts: Vec<ContentPart>,
        end: ReplyEnd,
    },
    /// Text the model wrote before calling tools: streamed, part of the
    /// model's context, not the turn's answer.
    Interim { text: String },
    /// A tool call the turn made.
    ToolCall {
        id: String,
        name: String,
        arguments: serde_json::Value,
        side: ToolSide,
    },
    /// How the tool call `id` ended.
    ToolResult { id: String, outcome: ToolOutcome },
    /// A turn that failed: the code and message the client was sent.
    Failure { code: ErrorCode, message: String },
    /// Something that happened on the session outside a turn, such as the
    /// client asserting it displayed the AI disclosure (`name`; details in
    /// the message's metadata). Never shown to a model.
    Event { name: String },
}

impl MessageBody {
    pub fn role(&self) -> MessageRole {
        match self {
            MessageBody::User { .. } => MessageRole::User,
            MessageBody::Reply { .. } | MessageBody::Interim { .. } => MessageRole::Assistant,
            MessageBody::ToolCall { .. } | MessageBody::ToolResult { .. } => MessageRole::Tool,
            MessageBody::Failure { .. } => MessageRole::Error,
            MessageBody::Event { .. } => MessageRole::Event,
        }
    }

    /// The words a person reads: a user's or the model's text, a failure's
    /// message, an event's name; `None` for tool steps.
    pub fn text(&self) -> Option<&str> {
        match self {
            MessageBody::User { text, .. }
            | MessageBody::Reply { text, .. }
            | MessageBody::Interim { text } => Some(text),
            MessageBody::Failure { message, .. } => Some(message),
            MessageBody::Event { name } => Some(name),
            MessageBody::ToolCall { .. } | MessageBody::ToolResult { .. } => None,
        }
    }

    /// The media and other parts of a user message or a reply.
    pub fn parts(&self) -> &[ContentPart] {
        match self {
            MessageBody::User { parts, .. } | MessageBody::Reply { parts, .. } => parts,
            _ => &[],
        }
    }
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

/// How many of a session's latest messages a turn is shown when its handler
/// asks for no other number ([`crate::Handler::history_window`]); the
/// runtime's `context_messages` default.
pub const DEFAULT_HISTORY_WINDOW: usize = 100;

/// The latest `limit` messages of `history`, starting at a user message so
/// no tool step is cut in half. When that holds no user message (one turn
/// with more tool records than `limit`), it widens back to the latest user
/// message: a turn's own request is never dropped. The one definition of
/// the window: the runtime shows the model this, and the engine keeps live
/// what the next turn's window needs ([`retained_start`]).
pub fn context_window(history: &[StoredMessage], limit: usize) -> &[StoredMessage] {
    let Some(from) = history.len().checked_sub(limit) else {
        return history;
    };
    let start = match history[from..].iter().position(is_user) {
        Some(offset) => from + offset,
        None => history[..from].iter().rposition(is_user).unwrap_or(0),
    };
    &history[start..]
}

/// Where the part of `history` that the next turn's window can reach
/// starts: the next turn appends its user message and is shown
/// [`context_window`] of that, which never reaches further back than this.
/// Everything before it can leave memory; the store still has it.
pub fn retained_start(history: &[StoredMessage], limit: usize) -> usize {
    // The next turn's own message takes one place of the window, and a
    // window with a user message in it never widens.
    let from = history.len().saturating_sub(limit.saturating_sub(1));
    history[from..]
        .iter()
        .position(is_user)
        .map_or(history.len(), |offset| from + offset)
}

fn is_user(message: &StoredMessage) -> bool {
    matches!(message.body, MessageBody::User { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u64, role: MessageRole) -> StoredMessage {
        let text = format!("{seq}");
        let body = match role {
            MessageRole::User => MessageBody::User {
                text,
                parts: Vec::new(),
                attachment: None,
            },
            MessageRole::Tool => MessageBody::ToolResult {
                id: text,
                outcome: ToolOutcome::Ok(serde_json::Value::Null),
            },
            _ => MessageBody::Reply {
                text,
                parts: Vec::new(),
                end: ReplyEnd::Complete,
            },
        };
        StoredMessage {
            session_id: SessionId::minted("s".into()),
            seq,
            body,
            via: Via::Text,
            metadata: Metadata::new(),
            created_at: Timestamp(0),
        }
    }

    /// A session of turns, each a user message, `tools` tool records and an
    /// answer, in every combination of lengths.
    fn sessions() -> Vec<Vec<StoredMessage>> {
        let mut out = Vec::new();
        for turns in 0..6 {
            for tools in 0..4 {
                let mut history = Vec::new();
                for turn in 0..turns {
                    let mut push = |role| history.push(message(history.len() as u64, role));
                    push(MessageRole::User);
                    for _ in 0..(tools + turn) % 4 {
                        push(MessageRole::Tool);
                    }
                    push(MessageRole::Assistant);
                }
                out.push(history);
            }
        }
        out
    }

    #[test]
    fn the_retained_part_gives_the_next_turn_the_window_the_whole_history_would() {
        for history in sessions() {
            for limit in 1..12 {
                let start = retained_start(&history, limit);
                let next = message(history.len() as u64, MessageRole::User);
                let mut whole = history.clone();
                whole.push(next.clone());
                let mut retained = history[start..].to_vec();
                retained.push(next);
                assert_eq!(
                    context_window(&retained, limit),
                    context_window(&whole, limit),
                    "limit {limit}, history of {}",
                    history.len()
                );
                // Never more than the window needs.
                assert!(history.len() - start < limit.max(1), "limit {limit}");
                assert!(history[start..].first().is_none_or(is_user));
            }
        }
    }
}

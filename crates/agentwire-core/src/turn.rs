//! A turn: one accepted user message, the handler that answers it and the
//! events it emits on the way to exactly one terminal event.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::content::{ContentPart, Metadata};
use crate::error::ErrorCode;
use crate::ids::SessionId;
use crate::session::StoredMessage;

/// What the user sent, as the handler sees it.
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    /// The effective text: the text parts joined, else `content`.
    pub text: String,
    pub parts: Vec<ContentPart>,
    pub metadata: Metadata,
}

/// Which side runs a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSide {
    Server,
    Client,
}

/// A tool call a handler made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    pub side: ToolSide,
    pub consent_message: Option<String>,
    pub categories: Vec<String>,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Ok(serde_json::Value),
    /// The tool ran and failed.
    Error(String),
    /// The tool never ran: declined, or not answered in time.
    Denied(String),
}

/// The final answer of a successful turn. `parts`, when present, take
/// precedence over `text` on the wire.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    pub text: String,
    pub parts: Vec<ContentPart>,
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: text.into(),
            parts: Vec::new(),
        }
    }
}

/// Why a turn failed. `message` is shown to the client as it is, so it must
/// never carry secrets or a provider's response body.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnFailure {
    pub code: ErrorCode,
    pub message: String,
}

impl TurnFailure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> TurnFailure {
        TurnFailure {
            code,
            message: message.into(),
        }
    }

    /// The generic failure for anything the client cannot act on.
    pub fn internal() -> TurnFailure {
        TurnFailure::new(ErrorCode::Internal, "internal server error")
    }
}

/// Everything a turn emits, in order. Exactly one of `Completed` and `Failed`
/// ends every turn.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    TextDelta(String),
    ToolCall(ToolCall),
    ToolResult { id: String, outcome: ToolOutcome },
    Completed(Reply),
    Failed(TurnFailure),
}

impl TurnEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(self, TurnEvent::Completed(_) | TurnEvent::Failed(_))
    }
}

/// The answerer of turns: a scripted handler, echo, demo or the model runtime.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs one turn. Progress goes out through `turn.events()`; the returned
    /// value becomes the terminal event, which only the engine emits.
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure>;
}

/// What a handler gets for one turn.
pub struct TurnContext {
    pub session_id: SessionId,
    pub input: TurnInput,
    /// The session's messages, ending with this turn's user message.
    pub history: Arc<Vec<StoredMessage>>,
    /// Cancelled when the turn must stop early (forced shutdown).
    pub cancel: CancellationToken,
    pub(crate) events: EventSink,
}

impl TurnContext {
    pub fn events(&self) -> &EventSink {
        &self.events
    }
}

/// Where a handler sends progress. Bounded: a slow client slows the handler
/// down instead of growing a queue.
pub struct EventSink {
    tx: mpsc::Sender<TurnEvent>,
    /// Tool events, kept to be persisted with the turn.
    pub(crate) tool_log: parking_lot::Mutex<Vec<TurnEvent>>,
}

impl EventSink {
    pub(crate) fn new(tx: mpsc::Sender<TurnEvent>) -> EventSink {
        EventSink {
            tx,
            tool_log: parking_lot::Mutex::new(Vec::new()),
        }
    }

    pub async fn text_delta(&self, delta: impl Into<String>) {
        self.send(TurnEvent::TextDelta(delta.into())).await;
    }

    pub async fn tool_call(&self, call: ToolCall) {
        let event = TurnEvent::ToolCall(call);
        self.tool_log.lock().push(event.clone());
        self.send(event).await;
    }

    pub async fn tool_result(&self, id: impl Into<String>, outcome: ToolOutcome) {
        let event = TurnEvent::ToolResult {
            id: id.into(),
            outcome,
        };
        self.tool_log.lock().push(event.clone());
        self.send(event).await;
    }

    pub(crate) async fn send(&self, event: TurnEvent) {
        // A gone receiver means the client left; the turn still completes so
        // that its answer is stored and a resumed session shows it.
        let _ = self.tx.send(event).await;
    }
}

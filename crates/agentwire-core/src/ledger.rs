//! The tool-call ledger: where each tool call of a turn stands, written as
//! the call moves, so that a replica taking a session over from one that
//! died reads the truth: which calls ran, and which were still open when
//! the turn stopped.
//!
//! A call is known by its turn (the store seq of the question the turn
//! answers) and its place among that turn's calls: providers reuse call
//! ids, and the call's own message gets its seq only when the turn ends.
//! The turn reports each move to its [`CallRecorder`] (the engine's), which
//! writes it through [`crate::SessionStore::record_call`], fenced like the
//! turn's appends.

use async_trait::async_trait;

use crate::ids::SessionId;
use crate::time::Timestamp;
use crate::turn::{ToolCall, ToolOutcome};

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallState {
    /// A server tool started, or the client was asked to run one.
    Requested,
    /// The client acknowledged the call (`tool_call_ack`).
    Acked,
    /// The tool ran, well or not.
    Answered,
    /// It never ran: declined, not answered in time, or its turn stopped
    /// (its replica died, or lost the session's lease) before an answer.
    Denied,
    /// Its turn was cancelled while the call was open.
    Cancelled,
}

impl CallState {
    /// How a call that ended with `outcome` ended, its turn cancelled or not.
    pub fn ended(outcome: &ToolOutcome, cancelled: TurnCancelled) -> CallState {
        match (outcome, cancelled) {
            (ToolOutcome::Ok(_) | ToolOutcome::Error(_), _) => CallState::Answered,
            (ToolOutcome::Denied(_), TurnCancelled::Yes) => CallState::Cancelled,
            (ToolOutcome::Denied(_), TurnCancelled::No) => CallState::Denied,
        }
    }
}

/// Whether a call's turn was cancelled when the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnCancelled {
    Yes,
    No,
}

/// One move of one tool call of a turn, as the ledger records it.
#[derive(Debug, Clone, Copy)]
pub struct CallMove<'a> {
    pub session: &'a SessionId,
    /// The store seq of the question the call's turn answers.
    pub turn: u64,
    /// The call's place among its turn's calls, from 0.
    pub ordinal: u32,
    pub call: &'a ToolCall,
    pub state: CallState,
    /// How the call ended, once it has.
    pub outcome: Option<&'a ToolOutcome>,
    pub at: Timestamp,
}

/// What a turn tells of its calls as they move (the engine's, which
/// writes each move to the ledger). A move that cannot be written is the
/// recorder's to log: the call goes on, and the turn's end writes every
/// call's final state again with its messages.
#[async_trait]
pub trait CallRecorder: Send + Sync {
    async fn record(
        &self,
        ordinal: u32,
        call: &ToolCall,
        state: CallState,
        outcome: Option<&ToolOutcome>,
    );
}

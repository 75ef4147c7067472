//! A turn's tool calls written to the store's ledger as they move
//! ([`agentwire_core::ledger`]), where logs are shared: there another
//! replica may take the session over from one that died, and reads there
//! which calls ran and which were open. One process alone has no takeover:
//! its turns end with it, and the turn's end writes every call with its
//! messages, so it records nothing on the way.
//!
//! Each move is one write, awaited: a turn's calls are few and slow (a
//! model's round, a client's answer), and the write orders the ledger
//! before the client is asked. A turn without tools writes nothing here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use super::write::QuestionFlush;
use agentwire_core::ids::SessionId;
use agentwire_core::ledger::{CallMove, CallRecorder, CallState};
use agentwire_core::live::Fence;
use agentwire_core::store::SessionStore;
use agentwire_core::time::Clock;
use agentwire_core::turn::{ToolCall, ToolOutcome};

/// The ledger writer of one turn: its calls named by the turn's question.
pub(super) struct TurnCalls {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) session: SessionId,
    /// The store seq of the turn's question.
    pub(super) turn: u64,
    /// The turn's lease fence: its ledger writes are fenced as its appends.
    pub(super) fence: Option<Fence>,
    /// The question's deferred write, had at the turn's first call: a row
    /// names a question the store holds.
    pub(super) question: QuestionFlush,
    pub(super) question_stored: AtomicBool,
}

#[async_trait]
impl CallRecorder for TurnCalls {
    async fn record(
        &self,
        ordinal: u32,
        call: &ToolCall,
        state: CallState,
        outcome: Option<&ToolOutcome>,
    ) {
        if !self.question_stored.swap(true, Ordering::AcqRel) {
            self.question.flush().await;
        }
        let step = CallMove {
            session: &self.session,
            turn: self.turn,
            ordinal,
            call,
            state,
            outcome,
            at: self.clock.now(),
        };
        // The turn goes on: its end writes every call's final state again.
        if let Err(e) = self.store.record_call(&step, self.fence).await {
            tracing::warn!(session = %self.session, error = %e, "recording a tool call failed");
        }
    }
}

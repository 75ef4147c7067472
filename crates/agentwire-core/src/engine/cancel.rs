//! Cancel: what stops a running turn, and what a cancelled turn owes the
//! client calls it was waiting on.

use super::SessionLease;
use crate::log::TurnId;
use crate::turn::{ToolOutcome, ToolSide, TurnContext, TurnEvent};

/// What [`SessionLease::cancel_turn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// This turn is being cancelled (or already was).
    Cancelled(TurnId),
    /// No turn runs, or not the one named.
    NothingRunning,
    /// The caller does not own the session.
    NotYours,
}

impl SessionLease {
    /// Cancels the session's running turn (`turn`: only if it is still
    /// that one; `None`: whatever runs) for `owner`, the caller. The turn
    /// then ends `Cancelled` with what it had streamed, wherever it runs (a
    /// turn on another replica is told over the control bus); running again
    /// is harmless, so is a cancel with nothing running.
    pub fn cancel_turn(&self, owner: Option<&str>, turn: Option<TurnId>) -> CancelOutcome {
        if self.session.record.owner.as_deref() != owner {
            return CancelOutcome::NotYours;
        }
        let cancelled = {
            let state = self.session.state.lock();
            match &state.turn_cancel {
                Some((running, token)) if turn.is_none_or(|t| t == *running) => {
                    token.cancel();
                    Some(*running)
                }
                _ => None,
            }
        };
        match cancelled.or_else(|| self.cancel_foreign_turn(turn)) {
            Some(turn) => CancelOutcome::Cancelled(turn),
            None => CancelOutcome::NothingRunning,
        }
    }
}

/// A cancelled turn's client calls still waiting for an answer: the client
/// is told each one is over (`tool_result` "turn cancelled", the frame a
/// timed-out call gets) and a late answer finds nothing to answer.
pub(super) async fn withdraw_client_calls(turn: &TurnContext) {
    let pending: Vec<String> = {
        let log = turn.events().tool_log.lock();
        let asked = log.iter().filter_map(|event| match event {
            TurnEvent::ToolCall(call) if call.side == ToolSide::Client => Some(&call.id),
            _ => None,
        });
        asked
            .filter(|id| {
                !log.iter().any(
                    |event| matches!(event, TurnEvent::ToolResult { id: done, .. } if done == *id),
                )
            })
            .cloned()
            .collect()
    };
    for id in pending {
        turn.client_tools.broker.forget(&id);
        turn.events()
            .tool_result_of_client(id, ToolOutcome::Denied(TURN_CANCELLED.to_owned()))
            .await;
    }
}

/// Why a cancelled turn's pending client calls ended.
pub const TURN_CANCELLED: &str = "turn cancelled";

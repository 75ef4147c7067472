//! Cancel: what stops a running turn, and what a cancelled turn owes the
//! client calls it was waiting on.

use super::SessionLease;
use agentwire_core::log::TurnId;

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

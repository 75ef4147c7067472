//! A turn's own task: the handler, raced against the turn's cancellation;
//! then the turn's records stored, and its one terminal appended.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::oneshot;

use super::records::{Ended, Ending, reply_of, terminal_record, tool_records};
use super::write::QuestionWrite;
use super::{Fence, SessionLease};
use agentwire_core::ledger::TurnCancelled;
use agentwire_core::time::Timestamp;
use agentwire_core::turn::{Handler, Reply, TURN_INTERRUPTED, TurnContext, TurnEvent, TurnFailure};

/// The `turn` span (`agentwire_core::trace`); its parent is the caller's span, the
/// connection's. The turn id and the outcome are recorded later.
pub(super) fn turn_span(agent: &str, session: &agentwire_core::ids::SessionId) -> tracing::Span {
    tracing::debug_span!(
        target: agentwire_core::trace::TARGET,
        "turn",
        agentwire.agent = %agent,
        agentwire.session_id = %session,
        agentwire.turn_id = tracing::field::Empty,
        agentwire.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

pub(super) async fn run_turn(
    handler: Arc<dyn Handler>,
    turn: TurnContext,
    lease: SessionLease,
    fence: Fence,
    question_write: QuestionWrite,
    summary: oneshot::Sender<Timestamp>,
) {
    let started = tokio::time::Instant::now();
    let cancel = turn.cancel.clone();
    let run = AssertUnwindSafe(handler.run(&turn)).catch_unwind();
    // Cancelled, the handler's future is dropped where it waits: the
    // provider's response (so its HTTP stream closes), a tool call (an MCP
    // request sends `notifications/cancelled` as it drops), a client call.
    // A turn whose lease is lost stops as a cancelled one does, and fails:
    // another replica may be running the session by now.
    let mut lost = false;
    let finished = tokio::select! {
        finished = run => Some(finished),
        () = cancel.cancelled() => None,
        () = lease.lease_lost(fence) => {
            lost = true;
            None
        }
    };
    // How the turn ends is decided here, under the lock `cancel_turn` takes:
    // a cancel from now on (while the records are stored, which takes a
    // round trip on a networked store) finds nothing running, instead of
    // reporting a cancel the turn then does not honour.
    let cancelled = {
        let mut state = lease.session.state.lock();
        state.turn_cancel = None;
        cancel.is_cancelled()
    };
    // The whole context goes now, not at the end of this function: while the
    // turn's history snapshot lives, appending the reply would copy the
    // session's entire history.
    let turn = turn.into_ending();
    let ending = match finished {
        _ if lost => {
            tracing::warn!(session = %lease.id(), "the turn lost its lease");
            turn.withdraw_client_calls(TurnCancelled::No).await;
            Ending::Ran(Err(TurnFailure::new(
                agentwire_core::error::ErrorCode::Internal,
                TURN_INTERRUPTED,
            )))
        }
        _ if cancelled => {
            turn.withdraw_client_calls(TurnCancelled::Yes).await;
            Ending::Cancelled(Reply::text(turn.streamed()))
        }
        Some(Ok(result)) => Ending::Ran(result),
        Some(Err(_)) | None => {
            tracing::error!(session = %lease.id(), "handler panicked");
            Ending::Ran(Err(TurnFailure::internal()))
        }
    };
    let now = lease.inner.clock.now();
    let mut records = tool_records(lease.id(), turn.take_recorded(), now);
    let (record, ended) = terminal_record(lease.id(), ending, now);
    records.push(record);
    let summary_due = match &ended {
        Ended::Completed => lease.summary_due_after_turn(),
        _ => None,
    };
    // The reply is in its record alone while it is stored, and comes back
    // from it for the terminal event.
    let stored = question_write.finish(&lease, records, summary_due).await;
    let terminal = match (stored, ended) {
        (Ok(record), Ended::Completed) => {
            if let Some(due) = summary_due {
                lease.queue_summary(due, summary);
            }
            TurnEvent::Completed(reply_of(record))
        }
        (Ok(_), Ended::Failed(failure)) => TurnEvent::Failed(failure),
        (Ok(record), Ended::Cancelled) => TurnEvent::Cancelled(reply_of(record)),
        (Err(e), _) => {
            tracing::error!(session = %lease.id(), error = %e, "storing the turn failed");
            TurnEvent::Failed(TurnFailure::internal())
        }
    };
    record_outcome(&terminal);
    log_finished(&lease, &terminal, started.elapsed());
    // Where logs are shared, the lease goes with the terminal's batch.
    if !lost && !lease.shares_logs() {
        lease.release_turn_lease(fence).await;
    }
    // The session is free once the terminal is in the log, at the same
    // moment: a reader that sees it may send the next message at once, and
    // that next turn's start must come after this terminal.
    lease.end_turn_then(|| turn.finish(terminal));
    // Where publishing this turn stopped short, the shared log tells how
    // it ended: this replica's clients learn it from there.
    lease.follow_foreign_turn();
    // No connection is on the session: its client went away mid-turn and
    // may come back for the end.
    if lease.is_sole() {
        lease.keep_for_rejoin();
    }
}

/// One log line per finished turn, for operators: who, how long, how it
/// ended; never what was said.
fn log_finished(lease: &SessionLease, terminal: &TurnEvent, took: std::time::Duration) {
    let record = &lease.session.record;
    let duration_ms = took.as_millis() as u64;
    match terminal {
        TurnEvent::Failed(failure) => tracing::info!(
            agent = %record.agent,
            session = %record.id,
            duration_ms,
            outcome = "failed",
            code = failure.code.as_str(),
            "turn finished"
        ),
        TurnEvent::Cancelled(_) => tracing::info!(
            agent = %record.agent,
            session = %record.id,
            duration_ms,
            outcome = "cancelled",
            "turn finished"
        ),
        _ => tracing::info!(
            agent = %record.agent,
            session = %record.id,
            duration_ms,
            outcome = "completed",
            "turn finished"
        ),
    }
}

/// The turn's outcome on its span (the current one: the task is
/// instrumented with it).
fn record_outcome(terminal: &TurnEvent) {
    let span = tracing::Span::current();
    match terminal {
        TurnEvent::Completed(_) => span.record("agentwire.outcome", "completed"),
        TurnEvent::Cancelled(_) => span.record("agentwire.outcome", "cancelled"),
        TurnEvent::Failed(failure) => span
            .record("agentwire.outcome", "failed")
            .record("error.type", failure.code.as_str()),
        _ => &span,
    };
}

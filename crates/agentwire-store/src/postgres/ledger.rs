//! The tool-call ledger (`tool_calls`, migrations 2, 3 and 9): one row per
//! tool call of a turn, server or client side, and where it stands.
//!
//! Where logs are shared, a turn records each call as it moves
//! ([`PgStore::record`], one statement per move): `requested` when a server
//! tool starts or a client is asked, `acked` when the client acknowledges,
//! then how it ended. A row is known by its turn (the seq of the question)
//! and its place among the turn's calls: the call's message gets its seq
//! only when the turn ends. The turn's end writes every call again, settled,
//! in the statement that stores its messages ([`CallColumns`]): the rows it
//! recorded take their final state and their message's seq; a turn that
//! recorded nothing on the way (one process alone, a voice call) gets its
//! rows there. Settled states: `answered` (the tool ran, well or not),
//! `denied` (it never ran: declined, timed out, or the turn ended before an
//! answer), `cancelled` (the turn was cancelled while the call was open).
//!
//! Each row holds the fence of the turn lease that wrote it, and every
//! write is fenced as the turn's appends are: a replica that lost the
//! session writes nothing, and the first fenced append under a later lease
//! (the interruption a replica taking the session over stores, or the next
//! turn's) settles the rows an earlier lease left open `denied`, "turn
//! interrupted", in its one statement. `running` is the schema's, unused.
//!
//! Arguments and results are user data and stay in the messages: a row holds
//! a SHA-256 digest of the arguments and, as its outcome, the status and,
//! for an error or a denial, the server's reason.

use agentwire_core::{
    CallMove, CallState, Fence, MessageBody, ReplyEnd, StoreError, StoredMessage, TURN_INTERRUPTED,
    ToolOutcome, ToolSide, TurnCancelled, Via,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::PgStore;

/// The rows, one array per column (`unnest`'s input).
#[derive(Default)]
pub(super) struct CallColumns {
    /// The seq of the call's message: what links the row to it.
    pub(super) call_seq: Vec<i64>,
    /// The call's place among its turn's: what the rows its turn recorded
    /// as it ran are known by. `None` for a spoken call (a voice call's
    /// exchange records nothing on the way).
    pub(super) call_ordinal: Vec<Option<i32>>,
    pub(super) call_id: Vec<String>,
    /// The seq of the batch's user message that began the call's turn;
    /// `None` when the question was written before (the statement looks it
    /// up).
    pub(super) question_seq: Vec<Option<i64>>,
    pub(super) side: Vec<&'static str>,
    pub(super) name: Vec<String>,
    pub(super) args_digest: Vec<String>,
    pub(super) state: Vec<&'static str>,
    pub(super) outcome: Vec<Option<String>>,
    pub(super) requested_at: Vec<i64>,
    pub(super) finished_at: Vec<Option<i64>>,
}

#[derive(Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
enum OutcomeJson<'a> {
    Ok,
    Error { message: &'a str },
    Denied { reason: &'a str },
}

impl CallColumns {
    /// The calls among `messages` (one session's, in `seq` order).
    pub(super) fn encode(messages: &[StoredMessage]) -> Result<CallColumns, StoreError> {
        let mut calls = CallColumns::default();
        let mut question_seq = None;
        let mut made: i32 = 0;
        let cancelled = match messages.iter().any(is_cancelled_reply) {
            true => TurnCancelled::Yes,
            false => TurnCancelled::No,
        };
        for message in messages {
            match &message.body {
                MessageBody::User { .. } => {
                    question_seq = Some(seq_of(message)?);
                    // A text turn's calls are counted from its question.
                    made = 0;
                }
                MessageBody::ToolCall { .. } => {
                    let ordinal = (message.via == Via::Text).then_some(made);
                    made += i32::from(ordinal.is_some());
                    calls.push_call(message, question_seq, ordinal, cancelled)?;
                }
                MessageBody::ToolResult { id, outcome } => {
                    calls.settle(id, outcome, message.created_at.0, cancelled)?;
                }
                _ => {}
            }
        }
        Ok(calls)
    }

    /// The row of a call `message`: settled by its result, if it has one,
    /// else as one its turn never answered.
    fn push_call(
        &mut self,
        message: &StoredMessage,
        question_seq: Option<i64>,
        ordinal: Option<i32>,
        cancelled: TurnCancelled,
    ) -> Result<(), StoreError> {
        let MessageBody::ToolCall {
            id,
            name,
            arguments,
            side,
        } = &message.body
        else {
            return Ok(());
        };
        self.call_seq.push(seq_of(message)?);
        self.call_ordinal.push(ordinal);
        self.call_id.push(id.clone());
        self.question_seq.push(question_seq);
        self.side.push(side_name(*side));
        self.name.push(name.clone());
        self.args_digest.push(digest(arguments)?);
        self.state.push(state_name(CallState::never_ran(cancelled)));
        self.outcome.push(None);
        self.requested_at.push(message.created_at.0);
        self.finished_at.push(Some(message.created_at.0));
        Ok(())
    }

    /// Settles the latest call `id` (a result answers the call before it).
    fn settle(
        &mut self,
        id: &str,
        outcome: &ToolOutcome,
        at: i64,
        cancelled: TurnCancelled,
    ) -> Result<(), StoreError> {
        let Some(call) = self.call_id.iter().rposition(|call| call == id) else {
            return Ok(());
        };
        self.state[call] = state_name(CallState::ended(outcome, cancelled));
        self.outcome[call] = Some(outcome_json(outcome)?);
        self.finished_at[call] = Some(at);
        Ok(())
    }
}

fn seq_of(message: &StoredMessage) -> Result<i64, StoreError> {
    i64::try_from(message.seq).map_err(|_| {
        StoreError::Rejected(format!(
            "message {} of session {}: seq out of range",
            message.seq, message.session_id
        ))
    })
}

/// A reply the turn's cancel cut short.
fn is_cancelled_reply(message: &StoredMessage) -> bool {
    matches!(
        message.body,
        MessageBody::Reply {
            end: ReplyEnd::Cancelled,
            ..
        }
    )
}

fn digest(arguments: &serde_json::Value) -> Result<String, StoreError> {
    let bytes = serde_json::to_vec(arguments)
        .map_err(|_| StoreError::Rejected("cannot encode a tool call's arguments".into()))?;
    let hash = Sha256::digest(&bytes);
    Ok(hash.iter().map(|b| format!("{b:02x}")).collect())
}

/// The outcome of a call an earlier lease left open, as the append that
/// settles it writes it.
pub(super) fn interrupted() -> Result<String, StoreError> {
    encode(&OutcomeJson::Denied {
        reason: TURN_INTERRUPTED,
    })
}

/// One move of one call: its row created, or moved on unless it has ended
/// (a late move never takes a settled call back); only for a writable
/// session (the fence as an append's, the session's row locked against a
/// concurrent fence raise), which the count says.
const RECORD: &str = "WITH s AS (
         SELECT key FROM sessions
         WHERE id = $1 AND turn_fence <= COALESCE($2::bigint, turn_fence)
         FOR SHARE),
     moved AS (
         INSERT INTO tool_calls AS t (session_key, turn_id, call_ordinal, call_id, side, name,
                                      args_digest, state, outcome, requested_at, acked_at,
                                      finished_at, updated_at, fence)
         SELECT s.key, $3::text, $4::int, $5::text, $6::text, $7::text, $8::text, $9::text,
                $10::text::jsonb, $11::bigint,
                CASE WHEN $9 = 'acked' THEN $11::bigint END,
                CASE WHEN $9 IN ('answered', 'denied', 'cancelled') THEN $11::bigint END,
                $11::bigint, $2::bigint
         FROM s
         ON CONFLICT (session_key, turn_id, call_ordinal) DO UPDATE
         SET state = EXCLUDED.state, outcome = EXCLUDED.outcome,
             acked_at = COALESCE(t.acked_at, EXCLUDED.acked_at),
             finished_at = EXCLUDED.finished_at, updated_at = EXCLUDED.updated_at,
             fence = EXCLUDED.fence
         WHERE t.state IN ('requested', 'acked', 'running') AND EXCLUDED.state <> 'requested')
     SELECT count(*) FROM s";

impl PgStore {
    /// [`agentwire_core::SessionStore::record_call`]: one statement.
    pub(super) async fn record(
        &self,
        step: &CallMove<'_>,
        fence: Option<Fence>,
    ) -> Result<(), StoreError> {
        let fence = fence.map(super::fence_of).transpose()?;
        let call = step.call;
        let turn = step.turn.to_string();
        let ordinal = i32::try_from(step.ordinal)
            .map_err(|_| StoreError::Rejected("a tool call's place out of range".into()))?;
        let outcome = step.outcome.map(outcome_json).transpose()?;
        let what = format!("a tool call of session {}", step.session);
        let rows = self
            .query(
                &what,
                RECORD,
                &[
                    &step.session.as_str(),
                    &fence,
                    &turn,
                    &ordinal,
                    &call.id,
                    &side_name(call.side),
                    &call.name,
                    &digest(&call.arguments)?,
                    &state_name(step.state),
                    &outcome,
                    &step.at.0,
                ],
            )
            .await?;
        let writable: i64 = super::get(&rows[0], 0, &what)?;
        match writable {
            0 => Err(self.why_nothing_written(step.session, &what).await),
            _ => Ok(()),
        }
    }
}

fn side_name(side: ToolSide) -> &'static str {
    match side {
        ToolSide::Server => "server",
        ToolSide::Client => "client",
    }
}

fn state_name(state: CallState) -> &'static str {
    match state {
        CallState::Requested => "requested",
        CallState::Acked => "acked",
        CallState::Answered => "answered",
        CallState::Denied => "denied",
        CallState::Cancelled => "cancelled",
    }
}

/// A settled call's outcome column.
fn outcome_json(outcome: &ToolOutcome) -> Result<String, StoreError> {
    encode(&match outcome {
        ToolOutcome::Ok(_) => OutcomeJson::Ok,
        ToolOutcome::Error(message) => OutcomeJson::Error { message },
        ToolOutcome::Denied(reason) => OutcomeJson::Denied { reason },
    })
}

fn encode(outcome: &OutcomeJson<'_>) -> Result<String, StoreError> {
    serde_json::to_string(outcome)
        .map_err(|_| StoreError::Rejected("cannot encode a tool call's outcome".into()))
}

#[cfg(test)]
mod tests;

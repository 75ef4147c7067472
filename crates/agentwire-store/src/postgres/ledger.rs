//! The tool-call ledger's rows of one turn write (`tool_calls`, migrations 2
//! and 3): one row per call the turn made, server or client side, with how
//! it ended, written in the same statement as the turn's messages.
//!
//! The engine writes a turn's tool records with its terminal (the turn's
//! question may have gone earlier), so each row is written once, already
//! settled: `answered` (the tool ran, well or not), `denied` (it never ran:
//! declined, timed out, or the turn ended before an answer), `cancelled`
//! (the turn was cancelled while the call was open). A turn that never
//! ended (its replica died) wrote no rows: its calls are in the turn log,
//! and its stored failure says how it ended. `requested`, `acked` and
//! `running` are the schema's for a writer that records calls as they open;
//! this one does not, so that a turn stays one round trip.
//!
//! Arguments and results are user data and stay in the messages: a row holds
//! a SHA-256 digest of the arguments and, as its outcome, the status and,
//! for an error or a denial, the server's reason.

use agentwire_core::{MessageBody, ReplyEnd, StoreError, StoredMessage, ToolOutcome, ToolSide};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// The rows, one array per column (`unnest`'s input).
#[derive(Default)]
pub(super) struct CallColumns {
    /// The seq of the call's message: the row's key.
    pub(super) call_seq: Vec<i64>,
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
        let cancelled = messages.iter().any(is_cancelled_reply);
        for message in messages {
            match &message.body {
                MessageBody::User { .. } => question_seq = Some(seq_of(message)?),
                MessageBody::ToolCall {
                    id,
                    name,
                    arguments,
                    side,
                } => {
                    calls.call_seq.push(seq_of(message)?);
                    calls.call_id.push(id.clone());
                    calls.question_seq.push(question_seq);
                    calls.side.push(match side {
                        ToolSide::Server => "server",
                        ToolSide::Client => "client",
                    });
                    calls.name.push(name.clone());
                    calls.args_digest.push(digest(arguments)?);
                    // Settled below by the call's result, if it has one.
                    calls.state.push(match cancelled {
                        true => "cancelled",
                        false => "denied",
                    });
                    calls.outcome.push(None);
                    calls.requested_at.push(message.created_at.0);
                    calls.finished_at.push(Some(message.created_at.0));
                }
                MessageBody::ToolResult { id, outcome } => {
                    // The latest call of that id: a result answers the call
                    // before it.
                    let Some(at) = calls.call_id.iter().rposition(|call| call == id) else {
                        continue;
                    };
                    let (state, json) = match outcome {
                        ToolOutcome::Ok(_) => ("answered", OutcomeJson::Ok),
                        ToolOutcome::Error(message) => ("answered", OutcomeJson::Error { message }),
                        ToolOutcome::Denied(reason) if cancelled => {
                            ("cancelled", OutcomeJson::Denied { reason })
                        }
                        ToolOutcome::Denied(reason) => ("denied", OutcomeJson::Denied { reason }),
                    };
                    calls.state[at] = state;
                    calls.outcome[at] = Some(encode(&json)?);
                    calls.finished_at[at] = Some(message.created_at.0);
                }
                _ => {}
            }
        }
        Ok(calls)
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

fn encode(outcome: &OutcomeJson<'_>) -> Result<String, StoreError> {
    serde_json::to_string(outcome)
        .map_err(|_| StoreError::Rejected("cannot encode a tool call's outcome".into()))
}

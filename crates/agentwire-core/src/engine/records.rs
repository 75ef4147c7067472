//! How a turn's outcome becomes stored records: its tool calls, results and
//! interim text, then its reply or failure, in the order they happened.

use crate::content::{ContentPart, Metadata};
use crate::ids::SessionId;
use crate::session::{MessageRole, StoredMessage};
use crate::time::Timestamp;
use crate::turn::{Reply, ToolOutcome, ToolSide, TurnEvent, TurnFailure};

pub(super) fn tool_records(
    session: &SessionId,
    events: Vec<TurnEvent>,
    at: Timestamp,
) -> Vec<StoredMessage> {
    events
        .into_iter()
        .filter_map(|event| {
            let content = match event {
                TurnEvent::ToolCall(call) => serde_json::json!({
                    "call": {"id": call.id, "name": call.name, "arguments": call.arguments,
                             "side": match call.side { ToolSide::Server => "server", ToolSide::Client => "client" }}
                }),
                TurnEvent::ToolResult { id, outcome, .. } => {
                    let (status, value) = match outcome {
                        ToolOutcome::Ok(v) => ("ok", v),
                        ToolOutcome::Error(e) => ("error", e.into()),
                        ToolOutcome::Denied(r) => ("denied", r.into()),
                    };
                    serde_json::json!({"result": {"id": id, "status": status, "value": value}})
                }
                // Text the model wrote before calling tools.
                TurnEvent::TextDelta(text) => {
                    let metadata = Metadata::from([("step".to_owned(), "interim".to_owned())]);
                    return Some(record(session, MessageRole::Assistant, text, Vec::new(), metadata, at));
                }
                _ => return None,
            };
            Some(record(session, MessageRole::Tool, content.to_string(), Vec::new(), Metadata::new(), at))
        })
        .collect()
}

pub(super) fn terminal_record(
    session: &SessionId,
    result: &Result<Reply, TurnFailure>,
    at: Timestamp,
) -> StoredMessage {
    match result {
        Ok(reply) => record(
            session,
            MessageRole::Assistant,
            reply.text.clone(),
            reply.parts.clone(),
            Metadata::new(),
            at,
        ),
        Err(failure) => {
            let metadata = Metadata::from([("code".to_owned(), failure.code.as_str().to_owned())]);
            record(
                session,
                MessageRole::Error,
                failure.message.clone(),
                Vec::new(),
                metadata,
                at,
            )
        }
    }
}

pub(super) fn record(
    session: &SessionId,
    role: MessageRole,
    content: String,
    parts: Vec<ContentPart>,
    metadata: Metadata,
    at: Timestamp,
) -> StoredMessage {
    StoredMessage {
        session_id: session.clone(),
        seq: 0,
        role,
        content,
        parts,
        metadata,
        created_at: at,
    }
}

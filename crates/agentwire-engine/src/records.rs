//! How a turn's outcome becomes stored records: its tool calls, results and
//! interim text, then its reply or failure, in the order they happened.

use agentwire_core::content::Metadata;
use agentwire_core::ids::SessionId;
use agentwire_core::session::{MessageBody, ReplyEnd, StoredMessage, Via};
use agentwire_core::time::Timestamp;
use agentwire_core::turn::{Reply, TurnEvent, TurnFailure};

pub(super) fn tool_records(
    session: &SessionId,
    events: Vec<TurnEvent>,
    at: Timestamp,
) -> Vec<StoredMessage> {
    events
        .into_iter()
        .filter_map(|event| {
            let body = match event {
                TurnEvent::ToolCall(call) => MessageBody::ToolCall {
                    id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                    side: call.side,
                },
                TurnEvent::ToolResult { id, outcome, .. } => {
                    MessageBody::ToolResult { id, outcome }
                }
                // Text the model wrote before calling tools.
                TurnEvent::TextDelta(text) => MessageBody::Interim { text },
                _ => return None,
            };
            Some(record(session, body, Metadata::new(), at))
        })
        .collect()
}

/// How a turn's handler came to an end.
pub(super) enum Ending {
    Ran(Result<Reply, TurnFailure>),
    /// Cancelled, with the reply as far as it was streamed.
    Cancelled(Reply),
}

/// How a turn ended, once its reply (if any) has moved into its record.
pub(super) enum Ended {
    Completed,
    Failed(TurnFailure),
    Cancelled,
}

/// The record of how the turn ended. A reply moves into it rather than
/// being copied: a large reply is then one copy while it is stored, and
/// the terminal event takes it back afterwards ([`reply_of`]).
pub(super) fn terminal_record(
    session: &SessionId,
    ending: Ending,
    at: Timestamp,
) -> (StoredMessage, Ended) {
    // A reply streamed into a `String` has up to twice its length in
    // capacity, and the record lives on in the session's window.
    let reply = |mut reply: Reply, end| {
        reply.text.shrink_to_fit();
        MessageBody::Reply {
            text: reply.text,
            parts: reply.parts,
            end,
        }
    };
    let (body, ended) = match ending {
        Ending::Ran(Ok(done)) => (reply(done, ReplyEnd::Complete), Ended::Completed),
        Ending::Ran(Err(failure)) => (
            MessageBody::Failure {
                code: failure.code,
                message: failure.message.clone(),
            },
            Ended::Failed(failure),
        ),
        // The reply as far as it was streamed, so the next turn's context
        // and the sessions API show what the user saw.
        Ending::Cancelled(partial) => (reply(partial, ReplyEnd::Cancelled), Ended::Cancelled),
    };
    (record(session, body, Metadata::new(), at), ended)
}

/// The reply a stored terminal record holds (see [`terminal_record`]).
pub(super) fn reply_of(record: Option<StoredMessage>) -> Reply {
    match record.map(|record| record.body) {
        Some(MessageBody::Reply { text, parts, .. }) => Reply { text, parts },
        _ => Reply::text(String::new()),
    }
}

/// A message as the engine stores it, typed ([`Via::Text`]; a voice call
/// marks its own).
pub(super) fn record(
    session: &SessionId,
    body: MessageBody,
    metadata: Metadata,
    at: Timestamp,
) -> StoredMessage {
    StoredMessage {
        session_id: session.clone(),
        seq: 0,
        body,
        via: Via::Text,
        metadata,
        created_at: at,
    }
}

/// The `store.write` span (`agentwire_core::trace`) of one append of `messages`
/// messages, the session's first write when it was not `persisted`.
pub(super) fn write_span(persisted: bool, messages: usize) -> tracing::Span {
    tracing::debug_span!(
        target: agentwire_core::trace::TARGET,
        "store.write",
        db.operation.name = if persisted { "append_messages" } else { "create_session" },
        agentwire.messages = messages,
        error.type = tracing::field::Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_reply_keeps_no_spare_room_in_its_record() {
        let mut text = String::new();
        for _ in 0..100 {
            text.push_str("four ");
        }
        assert!(text.capacity() > text.len());
        let ending = Ending::Ran(Ok(Reply::text(text)));
        let (record, _) = terminal_record(
            &SessionId::minted("s".to_owned()),
            ending,
            Timestamp::from_unix_millis(0),
        );
        let MessageBody::Reply { text, .. } = record.body else {
            panic!("a reply record");
        };
        assert_eq!(text.capacity(), text.len());
    }
}

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
        match outcome {
            ToolOutcome::Ok(_) | ToolOutcome::Error(_) => CallState::Answered,
            ToolOutcome::Denied(_) => CallState::never_ran(cancelled),
        }
    }

    /// How a call that never ran ended: cancelled with its turn, else
    /// denied.
    pub fn never_ran(cancelled: TurnCancelled) -> CallState {
        match cancelled {
            TurnCancelled::Yes => CallState::Cancelled,
            TurnCancelled::No => CallState::Denied,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::log::{Epoch, SessionLog};
    use crate::memory::TurnCaller;
    use crate::scope::ConnectionScope;
    use crate::testing::CountingIds;
    use crate::tools::{ClientAnswer, ClientToolBroker};
    use crate::turn::{ClientToolRequest, ToolSide, TurnContext, TurnInput, TurnSetup};

    /// What a turn told its recorder: (place, tool, state).
    #[derive(Default)]
    struct Moves(parking_lot::Mutex<Vec<(u32, String, CallState)>>);

    #[async_trait]
    impl CallRecorder for Moves {
        async fn record(
            &self,
            ordinal: u32,
            call: &ToolCall,
            state: CallState,
            _outcome: Option<&ToolOutcome>,
        ) {
            self.0.lock().push((ordinal, call.name.clone(), state));
        }
    }

    fn turn(moves: &Arc<Moves>, broker: &Arc<ClientToolBroker>) -> TurnContext {
        let log = SessionLog::new(Epoch(1));
        TurnContext::new(TurnSetup {
            session_id: SessionId::parse("s-1").unwrap(),
            input: TurnInput::default(),
            history: Arc::default(),
            cancel: Default::default(),
            scope: ConnectionScope::new(),
            caller: Arc::new(TurnCaller {
                owner: None,
                memory_facet: None,
            }),
            writer: log.start_turn("agent", Some(0)),
            client_tools: broker.clone(),
            ids: Arc::new(CountingIds::default()),
            ack_timeout: Duration::from_secs(5),
            result_timeout: Duration::from_secs(5),
            media: None,
            calls: Some(moves.clone()),
        })
    }

    fn server_call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "search".into(),
            arguments: json!({}),
            side: ToolSide::Server,
            consent_message: None,
            categories: Vec::new(),
        }
    }

    fn client_request(id: &str) -> ClientToolRequest {
        ClientToolRequest {
            id: id.into(),
            name: "get_location".into(),
            ..ClientToolRequest::default()
        }
    }

    /// Answers the client call `id` with `answers` once it is pending.
    async fn client(broker: &ClientToolBroker, id: &str, answers: Vec<ClientAnswer>) {
        while !broker.is_pending(id) {
            tokio::task::yield_now().await;
        }
        for answer in answers {
            assert!(broker.answer(id, answer));
        }
    }

    fn moves(moves: &Moves) -> Vec<(u32, &'static str, CallState)> {
        let names = ["search", "get_location"];
        let seen = moves.0.lock();
        seen.iter()
            .map(|(at, name, state)| (*at, *names.iter().find(|n| *n == name).unwrap(), *state))
            .collect()
    }

    #[tokio::test]
    async fn each_call_is_recorded_requested_then_as_it_moves_in_its_place() {
        let (recorded, broker) = (Arc::new(Moves::default()), ClientToolBroker::new());
        let turn = turn(&recorded, &broker);
        turn.events().tool_call(server_call("s")).await;
        turn.events()
            .tool_result("s", ToolOutcome::Ok(json!(1)))
            .await;
        let answers = vec![ClientAnswer::Ack, ClientAnswer::Result(Ok(json!(2)))];
        let (outcome, ()) = tokio::join!(
            turn.call_client_tool(client_request("c")),
            client(&broker, "c", answers)
        );
        assert_eq!(outcome, ToolOutcome::Ok(json!(2)));
        let declined = vec![ClientAnswer::Nack("no".into())];
        tokio::join!(
            turn.call_client_tool(client_request("d")),
            client(&broker, "d", declined)
        );
        use CallState::*;
        assert_eq!(
            moves(&recorded),
            [
                (0, "search", Requested),
                (0, "search", Answered),
                (1, "get_location", Requested),
                (1, "get_location", Acked),
                (1, "get_location", Answered),
                (2, "get_location", Requested),
                (2, "get_location", Denied),
            ]
        );
    }

    #[tokio::test]
    async fn a_call_open_when_its_turn_is_cancelled_is_recorded_cancelled() {
        let (recorded, broker) = (Arc::new(Moves::default()), ClientToolBroker::new());
        let turn = turn(&recorded, &broker);
        let cancel = turn.cancel.clone();
        let cancelling = async {
            client(&broker, "c", vec![ClientAnswer::Ack]).await;
            while moves(&recorded).len() < 2 {
                tokio::task::yield_now().await;
            }
            cancel.cancel();
        };
        tokio::join!(turn.call_client_tool(client_request("c")), cancelling);
        use CallState::*;
        assert_eq!(
            moves(&recorded),
            [
                (0, "get_location", Requested),
                (0, "get_location", Acked),
                (0, "get_location", Cancelled),
            ]
        );
    }

    #[tokio::test]
    async fn a_delegated_sub_turns_calls_are_not_the_turns_and_are_not_recorded() {
        let (recorded, broker) = (Arc::new(Moves::default()), ClientToolBroker::new());
        let turn = turn(&recorded, &broker);
        let delegate = turn.delegated(TurnInput::default());
        delegate.events().tool_call(server_call("s")).await;
        delegate
            .events()
            .tool_result("s", ToolOutcome::Ok(json!(1)))
            .await;
        assert!(moves(&recorded).is_empty());
    }
}

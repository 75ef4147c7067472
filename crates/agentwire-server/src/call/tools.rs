//! The tools a voice call's model calls: the agent's server tools, run
//! here, and its client tools, asked of the caller's client as a text turn
//! asks them (`tool_call` out; `tool_call_ack`, `tool_result` or
//! `tool_call_nack` back; the agent's `ack_timeout` and
//! `client_tool_timeout`).
//!
//! Each call runs on a task of its own beside the call, so a slow tool or
//! a client that takes its time never holds the caller's audio up; the
//! provider gets the output ([`CallInput::ToolOutput`]) and goes on.
//! Client calls are registered on the call's own broker, not the
//! session's: only a connection that holds the call (the one that opened
//! it, or the one that resumed it) can answer, and the ids are the
//! engine's unguessable ones, not the provider's.

use std::sync::Arc;
use std::time::Duration;

use agentwire_core::realtime::CallInput;
use agentwire_core::{
    ClientCallEnd, ClientToolBroker, ClientToolDecl, ToolBox, ToolCall, ToolOutcome, ToolSide,
    ToolSpec, TurnCaller,
};
use agentwire_engine::VoiceToolStep;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::{CallOutput, CallOwner, Voice};
use crate::AppState;

/// `ToolOutcome::Denied`: the call ended while its client tool waited.
const CALL_ENDED: &str = "the call ended";

/// What a call's model may call, and the steps taken since the last
/// response's end.
pub(super) struct CallTools {
    boxes: Vec<Arc<dyn ToolBox>>,
    client: Vec<ClientToolDecl>,
    /// Where the caller's answers to client calls arrive.
    pub(super) broker: Arc<ClientToolBroker>,
    ack_timeout: Duration,
    result_timeout: Duration,
    steps: Mutex<Vec<VoiceToolStep>>,
}

/// The call's side of a client tool call: frames for the client go back
/// to the call's task, which sends them (or keeps them while parked).
pub(super) type ToClient = mpsc::Sender<CallOutput>;

impl CallTools {
    /// The agent's tools for `owner`'s call: server tool sources opened
    /// (one that cannot open is left out, logged, as a text turn goes on
    /// without it), and the caller's own (memory) for its caller.
    pub(super) async fn open(voice: &Voice, owner: &CallOwner) -> CallTools {
        let mut boxes = Vec::with_capacity(voice.tools.len() + voice.caller_tools.len());
        for source in &voice.tools {
            match source.open().await {
                Ok(tools) => boxes.push(tools),
                Err(e) => {
                    tracing::warn!(tool = source.name(), error = %e, "a voice call's tool could not open")
                }
            }
        }
        let caller = Arc::new(TurnCaller {
            owner: owner.owner.clone(),
            memory_facet: owner.memory_facet.clone(),
        });
        for source in &voice.caller_tools {
            boxes.push(source.open_for(caller.clone(), owner.session.clone()));
        }
        CallTools {
            boxes,
            client: voice.client_tools.clone(),
            broker: ClientToolBroker::new(),
            ack_timeout: owner.agent.ack_timeout,
            result_timeout: owner.agent.client_tool_timeout,
            steps: Mutex::default(),
        }
    }

    /// What the provider's model is offered: the client's tools, then the
    /// server's.
    pub(super) fn specs(&self) -> Vec<ToolSpec> {
        let client = self.client.iter().map(|c| c.spec.clone());
        let server = self.boxes.iter().flat_map(|b| b.specs().iter().cloned());
        client.chain(server).collect()
    }

    /// The steps finished since the last call, in order.
    pub(super) fn take_steps(&self) -> Vec<VoiceToolStep> {
        std::mem::take(&mut *self.steps.lock())
    }

    /// Runs the model's call `call_id` beside the call and gives the
    /// provider its output; the step joins the response's exchange.
    pub(super) fn spawn(
        self: &Arc<Self>,
        state: &Arc<AppState>,
        call: ProviderToolCall,
        input: mpsc::Sender<CallInput>,
        to_client: ToClient,
    ) {
        let tools = self.clone();
        let state = state.clone();
        tokio::spawn(async move {
            let ProviderToolCall {
                call_id,
                name,
                arguments,
            } = call;
            let (id, side, outcome) = match tools.client.iter().find(|c| c.spec.name == name) {
                Some(decl) => {
                    let id = state.engine().new_call_id();
                    let outcome = tools
                        .ask_client(decl, &id, arguments.clone(), &to_client)
                        .await;
                    (id, ToolSide::Client, outcome)
                }
                None => {
                    let outcome = tools.run_server_tool(&name, arguments.clone()).await;
                    (call_id.clone(), ToolSide::Server, outcome)
                }
            };
            let output = match &outcome {
                ToolOutcome::Ok(value) => value.to_string(),
                ToolOutcome::Error(e) | ToolOutcome::Denied(e) => {
                    serde_json::json!({ "error": e }).to_string()
                }
            };
            tools.steps.lock().push(VoiceToolStep {
                id,
                name,
                arguments,
                side,
                outcome,
            });
            let _ = input.send(CallInput::ToolOutput { call_id, output }).await;
        });
    }

    async fn run_server_tool(&self, name: &str, arguments: serde_json::Value) -> ToolOutcome {
        let tool = self
            .boxes
            .iter()
            .find(|b| b.specs().iter().any(|s| s.name == name));
        match tool {
            Some(tool) => match tool.call(name, arguments).await {
                Ok(value) => ToolOutcome::Ok(value),
                Err(e) => ToolOutcome::Error(e),
            },
            None => ToolOutcome::Error(format!("no tool named {name}")),
        }
    }

    /// Asks the caller's client to run `decl` as call `id` and waits for
    /// its answer, as a text turn does; a client that does not answer in
    /// time is told the call is over (`tool_result` with the error), and
    /// the model hears it was denied.
    async fn ask_client(
        &self,
        decl: &ClientToolDecl,
        id: &str,
        arguments: serde_json::Value,
        to_client: &ToClient,
    ) -> ToolOutcome {
        if let Err(problem) = decl.validator.validate(&arguments) {
            return ToolOutcome::Error(format!("invalid arguments: {problem}"));
        }
        let pending = self.broker.expect(id);
        let call = ToolCall {
            id: id.to_owned(),
            name: decl.spec.name.clone(),
            arguments,
            side: ToolSide::Client,
            consent_message: decl.consent_message.clone(),
            categories: decl.categories.clone(),
        };
        if to_client.send(CallOutput::ToolCall(call)).await.is_err() {
            return ToolOutcome::Denied(CALL_ENDED.to_owned());
        }
        let end = tokio::select! {
            end = pending.end(self.ack_timeout, self.result_timeout) => end,
            // The call's task is gone: nobody could hear an answer.
            () = to_client.closed() => return ToolOutcome::Denied(CALL_ENDED.to_owned()),
        };
        match end {
            ClientCallEnd::Answered(outcome) => outcome,
            ClientCallEnd::Expired(reason) => {
                let outcome = ToolOutcome::Denied(reason);
                let told = CallOutput::ToolResult {
                    id: id.to_owned(),
                    outcome: outcome.clone(),
                };
                let _ = to_client.send(told).await;
                outcome
            }
        }
    }
}

/// A tool call as the provider made it.
pub(super) struct ProviderToolCall {
    pub(super) call_id: String,
    pub(super) name: String,
    pub(super) arguments: serde_json::Value,
}

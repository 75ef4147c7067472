//! The model runtime: the `runtime` handler, which answers a turn with a
//! language model, running the tools the model calls.
//!
//! A turn rebuilds the conversation the model sees from the session's stored
//! messages ([`context`]), then loops: ask the model; if it calls tools, run
//! them (server tools here, client tools through the connection) and ask
//! again with their results; stop when it answers, or at `max_rounds`.

mod context;
mod toolbox;

use std::sync::Arc;

use agentwire_core::{
    ClientToolRequest, ErrorCode, Handler, ModelMessage, ModelProvider, ModelRequest,
    ModelToolCall, Reply, TextSink, ToolCall, ToolOutcome, ToolSide, ToolSource, ToolSpec,
    TurnContext, TurnFailure,
};
use async_trait::async_trait;

pub use context::MetadataTemplate;

/// Validates a tool's arguments against its schema; the message goes to the model.
pub trait ArgumentValidator: Send + Sync {
    fn validate(&self, arguments: &serde_json::Value) -> Result<(), String>;
}

/// A tool the client runs, as declared in the config.
#[derive(Clone)]
pub struct ClientToolDecl {
    pub spec: ToolSpec,
    pub consent_message: Option<String>,
    pub categories: Vec<String>,
    pub validator: Arc<dyn ArgumentValidator>,
}

/// An agent with `handler: runtime`.
pub struct RuntimeSettings {
    pub agent_name: String,
    /// The system prompt.
    pub instructions: Option<String>,
    pub provider: Arc<dyn ModelProvider>,
    pub server_tools: Vec<Arc<dyn ToolSource>>,
    pub client_tools: Vec<ClientToolDecl>,
    /// Tool-call rounds one turn may run before it stops with `MAX_ROUNDS_EXCEEDED`.
    pub max_rounds: u32,
    /// Rendered from each user message's metadata and appended to its text
    /// in what the model sees.
    pub metadata_template: Option<MetadataTemplate>,
}

pub struct RuntimeHandler {
    settings: RuntimeSettings,
}

impl RuntimeHandler {
    pub fn new(settings: RuntimeSettings) -> RuntimeHandler {
        RuntimeHandler { settings }
    }
}

#[async_trait]
impl Handler for RuntimeHandler {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        let settings = &self.settings;
        let boxes =
            toolbox::open_for_connection(turn, &settings.agent_name, &settings.server_tools).await;
        let tools = Tools {
            client: &settings.client_tools,
            server: &boxes,
        };
        let mut request = ModelRequest {
            system: settings.instructions.clone(),
            messages: context::rebuild(&turn.history, settings.metadata_template.as_ref()),
            tools: tools.specs(),
            scenario: turn.input.metadata.get("mock_scenario").cloned(),
        };
        let sink = StreamToClient(turn);
        let mut rounds = 0;
        loop {
            let reply = settings
                .provider
                .complete(&request, &sink)
                .await
                .map_err(|e| TurnFailure::new(e.code(), e.message))?;
            if reply.tool_calls.is_empty() {
                return Ok(Reply::text(reply.text));
            }
            if rounds == settings.max_rounds {
                return Err(TurnFailure::new(
                    ErrorCode::MaxRoundsExceeded,
                    format!(
                        "the turn stopped at the agent's limit of {} tool-call rounds",
                        settings.max_rounds
                    ),
                ));
            }
            rounds += 1;
            if !reply.text.is_empty() {
                turn.events().record_interim_text(reply.text.clone());
            }
            let calls: Vec<ModelToolCall> = reply
                .tool_calls
                .into_iter()
                .map(|call| ModelToolCall {
                    id: turn.new_call_id(),
                    ..call
                })
                .collect();
            request.messages.push(ModelMessage::Assistant {
                text: reply.text,
                tool_calls: calls.clone(),
            });
            for call in calls {
                let outcome = tools.run(turn, &call).await;
                request
                    .messages
                    .push(context::tool_message(&call.id, &call.name, &outcome));
            }
        }
    }
}

/// The tools one turn can call.
struct Tools<'a> {
    client: &'a [ClientToolDecl],
    server: &'a [toolbox::OpenBox],
}

impl Tools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        let client = self.client.iter().map(|c| c.spec.clone());
        let server = self
            .server
            .iter()
            .flat_map(|b| b.tool_box.specs().iter().cloned());
        client.chain(server).collect()
    }

    /// Runs one call. Every failure becomes an error result for the model;
    /// none ends the turn.
    async fn run(&self, turn: &TurnContext, call: &ModelToolCall) -> ToolOutcome {
        if let Some(decl) = self.client.iter().find(|c| c.spec.name == call.name) {
            if let Err(problem) = decl.validator.validate(&call.arguments) {
                return self
                    .server_side_failure(turn, call, format!("invalid arguments: {problem}"))
                    .await;
            }
            let request = ClientToolRequest {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                consent_message: decl.consent_message.clone(),
                categories: decl.categories.clone(),
            };
            return turn.call_client_tool(request).await;
        }
        let owner = self
            .server
            .iter()
            .find(|b| b.tool_box.specs().iter().any(|s| s.name == call.name));
        let Some(owner) = owner else {
            return self
                .server_side_failure(turn, call, format!("unknown tool {:?}", call.name))
                .await;
        };
        announce(turn, call).await;
        let outcome = match owner
            .tool_box
            .call(&call.name, call.arguments.clone())
            .await
        {
            Ok(value) => ToolOutcome::Ok(value),
            Err(error) => ToolOutcome::Error(error),
        };
        turn.events().tool_result(&call.id, outcome.clone()).await;
        outcome
    }

    /// A call that could not run: recorded like any server tool call, so the
    /// context shows the model what it asked and why it failed.
    async fn server_side_failure(
        &self,
        turn: &TurnContext,
        call: &ModelToolCall,
        error: String,
    ) -> ToolOutcome {
        announce(turn, call).await;
        let outcome = ToolOutcome::Error(error);
        turn.events().tool_result(&call.id, outcome.clone()).await;
        outcome
    }
}

async fn announce(turn: &TurnContext, call: &ModelToolCall) {
    turn.events()
        .tool_call(ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            side: ToolSide::Server,
            consent_message: None,
            categories: Vec::new(),
        })
        .await;
}

/// Streams the model's text to the client as it arrives.
struct StreamToClient<'a>(&'a TurnContext);

#[async_trait]
impl TextSink for StreamToClient<'_> {
    async fn text(&self, delta: &str) {
        self.0.events().text_delta(delta).await;
    }
}

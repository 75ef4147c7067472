//! The model runtime: the `runtime` handler, which answers a turn with a
//! language model, running the tools the model calls.
//!
//! A turn rebuilds the conversation the model sees from the session's stored
//! messages ([`context`]), then loops: ask the model; if it calls tools, run
//! them (server tools here, client tools through the connection) and ask
//! again with their results; stop when it answers, or at `max_rounds`.
//! Media the conversation names by storage reference is resolved for each
//! model call ([`TurnContext::resolve_media`]), never kept in the loop.
//!
//! **Teams** ([`team`]): an agent with delegations gets a `delegate_agent`
//! tool, which runs another agent's handler on a sub-turn and returns its
//! answer as the tool's result; an agent with handoffs gets a
//! `transfer_to_<agent>` tool per target, which hands the rest of the turn,
//! with the conversation so far, to that agent's model and tools.

mod context;
pub mod memory;
mod summary;
mod team;
#[cfg(test)]
mod tests;
mod toolbox;

use std::borrow::Cow;
use std::sync::Arc;

use agentwire_core::{
    ClientToolRequest, ErrorCode, Handler, ModelMessage, ModelProvider, ModelReply, ModelRequest,
    ModelToolCall, ProviderError, Reply, SessionTools, TextSink, ToolCall, ToolOutcome, ToolSide,
    ToolSource, ToolSpec, TurnContext, TurnFailure,
};
use async_trait::async_trait;
use tracing::Instrument;

pub use agentwire_core::{ArgumentValidator, ClientToolDecl};
pub use context::MetadataTemplate;
pub use summary::{ModelSummarizer, SUMMARY_INSTRUCTIONS, SUMMARY_SCENARIO};
pub use team::{DELEGATE_TOOL, Delegation, Handoff, Peer, Roster, transfer_tool_name};

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
    /// The most stored messages of the session the model is shown: the
    /// latest, from a user message on. Bounds each turn's work and the
    /// model's context however long a session grows.
    pub context_messages: usize,
    /// Rendered from each user message's metadata and appended to its text
    /// in what the model sees.
    pub metadata_template: Option<MetadataTemplate>,
    /// Agents this one may ask through `delegate_agent`.
    pub delegations: Vec<Delegation>,
    /// Agents this one may hand the turn to, each through `transfer_to_<name>`.
    pub handoffs: Vec<Handoff>,
    /// Where the targets of `delegations` and `handoffs` are found.
    pub roster: Arc<Roster>,
    /// The agent's memory tools; `None`: memory is off for it.
    pub memory: Option<memory::MemorySettings>,
    /// The system prompt of each turn where it depends on the turn (a
    /// pack's template with variables a message sets); wins over
    /// `instructions`.
    pub turn_instructions: Option<Arc<dyn TurnInstructions>>,
    /// How long each message the model writes may be (a pack's
    /// `max_length` validator); `None`: no limit.
    pub reply_limit: Option<ReplyLimit>,
}

/// Instructions made for each turn from what its message carries.
pub trait TurnInstructions: Send + Sync + 'static {
    /// The system prompt for a turn whose message has `metadata`, or why
    /// the turn cannot run.
    fn render(&self, metadata: &agentwire_core::Metadata) -> Result<String, TurnFailure>;
}

/// A limit on the characters of each message the model writes: what
/// passes it is never streamed to the client nor stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyLimit {
    pub max_characters: usize,
    pub past_it: PastLimit,
}

/// What a message longer than a [`ReplyLimit`] does to its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PastLimit {
    /// The message is cut at the limit and the turn goes on.
    Cut,
    /// The turn fails (`INTERNAL_ERROR`) with this message, after the text
    /// up to the limit was streamed.
    Fail(String),
}

impl ReplyLimit {
    /// `text` held to the limit: cut, or the turn's failure.
    fn hold(&self, text: &mut String) -> Result<(), TurnFailure> {
        let Some((cut, _)) = text.char_indices().nth(self.max_characters) else {
            return Ok(());
        };
        match &self.past_it {
            PastLimit::Cut => {
                text.truncate(cut);
                Ok(())
            }
            PastLimit::Fail(message) => Err(TurnFailure::new(ErrorCode::Internal, message.clone())),
        }
    }
}

/// `agents[].context_messages` when not configured: the engine's default
/// window, so a runtime agent keeps as much live as a scripted one.
pub const DEFAULT_CONTEXT_MESSAGES: usize = agentwire_core::DEFAULT_HISTORY_WINDOW;

pub struct RuntimeHandler {
    settings: RuntimeSettings,
    /// The tools prepared for each session (its sandboxes'), offered beside
    /// the agent's own.
    session_tools: Option<Arc<dyn SessionTools>>,
}

impl RuntimeHandler {
    pub fn new(settings: RuntimeSettings) -> RuntimeHandler {
        RuntimeHandler {
            settings,
            session_tools: None,
        }
    }

    /// The handler, offering each turn the tools `tools` prepared for its
    /// session too.
    pub fn with_session_tools(self, tools: Arc<dyn SessionTools>) -> RuntimeHandler {
        RuntimeHandler {
            session_tools: Some(tools),
            ..self
        }
    }
}

/// How one agent's part of a turn ended.
enum Answer {
    Reply(Reply),
    /// The agent handed the rest of the turn to another.
    HandOff(Arc<RuntimeHandler>),
}

#[async_trait]
impl Handler for RuntimeHandler {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        let mut messages = context::rebuild(
            &turn.history,
            self.settings.metadata_template.as_ref(),
            self.settings.context_messages,
        );
        let mut rounds = 0;
        let mut handed_to: Option<Arc<RuntimeHandler>> = None;
        loop {
            let agent = handed_to.as_deref().unwrap_or(self);
            match agent.answer(turn, &mut messages, &mut rounds).await? {
                Answer::Reply(reply) => return Ok(reply),
                Answer::HandOff(target) => {
                    let delegated = turn.delegation_depth() > 0;
                    turn.events()
                        .agent_switched(&target.settings.agent_name, delegated)
                        .await;
                    handed_to = Some(target);
                }
            }
        }
    }

    /// The engine keeps live, and loads on resume, just what the model is
    /// shown.
    fn history_window(&self) -> usize {
        self.settings.context_messages
    }
}

impl RuntimeHandler {
    /// This agent's tool loop on the conversation so far: until it answers,
    /// hands off, or the turn runs out of rounds (counted across handoffs).
    async fn answer<'t>(
        &self,
        turn: &'t TurnContext,
        messages: &mut Vec<ModelMessage<'t>>,
        rounds: &mut u32,
    ) -> Result<Answer, TurnFailure> {
        let settings = &self.settings;
        let mut boxes =
            toolbox::open_for_connection(turn, &settings.agent_name, &settings.server_tools).await;
        if let Some(session_tools) = &self.session_tools {
            boxes.extend(toolbox::for_session(session_tools.as_ref(), turn).await);
        }
        let tools = Tools {
            client: &settings.client_tools,
            server: &boxes,
            team: team::TeamTools::new(settings),
            memory: settings
                .memory
                .as_ref()
                .map(|m| memory::MemoryTools::new(m, m.scope_agent_or(&settings.agent_name))),
        };
        let instructions = match &settings.turn_instructions {
            Some(made) => Some(made.render(&turn.input.metadata)?),
            None => settings.instructions.clone(),
        };
        let system = match &settings.memory {
            Some(memory) => {
                let agent = memory.scope_agent_or(&settings.agent_name);
                memory::with_note(instructions, memory, agent, turn).await
            }
            None => instructions,
        };
        let mut request = ModelRequest {
            system,
            messages: std::mem::take(messages),
            tools: tools.specs(),
            metadata: Cow::Borrowed(&turn.input.metadata),
        };
        loop {
            // Stored media is resolved for this call alone (fresh URLs,
            // bytes dropped after it); `request` keeps only the references.
            let call = turn.resolve_media(&request).await;
            let limit = settings.reply_limit.as_ref().map(|l| l.max_characters);
            let mut reply = model_call(settings.provider.as_ref(), &call, turn, limit)
                .await
                .map_err(|e| TurnFailure::new(e.code(), e.message))?;
            drop(call);
            if let Some(limit) = &settings.reply_limit {
                limit.hold(&mut reply.text)?;
            }
            if reply.tool_calls.is_empty() {
                return Ok(Answer::Reply(Reply::text(reply.text)));
            }
            if *rounds == settings.max_rounds {
                return Err(TurnFailure::new(
                    ErrorCode::MaxRoundsExceeded,
                    format!(
                        "the turn stopped at the agent's limit of {} tool-call rounds",
                        settings.max_rounds
                    ),
                ));
            }
            *rounds += 1;
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
                text: reply.text.into(),
                tool_calls: calls.clone(),
            });
            let handoff = tools
                .run_round(turn, settings, calls, &mut request.messages)
                .await;
            if let Some(target) = handoff {
                *messages = request.messages;
                return Ok(Answer::HandOff(target));
            }
        }
    }
}

/// The tools one turn can call.
struct Tools<'a> {
    client: &'a [ClientToolDecl],
    server: &'a [toolbox::OpenBox],
    /// `delegate_agent` and `transfer_to_*`; they win over a configured
    /// tool of the same name.
    team: team::TeamTools<'a>,
    /// `memory__*`, when the agent has memory; they win over a configured
    /// tool of the same name too.
    memory: Option<memory::MemoryTools<'a>>,
}

impl Tools<'_> {
    /// Who runs `name`, as traces name it: `client`, `team`, or the kind
    /// of the server tool's source (`http`, `mcp`).
    fn side(&self, name: &str) -> &'static str {
        if self.team.delegates(name) || self.team.handoff(name).is_some() {
            return "team";
        }
        if self.memory.as_ref().is_some_and(|m| m.handles(name)) {
            return "memory";
        }
        if self.client.iter().any(|c| c.spec.name == name) {
            return "client";
        }
        self.server
            .iter()
            .find(|b| b.tool_box.specs().iter().any(|s| s.name == name))
            .map_or("unknown", |b| b.kind)
    }

    fn specs(&self) -> Vec<ToolSpec> {
        let client = self.client.iter().map(|c| c.spec.clone());
        let server = self
            .server
            .iter()
            .flat_map(|b| b.tool_box.specs().iter().cloned());
        let memory = self.memory.iter().flat_map(|m| m.specs().iter().cloned());
        client
            .chain(server)
            .chain(self.team.specs())
            .chain(memory)
            .collect()
    }

    /// Runs a round's calls in order, each traced, and adds their results
    /// to `messages`. The agent a `transfer_to_*` call hands the turn to,
    /// if one did.
    async fn run_round(
        &self,
        turn: &TurnContext,
        settings: &RuntimeSettings,
        calls: Vec<ModelToolCall>,
        messages: &mut Vec<ModelMessage<'_>>,
    ) -> Option<Arc<RuntimeHandler>> {
        let mut handoff = None;
        for call in calls {
            let span = tracing::debug_span!(
                target: agentwire_core::trace::TARGET,
                "execute_tool",
                gen_ai.tool.name = %call.name,
                agentwire.tool.side = self.side(&call.name),
                agentwire.tool.outcome = tracing::field::Empty,
            );
            let outcome = match self.team.handoff(&call.name) {
                Some(target) => {
                    team::hand_off(turn, settings, &call, target, &mut handoff)
                        .instrument(span.clone())
                        .await
                }
                None => {
                    self.run(turn, settings, &call)
                        .instrument(span.clone())
                        .await
                }
            };
            span.record("agentwire.tool.outcome", outcome_label(&outcome));
            messages.push(context::tool_message(&call.id, &call.name, &outcome).into_owned());
        }
        handoff
    }

    /// Runs one call. Every failure becomes an error result for the model;
    /// none ends the turn.
    async fn run(
        &self,
        turn: &TurnContext,
        settings: &RuntimeSettings,
        call: &ModelToolCall,
    ) -> ToolOutcome {
        if self.team.delegates(&call.name) {
            return team::delegate(turn, settings, call).await;
        }
        if let Some(memory) = self.memory.as_ref().filter(|m| m.handles(&call.name)) {
            announce(turn, call).await;
            let outcome = memory.run(turn, call).await;
            turn.events().tool_result(&call.id, outcome.clone()).await;
            return outcome;
        }
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

pub(crate) async fn announce(turn: &TurnContext, call: &ModelToolCall) {
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

/// One model call, in its `chat` span: usage and the time to the first
/// token recorded when it ends. Text past `limit` characters is not
/// streamed.
async fn model_call(
    provider: &dyn ModelProvider,
    request: &ModelRequest<'_>,
    turn: &TurnContext,
    limit: Option<usize>,
) -> Result<ModelReply, ProviderError> {
    let span = tracing::debug_span!(
        target: agentwire_core::trace::TARGET,
        "chat",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider.provider_name(),
        gen_ai.request.model = provider.model(),
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        agentwire.time_to_first_token_ms = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    let sink = StreamToClient {
        turn,
        started: std::time::Instant::now(),
        first_token: std::sync::OnceLock::new(),
        room: limit.map(std::sync::atomic::AtomicUsize::new),
    };
    let reply = provider
        .complete(request, &sink)
        .instrument(span.clone())
        .await;
    if let Some(first) = sink.first_token.get() {
        span.record("agentwire.time_to_first_token_ms", first.as_millis() as u64);
    }
    match &reply {
        Ok(reply) => {
            if let Some(usage) = reply.usage {
                span.record("gen_ai.usage.input_tokens", usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            }
        }
        Err(e) => {
            span.record("error.type", e.code().as_str());
        }
    }
    reply
}

fn outcome_label(outcome: &ToolOutcome) -> &'static str {
    match outcome {
        ToolOutcome::Ok(_) => "ok",
        ToolOutcome::Error(_) => "error",
        ToolOutcome::Denied(_) => "denied",
    }
}

/// Streams the model's text to the client as it arrives, noting when the
/// first of it came; with a limit, only as many characters as `room` has
/// left.
struct StreamToClient<'a> {
    turn: &'a TurnContext,
    started: std::time::Instant,
    first_token: std::sync::OnceLock<std::time::Duration>,
    room: Option<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl TextSink for StreamToClient<'_> {
    async fn text(&self, delta: &str) {
        self.first_token.get_or_init(|| self.started.elapsed());
        let Some(room) = &self.room else {
            self.turn.events().text_delta(delta).await;
            return;
        };
        // One model call's text comes in order, one delta at a time.
        let left = room.load(std::sync::atomic::Ordering::Relaxed);
        let end = delta
            .char_indices()
            .nth(left)
            .map_or(delta.len(), |(i, _)| i);
        let kept = &delta[..end];
        room.store(
            left - kept.chars().count(),
            std::sync::atomic::Ordering::Relaxed,
        );
        if !kept.is_empty() {
            self.turn.events().text_delta(kept).await;
        }
    }
}

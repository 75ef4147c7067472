//! A turn: one accepted user message, the handler that answers it and the
//! events it emits on the way to exactly one terminal event.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::assets::MediaResolver;
use crate::content::{ContentPart, Metadata};
use crate::error::ErrorCode;
use crate::ids::{IdSource, SessionId};
use crate::ledger::{CallRecorder, CallState, TurnCancelled};
use crate::log::TurnWriter;
use crate::memory::TurnCaller;
use crate::model::ModelRequest;
use crate::session::{MessageBody, StoredMessage, Via};
use crate::tools::{ClientCallEnd, ClientToolBroker};

/// What the user sent, as the handler sees it.
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    /// The effective text: the text parts joined, else `content`.
    pub text: String,
    pub parts: Vec<ContentPart>,
    pub metadata: Metadata,
}

/// Which side runs a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSide {
    Server,
    Client,
}

/// A tool call a handler made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    pub side: ToolSide,
    pub consent_message: Option<String>,
    pub categories: Vec<String>,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Ok(serde_json::Value),
    /// The tool ran and failed.
    Error(String),
    /// The tool never ran: declined, or not answered in time.
    Denied(String),
}

/// The final answer of a successful turn. `parts`, when present, take
/// precedence over `text` on the wire.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reply {
    pub text: String,
    pub parts: Vec<ContentPart>,
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: text.into(),
            parts: Vec::new(),
        }
    }
}

/// Why a turn failed. `message` is shown to the client as it is, so it must
/// never carry secrets or a provider's response body.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnFailure {
    pub code: ErrorCode,
    pub message: String,
}

/// The text of the generic internal error, on every dialect: it says
/// nothing about the cause, which only the server's log holds.
pub const INTERNAL_ERROR_TEXT: &str = "internal server error";

impl TurnFailure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> TurnFailure {
        TurnFailure {
            code,
            message: message.into(),
        }
    }

    /// The generic failure for anything the client cannot act on.
    pub fn internal() -> TurnFailure {
        TurnFailure::new(ErrorCode::Internal, INTERNAL_ERROR_TEXT)
    }
}

/// A piece of a media stream a turn sends to the client.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaChunk {
    pub media_id: String,
    pub mime_type: String,
    /// Position in the stream, from 0.
    pub sequence: u32,
    /// The last chunk of this media stream.
    pub is_last: bool,
    pub data: Vec<u8>,
}

/// The audio format of a realtime session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudioFormat {
    pub codec: String,
    pub sample_rate: u32,
    pub channels: u32,
}

/// Everything a turn emits, in order. Exactly one of `Completed`, `Failed`
/// and `Cancelled` ends every turn.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// The first entry of every turn in the session's log ([`crate::log`]):
    /// `agent` answers it. Dialects that do not number events skip it.
    TurnStarted {
        agent: String,
        /// The store seq of the turn's question, when the turn answers
        /// one: how a replica ending another's orphaned turn finds whether
        /// that turn's end was stored before its replica died.
        question: Option<u64>,
    },
    TextDelta(String),
    ToolCall(ToolCall),
    /// A server tool's outcome, or a client call denied because the client
    /// did not answer in time (the client is told so it stops waiting).
    /// Outcomes the client itself sent are recorded but not echoed.
    ToolResult {
        id: String,
        outcome: ToolOutcome,
        side: ToolSide,
    },
    Media(MediaChunk),
    /// Barge-in: the client drops buffered audio output.
    Interrupt,
    AudioFormat(AudioFormat),
    /// From here on `name` is answering: a delegation began or ended, or the
    /// turn was handed off. `delegated` says whether `name` answers a
    /// delegation (its text is then not part of the turn's reply) rather than
    /// the user. Not stored; dialects without agent identities ignore it.
    AgentSwitched {
        name: String,
        delegated: bool,
    },
    Completed(Reply),
    Failed(TurnFailure),
    /// The turn was cancelled (the engine's cancel, or the drain gave
    /// up on it): the reply as far as it was streamed to the user.
    Cancelled(Reply),
}

impl TurnEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TurnEvent::Completed(_) | TurnEvent::Failed(_) | TurnEvent::Cancelled(_)
        )
    }
}

/// The answerer of turns: a scripted handler, echo, demo or the model runtime.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs one turn. Progress goes out through `turn.events()`; the returned
    /// value becomes the terminal event, which only the engine emits.
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure>;

    /// How many of the session's latest messages a turn needs to see
    /// ([`crate::session::context_window`]). The engine keeps only that much
    /// of a session in memory and loads only that much on resume, so say
    /// what the handler reads, not more.
    fn history_window(&self) -> usize {
        crate::session::DEFAULT_HISTORY_WINDOW
    }
}

/// What a handler gets for one turn.
pub struct TurnContext {
    pub session_id: SessionId,
    pub input: TurnInput,
    /// The session's latest messages, ending with this turn's user message:
    /// at most the handler's [`Handler::history_window`], from a user message
    /// on (earlier ones are in the store).
    pub history: Arc<Vec<StoredMessage>>,
    /// Cancelled when the turn must stop early (forced shutdown).
    pub cancel: CancellationToken,
    /// The connection the turn runs for: handlers cache per-connection
    /// resources here.
    pub scope: Arc<crate::scope::ConnectionScope>,
    /// Who asked, as the server established it: whose memory the turn may
    /// read and write ([`crate::memory`]).
    pub caller: Arc<TurnCaller>,
    events: EventSink,
    client_tools: ClientTools,
    /// Resolves stored media for each model call; `None`: media is off.
    media: Option<MediaResolver>,
}

/// A tool the client is asked to run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientToolRequest {
    /// From [`TurnContext::new_call_id`]: unguessable, so only the client
    /// that received the call can answer it.
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    pub consent_message: Option<String>,
    pub categories: Vec<String>,
}

/// What a turn needs to call the client's tools.
struct ClientTools {
    broker: Arc<ClientToolBroker>,
    ids: Arc<dyn IdSource>,
    ack_timeout: std::time::Duration,
    result_timeout: std::time::Duration,
}

/// Everything a turn runs with, as its runner (the engine) hands it over:
/// the parts of a [`TurnContext`] a handler reads, and the ones only the
/// context uses (the log writer, the client tool broker, the media).
pub struct TurnSetup {
    pub session_id: SessionId,
    pub input: TurnInput,
    pub history: Arc<Vec<StoredMessage>>,
    pub cancel: CancellationToken,
    pub scope: Arc<crate::scope::ConnectionScope>,
    pub caller: Arc<TurnCaller>,
    /// The turn's entries in its session's log.
    pub writer: TurnWriter,
    /// The session's client calls: where the client's answers arrive.
    pub client_tools: Arc<ClientToolBroker>,
    pub ids: Arc<dyn IdSource>,
    /// How long the client has to acknowledge a call, and to answer it.
    pub ack_timeout: std::time::Duration,
    pub result_timeout: std::time::Duration,
    /// Resolves stored media for each model call; `None`: media is off.
    pub media: Option<MediaResolver>,
    /// Where the turn's tool calls are recorded as they move (the
    /// ledger, [`crate::ledger`]); `None`: nowhere.
    pub calls: Option<Arc<dyn CallRecorder>>,
}

/// Why a cancelled turn's pending client calls ended.
pub const TURN_CANCELLED: &str = "turn cancelled";

/// The failure of a turn that lost its lease (its renewals failed for a
/// whole lease's life, or another replica took the session over): it stops
/// where it is.
pub const TURN_INTERRUPTED: &str = "turn interrupted";

impl TurnContext {
    pub fn new(setup: TurnSetup) -> TurnContext {
        TurnContext {
            session_id: setup.session_id,
            input: setup.input,
            history: setup.history,
            cancel: setup.cancel,
            scope: setup.scope,
            caller: setup.caller,
            events: EventSink::new(setup.writer, setup.calls),
            client_tools: ClientTools {
                broker: setup.client_tools,
                ids: setup.ids,
                ack_timeout: setup.ack_timeout,
                result_timeout: setup.result_timeout,
            },
            media: setup.media,
        }
    }

    pub fn events(&self) -> &EventSink {
        &self.events
    }

    /// How many delegations deep this turn runs: 0 for a user's turn.
    pub fn delegation_depth(&self) -> u32 {
        self.events.delegation_depth
    }

    /// A sub-turn in which another agent answers `input` alone, as a
    /// delegation: same session, connection and client tools, cancelled with
    /// this turn. Its events go to the connection, whose dialect decides what
    /// to show (neither shows the delegate's text: its answer is the call's
    /// result), and are not stored with the turn; only the delegating call
    /// and its outcome are.
    pub fn delegated(&self, input: TurnInput) -> TurnContext {
        let created_at = self
            .history
            .last()
            .map_or(crate::time::Timestamp(0), |m| m.created_at);
        let message = StoredMessage {
            session_id: self.session_id.clone(),
            seq: 0,
            body: MessageBody::User {
                text: input.text.clone(),
                parts: input.parts.clone(),
                attachment: None,
            },
            via: Via::Text,
            metadata: input.metadata.clone(),
            created_at,
        };
        let tools = &self.client_tools;
        TurnContext {
            session_id: self.session_id.clone(),
            input,
            history: Arc::new(vec![message]),
            cancel: self.cancel.child_token(),
            scope: self.scope.clone(),
            caller: self.caller.clone(),
            events: EventSink {
                writer: self.events.writer.clone(),
                streamed: self.events.streamed.clone(),
                tool_log: parking_lot::Mutex::new(Vec::new()),
                recording: false,
                calls: None,
                delegation_depth: self.events.delegation_depth + 1,
            },
            client_tools: ClientTools {
                broker: tools.broker.clone(),
                ids: tools.ids.clone(),
                ack_timeout: tools.ack_timeout,
                result_timeout: tools.result_timeout,
            },
            media: self.media.clone(),
        }
    }

    /// The turn is over for its handler: what its runner needs to end it,
    /// and nothing else the context holds (its history snapshot goes now).
    pub fn into_ending(self) -> EndingTurn {
        EndingTurn {
            events: self.events,
            broker: self.client_tools.broker,
        }
    }

    /// `request` as one model call sends it: media parts that name a stored
    /// item resolved afresh into inline data or a fresh presigned URL
    /// ([`crate::assets`]). Call it for every model call, never once per
    /// turn, and drop the result after the call, so URLs are fresh and no
    /// resolved bytes are kept. Without media storage, `request` itself.
    pub async fn resolve_media<'r, 'h>(
        &self,
        request: &'r ModelRequest<'h>,
    ) -> Cow<'r, ModelRequest<'h>> {
        match &self.media {
            Some(resolver) => resolver.resolve(request).await,
            None => Cow::Borrowed(request),
        }
    }

    /// A fresh, unguessable tool-call id.
    pub fn new_call_id(&self) -> String {
        self.client_tools.ids.call_id()
    }

    /// Asks the client to run a tool and waits for its outcome. A client that
    /// does not answer in time gets the call denied, and is told so.
    pub async fn call_client_tool(&self, request: ClientToolRequest) -> ToolOutcome {
        let id = request.id;
        let mut pending = self.client_tools.broker.expect(&id);
        let call = ToolCall {
            id: id.clone(),
            name: request.name,
            arguments: request.arguments,
            side: ToolSide::Client,
            consent_message: request.consent_message,
            categories: request.categories,
        };
        let ordinal = self.events.call_requested(call).await;
        let (end, cancelled) = tokio::select! {
            end = self.client_call_end(&mut pending, ordinal) => (end, TurnCancelled::No),
            () = self.cancel.cancelled() => {
                (ClientCallEnd::Expired(TURN_CANCELLED.to_owned()), TurnCancelled::Yes)
            }
        };
        // A late answer finds nothing to answer from here on.
        drop(pending);
        let (outcome, told) = match end {
            ClientCallEnd::Answered(outcome) => (outcome, Told::Already),
            ClientCallEnd::Expired(reason) => (ToolOutcome::Denied(reason), Told::NotYet),
        };
        let result = TurnEvent::ToolResult {
            id,
            outcome: outcome.clone(),
            side: ToolSide::Client,
        };
        self.events
            .call_ended(ordinal, result, cancelled, told)
            .await;
        outcome
    }

    /// Waits out a client call's two phases, recording its acknowledgement
    /// between them.
    async fn client_call_end(
        &self,
        pending: &mut crate::tools::PendingClientCall,
        ordinal: Option<u32>,
    ) -> ClientCallEnd {
        let tools = &self.client_tools;
        if let Err(end) = pending.acknowledged(tools.ack_timeout).await {
            return end;
        }
        if let Some(ordinal) = ordinal {
            self.events
                .call_moved(ordinal, CallState::Acked, None)
                .await;
        }
        pending.answered(tools.result_timeout).await
    }
}

/// Whether the client has been told how its call ended: it has when it
/// answered the call itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Told {
    Already,
    NotYet,
}

/// Where a handler sends progress: the turn's entries in its session's log
/// ([`crate::log`]). Appending waits for a reader only at the log's bounds,
/// and only for one that reads; the bounds keep memory flat whatever the
/// readers do.
pub struct EventSink {
    writer: Arc<TurnWriter>,
    /// The text streamed to the user so far (not a delegate's): a
    /// cancelled turn's reply.
    streamed: Arc<parking_lot::Mutex<String>>,
    /// Tool events, kept to be persisted with the turn.
    tool_log: parking_lot::Mutex<Vec<TurnEvent>>,
    /// False in a delegated sub-turn: its work is not stored.
    recording: bool,
    /// Where the turn's calls are recorded as they move; `None` in a
    /// delegated sub-turn (its calls are not the turn's).
    calls: Option<Arc<dyn CallRecorder>>,
    delegation_depth: u32,
}

impl EventSink {
    fn new(writer: TurnWriter, calls: Option<Arc<dyn CallRecorder>>) -> EventSink {
        EventSink {
            writer: Arc::new(writer),
            streamed: Arc::default(),
            tool_log: parking_lot::Mutex::new(Vec::new()),
            recording: true,
            calls,
            delegation_depth: 0,
        }
    }

    pub async fn text_delta(&self, delta: impl Into<String>) {
        let delta = delta.into();
        // A delegate's text is the call's result, not the user's reply.
        if self.delegation_depth == 0 {
            self.streamed.lock().push_str(&delta);
        }
        self.send(TurnEvent::TextDelta(delta)).await;
    }

    pub async fn tool_call(&self, call: ToolCall) {
        self.call_requested(call).await;
    }

    /// The outcome of a server-side tool.
    pub async fn tool_result(&self, id: impl Into<String>, outcome: ToolOutcome) {
        let id = id.into();
        let ordinal = self.ordinal_of(&id);
        let event = TurnEvent::ToolResult {
            id,
            outcome,
            side: ToolSide::Server,
        };
        self.call_ended(ordinal, event, TurnCancelled::No, Told::NotYet)
            .await;
    }

    /// Keeps `call` to be stored with the turn, records it requested, and
    /// sends it (in that order: the ledger knows every call a client could
    /// answer); its place among the turn's calls, when the turn records.
    async fn call_requested(&self, call: ToolCall) -> Option<u32> {
        let ordinal = self.recording.then(|| {
            let mut log = self.tool_log.lock();
            let made = log
                .iter()
                .filter(|event| matches!(event, TurnEvent::ToolCall(_)))
                .count();
            log.push(TurnEvent::ToolCall(call.clone()));
            made as u32
        });
        if let Some(ordinal) = ordinal {
            self.call_moved(ordinal, CallState::Requested, None).await;
        }
        self.send(TurnEvent::ToolCall(call)).await;
        ordinal
    }

    /// Keeps `result` (a [`TurnEvent::ToolResult`] of the call `ordinal`)
    /// to be stored with the turn, records the call ended, and sends the
    /// result unless the client was `told` already.
    async fn call_ended(
        &self,
        ordinal: Option<u32>,
        result: TurnEvent,
        cancelled: TurnCancelled,
        told: Told,
    ) {
        self.record(result.clone());
        if let (Some(ordinal), TurnEvent::ToolResult { outcome, .. }) = (ordinal, &result) {
            let state = CallState::ended(outcome, cancelled);
            self.call_moved(ordinal, state, Some(outcome)).await;
        }
        if told == Told::NotYet {
            self.send(result).await;
        }
    }

    /// Tells the recorder that the turn's call `ordinal` is now `state`.
    async fn call_moved(&self, ordinal: u32, state: CallState, outcome: Option<&ToolOutcome>) {
        let Some(calls) = &self.calls else {
            return;
        };
        let call = {
            let log = self.tool_log.lock();
            let mut made = log.iter().filter_map(|event| match event {
                TurnEvent::ToolCall(call) => Some(call),
                _ => None,
            });
            made.nth(ordinal as usize).cloned()
        };
        if let Some(call) = call {
            calls.record(ordinal, &call, state, outcome).await;
        }
    }

    /// The place among the turn's calls of the latest call `id`: a result
    /// answers the call before it.
    fn ordinal_of(&self, id: &str) -> Option<u32> {
        if !self.recording {
            return None;
        }
        let log = self.tool_log.lock();
        let made = log.iter().filter_map(|event| match event {
            TurnEvent::ToolCall(call) => Some(&call.id),
            _ => None,
        });
        let ordinal = made.enumerate().filter(|(_, call)| *call == id).last()?.0;
        Some(ordinal as u32)
    }

    pub async fn media(&self, chunk: MediaChunk) {
        self.send(TurnEvent::Media(chunk)).await;
    }

    pub async fn interrupt(&self) {
        self.send(TurnEvent::Interrupt).await;
    }

    pub async fn audio_format(&self, format: AudioFormat) {
        self.send(TurnEvent::AudioFormat(format)).await;
    }

    /// `name` answers from here on (see [`TurnEvent::AgentSwitched`]).
    pub async fn agent_switched(&self, name: impl Into<String>, delegated: bool) {
        let name = name.into();
        self.send(TurnEvent::AgentSwitched { name, delegated })
            .await;
    }

    /// Keeps text the model wrote before calling tools, to be stored with
    /// the turn as an interim assistant message. It was streamed already.
    pub fn record_interim_text(&self, text: impl Into<String>) {
        self.record(TurnEvent::TextDelta(text.into()));
    }

    /// Keeps `event` to be stored with the turn without sending it.
    fn record(&self, event: TurnEvent) {
        if self.recording {
            self.tool_log.lock().push(event);
        }
    }

    /// Appends `event`, paced by the log's readers
    /// ([`TurnWriter::append_paced`]: it waits only at the log's bound, for
    /// a reader that reads). An append that does not wait spends a unit of
    /// the task's cooperative budget: a handler that streams from memory
    /// still yields to the other tasks.
    async fn send(&self, event: TurnEvent) {
        self.writer.append_paced(event).await;
        tokio::task::consume_budget().await;
    }
}

/// A turn whose handler is done or was stopped, in its runner's hands: what
/// it streamed, what it recorded, and the one terminal that ends it. Only
/// the runner holds one: a handler sees its turn through `&TurnContext`.
pub struct EndingTurn {
    events: EventSink,
    broker: Arc<ClientToolBroker>,
}

impl EndingTurn {
    /// What the user has been shown of the reply: a cancelled turn's reply.
    pub fn streamed(&self) -> String {
        self.events.streamed.lock().clone()
    }

    /// The tool events to store with the turn, taken (a second call gets
    /// none).
    pub fn take_recorded(&self) -> Vec<TurnEvent> {
        std::mem::take(&mut *self.events.tool_log.lock())
    }

    /// The turn's client calls still waiting for an answer: the client is
    /// told each one is over (`tool_result` [`TURN_CANCELLED`], the frame a
    /// timed-out call gets) and a late answer finds nothing to answer. The
    /// ledger records each `cancelled` when the turn was, else `denied`.
    pub async fn withdraw_client_calls(&self, cancelled: TurnCancelled) {
        for id in self.unanswered_client_calls() {
            self.broker.forget(&id);
            let ordinal = self.events.ordinal_of(&id);
            let result = TurnEvent::ToolResult {
                id,
                outcome: ToolOutcome::Denied(TURN_CANCELLED.to_owned()),
                side: ToolSide::Client,
            };
            let events = &self.events;
            events
                .call_ended(ordinal, result, cancelled, Told::NotYet)
                .await;
        }
    }

    fn unanswered_client_calls(&self) -> Vec<String> {
        let log = self.events.tool_log.lock();
        let asked = log.iter().filter_map(|event| match event {
            TurnEvent::ToolCall(call) if call.side == ToolSide::Client => Some(&call.id),
            _ => None,
        });
        asked
            .filter(|id| {
                !log.iter().any(
                    |event| matches!(event, TurnEvent::ToolResult { id: done, .. } if done == *id),
                )
            })
            .cloned()
            .collect()
    }

    /// Ends the turn with `terminal`: the last entry of the turn.
    pub fn finish(self, terminal: TurnEvent) {
        self.events.writer.finish(terminal);
    }
}

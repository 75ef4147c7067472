//! The OpenAI Realtime API on the realtime port: one WebSocket per provider
//! session, JSON text events both ways, audio as base64 PCM16 at 24 kHz mono
//! (the provider's rate: the server relays it and the client re-captures; no
//! resampling here).
//!
//! - **Open**: `{url}?model=…` with the bearer key, `session.created`, our
//!   `session.update` (instructions, formats, input transcription, server VAD
//!   that creates and interrupts responses, tools), `session.updated`, then
//!   [`CallEvent::Ready`]. Every wait has the connect timeout.
//! - **Events**: GA names and the beta names of audio and transcript deltas;
//!   provider response ids become numbers from 0; unknown event types are
//!   counted ([`OpenAiRealtime::unknown_events`]) and otherwise ignored.
//! - **Barge-in**: the provider cancels the response itself; we tell it how
//!   much of the item the caller can have heard (`conversation.item.truncate`):
//!   min(audio sent, wall time since the item's first audio) minus a jitter
//!   allowance, never more than the item has, skipped at 0.
//! - **Rollover**: the provider ends a session after 60 minutes. After
//!   [`OpenAiRealtimeSettings::session_cap`] a second session is opened beside
//!   the first and, at the first quiet moment (no speech, no response, no tool
//!   call pending), seeded with the transcript as text items and swapped in.
//!   If the first one dies before that moment, the second takes over at once.
//!
//! Errors name the step and an HTTP status, close code or the provider's
//! error type and code: never a body, an error message or the key. Nothing
//! logged carries audio, transcripts, instructions or the key.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentwire_core::realtime::{
    CallError, CallEvent, CallFailure, CallInput, CallLink, CallSpec, RealtimeProvider, ResponseId,
    pcm_millis,
};
use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::{ApiKey, task_outcome};
use session::{Opening, joined, spawn_session};
use wire::{Role, ServerEvent};

mod session;
pub(crate) mod wire;

/// Input frames a call buffers towards the provider: 2 s of 20 ms frames.
const INPUT_CAPACITY: usize = 100;
/// Events buffered towards the server.
const EVENT_CAPACITY: usize = 64;
/// Transcript items kept for seeding a rolled-over session.
const TRANSCRIPT_ITEMS: usize = 50;
/// After `End`: longest wait for the last response.
const END_WAIT: Duration = Duration::from_secs(5);
/// After the end of speech or a `response.create`: how long a response is
/// expected before the call counts as quiet again.
const RESPONSE_EXPECTED: Duration = Duration::from_secs(3);
/// A failed rollover session is tried again after this.
const ROLLOVER_RETRY: Duration = Duration::from_secs(10);
/// Longest wait for the provider's side of a closing handshake.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Names of function calls remembered until their arguments are done.
const TOOL_NAMES: usize = 32;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How to reach the Realtime API and what to ask of it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiRealtimeSettings {
    /// The endpoint, `ws://` or `wss://`, without a query.
    pub url: String,
    pub model: String,
    pub api_key: ApiKey,
    /// `None`: the provider's default voice.
    pub voice: Option<String>,
    /// The model transcribing the caller.
    pub transcription_model: String,
    /// Age at which a provider session is replaced, before the provider's own
    /// 60-minute limit.
    pub session_cap: Duration,
    /// Subtracted from what the caller can have heard at a barge-in.
    pub truncate_jitter: Duration,
    /// Bounds the connection and each wait of the session's opening.
    pub connect_timeout: Duration,
}

impl OpenAiRealtimeSettings {
    pub const DEFAULT_URL: &'static str = "wss://api.openai.com/v1/realtime";
    pub const DEFAULT_TRANSCRIPTION_MODEL: &'static str = "gpt-4o-mini-transcribe";
    pub const DEFAULT_SESSION_CAP: Duration = Duration::from_secs(55 * 60);
    pub const DEFAULT_TRUNCATE_JITTER: Duration = Duration::from_millis(100);
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Settings with every default.
    pub fn new(model: impl Into<String>, api_key: ApiKey) -> OpenAiRealtimeSettings {
        OpenAiRealtimeSettings {
            url: Self::DEFAULT_URL.to_owned(),
            model: model.into(),
            api_key,
            voice: None,
            transcription_model: Self::DEFAULT_TRANSCRIPTION_MODEL.to_owned(),
            session_cap: Self::DEFAULT_SESSION_CAP,
            truncate_jitter: Self::DEFAULT_TRUNCATE_JITTER,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// The OpenAI Realtime API as a [`RealtimeProvider`].
#[derive(Debug, Clone)]
pub struct OpenAiRealtime {
    shared: Arc<Shared>,
}

/// What every call of a provider shares.
#[derive(Debug)]
struct Shared {
    settings: OpenAiRealtimeSettings,
    /// `{url}?model={model}`.
    endpoint: String,
    /// `Bearer <key>`, marked sensitive.
    auth: HeaderValue,
    unknown: AtomicU64,
}

impl OpenAiRealtime {
    /// Checks `settings`; the error names the problem (never the key).
    pub fn new(settings: OpenAiRealtimeSettings) -> Result<OpenAiRealtime, String> {
        let problem = |what: &str| format!("openai realtime ({}): {what}", settings.model);
        if settings.model.trim().is_empty() {
            return Err(problem("model is empty"));
        }
        if settings.connect_timeout.is_zero() {
            return Err(problem("connect_timeout must be positive"));
        }
        if settings.session_cap.is_zero() {
            return Err(problem("session_cap must be positive"));
        }
        let url = settings.url.trim();
        // The URL itself is not repeated: it could carry credentials.
        let parsed = reqwest::Url::parse(url).map_err(|_| problem("url is not a valid URL"))?;
        if !matches!(parsed.scheme(), "ws" | "wss") {
            return Err(problem("url must be a ws or wss URL"));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(problem("url must not have a query or fragment"));
        }
        let endpoint = wire::endpoint(url, &settings.model);
        if endpoint.as_str().into_client_request().is_err() {
            return Err(problem("url is not a valid WebSocket URL"));
        }
        let bearer = format!("Bearer {}", settings.api_key.expose());
        let mut auth = HeaderValue::from_str(&bearer)
            .map_err(|_| problem("api_key is not a valid HTTP header value"))?;
        auth.set_sensitive(true);
        Ok(OpenAiRealtime {
            shared: Arc::new(Shared {
                settings,
                endpoint,
                auth,
                unknown: AtomicU64::new(0),
            }),
        })
    }

    /// Provider events of a type this adapter does not know (or that could
    /// not be read), over all calls: ignored, only counted.
    pub fn unknown_events(&self) -> u64 {
        self.shared.unknown.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl RealtimeProvider for OpenAiRealtime {
    async fn open(&self, spec: CallSpec) -> Result<CallLink, CallError> {
        let update: Arc<str> = wire::session_update(&self.shared.settings, &spec).into();
        let socket = joined(&self.shared, spawn_session(&self.shared, &update)).await?;
        let (input, input_rx) = mpsc::channel(INPUT_CAPACITY);
        let (events_tx, events) = mpsc::channel(EVENT_CAPACITY);
        // The channel is new: there is room.
        let _ = events_tx.try_send(CallEvent::Ready {
            effective: wire::effective(),
        });
        let call = Call::new(self.shared.clone(), update, events_tx, socket);
        tokio::spawn(call.run(input_rx));
        Ok(CallLink { input, events })
    }
}

/// The latest item whose audio went out, for a barge-in's truncate.
struct Played {
    item_id: String,
    response: ResponseId,
    bytes: usize,
    first_at: Instant,
    /// Its response is over: no more audio comes.
    done: bool,
}

/// What a call knows of its current provider session; a rollover starts a
/// fresh one.
#[derive(Default)]
struct Turns {
    /// Provider ids of the responses not done yet, and their numbers.
    responses: HashMap<String, ResponseId>,
    /// The assistant transcript of each response not done yet.
    replies: HashMap<ResponseId, String>,
    speaking: bool,
    /// A response is expected (after speech or a `response.create`) until
    /// then.
    expecting: Option<Instant>,
    playing: Option<Played>,
    /// Function call names by call id, from `response.output_item.added`.
    tool_names: HashMap<String, String>,
    /// Tool calls the server has not answered yet.
    pending_tools: HashSet<String>,
}

impl Turns {
    /// Nothing under way that a switch of sessions would lose.
    fn quiet(&self) -> bool {
        !self.speaking
            && self.responses.is_empty()
            && self.expecting.is_none()
            && self.pending_tools.is_empty()
    }
}

struct Ending {
    deadline: Instant,
    /// Our `input_audio_buffer.commit` is not answered yet.
    commit_pending: bool,
}

enum Stop {
    /// The call is over as it should be.
    Done,
    /// The server dropped the events.
    Gone,
    Failed(CallError),
}

type Step = Result<(), Stop>;

/// A call's task: owns the provider session(s) and both channel ends.
struct Call {
    shared: Arc<Shared>,
    update: Arc<str>,
    events: mpsc::Sender<CallEvent>,
    socket: Socket,
    turns: Turns,
    /// Numbers responses across sessions.
    next_response: ResponseId,
    /// The last lines said, for seeding a new session.
    transcript: VecDeque<(Role, String)>,
    /// When the next session should be opened.
    rollover_at: Option<Instant>,
    opening: Option<Opening>,
    standby: Option<Socket>,
    ending: Option<Ending>,
}

impl Call {
    fn new(
        shared: Arc<Shared>,
        update: Arc<str>,
        events: mpsc::Sender<CallEvent>,
        socket: Socket,
    ) -> Call {
        let rollover_at = Some(Instant::now() + shared.settings.session_cap);
        Call {
            shared,
            update,
            events,
            socket,
            turns: Turns::default(),
            next_response: 0,
            transcript: VecDeque::new(),
            rollover_at,
            opening: None,
            standby: None,
            ending: None,
        }
    }

    async fn run(mut self, mut input: mpsc::Receiver<CallInput>) {
        let stop = loop {
            if let Err(stop) = self.step(&mut input).await {
                break stop;
            }
        };
        drop(input);
        if let Stop::Failed(e) = stop {
            let _ = self.events.send(CallEvent::Failed(e)).await;
        }
        // The server sees the end before the closing handshakes.
        drop(self.events);
        if let Some(opening) = self.opening {
            opening.abort();
        }
        if let Some(standby) = self.standby {
            tokio::spawn(close(standby));
        }
        close(self.socket).await;
    }

    async fn step(&mut self, input: &mut mpsc::Receiver<CallInput>) -> Step {
        let now = Instant::now();
        if self.turns.expecting.is_some_and(|at| at <= now) {
            self.turns.expecting = None;
        }
        if let Some(ending) = &self.ending {
            let answered = !ending.commit_pending && self.turns.responses.is_empty();
            if answered && self.turns.expecting.is_none() {
                return Err(Stop::Done);
            }
        } else if self.standby.is_some() && self.turns.quiet() {
            self.switch().await?;
        }
        let ending = self.ending.is_some();
        let waiting = self.opening.is_some() || self.standby.is_some();
        let rollover_at = self.rollover_at.filter(|_| !ending && !waiting);
        let expecting = self
            .turns
            .expecting
            .filter(|_| ending || self.standby.is_some());
        let deadline = self.ending.as_ref().map(|e| e.deadline);
        tokio::select! {
            next = input.recv(), if !ending => match next {
                Some(input) => self.on_input(input).await,
                // The server is gone: close at once.
                None => Err(Stop::Done),
            },
            message = self.socket.next() => self.on_message(message).await,
            message = next_of(&mut self.standby), if self.standby.is_some() => {
                // An idle session has nothing to say that matters, but its end.
                if matches!(message, Some(Ok(Message::Close(_)) | Err(_)) | None) {
                    self.standby = None;
                    self.retry_rollover("the standby session closed");
                }
                Ok(())
            }
            opened = task_outcome(&mut self.opening, "the connection task failed"),
                if self.opening.is_some() => {
                self.opening = None;
                match opened {
                    Ok(socket) => self.standby = Some(socket),
                    Err(_) => self.retry_rollover("opening the next session failed"),
                }
                Ok(())
            }
            () = at(rollover_at), if rollover_at.is_some() => {
                self.rollover_at = None;
                self.opening = Some(spawn_session(&self.shared, &self.update));
                Ok(())
            }
            () = at(expecting), if expecting.is_some() => Ok(()),
            () = at(deadline), if deadline.is_some() => Err(Stop::Done),
        }
    }

    async fn emit(&self, event: CallEvent) -> Step {
        self.events.send(event).await.map_err(|_| Stop::Gone)
    }

    async fn send(&mut self, event: String) -> Step {
        if self.socket.send(Message::text(event)).await.is_err() {
            return self.lost(None).await;
        }
        Ok(())
    }

    async fn on_input(&mut self, input: CallInput) -> Step {
        match input {
            CallInput::Audio(pcm) if pcm.is_empty() => Ok(()),
            CallInput::Audio(pcm) => self.send(wire::append(&pcm)).await,
            CallInput::ToolOutput { call_id, output } => {
                if !self.turns.pending_tools.remove(&call_id) {
                    // Of an earlier session, or never asked for.
                    tracing::debug!("openai realtime: a tool output without its call was dropped");
                    return Ok(());
                }
                self.send(wire::tool_output(&call_id, &output)).await?;
                self.send(wire::simple("response.create")).await?;
                self.turns.expecting = Some(Instant::now() + RESPONSE_EXPECTED);
                Ok(())
            }
            CallInput::End => {
                let deadline = Instant::now() + END_WAIT;
                self.ending = Some(Ending {
                    deadline,
                    commit_pending: true,
                });
                self.send(wire::simple("input_audio_buffer.commit")).await
            }
        }
    }

    async fn on_message(&mut self, message: Option<Result<Message, tungstenite::Error>>) -> Step {
        match message {
            Some(Ok(Message::Text(text))) => self.on_event(&text).await,
            Some(Ok(Message::Close(frame))) => self.lost(frame.map(|f| u16::from(f.code))).await,
            Some(Ok(Message::Binary(_))) => {
                self.shared.count_unknown();
                Ok(())
            }
            Some(Ok(_)) => Ok(()),
            Some(Err(_)) | None => self.lost(None).await,
        }
    }

    /// The provider session is gone: a standby takes over, or the call fails
    /// (unless it was ending anyway).
    async fn lost(&mut self, code: Option<u16>) -> Step {
        if self.ending.is_some() {
            return Err(Stop::Done);
        }
        if self.standby.is_none()
            && let Some(opening) = self.opening.take()
        {
            self.standby = joined(&self.shared, opening).await.ok();
        }
        if self.standby.is_some() {
            tracing::debug!(
                code,
                "openai realtime: the session ended early; rolling over"
            );
            return self.switch().await;
        }
        Err(Stop::Failed(
            self.shared.error(CallFailure::Closed, wire::closed(code)),
        ))
    }

    async fn on_event(&mut self, text: &str) -> Step {
        let Some((kind, event)) = wire::decode(text) else {
            self.shared.count_unknown();
            return Ok(());
        };
        tracing::debug!(event = kind, bytes = text.len(), "openai realtime event");
        let now = Instant::now();
        match event {
            ServerEvent::Ignored => {}
            ServerEvent::UserTranscript(text) => {
                self.remember(Role::User, text.clone());
                self.emit(CallEvent::UserTranscript { text }).await?;
            }
            ServerEvent::Audio {
                response,
                item,
                pcm,
            } => self.on_audio(&response, &item, pcm).await?,
            ServerEvent::TextDelta { response, delta } => {
                let response = self.response_id(&response);
                self.turns
                    .replies
                    .entry(response)
                    .or_default()
                    .push_str(&delta);
                self.emit(CallEvent::AssistantText { response, delta })
                    .await?;
            }
            ServerEvent::FunctionCallAdded { call_id, name } => {
                let names = &mut self.turns.tool_names;
                if names.len() >= TOOL_NAMES {
                    names.clear();
                }
                names.insert(call_id, name);
            }
            ServerEvent::FunctionCall {
                call_id,
                name,
                arguments,
            } => self.on_tool_call(call_id, name, arguments).await?,
            ServerEvent::ResponseCreated { response } => {
                self.response_id(&response);
                self.turns.expecting = None;
            }
            ServerEvent::ResponseDone {
                response,
                cancelled,
            } => self.on_response_done(&response, cancelled).await?,
            ServerEvent::SpeechStarted => self.on_speech_started(now).await?,
            ServerEvent::SpeechStopped => {
                self.turns.speaking = false;
                // Server VAD commits the utterance and answers it.
                self.turns.expecting = Some(now + RESPONSE_EXPECTED);
            }
            ServerEvent::Committed => {
                let ours = (self.ending.as_mut())
                    .is_some_and(|e| std::mem::replace(&mut e.commit_pending, false));
                if ours && self.turns.responses.is_empty() && self.turns.expecting.is_none() {
                    // What the caller said last, answered before the close.
                    self.send(wire::simple("response.create")).await?;
                    self.turns.expecting = Some(now + RESPONSE_EXPECTED);
                }
            }
            ServerEvent::Error(why) => match &mut self.ending {
                // Typically our commit of an empty buffer: the call ends.
                Some(ending) => ending.commit_pending = false,
                None => {
                    let failure = self.shared.error(CallFailure::ProviderError, why);
                    return Err(Stop::Failed(failure));
                }
            },
        }
        Ok(())
    }

    /// The number of provider response `id`, given at its first sight.
    fn response_id(&mut self, id: &str) -> ResponseId {
        if let Some(&response) = self.turns.responses.get(id) {
            return response;
        }
        let response = self.next_response;
        self.next_response += 1;
        self.turns.responses.insert(id.to_owned(), response);
        response
    }

    fn remember(&mut self, role: Role, text: String) {
        if self.transcript.len() == TRANSCRIPT_ITEMS {
            self.transcript.pop_front();
        }
        self.transcript.push_back((role, text));
    }

    async fn on_audio(&mut self, response: &str, item_id: &str, pcm: Vec<u8>) -> Step {
        let response = self.response_id(response);
        match &mut self.turns.playing {
            Some(played) if played.item_id == item_id => played.bytes += pcm.len(),
            playing => {
                *playing = Some(Played {
                    item_id: item_id.to_owned(),
                    response,
                    bytes: pcm.len(),
                    first_at: Instant::now(),
                    done: false,
                });
            }
        }
        self.emit(CallEvent::AudioOut { response, pcm }).await
    }

    async fn on_tool_call(
        &mut self,
        call_id: String,
        name: Option<String>,
        arguments: Value,
    ) -> Step {
        let remembered = self.turns.tool_names.remove(&call_id);
        let name = name.or(remembered).unwrap_or_default();
        self.turns.pending_tools.insert(call_id.clone());
        self.emit(CallEvent::ToolCall {
            call_id,
            name,
            arguments,
        })
        .await
    }

    async fn on_response_done(&mut self, id: &str, cancelled: bool) -> Step {
        let response = self.response_id(id);
        self.turns.responses.remove(id);
        if let Some(played) = &mut self.turns.playing
            && played.response == response
        {
            played.done = true;
        }
        if let Some(reply) = self.turns.replies.remove(&response)
            && !reply.trim().is_empty()
        {
            self.remember(Role::Assistant, reply);
        }
        self.emit(CallEvent::ResponseDone {
            response,
            interrupted: cancelled,
        })
        .await
    }

    /// The caller speaks: cut the item being played to what they can have
    /// heard of it.
    async fn on_speech_started(&mut self, now: Instant) -> Step {
        self.turns.speaking = true;
        self.turns.expecting = None;
        self.emit(CallEvent::SpeechStarted).await?;
        let Some(played) = self.turns.playing.take() else {
            return Ok(());
        };
        let audio_ms = pcm_millis(&wire::effective(), played.bytes);
        let elapsed = now.saturating_duration_since(played.first_at);
        let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if played.done && elapsed_ms >= audio_ms {
            // All of it was heard.
            return Ok(());
        }
        let jitter = self.shared.settings.truncate_jitter.as_millis();
        let jitter_ms = u64::try_from(jitter).unwrap_or(u64::MAX);
        let audio_end_ms = audio_ms.min(elapsed_ms).saturating_sub(jitter_ms);
        if audio_end_ms == 0 {
            // Nothing was heard; the API rejects more than the item has.
            return Ok(());
        }
        self.send(wire::truncate(&played.item_id, audio_end_ms))
            .await
    }

    fn retry_rollover(&mut self, why: &'static str) {
        tracing::debug!("openai realtime: {why}; rolling over later");
        self.rollover_at = Some(Instant::now() + ROLLOVER_RETRY);
    }

    /// Seeds the standby with the transcript and makes it the session.
    async fn switch(&mut self) -> Step {
        let Some(mut next) = self.standby.take() else {
            return Ok(());
        };
        for (role, text) in &self.transcript {
            if next
                .send(Message::text(wire::seed(*role, text)))
                .await
                .is_err()
            {
                self.retry_rollover("seeding the next session failed");
                return Ok(());
            }
        }
        tokio::spawn(close(std::mem::replace(&mut self.socket, next)));
        let items = self.transcript.len();
        tracing::debug!(items, "openai realtime: rolled over to a new session");
        self.rollover_at = Some(Instant::now() + self.shared.settings.session_cap);
        // Responses the old session will not finish.
        let old = std::mem::take(&mut self.turns);
        let mut unfinished: Vec<ResponseId> = old.responses.into_values().collect();
        unfinished.sort_unstable();
        for response in unfinished {
            let done = CallEvent::ResponseDone {
                response,
                interrupted: true,
            };
            self.emit(done).await?;
        }
        Ok(())
    }
}

async fn next_of(socket: &mut Option<Socket>) -> Option<Result<Message, tungstenite::Error>> {
    match socket {
        Some(socket) => socket.next().await,
        None => std::future::pending().await,
    }
}

async fn at(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Closes `socket`, waiting a little for the provider's side.
async fn close(mut socket: Socket) {
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        let _ = socket.close(None).await;
        while let Some(Ok(_)) = socket.next().await {}
    })
    .await;
}

#[cfg(test)]
mod tests;

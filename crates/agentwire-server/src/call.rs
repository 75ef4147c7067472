//! Voice calls: the task that owns a call's provider link, and what it hands
//! the connection to send.
//!
//! A call is opened by a connection's first audio frame and owned by its own
//! task, never by the socket's: the task reads the provider's events, keeps
//! the exchange being spoken, stores each response when it ends, and puts
//! what the client should see on a bounded queue the connection drains.
//! Audio is the only thing that may be dropped on the way (late audio is
//! worse than none): a full queue drops the frame, and the connection drops
//! frames that waited longer than [`LATE_AUDIO`]. Everything else (the
//! format, transcripts, `done`, `interrupt`, errors) waits for room.
//!
//! # Park and resume (`omnia-behaviour.md` §3.6, done right)
//!
//! A connection that closes without `hangup` or an IsLast frame leaves its
//! call **parked** for `server.limits.call_park_window`: the task keeps the
//! provider link (it never belonged to the socket), drops the audio it
//! produces meanwhile and keeps the transcripts (and stores the exchanges).
//! `resume=S` from the same owner within the window takes the call out of
//! [`Calls`]'s park under its lock and hands the task a new output queue:
//! the old socket is gone for good, so audio goes only to the new one, which
//! gets `session_config` again and the transcripts it missed. Anonymous
//! calls are never parked (anyone could claim them); another owner's
//! `resume=` does not even learn the call exists.
//!
//! # Across replicas
//!
//! With replicas linked (`replica.secret`), an owner's call keeps a route
//! naming this replica (`routes.rs`) while it lives; a `resume=` that lands
//! on another replica hops here (`hop.rs`) and its socket is relayed
//! (`relay.rs`) to a connection here that resumes the call as above.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use agentwire_core::realtime::{CallEvent, CallInput, CallSpec, PCM, RealtimeProvider, ResponseId};
use agentwire_core::{
    AudioFormat, CallerToolSource, ClientToolBroker, ClientToolDecl, ErrorCode, SessionId,
    ToolCall, ToolOutcome, ToolSource,
};
use agentwire_engine::Agent;
use agentwire_engine::VoiceExchange;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::AppState;

pub(crate) mod hop;
pub(crate) mod relay;
mod routes;
mod tools;
pub use routes::{HopSecret, ReplicaLinks};
use tools::{CallTools, ProviderToolCall, ToClient};

/// Output a call queues for its connection: a second of 20 ms audio frames
/// and the control frames among them.
const OUTPUT_CAPACITY: usize = 64;
/// Client tool frames waiting for the call's task to send them.
const TOOL_FRAMES: usize = 8;
/// Audio that waited this long for the socket is dropped.
pub(crate) const LATE_AUDIO: Duration = Duration::from_millis(300);

/// `RATE_LIMITED`: the server holds `server.limits.max_calls` calls.
pub(crate) const CALL_LIMIT_REACHED: &str = "audio session limit reached";
/// `DUPLEX_ERROR`: the provider failed, or the call could not go on. The
/// provider's own words go to the log, never to the client.
pub(crate) const CALL_FAILED: &str = "duplex session failed";
/// `DUPLEX_ERROR`: the provider did not keep up with the caller's audio;
/// dropping it would corrupt what the provider hears, so the call ends.
pub(crate) const INPUT_OVERFLOW: &str = "audio input overflow: the call ended";

/// A voice provider as an agent has it (`agents[].voice`).
pub struct Voice {
    pub provider: Arc<dyn RealtimeProvider>,
    /// What the provider is told the agent is.
    pub instructions: String,
    /// The agent's server tools, opened per call (as per connection for
    /// text turns) and offered to the provider's model.
    pub tools: Vec<Arc<dyn ToolSource>>,
    /// The agent's client tools: the caller's client runs them.
    pub client_tools: Vec<ClientToolDecl>,
    /// Tools that act for the call's caller (agent memory), opened per
    /// call with who is calling.
    pub caller_tools: Vec<Arc<dyn CallerToolSource>>,
}

/// Transcripts a parked call keeps for its resume; older ones are dropped
/// (they are stored all the same).
const PARKED_BACKLOG: usize = 256;

/// The server's calls: how many are open (parked ones included), against
/// `server.limits.max_calls`, and the parked ones by session.
#[derive(Default)]
pub struct Calls {
    active: AtomicUsize,
    parked: Mutex<HashMap<SessionId, Parked>>,
    /// Tells parks apart: a park's timer removes its own entry only.
    parks: AtomicU64,
}

/// A parked call, as a resume finds it.
struct Parked {
    owner: String,
    park: u64,
    input: mpsc::Sender<CallInput>,
    ended: Arc<AtomicBool>,
    client_tools: Arc<ClientToolBroker>,
    /// Hands the call task its new output queue.
    attach: mpsc::Sender<mpsc::Sender<CallOutput>>,
}

impl Calls {
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    pub fn parked(&self) -> usize {
        self.parked.lock().len()
    }

    /// Whether `owner`'s call is parked on `session` here.
    pub(crate) fn is_parked(&self, session: &SessionId, owner: &str) -> bool {
        self.parked
            .lock()
            .get(session)
            .is_some_and(|parked| parked.owner == owner)
    }

    /// Takes the call parked on `session` for `owner`, attaching a new
    /// output queue; `None` when there is none, it is another owner's, or
    /// its window closed. The check, the removal and the hand-over happen
    /// under one lock, so the park's timer and a second resume cannot both
    /// have it.
    pub(crate) fn resume(&self, session: &SessionId, owner: &str) -> Option<CallHandle> {
        let mut parked = self.parked.lock();
        if parked.get(session).is_none_or(|p| p.owner != owner) {
            return None;
        }
        let call = parked.remove(session)?;
        let (output, output_rx) = mpsc::channel(OUTPUT_CAPACITY);
        // Room for one: the task takes it before it can be parked again.
        call.attach.try_send(output).ok()?;
        Some(CallHandle {
            input: call.input,
            output: output_rx,
            ended: call.ended,
            client_tools: call.client_tools,
        })
    }

    fn try_take(state: &Arc<AppState>) -> Option<CallSlot> {
        let max = state.settings().limits.max_calls;
        state
            .calls()
            .active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| CallSlot(state.clone()))
    }
}

/// One call's share of the cap, given back when its task ends.
struct CallSlot(Arc<AppState>);

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.0.calls().active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a connection sends for its call, in order.
#[derive(Debug)]
pub(crate) enum CallOutput {
    /// `session_config`: the effective format.
    Config(AudioFormat),
    /// `chunk{role: "user"}`.
    UserText(String),
    /// `chunk`.
    AssistantText(String),
    /// A binary media frame (or `media_chunk`), unless it is late.
    Audio {
        sequence: u32,
        pcm: Vec<u8>,
        queued: Instant,
    },
    /// `interrupt`: the caller barged in; flush playback.
    Interrupt,
    /// `done{}`: a response is over.
    Done,
    /// `tool_call`: the model asks the client to run one of its tools.
    ToolCall(ToolCall),
    /// `tool_result`: a client call is over without the client's answer
    /// (it did not answer in time).
    ToolResult { id: String, outcome: ToolOutcome },
    /// `error`; the call is over.
    Failed { code: ErrorCode, message: String },
}

/// Whose call it is and where its exchanges are stored.
pub(crate) struct CallOwner {
    pub(crate) agent: Arc<Agent>,
    pub(crate) namespace: String,
    pub(crate) owner: Option<String>,
    /// The connection's `memory_facet`, for the call's memory tools.
    pub(crate) memory_facet: Option<String>,
    pub(crate) session: SessionId,
}

/// A connection's side of an open call.
pub(crate) struct CallHandle {
    pub(crate) input: mpsc::Sender<CallInput>,
    pub(crate) output: mpsc::Receiver<CallOutput>,
    /// Set by the connection when the caller ended the call (`hangup`, an
    /// IsLast frame): the close that follows parks nothing.
    pub(crate) ended: Arc<AtomicBool>,
    /// Where the client's answers to the call's client tool calls go.
    pub(crate) client_tools: Arc<ClientToolBroker>,
}

/// Opens a call on `voice` for `owner` with the client's `proposed`
/// format; its task runs until the provider closes the link or the
/// connection drops the handle. Refused with the code and text to send.
pub(crate) async fn open(
    state: &Arc<AppState>,
    voice: &Voice,
    owner: CallOwner,
    proposed: AudioFormat,
) -> Result<CallHandle, (ErrorCode, &'static str)> {
    let Some(slot) = Calls::try_take(state) else {
        return Err((ErrorCode::RateLimited, CALL_LIMIT_REACHED));
    };
    let tools = Arc::new(CallTools::open(voice, &owner).await);
    let spec = CallSpec {
        instructions: voice.instructions.clone(),
        proposed,
        tools: tools.specs(),
    };
    let link = match voice.provider.open(spec).await {
        Ok(link) => link,
        Err(e) => {
            let code = e.failure.as_str();
            tracing::warn!(error = %e, code, "a voice call could not open");
            state.metrics().count_call_failure(e.failure);
            return Err((ErrorCode::DuplexError, CALL_FAILED));
        }
    };
    let (output, output_rx) = mpsc::channel(OUTPUT_CAPACITY);
    let (attach, attach_rx) = mpsc::channel(1);
    let ended = Arc::new(AtomicBool::new(false));
    let client_tools = tools.broker.clone();
    let (to_client, from_tools) = mpsc::channel(TOOL_FRAMES);
    // Only an owner's call can be resumed, here or through another replica.
    let route = (owner.owner.as_deref()).and_then(|who| routes::keep(state, &owner.session, who));
    let task = CallTask {
        state: state.clone(),
        owner,
        sink: Some(output),
        input: link.input.clone(),
        ended: ended.clone(),
        attach,
        effective: None,
        backlog: VecDeque::new(),
        exchange: VoiceExchange::default(),
        tools,
        to_client,
        asked: Vec::new(),
        speaking: None,
        interrupted: None,
        sequence: 0,
        _route: route,
        _slot: slot,
    };
    tokio::spawn(task.run(link.events, attach_rx, from_tools));
    Ok(CallHandle {
        input: link.input,
        output: output_rx,
        ended,
        client_tools,
    })
}

struct CallTask {
    state: Arc<AppState>,
    owner: CallOwner,
    /// The attached connection's queue; `None` while parked.
    sink: Option<mpsc::Sender<CallOutput>>,
    /// Keeps the provider's input open while no connection holds it.
    input: mpsc::Sender<CallInput>,
    ended: Arc<AtomicBool>,
    /// The sender a park hands to [`Calls`], for a resume.
    attach: mpsc::Sender<mpsc::Sender<CallOutput>>,
    /// The format relayed, for a resumed connection's `session_config`.
    effective: Option<AudioFormat>,
    /// Transcripts produced while parked, for the resume.
    backlog: VecDeque<CallOutput>,
    /// The response being spoken: what was said and what it answers.
    exchange: VoiceExchange,
    /// What the model may call, and the steps taken for this response.
    tools: Arc<CallTools>,
    /// Client tool calls' frames for the client, back to this task.
    to_client: ToClient,
    /// Client tool calls asked (some may be answered since): a resumed
    /// connection is asked the pending ones again.
    asked: Vec<ToolCall>,
    /// The response whose audio is going out now.
    speaking: Option<ResponseId>,
    /// The response the caller barged in on: nothing more of it is sent.
    interrupted: Option<ResponseId>,
    /// Audio frames sent, for their `sequence`.
    sequence: u32,
    /// The call's route for the other replicas, kept while the task runs.
    _route: Option<routes::RouteGuard>,
    _slot: CallSlot,
}

/// The connection is gone (it dropped its queue).
struct Detached;

/// Where a parked call stands.
struct Park {
    id: u64,
    until: Instant,
}

impl CallTask {
    async fn run(
        mut self,
        mut events: mpsc::Receiver<CallEvent>,
        mut attach: mpsc::Receiver<mpsc::Sender<CallOutput>>,
        mut from_tools: mpsc::Receiver<CallOutput>,
    ) {
        let metrics = &self.state.metrics();
        metrics.calls_opened.fetch_add(1, Ordering::Relaxed);
        let force_close = self.state.lifecycle().force_close.clone();
        let mut park: Option<Park> = None;
        loop {
            let detached = tokio::select! {
                event = events.recv() => match event {
                    None => break,
                    Some(event) => match self.on_event(event).await {
                        Ok(true) => false,
                        Ok(false) => break,
                        Err(Detached) => true,
                    },
                },
                Some(output) = from_tools.recv() => self.ask(output).await.is_err(),
                () = closed(self.sink.as_ref()) => true,
                Some(output) = attach.recv(), if park.is_some() => {
                    park = None;
                    // An error: the resumed connection is gone already.
                    self.reattach(output).await.is_err()
                }
                () = until(park.as_ref()) => {
                    if self.expire(park.as_ref()) {
                        break;
                    }
                    // A resume took it just now: its queue is on the way.
                    false
                }
                () = force_close.cancelled() => break,
            };
            if detached && park.is_none() {
                self.sink = None;
                match self.park() {
                    Some(parked) => park = Some(parked),
                    None => break,
                }
            }
        }
        let _ = self.expire(park.as_ref());
        // A response cut off by the call's end (a hangup, the park's
        // window) is stored as far as it went.
        let mut unfinished = std::mem::take(&mut self.exchange);
        unfinished.interrupted = true;
        self.store(unfinished).await;
        // Dropping `events` and the input tells the provider the call is over.
    }

    /// Parks the call, unless the caller ended it or is anonymous.
    fn park(&mut self) -> Option<Park> {
        let owner = self.owner.owner.clone()?;
        if self.ended.load(Ordering::Acquire) {
            return None;
        }
        let calls = self.state.calls();
        let id = calls.parks.fetch_add(1, Ordering::Relaxed);
        let parked = Parked {
            owner,
            park: id,
            input: self.input.clone(),
            ended: self.ended.clone(),
            client_tools: self.tools.broker.clone(),
            attach: self.attach.clone(),
        };
        // One parked call per session: one parked there before (its owner
        // opened a second call meanwhile) ends by its own timer.
        calls
            .parked
            .lock()
            .insert(self.owner.session.clone(), parked);
        let window = self.state.settings().limits.call_park_window;
        Some(Park {
            id,
            until: Instant::now() + window,
        })
    }

    /// Takes this park's entry out of [`Calls`]: `true` when it was there
    /// (the call is over); `false` when a resume took it first (its queue
    /// is in `attach`), or the call is not parked.
    fn expire(&self, park: Option<&Park>) -> bool {
        let Some(park) = park else { return false };
        let mut parked = self.state.calls().parked.lock();
        match parked.get(&self.owner.session) {
            Some(entry) if entry.park == park.id => {
                parked.remove(&self.owner.session);
                true
            }
            _ => false,
        }
    }

    /// A resumed connection: the format again, what it missed, and the
    /// client tool calls still waiting for an answer (the old socket may
    /// have lost them; a client knows a call by its id).
    async fn reattach(&mut self, output: mpsc::Sender<CallOutput>) -> Result<(), Detached> {
        self.sink = Some(output);
        if let Some(format) = self.effective.clone() {
            self.send(CallOutput::Config(format)).await?;
        }
        while let Some(missed) = self.backlog.pop_front() {
            self.send(missed).await?;
        }
        self.forget_answered();
        for call in self.asked.clone() {
            self.send(CallOutput::ToolCall(call)).await?;
        }
        Ok(())
    }

    /// A client tool's frame for the client; a call is kept while it waits
    /// for its answer (for a resume), whether the client got it or not.
    async fn ask(&mut self, output: CallOutput) -> Result<(), Detached> {
        if let CallOutput::ToolCall(call) = &output {
            self.forget_answered();
            self.asked.push(call.clone());
        }
        self.send(output).await
    }

    fn forget_answered(&mut self) {
        let broker = &self.tools.broker;
        self.asked.retain(|call| broker.is_pending(&call.id));
    }

    /// Sends `output` to the attached connection; while parked, keeps
    /// transcripts and the ends of client tool calls for the resume and
    /// drops the rest (a pending call is asked again at the resume).
    async fn send(&mut self, output: CallOutput) -> Result<(), Detached> {
        let Some(sink) = &self.sink else {
            if matches!(
                output,
                CallOutput::UserText(_)
                    | CallOutput::AssistantText(_)
                    | CallOutput::Done
                    | CallOutput::ToolResult { .. }
            ) {
                if self.backlog.len() == PARKED_BACKLOG {
                    self.backlog.pop_front();
                }
                self.backlog.push_back(output);
            }
            return Ok(());
        };
        sink.send(output).await.map_err(|_| Detached)
    }

    /// `Ok(false)`: the call is over.
    async fn on_event(&mut self, event: CallEvent) -> Result<bool, Detached> {
        match event {
            CallEvent::Ready { effective } => {
                if let Some(message) = unservable(&effective) {
                    let code = ErrorCode::UnsatisfiableFormat;
                    self.send(CallOutput::Failed { code, message }).await?;
                    return Ok(false);
                }
                self.effective = Some(effective.clone());
                self.send(CallOutput::Config(effective)).await?;
            }
            CallEvent::SpeechStarted => {
                if let Some(response) = self.speaking.take() {
                    self.interrupted = Some(response);
                    self.state
                        .metrics()
                        .call_barge_ins
                        .fetch_add(1, Ordering::Relaxed);
                    self.send(CallOutput::Interrupt).await?;
                }
            }
            CallEvent::UserTranscript { text } => {
                if !self.exchange.user.is_empty() {
                    self.exchange.user.push(' ');
                }
                self.exchange.user.push_str(&text);
                self.send(CallOutput::UserText(text)).await?;
            }
            CallEvent::AssistantText { response, delta } => {
                if self.interrupted != Some(response) {
                    self.exchange.reply.push_str(&delta);
                    self.send(CallOutput::AssistantText(delta)).await?;
                }
            }
            CallEvent::AudioOut { response, pcm } => self.on_audio(response, pcm)?,
            CallEvent::ResponseDone {
                response,
                interrupted,
            } => self.on_response_done(response, interrupted).await?,
            CallEvent::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                let call = ProviderToolCall {
                    call_id,
                    name,
                    arguments,
                };
                let input = self.input.clone();
                self.tools
                    .spawn(&self.state, call, input, self.to_client.clone());
            }
            CallEvent::Failed(e) => {
                let code = e.failure.as_str();
                tracing::warn!(error = %e, code, "a voice call failed");
                self.state.metrics().count_call_failure(e.failure);
                let (code, message) = (ErrorCode::DuplexError, CALL_FAILED.to_owned());
                self.send(CallOutput::Failed { code, message }).await?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A response is over: its exchange is stored, then `done` (as for a
    /// text turn, `done` means stored).
    async fn on_response_done(
        &mut self,
        response: ResponseId,
        interrupted: bool,
    ) -> Result<(), Detached> {
        if interrupted && self.speaking == Some(response) {
            // The provider stopped it before we saw the speech.
            self.speaking = None;
            self.state
                .metrics()
                .call_barge_ins
                .fetch_add(1, Ordering::Relaxed);
            self.send(CallOutput::Interrupt).await?;
        }
        let mut exchange = std::mem::take(&mut self.exchange);
        exchange.interrupted = interrupted || self.interrupted == Some(response);
        exchange.tools = self.tools.take_steps();
        if self.speaking == Some(response) {
            self.speaking = None;
        }
        self.store(exchange).await;
        self.send(CallOutput::Done).await
    }

    fn on_audio(&mut self, response: ResponseId, pcm: Vec<u8>) -> Result<(), Detached> {
        if self.interrupted == Some(response) {
            return Ok(());
        }
        self.speaking = Some(response);
        let sequence = self.sequence;
        self.sequence = self.sequence.wrapping_add(1);
        let Some(sink) = &self.sink else {
            // Parked: audio nobody can hear is stale by the resume.
            let metrics = &self.state.metrics();
            metrics.call_audio_dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let bytes = pcm.len() as u64;
        let audio = CallOutput::Audio {
            sequence,
            pcm,
            queued: Instant::now(),
        };
        match sink.try_send(audio) {
            Ok(()) => {
                let metrics = &self.state.metrics();
                metrics
                    .call_audio_out_bytes
                    .fetch_add(bytes, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.state
                    .metrics()
                    .call_audio_dropped
                    .fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Detached),
        }
    }

    /// A response's exchange joins the session; a failure to store it is
    /// logged and the call goes on (the caller heard it either way).
    async fn store(&self, exchange: VoiceExchange) {
        if exchange.user.is_empty() && exchange.reply.is_empty() {
            return;
        }
        let owner = &self.owner;
        let stored = self
            .state
            .engine()
            .record_voice_exchange(
                &owner.agent,
                &owner.namespace,
                owner.owner.as_deref(),
                &owner.session,
                exchange,
            )
            .await;
        if let Err(e) = stored {
            tracing::warn!(error = %e, "storing a voice exchange failed");
        }
    }
}

/// Resolves when the attached connection dropped its queue; never while
/// parked.
async fn closed(sink: Option<&mpsc::Sender<CallOutput>>) {
    match sink {
        Some(sink) => sink.closed().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the park's window closes; never while attached.
async fn until(park: Option<&Park>) {
    match park {
        Some(park) => tokio::time::sleep_until(park.until).await,
        None => std::future::pending().await,
    }
}

/// Why the server cannot serve `format`, if it cannot: PCM16 in one or two
/// channels at a rate between 8 and 48 kHz.
fn unservable(format: &AudioFormat) -> Option<String> {
    let servable = format.codec == PCM
        && (1..=2).contains(&format.channels)
        && (8_000..=48_000).contains(&format.sample_rate);
    (!servable).then(|| {
        format!(
            "the voice provider requires an audio format this server does not support ({}, {} Hz, {} channels)",
            format.codec, format.sample_rate, format.channels
        )
    })
}

/// The client's proposal from a first frame's metadata; pcm, 16 kHz, mono
/// where it says nothing.
pub(crate) fn proposed_format(
    codec: Option<&str>,
    sample_rate: Option<u32>,
    channels: Option<u32>,
) -> AudioFormat {
    AudioFormat {
        codec: codec.unwrap_or(PCM).to_owned(),
        sample_rate: sample_rate.unwrap_or(16_000),
        channels: channels.unwrap_or(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_serves_pcm16_in_one_or_two_channels() {
        let format = proposed_format(None, None, None);
        assert_eq!(
            format,
            AudioFormat {
                codec: "pcm".into(),
                sample_rate: 16_000,
                channels: 1
            }
        );
        assert_eq!(unservable(&format), None);
        assert_eq!(
            unservable(&proposed_format(None, Some(24_000), Some(2))),
            None
        );
        assert!(unservable(&proposed_format(Some("opus"), None, None)).is_some());
        assert!(unservable(&proposed_format(None, None, Some(6))).is_some());
        assert!(unservable(&proposed_format(None, Some(1), None)).is_some());
    }
}

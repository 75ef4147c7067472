//! A cascade voice provider on the realtime port, so that local models give
//! voice: speech-to-text over an OpenAI-compatible transcription endpoint,
//! the agent's own text model (the [`ModelProvider`] port), and
//! text-to-speech over an OpenAI-compatible speech endpoint.
//!
//! - **Format**: the call runs at [`CascadeSettings::sample_rate`], mono
//!   PCM16, whatever the client proposed: [`CallEvent::Ready`] says so at
//!   once and the client re-captures. Speech comes back at that rate.
//! - **Utterances**: the energy VAD the scripted mock uses (RMS of 20 ms
//!   windows against [`CascadeSettings::speech_threshold`], ended by
//!   [`CascadeSettings::hangover`] of silence). Speech starting while a reply
//!   is being prepared or spoken is a barge-in: its text and audio stop, and
//!   the reply ends `ResponseDone{interrupted: true}`.
//! - **Transcription**: each utterance, in order, as a WAV file (16-bit PCM
//!   mono) in `multipart/form-data` to `{base}/audio/transcriptions` with
//!   `model` and `response_format=json`, read as `{"text": …}`. An empty
//!   transcript is skipped: no event, no reply.
//! - **Reply**: once the caller is quiet and every utterance is transcribed,
//!   the text model answers with the call's instructions as the system
//!   prompt and the call's transcript as user and assistant messages (the
//!   latest [`HISTORY_MESSAGES`]). Its text streams out as `AssistantText`.
//!   Tool calls (of [`CallSpec::tools`]) become [`CallEvent::ToolCall`]s; the
//!   model is asked again with their outputs, at most [`MAX_TOOL_ROUNDS`]
//!   times, then once more without tools.
//! - **Speech**: the reply, a sentence at a time as its text streams in, as
//!   JSON `{"model","voice","input","response_format":"pcm"}` to
//!   `{base}/audio/speech`. The answer is raw PCM16 mono at 24 kHz (OpenAI's
//!   `pcm`) or a WAV file (read from its header); audio at another rate than
//!   the call's is resampled linearly. Paced out in 20 ms frames in real time,
//!   then `ResponseDone`.
//! - **End**: the utterance in progress is finished, transcribed and
//!   answered, then the call closes.
//!
//! **Failures are fatal**: an unreachable endpoint, a non-2xx status, an
//! unreadable answer, a timeout ([`CascadeSettings::timeout`], per request)
//! or a failed completion ends the call with [`CallEvent::Failed`], whose
//! message names the step (`transcription`, `model`, `speech`) and the HTTP
//! status or the model's own (body-free) error. A caller would otherwise
//! wait in silence for a turn that was dropped; the text model retries inside
//! its provider already. Errors and logs never carry a response body, a key,
//! audio, a transcript or the instructions.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::realtime::{
    CallError, CallEvent, CallFailure, CallInput, CallLink, CallSpec, PCM, RealtimeProvider,
    ResponseId,
};
use agentwire_core::{AudioFormat, ModelMessage, ModelProvider, ModelRequest, ModelToolCall};
use agentwire_core::{TextSink, ToolSpec};
use async_trait::async_trait;
use reqwest::header::HeaderValue;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::vad::{Speaker, Vad, VadEvent};
use crate::{ApiKey, task_outcome};
use wire::{synthesize, transcribe};

pub(crate) mod wire;

/// Input frames a call buffers towards the cascade: 2 s of 20 ms frames.
const INPUT_CAPACITY: usize = 100;
/// Events buffered towards the server.
const EVENT_CAPACITY: usize = 64;
/// What a reply's task buffers towards the call.
const REPLY_CAPACITY: usize = 64;
/// Rounds of tool calls in one reply before the model must answer.
const MAX_TOOL_ROUNDS: usize = 4;
/// Messages of the call's transcript the model sees.
const HISTORY_MESSAGES: usize = 32;

/// An OpenAI-compatible audio endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechEndpoint {
    /// Ends before `/audio/…`, e.g. `http://localhost:8000/v1`. Empty: the
    /// OpenAI API.
    pub base_url: String,
    /// E.g. `whisper-1`, `tts-1`.
    pub model: String,
    /// The speech endpoint's voice ([`CascadeSettings::DEFAULT_VOICE`] when
    /// `None`); the transcription endpoint has none.
    pub voice: Option<String>,
    /// Sent as `Authorization: Bearer <key>`; none for keyless local servers.
    pub api_key: Option<ApiKey>,
}

impl SpeechEndpoint {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> SpeechEndpoint {
        SpeechEndpoint {
            base_url: base_url.into(),
            model: model.into(),
            voice: None,
            api_key: None,
        }
    }
}

/// What a [`Cascade`] is made of.
#[derive(Clone)]
pub struct CascadeSettings {
    pub transcription: SpeechEndpoint,
    pub speech: SpeechEndpoint,
    /// The agent's text model.
    pub model: Arc<dyn ModelProvider>,
    /// The call's rate (mono PCM16). Default 16 kHz.
    pub sample_rate: u32,
    /// RMS (of 16-bit samples) above which a 20 ms window is speech.
    /// Default 500.
    pub speech_threshold: f64,
    /// Silence that ends an utterance. Default 300 ms.
    pub hangover: Duration,
    /// Longest transcription or speech request, whole. Default 30 s.
    pub timeout: Duration,
}

impl CascadeSettings {
    pub const DEFAULT_SAMPLE_RATE: u32 = 16_000;
    pub const DEFAULT_SPEECH_THRESHOLD: f64 = 500.0;
    pub const DEFAULT_HANGOVER: Duration = Duration::from_millis(300);
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_VOICE: &'static str = "alloy";

    /// Settings with every default.
    pub fn new(
        transcription: SpeechEndpoint,
        speech: SpeechEndpoint,
        model: Arc<dyn ModelProvider>,
    ) -> CascadeSettings {
        CascadeSettings {
            transcription,
            speech,
            model,
            sample_rate: Self::DEFAULT_SAMPLE_RATE,
            speech_threshold: Self::DEFAULT_SPEECH_THRESHOLD,
            hangover: Self::DEFAULT_HANGOVER,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

impl fmt::Debug for CascadeSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let model = format!("{} {}", self.model.provider_name(), self.model.model());
        f.debug_struct("CascadeSettings")
            .field("transcription", &self.transcription)
            .field("speech", &self.speech)
            .field("model", &model)
            .field("sample_rate", &self.sample_rate)
            .field("speech_threshold", &self.speech_threshold)
            .field("hangover", &self.hangover)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The cascade as a [`RealtimeProvider`].
#[derive(Clone)]
pub struct Cascade {
    shared: Arc<Shared>,
}

impl fmt::Debug for Cascade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cascade")
            .field("format", &self.shared.format)
            .finish_non_exhaustive()
    }
}

/// What every call of a cascade shares.
struct Shared {
    client: reqwest::Client,
    transcription: Endpoint,
    speech: Endpoint,
    voice: String,
    model: Arc<dyn ModelProvider>,
    format: AudioFormat,
    speech_threshold: f64,
    hangover: Duration,
    timeout: Duration,
}

/// A checked endpoint.
struct Endpoint {
    url: String,
    model: String,
    /// `Bearer <key>`, marked sensitive.
    auth: Option<HeaderValue>,
}

impl Endpoint {
    fn new(step: &str, endpoint: &SpeechEndpoint, path: &str) -> Result<Endpoint, String> {
        let url = crate::http::endpoint(&endpoint.base_url, crate::OPENAI_DEFAULT_BASE_URL, path)
            .map_err(|e| format!("cascade {step}: base_url {e}"))?;
        let model = endpoint.model.trim();
        if model.is_empty() || model.chars().any(char::is_control) {
            return Err(format!("cascade {step}: model must be a non-empty name"));
        }
        let auth = endpoint
            .api_key
            .as_ref()
            .map(|key| crate::http::secret_header(&format!("Bearer {}", key.expose())))
            .transpose()
            .map_err(|e| format!("cascade {step}: api_key {e}"))?;
        Ok(Endpoint {
            url,
            model: model.to_owned(),
            auth,
        })
    }
}

impl Cascade {
    /// Checks `settings`; the error names the problem (never a key).
    pub fn new(settings: CascadeSettings) -> Result<Cascade, String> {
        let transcription = Endpoint::new(
            "transcription",
            &settings.transcription,
            "audio/transcriptions",
        )?;
        let speech = Endpoint::new("speech", &settings.speech, "audio/speech")?;
        if !(8_000..=48_000).contains(&settings.sample_rate) {
            return Err("cascade: sample_rate must be between 8000 and 48000".to_owned());
        }
        if !settings.speech_threshold.is_finite() || settings.speech_threshold < 0.0 {
            return Err("cascade: speech_threshold must be a non-negative number".to_owned());
        }
        if settings.hangover.is_zero() || settings.timeout.is_zero() {
            return Err("cascade: hangover and timeout must be positive".to_owned());
        }
        let voice = settings.speech.voice.as_deref().map(str::trim);
        let voice = voice.filter(|v| !v.is_empty());
        Ok(Cascade {
            shared: Arc::new(Shared {
                client: crate::http::client().map_err(|e| format!("cascade: {e}"))?,
                transcription,
                speech,
                voice: voice.unwrap_or(CascadeSettings::DEFAULT_VOICE).to_owned(),
                model: settings.model,
                format: AudioFormat {
                    codec: PCM.to_owned(),
                    sample_rate: settings.sample_rate,
                    channels: 1,
                },
                speech_threshold: settings.speech_threshold,
                hangover: settings.hangover,
                timeout: settings.timeout,
            }),
        })
    }
}

#[async_trait]
impl RealtimeProvider for Cascade {
    async fn open(&self, spec: CallSpec) -> Result<CallLink, CallError> {
        let (input, input_rx) = mpsc::channel(INPUT_CAPACITY);
        let (events_tx, events) = mpsc::channel(EVENT_CAPACITY);
        // The channel is new: there is room.
        let _ = events_tx.try_send(CallEvent::Ready {
            effective: self.shared.format.clone(),
        });
        let call = Call::new(self.shared.clone(), spec, events_tx);
        tokio::spawn(call.run(input_rx));
        Ok(CallLink { input, events })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

/// The call is over: the server is gone, or it failed.
struct Over;

/// What a reply's task tells the call.
enum ReplyMessage {
    Text(String),
    ToolCall(ModelToolCall),
    /// Speech at the call's rate.
    Audio(Vec<u8>),
    /// All of the reply's text and audio was sent.
    Done,
    Failed(CallError),
}

/// The reply being prepared (its task runs) and spoken.
struct Reply {
    response: ResponseId,
    task: JoinHandle<()>,
    messages: mpsc::Receiver<ReplyMessage>,
    /// Towards the task; none once the call's input closed.
    tool_outputs: Option<mpsc::UnboundedSender<(String, String)>>,
    /// Tool calls whose output the task waits for.
    awaited: HashSet<String>,
    /// The text streamed so far.
    text: String,
}

type Transcription = JoinHandle<Result<String, CallError>>;

struct Call {
    shared: Arc<Shared>,
    system: Option<String>,
    tools: Arc<[ToolSpec]>,
    events: mpsc::Sender<CallEvent>,
    vad: Vad,
    speaker: Speaker,
    /// Utterances waiting for their transcription, in order.
    utterances: VecDeque<Vec<u8>>,
    transcribing: Option<Transcription>,
    /// The call's transcript, roles alternating.
    history: VecDeque<(Role, String)>,
    /// The latest transcripts have no reply yet.
    unanswered: bool,
    next_response: ResponseId,
    reply: Option<Reply>,
    /// Tool outputs can still arrive.
    input_open: bool,
}

impl Call {
    fn new(shared: Arc<Shared>, spec: CallSpec, events: mpsc::Sender<CallEvent>) -> Call {
        let vad = Vad::new(&shared.format, shared.speech_threshold, shared.hangover);
        let speaker = Speaker::new(vad.window());
        let system = Some(spec.instructions).filter(|s| !s.trim().is_empty());
        Call {
            shared,
            system,
            tools: spec.tools.into(),
            events,
            vad,
            speaker,
            utterances: VecDeque::new(),
            transcribing: None,
            history: VecDeque::new(),
            unanswered: false,
            next_response: 0,
            reply: None,
            input_open: true,
        }
    }

    async fn run(mut self, mut input: mpsc::Receiver<CallInput>) {
        let _ = self.serve(&mut input).await;
    }

    async fn serve(&mut self, input: &mut mpsc::Receiver<CallInput>) -> Result<(), Over> {
        let mut pace = crate::vad::pace();
        let mut ending = false;
        loop {
            tokio::select! {
                biased;
                next = input.recv(), if self.input_open => match next {
                    Some(CallInput::Audio(pcm)) if !ending => self.hear(&pcm).await?,
                    Some(CallInput::Audio(_)) => {}
                    Some(CallInput::ToolOutput { call_id, output }) => {
                        self.tool_output(call_id, output);
                    }
                    Some(CallInput::End) => {
                        ending = true;
                        self.end_speech();
                    }
                    None => {
                        ending = true;
                        self.end_speech();
                        self.input_open = false;
                        if let Some(reply) = &mut self.reply {
                            reply.tool_outputs = None;
                        }
                    }
                },
                done = task_outcome(
                    &mut self.transcribing,
                    "cascade transcription: the task failed",
                ) => {
                    self.transcribing = None;
                    self.transcript(done).await?;
                }
                message = replied(&mut self.reply) => self.reply_message(message).await?,
                _ = pace.tick(), if self.speaker.ready() => {
                    if let Some(event) = self.speaker.tick() {
                        self.emit(event).await?;
                    }
                }
            }
            self.next_step();
            if ending && self.idle() {
                return Ok(());
            }
        }
    }

    async fn emit(&self, event: CallEvent) -> Result<(), Over> {
        self.events.send(event).await.map_err(|_| Over)
    }

    async fn fail(&self, error: CallError) -> Result<(), Over> {
        tracing::warn!(error = %error, "a cascade voice call failed");
        let _ = self.events.send(CallEvent::Failed(error)).await;
        Err(Over)
    }

    async fn hear(&mut self, pcm: &[u8]) -> Result<(), Over> {
        for heard in self.vad.push(pcm) {
            match heard {
                VadEvent::Started => {
                    self.emit(CallEvent::SpeechStarted).await?;
                    self.barge_in().await?;
                }
                VadEvent::Ended(audio) => self.utterances.push_back(audio),
            }
        }
        Ok(())
    }

    /// The caller speaks: the reply being prepared or spoken stops.
    async fn barge_in(&mut self) -> Result<(), Over> {
        if let Some(reply) = self.reply.take() {
            reply.task.abort();
            self.remember(Role::Assistant, &reply.text);
        }
        match self.speaker.interrupt() {
            Some(response) => {
                let done = CallEvent::ResponseDone {
                    response,
                    interrupted: true,
                };
                self.emit(done).await
            }
            None => Ok(()),
        }
    }

    /// The utterance in progress, if any, is over.
    fn end_speech(&mut self) {
        if let Some(audio) = self.vad.finish() {
            self.utterances.push_back(audio);
        }
    }

    fn tool_output(&mut self, call_id: String, output: String) {
        if let Some(reply) = &mut self.reply
            && reply.awaited.remove(&call_id)
            && let Some(outputs) = &reply.tool_outputs
        {
            let _ = outputs.send((call_id, output));
        }
    }

    async fn transcript(&mut self, done: Result<String, CallError>) -> Result<(), Over> {
        let text = match done {
            Ok(text) => text,
            Err(error) => return self.fail(error).await,
        };
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        self.remember(Role::User, text);
        self.unanswered = true;
        let text = text.to_owned();
        self.emit(CallEvent::UserTranscript { text }).await
    }

    /// Adds to the transcript the model sees: a message of the same role as
    /// the last one joins it; the oldest go past the bound.
    fn remember(&mut self, role: Role, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        match self.history.back_mut() {
            Some((last, joined)) if *last == role => {
                joined.push(' ');
                joined.push_str(text);
            }
            _ => self.history.push_back((role, text.to_owned())),
        }
        while self.history.len() > HISTORY_MESSAGES
            || self
                .history
                .front()
                .is_some_and(|(r, _)| *r == Role::Assistant)
        {
            self.history.pop_front();
        }
    }

    async fn reply_message(&mut self, message: Option<ReplyMessage>) -> Result<(), Over> {
        let Some(reply) = &mut self.reply else {
            return Ok(());
        };
        let response = reply.response;
        match message {
            Some(ReplyMessage::Text(delta)) => {
                reply.text.push_str(&delta);
                self.emit(CallEvent::AssistantText { response, delta })
                    .await
            }
            Some(ReplyMessage::ToolCall(call)) => {
                reply.awaited.insert(call.id.clone());
                let call = CallEvent::ToolCall {
                    call_id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                };
                self.emit(call).await
            }
            Some(ReplyMessage::Audio(pcm)) => {
                self.speaker.push(&pcm);
                Ok(())
            }
            Some(ReplyMessage::Done) => {
                let text = std::mem::take(&mut reply.text);
                self.reply = None;
                self.remember(Role::Assistant, &text);
                self.speaker.finish();
                Ok(())
            }
            Some(ReplyMessage::Failed(error)) => self.fail(error).await,
            None => {
                self.fail(CallError::new(
                    CallFailure::Internal,
                    "cascade: the reply stopped",
                ))
                .await
            }
        }
    }

    /// Transcribes the next utterance; answers once the caller is quiet and
    /// everything said is transcribed.
    fn next_step(&mut self) {
        if self.transcribing.is_none()
            && let Some(audio) = self.utterances.pop_front()
        {
            let shared = self.shared.clone();
            let task = async move { transcribe(&shared, audio).await };
            self.transcribing = Some(tokio::spawn(task));
        }
        let quiet = !self.vad.speaking() && self.transcribing.is_none();
        if self.unanswered && quiet && self.reply.is_none() && !self.speaker.active() {
            self.start_reply();
        }
    }

    fn start_reply(&mut self) {
        self.unanswered = false;
        let response = self.next_response;
        self.next_response += 1;
        let messages = self
            .history
            .iter()
            .map(|(role, text)| match role {
                Role::User => ModelMessage::User {
                    text: Cow::Owned(text.clone()),
                    parts: Cow::Borrowed(&[]),
                },
                Role::Assistant => ModelMessage::Assistant {
                    text: Cow::Owned(text.clone()),
                    tool_calls: Vec::new(),
                },
            })
            .collect();
        let (out, replies) = mpsc::channel(REPLY_CAPACITY);
        let (tool_outputs, tool_rx) = mpsc::unbounded_channel();
        let job = ReplyJob {
            shared: self.shared.clone(),
            system: self.system.clone(),
            tools: self.tools.clone(),
            messages,
            out,
            tool_outputs: tool_rx,
        };
        self.speaker.start(response);
        self.reply = Some(Reply {
            response,
            task: tokio::spawn(answer(job)),
            messages: replies,
            tool_outputs: self.input_open.then_some(tool_outputs),
            awaited: HashSet::new(),
            text: String::new(),
        });
    }

    /// Nothing said is left to transcribe, answer or speak.
    fn idle(&self) -> bool {
        !self.vad.speaking()
            && self.utterances.is_empty()
            && self.transcribing.is_none()
            && !self.unanswered
            && self.reply.is_none()
            && !self.speaker.active()
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(task) = &self.transcribing {
            task.abort();
        }
        if let Some(reply) = &self.reply {
            reply.task.abort();
        }
    }
}

async fn replied(reply: &mut Option<Reply>) -> Option<ReplyMessage> {
    match reply {
        Some(reply) => reply.messages.recv().await,
        None => std::future::pending().await,
    }
}

/// What a reply's task needs.
struct ReplyJob {
    shared: Arc<Shared>,
    system: Option<String>,
    tools: Arc<[ToolSpec]>,
    messages: Vec<ModelMessage<'static>>,
    out: mpsc::Sender<ReplyMessage>,
    tool_outputs: mpsc::UnboundedReceiver<(String, String)>,
}

/// Text towards the speech side of a reply.
enum Feed {
    Text(String),
    /// Speak what is pending now, sentence or not (a tool call follows).
    Flush,
}

/// A reply's task: the model's rounds, and beside them its speech.
async fn answer(job: ReplyJob) {
    let out = job.out.clone();
    let shared = job.shared.clone();
    let (feed, fed) = mpsc::unbounded_channel();
    let done = tokio::try_join!(think(job, feed), speak(&shared, fed, &out));
    let message = match done {
        Ok(_) => ReplyMessage::Done,
        Err(error) => ReplyMessage::Failed(error),
    };
    let _ = out.send(message).await;
}

/// Streams the model's text to the call and to `feed`; runs its tool rounds.
async fn think(job: ReplyJob, feed: mpsc::UnboundedSender<Feed>) -> Result<(), CallError> {
    let ReplyJob {
        shared,
        system,
        tools,
        mut messages,
        out,
        mut tool_outputs,
    } = job;
    let sink = ReplySink {
        out: &out,
        feed: &feed,
    };
    for round in 0..=MAX_TOOL_ROUNDS {
        let offered = round < MAX_TOOL_ROUNDS && !tools.is_empty();
        let request = ModelRequest {
            system: system.clone(),
            messages: messages.clone(),
            tools: if offered { tools.to_vec() } else { Vec::new() },
            ..ModelRequest::default()
        };
        let reply = shared.model.complete(&request, &sink).await.map_err(|e| {
            CallError::new(CallFailure::ProviderError, format!("cascade model: {e}"))
        })?;
        if !offered || reply.tool_calls.is_empty() {
            break;
        }
        let _ = feed.send(Feed::Flush);
        let wanted: HashSet<&str> = reply.tool_calls.iter().map(|c| c.id.as_str()).collect();
        for call in &reply.tool_calls {
            let gone = |_| CallError::new(CallFailure::Internal, "cascade: the call is gone");
            out.send(ReplyMessage::ToolCall(call.clone()))
                .await
                .map_err(gone)?;
        }
        let mut outputs = HashMap::new();
        while outputs.len() < wanted.len() {
            let Some((call_id, output)) = tool_outputs.recv().await else {
                return Err(CallError::new(
                    CallFailure::Internal,
                    "cascade: the call ended before a tool's output",
                ));
            };
            if wanted.contains(call_id.as_str()) {
                outputs.insert(call_id, output);
            }
        }
        messages.push(ModelMessage::Assistant {
            text: Cow::Owned(reply.text),
            tool_calls: reply.tool_calls.clone(),
        });
        for call in reply.tool_calls {
            messages.push(ModelMessage::Tool {
                content: Cow::Owned(outputs.remove(&call.id).unwrap_or_default()),
                call_id: call.id,
                name: call.name,
                is_error: false,
            });
        }
    }
    Ok(())
}

struct ReplySink<'a> {
    out: &'a mpsc::Sender<ReplyMessage>,
    feed: &'a mpsc::UnboundedSender<Feed>,
}

#[async_trait]
impl<'a> TextSink for ReplySink<'a> {
    async fn text(&self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        let _ = self.out.send(ReplyMessage::Text(delta.to_owned())).await;
        let _ = self.feed.send(Feed::Text(delta.to_owned()));
    }
}

/// Synthesizes the fed text a sentence at a time, in order, while more
/// streams in; ends when the feed closes and everything is spoken.
async fn speak(
    shared: &Shared,
    mut fed: mpsc::UnboundedReceiver<Feed>,
    out: &mpsc::Sender<ReplyMessage>,
) -> Result<(), CallError> {
    let mut pending = String::new();
    let mut open = true;
    let mut flush = false;
    loop {
        let sentence = match next_sentence(&mut pending) {
            Some(sentence) => sentence,
            None if flush || !open => {
                flush = false;
                if pending.is_empty() && !open {
                    return Ok(());
                }
                std::mem::take(&mut pending)
            }
            None => {
                match fed.recv().await {
                    Some(Feed::Text(text)) => pending.push_str(&text),
                    Some(Feed::Flush) => flush = true,
                    None => open = false,
                }
                continue;
            }
        };
        if sentence.chars().any(char::is_alphanumeric) {
            let pcm = synthesize(shared, sentence.trim()).await?;
            if out.send(ReplyMessage::Audio(pcm)).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// Takes the first whole sentence off `pending`: up to a line break, or to
/// `.`, `!`, `?` or `…` followed by white space.
fn next_sentence(pending: &mut String) -> Option<String> {
    let mut chars = pending.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let boundary = match c {
            '\n' => true,
            '.' | '!' | '?' | '…' => chars.peek().is_some_and(|(_, next)| next.is_whitespace()),
            _ => false,
        };
        if boundary {
            let end = i + c.len_utf8();
            let sentence = pending[..end].to_owned();
            pending.drain(..end);
            return Some(sentence);
        }
    }
    None
}

#[cfg(test)]
mod tests;

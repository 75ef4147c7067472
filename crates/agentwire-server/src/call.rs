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

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentwire_core::engine::VoiceExchange;
use agentwire_core::realtime::{CallEvent, CallInput, CallSpec, PCM, RealtimeProvider, ResponseId};
use agentwire_core::{Agent, AudioFormat, ErrorCode, SessionId};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::AppState;

/// Output a call queues for its connection: a second of 20 ms audio frames
/// and the control frames among them.
const OUTPUT_CAPACITY: usize = 64;
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
}

/// The server's calls: how many are open, against `server.limits.max_calls`.
#[derive(Default)]
pub struct Calls {
    active: AtomicUsize,
}

impl Calls {
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    fn try_take(state: &Arc<AppState>) -> Option<CallSlot> {
        let max = state.settings.limits.max_calls;
        state
            .calls
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
        self.0.calls.active.fetch_sub(1, Ordering::AcqRel);
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
    /// `error`; the call is over.
    Failed { code: ErrorCode, message: String },
}

/// Whose call it is and where its exchanges are stored.
pub(crate) struct CallOwner {
    pub(crate) agent: Arc<Agent>,
    pub(crate) namespace: String,
    pub(crate) owner: Option<String>,
    pub(crate) session: SessionId,
}

/// A connection's side of an open call.
pub(crate) struct CallHandle {
    pub(crate) input: mpsc::Sender<CallInput>,
    pub(crate) output: mpsc::Receiver<CallOutput>,
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
    let spec = CallSpec {
        instructions: voice.instructions.clone(),
        proposed,
    };
    let link = match voice.provider.open(spec).await {
        Ok(link) => link,
        Err(e) => {
            tracing::warn!(error = %e, "a voice call could not open");
            state.metrics.count_call_failure();
            return Err((ErrorCode::DuplexError, CALL_FAILED));
        }
    };
    let (output, output_rx) = mpsc::channel(OUTPUT_CAPACITY);
    let task = CallTask {
        state: state.clone(),
        owner,
        output,
        exchange: VoiceExchange::default(),
        speaking: None,
        interrupted: None,
        sequence: 0,
        _slot: slot,
    };
    tokio::spawn(task.run(link.events));
    Ok(CallHandle {
        input: link.input,
        output: output_rx,
    })
}

struct CallTask {
    state: Arc<AppState>,
    owner: CallOwner,
    output: mpsc::Sender<CallOutput>,
    /// The response being spoken: what was said and what it answers.
    exchange: VoiceExchange,
    /// The response whose audio is going out now.
    speaking: Option<ResponseId>,
    /// The response the caller barged in on: nothing more of it is sent.
    interrupted: Option<ResponseId>,
    /// Audio frames sent, for their `sequence`.
    sequence: u32,
    _slot: CallSlot,
}

/// The connection is gone (it dropped its handle).
struct Detached;

impl CallTask {
    async fn run(mut self, mut events: mpsc::Receiver<CallEvent>) {
        self.state
            .metrics
            .calls_opened
            .fetch_add(1, Ordering::Relaxed);
        while let Some(event) = events.recv().await {
            match self.on_event(event).await {
                Ok(true) => {}
                Ok(false) | Err(Detached) => break,
            }
        }
        // Dropping `events` tells the provider the call is over.
    }

    async fn send(&self, output: CallOutput) -> Result<(), Detached> {
        self.output.send(output).await.map_err(|_| Detached)
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
                self.send(CallOutput::Config(effective)).await?;
            }
            CallEvent::SpeechStarted => {
                if let Some(response) = self.speaking.take() {
                    self.interrupted = Some(response);
                    self.state
                        .metrics
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
            } => {
                if interrupted && self.speaking == Some(response) {
                    // The provider stopped it before we saw the speech.
                    self.speaking = None;
                    self.state
                        .metrics
                        .call_barge_ins
                        .fetch_add(1, Ordering::Relaxed);
                    self.send(CallOutput::Interrupt).await?;
                }
                let mut exchange = std::mem::take(&mut self.exchange);
                exchange.interrupted = interrupted || self.interrupted == Some(response);
                if self.speaking == Some(response) {
                    self.speaking = None;
                }
                // As for a text turn, `done` means stored.
                self.store(exchange).await;
                self.send(CallOutput::Done).await?;
            }
            CallEvent::Failed(e) => {
                tracing::warn!(error = %e, "a voice call failed");
                self.state.metrics.count_call_failure();
                let (code, message) = (ErrorCode::DuplexError, CALL_FAILED.to_owned());
                self.send(CallOutput::Failed { code, message }).await?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn on_audio(&mut self, response: ResponseId, pcm: Vec<u8>) -> Result<(), Detached> {
        if self.interrupted == Some(response) {
            return Ok(());
        }
        self.speaking = Some(response);
        let bytes = pcm.len() as u64;
        let audio = CallOutput::Audio {
            sequence: self.sequence,
            pcm,
            queued: Instant::now(),
        };
        self.sequence = self.sequence.wrapping_add(1);
        match self.output.try_send(audio) {
            Ok(()) => {
                let metrics = &self.state.metrics;
                metrics
                    .call_audio_out_bytes
                    .fetch_add(bytes, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.state
                    .metrics
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
            .engine
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

//! The realtime provider port: a voice call's link to a model that hears
//! and speaks (OpenAI Realtime, a speech-to-text → text model →
//! text-to-speech cascade, the scripted mock).
//!
//! A call is not a turn: it runs beside the session's text turns, for as
//! long as the caller talks, and each of its responses is stored as a
//! voice exchange (the caller's transcript and the reply's) when it ends.
//! The port is channels, not callbacks: the call's task (the server's, never
//! the socket's) owns the [`CallLink`], so the link outlives a socket that
//! drops (a parked call) and a provider never waits on a client.
//!
//! Audio is PCM16 little-endian at the call's effective format
//! ([`CallEvent::Ready`]); the server relays that format to the client and
//! does not resample.

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::turn::AudioFormat;

/// The codec of every call's audio: 16-bit signed little-endian PCM.
pub const PCM: &str = "pcm";

/// What a call opens with.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    /// The agent's instructions, as a text turn's model sees them.
    pub instructions: String,
    /// The client's proposal, from its first audio frame's metadata.
    pub proposed: AudioFormat,
    /// The server-side tools the model may call in the call
    /// ([`CallEvent::ToolCall`]).
    pub tools: Vec<crate::model::ToolSpec>,
}

/// The two ends of an open call, as the provider hands them over.
pub struct CallLink {
    /// Towards the provider. Bounded: a provider that cannot keep up makes
    /// `try_send` fail, and the server ends the call rather than drop the
    /// caller's audio (which would corrupt what the provider hears).
    pub input: mpsc::Sender<CallInput>,
    /// From the provider, in order. The provider closes it when the call is
    /// over (after [`CallInput::End`], a fatal [`CallEvent::Failed`], or its
    /// own end).
    pub events: mpsc::Receiver<CallEvent>,
}

/// What the server sends a provider.
#[derive(Debug, Clone, PartialEq)]
pub enum CallInput {
    /// The caller's audio, at the effective format.
    Audio(Vec<u8>),
    /// The result of the provider's [`CallEvent::ToolCall`] `call_id`, as
    /// JSON text; the provider goes on answering with it.
    ToolOutput { call_id: String, output: String },
    /// The caller is done (the frame flagged IsLast): finish what was
    /// said, then close.
    End,
}

/// A response of the call, numbered by the provider from 0.
pub type ResponseId = u64;

/// What a provider tells the server, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    /// The call's effective audio format, once, before any audio out.
    Ready { effective: AudioFormat },
    /// The caller started speaking. While a response is being spoken this
    /// is a barge-in: the provider stops that response's audio.
    SpeechStarted,
    /// What the caller said in the utterance that just ended.
    UserTranscript { text: String },
    /// More of a response's transcript.
    AssistantText { response: ResponseId, delta: String },
    /// More of a response's audio.
    AudioOut { response: ResponseId, pcm: Vec<u8> },
    /// The model calls a tool; the server answers with
    /// [`CallInput::ToolOutput`].
    ToolCall {
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// The response is over: all of it was spoken, or (`interrupted`) the
    /// caller barged in and the rest was dropped.
    ResponseDone {
        response: ResponseId,
        interrupted: bool,
    },
    /// The call failed; nothing follows.
    Failed(CallError),
}

/// Why a call could not open or go on: a kind, classified where the
/// failure happens (never from the words), and words for the log.
/// `message` never carries a provider's body, a key or anything the caller
/// said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    pub failure: CallFailure,
    pub message: String,
}

impl CallError {
    pub fn new(failure: CallFailure, message: impl Into<String>) -> CallError {
        CallError {
            failure,
            message: message.into(),
        }
    }
}

/// What kind of failure ended a call (`agentwire_call_failures_total{code}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    /// The provider could not be reached: DNS, TCP, TLS, or its upgrade
    /// refused.
    Unreachable,
    /// It did not answer in time.
    Timeout,
    /// It answered with an error: an `error` event, an HTTP error status,
    /// or its text model's failure.
    ProviderError,
    /// It closed the link, or an answer broke off.
    Closed,
    /// What it sent could not be used: unreadable, too large, or audio the
    /// server cannot play.
    Unreadable,
    /// The adapter's own: one of its tasks failed.
    Internal,
}

impl CallFailure {
    pub const ALL: [CallFailure; 6] = [
        CallFailure::Unreachable,
        CallFailure::Timeout,
        CallFailure::ProviderError,
        CallFailure::Closed,
        CallFailure::Unreadable,
        CallFailure::Internal,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            CallFailure::Unreachable => "unreachable",
            CallFailure::Timeout => "timeout",
            CallFailure::ProviderError => "provider_error",
            CallFailure::Closed => "closed",
            CallFailure::Unreadable => "unreadable",
            CallFailure::Internal => "internal",
        }
    }
}

/// A source of voice calls, configured per agent.
#[async_trait]
pub trait RealtimeProvider: Send + Sync + 'static {
    /// Opens a call. The link's first event is [`CallEvent::Ready`] (or a
    /// failure).
    async fn open(&self, spec: CallSpec) -> Result<CallLink, CallError>;
}

/// Bytes of `duration_ms` of audio at `format`.
pub fn pcm_bytes(format: &AudioFormat, duration_ms: u64) -> usize {
    let per_second = u64::from(format.sample_rate) * u64::from(format.channels) * 2;
    usize::try_from(per_second * duration_ms / 1000).unwrap_or(usize::MAX)
}

/// Milliseconds `bytes` of audio at `format` last.
pub fn pcm_millis(format: &AudioFormat, bytes: usize) -> u64 {
    let per_second = u64::from(format.sample_rate) * u64::from(format.channels) * 2;
    match per_second {
        0 => 0,
        _ => bytes as u64 * 1000 / per_second,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_agree() {
        let format = AudioFormat {
            codec: PCM.into(),
            sample_rate: 16_000,
            channels: 1,
        };
        assert_eq!(pcm_bytes(&format, 20), 640);
        assert_eq!(pcm_millis(&format, 32_000), 1000);
        let silent = AudioFormat {
            sample_rate: 0,
            ..format
        };
        assert_eq!(pcm_millis(&silent, 10), 0);
    }
}

//! For the fuzz targets (`fuzz/`): the providers' stream decoders over a
//! body in memory, exactly as a response body is read, without the HTTP.
//! Not an API.

use std::time::Duration;

use agentwire_core::{ModelReply, TextSink};
use bytes::Bytes;

use crate::http::{SseStream, Timeouts};

/// No deadline a body in memory could reach.
const TIMEOUTS: Timeouts = Timeouts {
    first_token: Duration::from_secs(3600),
    idle: Duration::from_secs(3600),
};

/// An OpenAI-compatible streamed body, delivered in `pieces`: the reply,
/// or the failure (its fault, and whether text had been streamed) as text.
/// Needs a Tokio runtime with its timer.
pub async fn openai_stream(pieces: Vec<Bytes>, sink: &dyn TextSink) -> Result<ModelReply, String> {
    crate::streaming::read::<crate::openai::OpenAi>(SseStream::from_pieces(pieces, TIMEOUTS), sink)
        .await
        .map_err(|f| format!("{:?} (streamed: {})", f.fault, f.streamed))
}

/// An Anthropic Messages streamed body, as [`openai_stream`].
pub async fn anthropic_stream(
    pieces: Vec<Bytes>,
    sink: &dyn TextSink,
) -> Result<ModelReply, String> {
    crate::streaming::read::<crate::anthropic::Anthropic>(
        SseStream::from_pieces(pieces, TIMEOUTS),
        sink,
    )
    .await
    .map_err(|f| format!("{:?} (streamed: {})", f.fault, f.streamed))
}

/// The cascade's speech answer (raw 24 kHz PCM16 or a WAV file) as PCM16
/// at a call's `rate`, or why it cannot be played.
pub fn cascade_speech(answer: &[u8], rate: u32) -> Result<Vec<u8>, &'static str> {
    crate::cascade::wire::speech_pcm(answer.to_vec(), rate)
}

/// An OpenAI Realtime server event as a call reads it.
#[derive(Debug)]
pub struct RealtimeEvent {
    /// Its type, as the adapter's list spells it.
    pub kind: &'static str,
    /// For an `error` event, the words it becomes (they reach the log).
    pub error: Option<String>,
    /// For an audio delta, the decoded bytes.
    pub audio_bytes: usize,
}

/// Decodes one text frame from an OpenAI Realtime server; `None` when the
/// adapter counts it as unknown.
pub fn openai_realtime_event(text: &str) -> Option<RealtimeEvent> {
    use crate::openai_realtime::wire::{ServerEvent, decode};
    let (kind, event) = decode(text)?;
    Some(RealtimeEvent {
        kind,
        error: match &event {
            ServerEvent::Error(words) => Some(words.clone()),
            _ => None,
        },
        audio_bytes: match &event {
            ServerEvent::Audio { pcm, .. } => pcm.len(),
            _ => 0,
        },
    })
}

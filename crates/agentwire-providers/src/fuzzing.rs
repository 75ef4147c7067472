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
    crate::openai::read_stream(SseStream::from_pieces(pieces, TIMEOUTS), sink)
        .await
        .map_err(|f| format!("{:?} (streamed: {})", f.fault, f.streamed))
}

/// An Anthropic Messages streamed body, as [`openai_stream`].
pub async fn anthropic_stream(
    pieces: Vec<Bytes>,
    sink: &dyn TextSink,
) -> Result<ModelReply, String> {
    crate::anthropic::read_stream(SseStream::from_pieces(pieces, TIMEOUTS), sink)
        .await
        .map_err(|f| format!("{:?} (streamed: {})", f.fault, f.streamed))
}

/// The cascade's speech answer (raw 24 kHz PCM16 or a WAV file) as PCM16
/// at a call's `rate`, or why it cannot be played.
pub fn cascade_speech(answer: &[u8], rate: u32) -> Result<Vec<u8>, &'static str> {
    crate::cascade::wire::speech_pcm(answer.to_vec(), rate)
}

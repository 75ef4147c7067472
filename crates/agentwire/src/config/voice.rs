//! `voice_providers[]`: the realtime voice providers agents name in
//! `agents[].voice`, for voice calls on the Omnia endpoint.

use std::time::Duration;

use agentwire_core::AudioFormat;
use agentwire_providers::{MockVoice, MockVoiceOutput, MockVoiceTool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// A validated `voice_providers[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceProviderConfig {
    pub name: String,
    pub kind: VoiceKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum VoiceKind {
    /// The scripted provider (`type: mock`).
    Mock(MockVoice),
}

/// One entry of `voice_providers[]`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVoiceProvider {
    /// The name agents use in `voice`: 1 to 64 ASCII letters, digits, `.`,
    /// `_`, `-`.
    name: String,
    /// `mock`: the scripted provider (energy voice detection, echo or tone
    /// replies, barge-in), offline.
    #[serde(rename = "type")]
    kind: RawVoiceKind,
    /// `mock`: `tone` (a 440 Hz sine as long as the reply takes to say; the
    /// default) or `echo` (the caller's own audio back).
    output: Option<RawVoiceOutput>,
    /// `mock`: the transcript of every reply. Default: "I heard you.".
    reply: Option<String>,
    /// `mock`: the transcripts of the caller's first utterances, in order;
    /// later ones read `utterance <n> (<ms> ms)`. Default: none.
    #[serde(default)]
    user_transcripts: Vec<String>,
    /// `mock`: the format the provider insists on instead of the caller's
    /// proposal (relayed in `session_config`). Default: the proposal.
    counter_offer: Option<RawAudioFormat>,
    /// `mock`: fail the call (`DUPLEX_ERROR`) after this many audio frames.
    /// Default: never.
    fail_after_frames: Option<u64>,
    /// `mock`: the RMS level (of 16-bit samples, 0 to 32767) above which
    /// 20 ms of audio is speech. Default: 500.
    speech_threshold: Option<f64>,
    /// `mock`: silence that ends an utterance. Default: 300ms.
    hangover: Option<ConfigDuration>,
    /// `mock`: a tool the model calls after every utterance (one of the
    /// agent's server tools); the reply waits for its output and ends with
    /// it. Default: none.
    tool: Option<RawVoiceTool>,
}

/// A scripted tool call.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawVoiceTool {
    /// The tool's name.
    name: String,
    /// Its arguments, a JSON object. Default: `{}`.
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum RawVoiceKind {
    Mock,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum RawVoiceOutput {
    Tone,
    Echo,
}

/// An audio format: PCM16 at a rate, in channels.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAudioFormat {
    /// Default: `pcm`.
    codec: Option<String>,
    /// Samples per second, 8000 to 48000.
    sample_rate: u32,
    /// Default: 1.
    channels: Option<u32>,
}

pub(super) fn validate(
    index: usize,
    raw: RawVoiceProvider,
) -> Result<VoiceProviderConfig, ConfigError> {
    let key = |field: &str| format!("voice_providers[{index}].{field}");
    let valid_name = !raw.name.is_empty()
        && raw.name.len() <= 64
        && raw
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid_name {
        return Err(ConfigError::new(
            key("name"),
            "1 to 64 ASCII letters, digits, '.', '_' or '-'",
        ));
    }
    let defaults = MockVoice::default();
    let speech_threshold = raw.speech_threshold.unwrap_or(defaults.speech_threshold);
    if !(0.0..=32767.0).contains(&speech_threshold) {
        return Err(ConfigError::new(
            key("speech_threshold"),
            "between 0 and 32767",
        ));
    }
    let hangover = raw.hangover.map_or(defaults.hangover, |d| d.0);
    if hangover < Duration::from_millis(20) {
        return Err(ConfigError::new(key("hangover"), "at least 20ms"));
    }
    let counter_offer = match raw.counter_offer {
        None => None,
        Some(format) => {
            if !(8_000..=48_000).contains(&format.sample_rate) {
                return Err(ConfigError::new(
                    key("counter_offer.sample_rate"),
                    "between 8000 and 48000",
                ));
            }
            Some(AudioFormat {
                codec: format
                    .codec
                    .unwrap_or_else(|| agentwire_core::realtime::PCM.to_owned()),
                sample_rate: format.sample_rate,
                channels: format.channels.unwrap_or(1),
            })
        }
    };
    let RawVoiceKind::Mock = raw.kind;
    let script = MockVoice {
        output: match raw.output {
            None | Some(RawVoiceOutput::Tone) => MockVoiceOutput::Tone,
            Some(RawVoiceOutput::Echo) => MockVoiceOutput::Echo,
        },
        reply: raw.reply.unwrap_or(defaults.reply),
        user_transcripts: raw.user_transcripts,
        counter_offer,
        fail_after_frames: raw.fail_after_frames,
        speech_threshold,
        hangover,
        tool: raw.tool.map(|tool| MockVoiceTool {
            name: tool.name,
            arguments: serde_json::Value::Object(tool.arguments),
        }),
    };
    Ok(VoiceProviderConfig {
        name: raw.name,
        kind: VoiceKind::Mock(script),
    })
}

/// `agents[index].voice`, checked against the providers.
pub(super) fn validate_agent_voice(
    index: usize,
    voice: Option<String>,
    providers: &[VoiceProviderConfig],
) -> Result<Option<String>, ConfigError> {
    match voice {
        Some(name) if !providers.iter().any(|p| p.name == name) => Err(ConfigError::new(
            format!("agents[{index}].voice"),
            format!("no voice provider named {name:?} in voice_providers[]"),
        )),
        voice => Ok(voice),
    }
}

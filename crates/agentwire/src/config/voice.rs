//! `voice_providers[]`: the realtime voice providers agents name in
//! `agents[].voice`, for voice calls on the Omnia endpoint.

use std::time::Duration;

use agentwire_core::AudioFormat;
use agentwire_providers::{
    Cascade, CascadeSettings, MockVoice, MockVoiceOutput, MockVoiceTool, OpenAiRealtime,
    OpenAiRealtimeSettings, ProviderSettings, SpeechEndpoint,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// A validated `voice_providers[]` entry.
#[derive(Debug, Clone)]
pub struct VoiceProviderConfig {
    pub name: String,
    pub kind: VoiceKind,
}

#[derive(Debug, Clone)]
pub enum VoiceKind {
    /// The scripted provider (`type: mock`).
    Mock(MockVoice),
    /// The OpenAI Realtime API (`type: openai_realtime`), checked and built.
    OpenAiRealtime(OpenAiRealtime),
    /// Speech-to-text, a text model, text-to-speech (`type: cascade`),
    /// checked and built.
    Cascade(Cascade),
}

/// One entry of `voice_providers[]`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVoiceProvider {
    /// The name agents use in `voice`: 1 to 64 ASCII letters, digits, `.`,
    /// `_`, `-`.
    name: String,
    /// `mock`: the scripted provider (energy voice detection, echo or tone
    /// replies, barge-in), offline. `openai_realtime`: the OpenAI Realtime
    /// API over WebSocket (24 kHz PCM, server-side voice detection).
    #[serde(rename = "type")]
    kind: RawVoiceKind,
    /// `openai_realtime`: the model, such as `gpt-realtime`. Required.
    model: Option<String>,
    /// `openai_realtime`: the API key. A secret: use `${VAR}`. Not with
    /// `api_key_env`; one of the two is required.
    api_key: Option<String>,
    /// `openai_realtime`: the name of an environment variable holding the
    /// API key (it must be set).
    api_key_env: Option<String>,
    /// `openai_realtime`: the endpoint, `wss://` or `ws://`. Default:
    /// `wss://api.openai.com/v1/realtime`.
    url: Option<String>,
    /// `openai_realtime`: the voice, such as `alloy`. Default: the
    /// provider's.
    voice: Option<String>,
    /// `openai_realtime`: the model that transcribes the caller. Default:
    /// `gpt-4o-mini-transcribe`.
    transcription_model: Option<String>,
    /// `openai_realtime`: the age at which a provider session is replaced by
    /// a fresh one seeded with the transcript (the provider ends sessions at
    /// 60 minutes). Default: 55m.
    session_cap: Option<ConfigDuration>,
    /// `cascade`: the text model that answers, a name from `providers[]`.
    /// Required.
    provider: Option<String>,
    /// `cascade`: the OpenAI-compatible speech-to-text endpoint
    /// (`POST {base_url}/audio/transcriptions`, such as a local whisper
    /// server). Required.
    transcription: Option<RawEndpoint>,
    /// `cascade`: the OpenAI-compatible text-to-speech endpoint
    /// (`POST {base_url}/audio/speech`). Required.
    speech: Option<RawEndpoint>,
    /// `cascade`: the call's audio rate, 8000 to 48000 (relayed in
    /// `session_config`; speech is resampled to it). Default: 16000.
    sample_rate: Option<u32>,
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
    /// agent's tools: a server tool runs on the server, a client tool is
    /// asked of the caller's client); the reply waits for its output and
    /// ends with it. Default: none.
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

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum RawVoiceKind {
    Mock,
    OpenaiRealtime,
    Cascade,
}

/// An OpenAI-compatible audio endpoint of a cascade.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawEndpoint {
    /// The API's base URL, such as `http://localhost:8000/v1`. Default:
    /// `https://api.openai.com/v1`.
    base_url: Option<String>,
    /// The model, such as `whisper-1` or `tts-1`. Required.
    model: String,
    /// `speech` only: the voice. Default: `alloy`.
    voice: Option<String>,
    /// The API key, sent as a bearer token. Default: none. A secret: use
    /// `${VAR}`. Not with `api_key_env`.
    api_key: Option<String>,
    /// The name of an environment variable holding the API key.
    api_key_env: Option<String>,
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
    providers: &[ProviderSettings],
    lookup: &dyn Fn(&str) -> Option<String>,
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
    let name = raw.name.clone();
    let kind = match raw.kind {
        RawVoiceKind::Mock => {
            refuse(&key, "type: mock", &openai_fields(&raw))?;
            refuse(&key, "type: mock", &cascade_fields(&raw))?;
            VoiceKind::Mock(mock(&key, raw)?)
        }
        RawVoiceKind::OpenaiRealtime => {
            refuse(&key, "type: openai_realtime", &mock_fields(&raw))?;
            refuse(&key, "type: openai_realtime", &vad_fields(&raw))?;
            refuse(&key, "type: openai_realtime", &cascade_fields(&raw))?;
            VoiceKind::OpenAiRealtime(openai(&key, raw, lookup)?)
        }
        RawVoiceKind::Cascade => {
            refuse(&key, "type: cascade", &openai_fields(&raw))?;
            refuse(&key, "type: cascade", &mock_fields(&raw))?;
            VoiceKind::Cascade(cascade(&key, raw, providers, lookup)?)
        }
    };
    Ok(VoiceProviderConfig { name, kind })
}

fn openai_fields(raw: &RawVoiceProvider) -> [(&'static str, bool); 7] {
    [
        ("model", raw.model.is_some()),
        ("api_key", raw.api_key.is_some()),
        ("api_key_env", raw.api_key_env.is_some()),
        ("url", raw.url.is_some()),
        ("voice", raw.voice.is_some()),
        ("transcription_model", raw.transcription_model.is_some()),
        ("session_cap", raw.session_cap.is_some()),
    ]
}

fn mock_fields(raw: &RawVoiceProvider) -> [(&'static str, bool); 6] {
    [
        ("output", raw.output.is_some()),
        ("reply", raw.reply.is_some()),
        ("user_transcripts", !raw.user_transcripts.is_empty()),
        ("counter_offer", raw.counter_offer.is_some()),
        ("fail_after_frames", raw.fail_after_frames.is_some()),
        ("tool", raw.tool.is_some()),
    ]
}

/// The energy voice detection of `mock` and `cascade`.
fn vad_fields(raw: &RawVoiceProvider) -> [(&'static str, bool); 2] {
    [
        ("speech_threshold", raw.speech_threshold.is_some()),
        ("hangover", raw.hangover.is_some()),
    ]
}

fn cascade_fields(raw: &RawVoiceProvider) -> [(&'static str, bool); 4] {
    [
        ("provider", raw.provider.is_some()),
        ("transcription", raw.transcription.is_some()),
        ("speech", raw.speech.is_some()),
        ("sample_rate", raw.sample_rate.is_some()),
    ]
}

fn cascade(
    key: &dyn Fn(&str) -> String,
    raw: RawVoiceProvider,
    providers: &[ProviderSettings],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Cascade, ConfigError> {
    let name = raw
        .provider
        .ok_or_else(|| ConfigError::new(key("provider"), "required for `type: cascade`"))?;
    let settings = providers.iter().find(|p| p.name == name).ok_or_else(|| {
        ConfigError::new(
            key("provider"),
            format!("no provider named {name:?} in providers[]"),
        )
    })?;
    let model = agentwire_providers::build(settings.clone())
        .map_err(|e| ConfigError::new(key("provider"), e))?;
    let endpoint = |field: &str, raw: Option<RawEndpoint>| {
        let raw =
            raw.ok_or_else(|| ConfigError::new(key(field), "required for `type: cascade`"))?;
        let sub = |inner: &str| key(&format!("{field}.{inner}"));
        let mut endpoint = SpeechEndpoint::new(raw.base_url.unwrap_or_default(), raw.model);
        endpoint.voice = raw.voice;
        endpoint.api_key = super::runtime::api_key(&sub, raw.api_key, raw.api_key_env, lookup)?;
        Ok::<_, ConfigError>(endpoint)
    };
    let transcription = endpoint("transcription", raw.transcription)?;
    let speech = endpoint("speech", raw.speech)?;
    let mut settings = CascadeSettings::new(transcription, speech, model);
    if let Some(rate) = raw.sample_rate {
        settings.sample_rate = rate;
    }
    if let Some(threshold) = raw.speech_threshold {
        settings.speech_threshold = threshold;
    }
    if let Some(hangover) = raw.hangover {
        settings.hangover = hangover.0;
    }
    // Its checks name the endpoint or the setting in the message; the key
    // names the entry.
    Cascade::new(settings).map_err(|e| ConfigError::new(key("type"), e))
}

/// The first of `fields` that is set: not a field of `kind`.
fn refuse(
    key: &dyn Fn(&str) -> String,
    kind: &str,
    fields: &[(&'static str, bool)],
) -> Result<(), ConfigError> {
    super::refuse_given(key, fields, &format!("not for `{kind}`"))
}

fn openai(
    key: &dyn Fn(&str) -> String,
    raw: RawVoiceProvider,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<OpenAiRealtime, ConfigError> {
    let model = raw
        .model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ConfigError::new(key("model"), "required for `type: openai_realtime`"))?;
    let api_key =
        super::runtime::api_key(key, raw.api_key, raw.api_key_env, lookup)?.ok_or_else(|| {
            ConfigError::new(
                key("api_key"),
                "required for `type: openai_realtime` (or api_key_env)",
            )
        })?;
    let mut settings = OpenAiRealtimeSettings::new(model, api_key);
    if let Some(url) = raw.url {
        settings.url = url;
    }
    settings.voice = raw.voice;
    if let Some(model) = raw.transcription_model {
        settings.transcription_model = model;
    }
    if let Some(cap) = raw.session_cap {
        settings.session_cap = cap.0;
    }
    // Its checks (the URL, the timeouts, the key as a header value) never
    // quote the key.
    OpenAiRealtime::new(settings).map_err(|e| ConfigError::new(key("url"), e))
}

fn mock(key: &dyn Fn(&str) -> String, raw: RawVoiceProvider) -> Result<MockVoice, ConfigError> {
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
    Ok(MockVoice {
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

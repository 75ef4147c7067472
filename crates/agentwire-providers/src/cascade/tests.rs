//! Wire tests against in-process fake transcription and speech endpoints on
//! loopback (real sockets, the real wire formats), with the crate's scripted
//! text model: the request shapes, the event sequence, barge-in, tools and
//! failures. Real time: the output is paced.

use std::collections::BTreeMap;

use agentwire_core::{ModelReply, ProviderError};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::wire::*;
use super::*;
use crate::{MockScenario, MockTurn, ProviderKind, ProviderSettings};

/// Failures, settings and sentences.
mod checks;

const WAIT: Duration = Duration::from_secs(10);
const STT_KEY: &str = "sk-stt-SECRET-1111";
const TTS_KEY: &str = "sk-tts-SECRET-2222";
const SECRET_BODY: &str = "{\"error\":\"SECRET provider body\"}";

// ------------------------------------------------------------ fake endpoints

/// How the fake audio server answers.
#[derive(Clone)]
struct Script {
    /// By transcription request; the last repeats.
    transcripts: Vec<&'static str>,
    transcription_status: u16,
    speech_status: u16,
    /// Length of every synthesized sentence.
    speech_ms: u64,
    /// Answer speech as a WAV file at this rate, not raw 24 kHz PCM.
    speech_wav: Option<u32>,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            transcripts: vec!["what is the weather"],
            transcription_status: 200,
            speech_status: 200,
            speech_ms: 100,
            speech_wav: None,
        }
    }
}

struct Seen {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

struct FakeState {
    script: Script,
    seen: Mutex<Vec<Seen>>,
}

struct Fake {
    base_url: String,
    state: Arc<FakeState>,
}

async fn fake(script: Script) -> Fake {
    let state = Arc::new(FakeState {
        script,
        seen: Mutex::new(Vec::new()),
    });
    let app = Router::new().fallback(handle).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Fake { base_url, state }
}

impl Fake {
    /// The requests to `path`, in order: headers and body.
    fn requests(&self, path: &str) -> Vec<(HeaderMap, Bytes)> {
        let seen = self.state.seen.lock();
        let matching = seen.iter().filter(|s| s.path == path);
        matching
            .map(|s| (s.headers.clone(), s.body.clone()))
            .collect()
    }

    /// The speech requests' JSON bodies.
    fn speech_bodies(&self) -> Vec<Value> {
        let requests = self.requests("/v1/audio/speech");
        let body = |(_, body): &(HeaderMap, Bytes)| serde_json::from_slice(body).unwrap();
        requests.iter().map(body).collect()
    }
}

async fn handle(
    State(state): State<Arc<FakeState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let index = {
        let mut seen = state.seen.lock();
        let index = seen.iter().filter(|s| s.path == path).count();
        let body = body.clone();
        seen.push(Seen {
            path: path.clone(),
            headers,
            body,
        });
        index
    };
    let script = &state.script;
    let answer = |status: u16, content_type: &str, body: Vec<u8>| {
        Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap()
    };
    let refusal = |status| answer(status, "application/json", SECRET_BODY.into());
    match path.as_str() {
        "/v1/audio/transcriptions" if script.transcription_status != 200 => {
            refusal(script.transcription_status)
        }
        "/v1/audio/transcriptions" => {
            let text = script.transcripts[index.min(script.transcripts.len() - 1)];
            let body = json!({ "text": text }).to_string().into_bytes();
            answer(200, "application/json", body)
        }
        "/v1/audio/speech" if script.speech_status != 200 => refusal(script.speech_status),
        "/v1/audio/speech" => {
            let request: Value = serde_json::from_slice(&body).unwrap();
            let input = request["input"].as_str().unwrap_or_default();
            match script.speech_wav {
                Some(rate) => {
                    let pcm = speech_pcm(input, script.speech_ms, rate);
                    answer(200, "audio/wav", wav(&pcm, rate))
                }
                None => answer(
                    200,
                    "audio/pcm",
                    speech_pcm(input, script.speech_ms, 24_000),
                ),
            }
        }
        _ => refusal(404),
    }
}

/// What the fake says for `input`: `millis` of quiet PCM16 at `rate`,
/// different for every input length.
fn speech_pcm(input: &str, millis: u64, rate: u32) -> Vec<u8> {
    let samples = u64::from(rate) * millis / 1000;
    (0..samples as usize)
        .flat_map(|n| (((n * 37 + input.len() * 101) % 4000) as i16 - 2000).to_le_bytes())
        .collect()
}

/// The parts of a `multipart/form-data` body: each one's headers and content.
fn parts(content_type: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .expect("a multipart content type with its boundary");
    let delimiter = format!("\r\n--{boundary}");
    // The body opens with the delimiter (without its CRLF) and closes it.
    let body = [b"\r\n".as_slice(), body].concat();
    let closing = format!("{delimiter}--\r\n");
    assert!(body.ends_with(closing.as_bytes()), "closed by the boundary");
    let positions: Vec<usize> = body
        .windows(delimiter.len())
        .enumerate()
        .filter(|(_, w)| *w == delimiter.as_bytes())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(positions[0], 0, "opened by the boundary");
    positions
        .windows(2)
        .map(|pair| {
            let part = &body[pair[0] + delimiter.len() + 2..pair[1]];
            let split = part.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
            let headers = String::from_utf8(part[..split].to_vec()).unwrap();
            (headers, part[split + 4..].to_vec())
        })
        .collect()
}

// ------------------------------------------------------------------ the model

/// A text model that records what it is asked.
struct Recording {
    inner: Arc<dyn ModelProvider>,
    requests: Mutex<Vec<ModelRequest<'static>>>,
}

#[async_trait]
impl ModelProvider for Recording {
    fn provider_name(&self) -> &'static str {
        self.inner.provider_name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn complete(
        &self,
        request: &ModelRequest<'_>,
        text: &dyn TextSink,
    ) -> Result<ModelReply, ProviderError> {
        self.requests.lock().push(request.clone().into_owned());
        self.inner.complete(request, text).await
    }
}

/// The crate's scripted model: `reply` on every turn, or `turns`.
fn model(reply: &str, turns: BTreeMap<u32, MockTurn>) -> Arc<Recording> {
    let kind = ProviderKind::Mock {
        default_response: Some(reply.to_owned()),
        scenarios: BTreeMap::from([(
            "default".to_owned(),
            MockScenario {
                turns,
                default_response: None,
            },
        )]),
    };
    let inner = crate::build(ProviderSettings::new("local", "llama3.2", kind)).unwrap();
    Arc::new(Recording {
        inner,
        requests: Mutex::new(Vec::new()),
    })
}

/// The crate's Chat Completions provider against `base_url`, no retries.
fn chat_model(base_url: &str) -> Arc<dyn ModelProvider> {
    let kind = ProviderKind::OpenAi {
        base_url: base_url.to_owned(),
        api_key: None,
    };
    let settings = ProviderSettings {
        max_retries: 0,
        ..ProviderSettings::new("local", "llama3.2", kind)
    };
    crate::build(settings).unwrap()
}

// ------------------------------------------------------------------- the call

fn settings(base_url: &str, model: Arc<dyn ModelProvider>, rate: u32) -> CascadeSettings {
    // What the binary's `main` installs before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transcription = SpeechEndpoint {
        api_key: Some(STT_KEY.into()),
        ..SpeechEndpoint::new(base_url, "whisper-1")
    };
    let speech = SpeechEndpoint {
        voice: Some("alloy".into()),
        api_key: Some(TTS_KEY.into()),
        ..SpeechEndpoint::new(base_url, "tts-1")
    };
    CascadeSettings {
        sample_rate: rate,
        timeout: Duration::from_secs(5),
        ..CascadeSettings::new(transcription, speech, model)
    }
}

fn lookup() -> ToolSpec {
    ToolSpec {
        name: "lookup".into(),
        description: "Looks things up".into(),
        parameters: json!({"type": "object"}),
    }
}

async fn open(settings: CascadeSettings, tools: Vec<ToolSpec>) -> CallLink {
    let spec = CallSpec {
        instructions: "Be brief.".into(),
        proposed: pcm(16_000),
        tools,
    };
    Cascade::new(settings).unwrap().open(spec).await.unwrap()
}

fn pcm(sample_rate: u32) -> AudioFormat {
    AudioFormat {
        codec: PCM.into(),
        sample_rate,
        channels: 1,
    }
}

/// `millis` of a loud square wave at `rate` (speech, for the energy VAD).
fn loud(millis: u64, rate: u32) -> Vec<u8> {
    let samples = (u64::from(rate) * millis / 1000) as usize;
    (0..samples)
        .flat_map(|n| if n % 20 < 10 { 6000i16 } else { -6000 }.to_le_bytes())
        .collect()
}

fn silence(millis: u64, rate: u32) -> Vec<u8> {
    vec![0; (u64::from(rate) * millis / 1000) as usize * 2]
}

async fn send(link: &CallLink, audio: &[u8], rate: u32) {
    for frame in audio.chunks(rate as usize / 50 * 2) {
        let frame = CallInput::Audio(frame.to_vec());
        link.input.send(frame).await.unwrap();
    }
}

/// An utterance: `millis` of speech, then enough silence to end it.
async fn say(link: &CallLink, millis: u64, rate: u32) {
    send(link, &loud(millis, rate), rate).await;
    send(link, &silence(400, rate), rate).await;
}

async fn next(link: &mut CallLink) -> Option<CallEvent> {
    let event = tokio::time::timeout(WAIT, link.events.recv()).await;
    event.expect("an event in time")
}

/// Every event until the call closes.
async fn rest(link: &mut CallLink) -> Vec<CallEvent> {
    let mut events = Vec::new();
    while let Some(event) = next(link).await {
        events.push(event);
    }
    events
}

/// The events up to the first that `until` matches, that one included.
async fn events_until(
    link: &mut CallLink,
    mut until: impl FnMut(&CallEvent) -> bool,
) -> Vec<CallEvent> {
    let mut events = Vec::new();
    loop {
        let event = next(link).await.expect("the call goes on");
        let done = until(&event);
        events.push(event);
        if done {
            return events;
        }
    }
}

fn text_of(events: &[CallEvent], of: ResponseId) -> String {
    let delta = |e: &CallEvent| match e {
        CallEvent::AssistantText { response, delta } if *response == of => Some(delta.clone()),
        _ => None,
    };
    events.iter().filter_map(delta).collect()
}

fn audio_of(events: &[CallEvent], of: ResponseId) -> Vec<u8> {
    let pcm = |e: &CallEvent| match e {
        CallEvent::AudioOut { response, pcm } if *response == of => Some(pcm.clone()),
        _ => None,
    };
    events.iter().filter_map(pcm).flatten().collect()
}

fn done(response: ResponseId, interrupted: bool) -> CallEvent {
    CallEvent::ResponseDone {
        response,
        interrupted,
    }
}

fn ready(rate: u32) -> CallEvent {
    CallEvent::Ready {
        effective: pcm(rate),
    }
}

fn heard(text: &str) -> CallEvent {
    CallEvent::UserTranscript { text: text.into() }
}

fn user(text: &str) -> ModelMessage<'static> {
    ModelMessage::User {
        text: text.to_owned().into(),
        parts: Cow::Borrowed(&[]),
    }
}

fn assistant(text: &str) -> ModelMessage<'static> {
    ModelMessage::Assistant {
        text: text.to_owned().into(),
        tool_calls: Vec::new(),
    }
}

// ---------------------------------------------------------------------- tests

/// The transcription request of `speech` at 24 kHz: a multipart form with
/// the WAV file, the model and the response format.
fn assert_transcription_request(fake: &Fake, speech: &[u8]) {
    let requests = fake.requests("/v1/audio/transcriptions");
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(
        headers["authorization"],
        format!("Bearer {STT_KEY}").as_str()
    );
    let parts = parts(headers["content-type"].to_str().unwrap(), body);
    assert_eq!(parts.len(), 3);
    let (file_headers, file) = &parts[0];
    assert!(
        file_headers
            .contains("Content-Disposition: form-data; name=\"file\"; filename=\"speech.wav\"")
            && file_headers.contains("Content-Type: audio/wav"),
        "{file_headers}"
    );
    // A RIFF header for 16-bit mono PCM at the call's rate, then the
    // utterance up to its last voiced window.
    let header = [
        b"RIFF".as_slice(),
        &(36 + 19_200u32).to_le_bytes(),
        b"WAVEfmt ",
        &[16, 0, 0, 0, 1, 0, 1, 0],
        &24_000u32.to_le_bytes(),
        &48_000u32.to_le_bytes(),
        &[2, 0, 16, 0],
        b"data",
        &19_200u32.to_le_bytes(),
    ];
    assert_eq!(file[..44], header.concat());
    assert_eq!(file[44..], *speech);
    let fields: Vec<(&str, &[u8])> = parts[1..]
        .iter()
        .map(|(headers, value)| (headers.as_str(), value.as_slice()))
        .collect();
    let disposition = |name| format!("Content-Disposition: form-data; name=\"{name}\"");
    assert_eq!(
        fields,
        [
            (disposition("model").as_str(), b"whisper-1".as_slice()),
            (disposition("response_format").as_str(), b"json"),
        ]
    );
}

#[tokio::test]
async fn an_utterance_is_transcribed_answered_and_spoken() {
    let fake = fake(Script::default()).await;
    let model = model("Sure. It is sunny today.", BTreeMap::new());
    let mut link = open(settings(&fake.base_url, model.clone(), 24_000), Vec::new()).await;
    let speech = loud(400, 24_000);
    send(&link, &speech, 24_000).await;
    send(&link, &silence(400, 24_000), 24_000).await;
    link.input.send(CallInput::End).await.unwrap();
    let events = rest(&mut link).await;

    assert_eq!(events[0], ready(24_000));
    assert_eq!(events[1], CallEvent::SpeechStarted);
    assert_eq!(events[2], heard("what is the weather"));
    assert!(matches!(
        events[3],
        CallEvent::AssistantText { response: 0, .. }
    ));
    assert_eq!(text_of(&events, 0), "Sure. It is sunny today.");
    // Sentence by sentence, byte for byte: the call's rate is the speech's.
    let spoken = [
        speech_pcm("Sure.", 100, 24_000),
        speech_pcm("It is sunny today.", 100, 24_000),
    ];
    assert_eq!(audio_of(&events, 0), spoken.concat());
    let frames = events.iter().filter_map(|e| match e {
        CallEvent::AudioOut { pcm, .. } => Some(pcm.len()),
        _ => None,
    });
    assert!(frames.into_iter().all(|len| len == 960), "20 ms frames");
    assert_eq!(events.last(), Some(&done(0, false)));

    assert_transcription_request(&fake, &speech);

    // The speech requests: one a sentence.
    let requests = fake.requests("/v1/audio/speech");
    assert_eq!(
        requests[0].0["authorization"],
        format!("Bearer {TTS_KEY}").as_str()
    );
    assert_eq!(requests[0].0["content-type"], "application/json");
    let speech = |input: &str| json!({"model": "tts-1", "voice": "alloy", "input": input, "response_format": "pcm"});
    assert_eq!(
        fake.speech_bodies(),
        vec![speech("Sure."), speech("It is sunny today.")]
    );

    // The model: the instructions and what the caller said.
    let requests = model.requests.lock();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].system.as_deref(), Some("Be brief."));
    assert_eq!(requests[0].messages, vec![user("what is the weather")]);
    assert!(requests[0].tools.is_empty());
}

#[tokio::test]
async fn the_transcript_carries_over_and_speech_is_resampled_to_the_call_rate() {
    let fake = fake(Script {
        transcripts: vec!["hello", "and tomorrow"],
        ..Script::default()
    })
    .await;
    let model = model("Hi there.", BTreeMap::new());
    let mut link = open(settings(&fake.base_url, model.clone(), 16_000), Vec::new()).await;
    say(&link, 300, 16_000).await;
    let first = events_until(&mut link, |e| *e == done(0, false)).await;
    assert_eq!(first[0], ready(16_000));
    // 100 ms at 24 kHz is 100 ms at 16 kHz: two thirds of the samples.
    let spoken = samples(&speech_pcm("Hi there.", 100, 24_000));
    let expected = to_pcm(&resample(&spoken, 24_000, 16_000));
    assert_eq!(expected.len(), 3_200);
    assert_eq!(audio_of(&first, 0), expected);

    say(&link, 300, 16_000).await;
    link.input.send(CallInput::End).await.unwrap();
    let second = rest(&mut link).await;
    assert!(second.contains(&heard("and tomorrow")));
    assert_eq!(text_of(&second, 1), "Hi there.");
    assert_eq!(second.last(), Some(&done(1, false)));

    let transcriptions = fake.requests("/v1/audio/transcriptions");
    let (headers, body) = &transcriptions[1];
    let file = &parts(headers["content-type"].to_str().unwrap(), body)[0].1;
    let (rate, samples) = read_wav(file).unwrap().unwrap();
    assert_eq!((rate, samples.len()), (16_000, 4_800), "300 ms at 16 kHz");
    let requests = model.requests.lock();
    assert_eq!(
        requests[1].messages,
        vec![user("hello"), assistant("Hi there."), user("and tomorrow")]
    );
}

#[tokio::test]
async fn speech_during_a_reply_stops_its_audio() {
    let fake = fake(Script {
        transcripts: vec!["tell me a story", "stop"],
        speech_ms: 2_000,
        ..Script::default()
    })
    .await;
    let model = model("Once upon a time.", BTreeMap::new());
    let mut link = open(settings(&fake.base_url, model.clone(), 16_000), Vec::new()).await;
    say(&link, 300, 16_000).await;
    let mut frames = 0;
    events_until(&mut link, |e| {
        frames += usize::from(matches!(e, CallEvent::AudioOut { .. }));
        frames == 3
    })
    .await;
    send(&link, &loud(200, 16_000), 16_000).await;
    let barge_in = events_until(&mut link, |e| matches!(e, CallEvent::ResponseDone { .. })).await;
    let started = barge_in
        .iter()
        .position(|e| *e == CallEvent::SpeechStarted)
        .unwrap();
    assert_eq!(
        barge_in[started + 1..],
        [done(0, true)],
        "nothing between: {barge_in:?}"
    );

    send(&link, &silence(400, 16_000), 16_000).await;
    link.input.send(CallInput::End).await.unwrap();
    let after = rest(&mut link).await;
    assert!(
        audio_of(&after, 0).is_empty(),
        "no audio of the interrupted reply"
    );
    assert!(after.contains(&heard("stop")));
    assert_eq!(after.last(), Some(&done(1, false)));
    // The interrupted reply's text stays in the transcript.
    let requests = model.requests.lock();
    let expected = [
        user("tell me a story"),
        assistant("Once upon a time."),
        user("stop"),
    ];
    assert_eq!(requests[1].messages, expected);
}

#[tokio::test]
async fn a_tool_call_round_trips_and_its_output_reaches_the_reply() {
    let fake = fake(Script::default()).await;
    let turns = BTreeMap::from([
        (
            1,
            MockTurn::ToolCalls {
                content: Some("Let me look.".into()),
                tool_calls: vec![("lookup".into(), json!({"q": "weather"}))],
            },
        ),
        (
            2,
            MockTurn::Text(" It is {{last_tool_result}} today.".into()),
        ),
    ]);
    let model = model("unused", turns);
    let mut link = open(
        settings(&fake.base_url, model.clone(), 24_000),
        vec![lookup()],
    )
    .await;
    say(&link, 300, 24_000).await;
    let before = events_until(&mut link, |e| matches!(e, CallEvent::ToolCall { .. })).await;
    let Some(CallEvent::ToolCall {
        call_id,
        name,
        arguments,
    }) = before.last().cloned()
    else {
        unreachable!()
    };
    assert_eq!(
        (name.as_str(), arguments),
        ("lookup", json!({"q": "weather"}))
    );
    assert_eq!(text_of(&before, 0), "Let me look.");
    let output = "sunny".to_owned();
    link.input
        .send(CallInput::ToolOutput {
            call_id: call_id.clone(),
            output,
        })
        .await
        .unwrap();
    link.input.send(CallInput::End).await.unwrap();
    let after = rest(&mut link).await;
    assert_eq!(text_of(&after, 0), " It is sunny today.");
    assert_eq!(after.last(), Some(&done(0, false)));
    let inputs: Vec<Value> = fake
        .speech_bodies()
        .iter()
        .map(|b| b["input"].clone())
        .collect();
    assert_eq!(inputs, [json!("Let me look."), json!("It is sunny today.")]);

    let requests = model.requests.lock();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.tools == vec![lookup()]));
    let ModelMessage::Assistant { tool_calls, .. } = &requests[1].messages[1] else {
        panic!("the model's call: {:?}", requests[1].messages);
    };
    assert_eq!(tool_calls[0].id, call_id);
    let result = ModelMessage::Tool {
        call_id,
        name: "lookup".into(),
        content: "sunny".into(),
        is_error: false,
    };
    assert_eq!(requests[1].messages[2], result);
}

#[tokio::test]
async fn empty_transcripts_are_skipped() {
    let fake = fake(Script {
        transcripts: vec!["  "],
        ..Script::default()
    })
    .await;
    let model = model("unused", BTreeMap::new());
    let mut link = open(settings(&fake.base_url, model.clone(), 16_000), Vec::new()).await;
    say(&link, 200, 16_000).await;
    link.input.send(CallInput::End).await.unwrap();
    let events = rest(&mut link).await;
    assert_eq!(events, [ready(16_000), CallEvent::SpeechStarted]);
    assert_eq!(fake.requests("/v1/audio/transcriptions").len(), 1);
    assert!(fake.requests("/v1/audio/speech").is_empty());
    assert!(model.requests.lock().is_empty());
}

#[tokio::test]
async fn a_wav_speech_answer_is_read_from_its_header() {
    let fake = fake(Script {
        speech_wav: Some(16_000),
        ..Script::default()
    })
    .await;
    let model = model("Fine.", BTreeMap::new());
    let mut link = open(settings(&fake.base_url, model, 16_000), Vec::new()).await;
    say(&link, 200, 16_000).await;
    link.input.send(CallInput::End).await.unwrap();
    let events = rest(&mut link).await;
    assert_eq!(audio_of(&events, 0), speech_pcm("Fine.", 100, 16_000));
    assert_eq!(events.last(), Some(&done(0, false)));
}

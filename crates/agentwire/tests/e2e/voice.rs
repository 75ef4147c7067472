//! Voice calls on the Omnia endpoint (`omnia-behaviour.md` §7), over real
//! sockets with the scripted mock voice provider: recorded speech in
//! (`tests/fixtures/audio`, made by `scripts/audio-fixtures.sh` with
//! espeak-ng and sox), echoed bytes or a tone out.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Client, TestServer, assert_error, metric, stored_messages};

pub(crate) const WEATHER_16K: &[u8] = include_bytes!("../fixtures/audio/weather-16k.pcm");
pub(crate) const HELLO_16K: &[u8] = include_bytes!("../fixtures/audio/hello-16k.pcm");
const WEATHER_24K: &[u8] = include_bytes!("../fixtures/audio/weather-24k.pcm");
pub(crate) const SILENCE_16K: &[u8] = include_bytes!("../fixtures/audio/silence-16k.pcm");

const IS_LAST: u8 = 0x04;

/// The voice agents: echo, tone with a long reply (time to barge in), a
/// 24 kHz counter-offer, a provider that fails; two calls at most.
pub(crate) const VOICE_PROVIDERS: &str = r#"voice_providers:
  - {name: echo-voice, type: mock, output: echo}
  - name: long-voice
    type: mock
    reply: "This reply is long enough to be interrupted before it ends."
  - {name: hifi-voice, type: mock, reply: "A tone at twenty four kilohertz.", counter_offer: {sample_rate: 24000}}
  - {name: broken-voice, type: mock, fail_after_frames: 3}
"#;

pub(crate) const VOICE_AGENTS: &str = r#"  - {name: voice-echo, handler: echo, voice: echo-voice}
  - {name: voice-long, handler: echo, voice: long-voice}
  - {name: voice-hifi, handler: echo, voice: hifi-voice}
  - {name: voice-broken, handler: echo, voice: broken-voice}
"#;

async fn voice_server() -> TestServer {
    TestServer::with_server_and_runtime(
        "  limits:\n    max_calls: 2",
        VOICE_PROVIDERS,
        VOICE_AGENTS,
    )
    .await
}

/// An OMNI audio frame as the Omnia dashboard sends it.
pub(crate) fn audio_frame(
    session: &str,
    sequence: u32,
    rate: u32,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let metadata = json!({
        "session_id": session, "mime_type": "audio/pcm",
        "sample_rate": rate, "channels": 1, "codec": "pcm"
    })
    .to_string();
    let mut frame = Vec::with_capacity(32 + metadata.len() + payload.len());
    frame.extend_from_slice(b"OMNI");
    frame.push(1);
    frame.push(flags);
    frame.extend_from_slice(&1u16.to_be_bytes());
    frame.extend_from_slice(&(metadata.len() as u32).to_be_bytes());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&sequence.to_be_bytes());
    frame.extend_from_slice(&[0; 12]);
    frame.extend_from_slice(metadata.as_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// A server audio frame, decoded and checked against the contract: media
/// id all zeros, not last, `audio/pcm`, the session's id.
pub(crate) struct AudioOut {
    pub(crate) sequence: u32,
    pub(crate) payload: Vec<u8>,
}

pub(crate) fn decode_audio(frame: &[u8], session: &str) -> AudioOut {
    assert_eq!(&frame[..4], b"OMNI");
    assert_eq!(frame[4], 1, "version");
    assert_eq!(frame[5], 0, "flags: neither chunked nor last");
    assert_eq!(u16::from_be_bytes([frame[6], frame[7]]), 1, "MediaChunk");
    let meta_len = u32::from_be_bytes(frame[8..12].try_into().unwrap()) as usize;
    let payload_len = u32::from_be_bytes(frame[12..16].try_into().unwrap()) as usize;
    let sequence = u32::from_be_bytes(frame[16..20].try_into().unwrap());
    assert_eq!(&frame[20..32], &[0; 12], "media id all zeros");
    let metadata: Value = serde_json::from_slice(&frame[32..32 + meta_len]).unwrap();
    assert_eq!(metadata["session_id"], session);
    assert_eq!(metadata["mime_type"], "audio/pcm");
    let payload = frame[32 + meta_len..32 + meta_len + payload_len].to_vec();
    AudioOut { sequence, payload }
}

pub(crate) enum Frame {
    Text(Value),
    Audio(Vec<u8>),
}

pub(crate) async fn next_frame(client: &mut Client) -> Frame {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), client.next_message())
            .await
            .expect("a frame within 10 s")
            .expect("socket open")
            .expect("frame readable");
        match message {
            Message::Text(text) => return Frame::Text(serde_json::from_str(&text).unwrap()),
            Message::Binary(bytes) => return Frame::Audio(bytes.to_vec()),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The next text frame, skipping audio.
pub(crate) async fn next_text(client: &mut Client) -> Value {
    loop {
        if let Frame::Text(value) = next_frame(client).await {
            return value;
        }
    }
}

/// Sends `pcm` as 20 ms frames from `first_sequence`, two frames per 20 ms
/// (faster than real time, as a client catching up would); the last one
/// flagged IsLast when `last`. Returns the next sequence.
pub(crate) async fn speak(
    client: &mut Client,
    session: &str,
    rate: u32,
    first_sequence: u32,
    pcm: &[u8],
    last: bool,
) -> u32 {
    let frame_bytes = rate as usize / 50 * 2;
    let frames: Vec<&[u8]> = pcm.chunks(frame_bytes).collect();
    let mut sequence = first_sequence;
    for (i, chunk) in frames.iter().enumerate() {
        let flags = if last && i + 1 == frames.len() {
            IS_LAST
        } else {
            0
        };
        client
            .send_binary(audio_frame(session, sequence, rate, flags, chunk))
            .await;
        sequence += 1;
        if i % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    sequence
}

/// [`speak`] in real time, reading what the server sends meanwhile.
async fn speak_and_listen(
    client: &mut Client,
    session: &str,
    rate: u32,
    first_sequence: u32,
    pcm: &[u8],
) -> (u32, Vec<Frame>) {
    let frame_bytes = rate as usize / 50 * 2;
    let mut sequence = first_sequence;
    let mut heard = Vec::new();
    for chunk in pcm.chunks(frame_bytes) {
        client
            .send_binary(audio_frame(session, sequence, rate, 0, chunk))
            .await;
        sequence += 1;
        let until = tokio::time::Instant::now() + Duration::from_millis(20);
        while let Ok(message) = tokio::time::timeout_at(until, client.next_message()).await {
            match message.expect("socket open").expect("frame readable") {
                Message::Text(text) => {
                    heard.push(Frame::Text(serde_json::from_str(&text).unwrap()))
                }
                Message::Binary(bytes) => heard.push(Frame::Audio(bytes.to_vec())),
                _ => {}
            }
        }
    }
    (sequence, heard)
}

/// Frames up to and including the next `done`: the text frames, and the
/// audio payloads in order.
pub(crate) async fn until_done(client: &mut Client, session: &str) -> (Vec<Value>, Vec<AudioOut>) {
    let (mut texts, mut audio) = (Vec::new(), Vec::new());
    loop {
        match next_frame(client).await {
            Frame::Audio(bytes) => audio.push(decode_audio(&bytes, session)),
            Frame::Text(value) => {
                assert_eq!(
                    value["session_id"], session,
                    "every frame names the session"
                );
                let done = value["type"] == "done" || value["type"] == "error";
                texts.push(value);
                if done {
                    return (texts, audio);
                }
            }
        }
    }
}

pub(crate) fn joined(audio: &[AudioOut]) -> Vec<u8> {
    audio
        .iter()
        .flat_map(|a| a.payload.iter().copied())
        .collect()
}

#[tokio::test]
async fn a_call_relays_the_format_echoes_the_callers_bytes_and_transcribes_both_sides() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-echo&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    let config = next_text(&mut client).await;
    assert_eq!(config["type"], "session_config", "{config}");
    assert_eq!(config["session_id"], session.as_str());
    assert_eq!(
        config["session_config"],
        json!({"codec": "pcm", "sample_rate": 16000, "channels": 1})
    );
    let (texts, audio) = until_done(&mut client, &session).await;
    let user = &texts[0];
    assert_eq!(
        (&user["type"], &user["role"]),
        (&json!("chunk"), &json!("user"))
    );
    let said = user["content"].as_str().unwrap();
    assert!(said.starts_with("utterance 1 ("), "{said}");
    let assistant: String = texts[1..texts.len() - 1]
        .iter()
        .map(|t| {
            assert_eq!(t["type"], "chunk");
            assert!(
                t.get("role").is_none(),
                "an assistant chunk has no role: {t}"
            );
            t["content"].as_str().unwrap()
        })
        .collect();
    assert_eq!(assistant, "I heard you.");
    let done = texts.last().unwrap();
    assert_eq!(done["type"], "done");
    assert!(
        done.get("content").is_none(),
        "a bare done seals the response: {done}"
    );
    // The echo is the utterance, byte for byte: a contiguous, 20 ms-aligned
    // run of what was sent, in order, in frames numbered from 0.
    let echoed = joined(&audio);
    assert!(
        echoed.len() >= 32_000 / 2,
        "at least half a second: {}",
        echoed.len()
    );
    let start = (0..WEATHER_16K.len())
        .step_by(640)
        .find(|&at| WEATHER_16K[at..].starts_with(&echoed))
        .expect("the echo is a run of the caller's audio");
    assert!(
        start < 16_000,
        "the utterance starts in the first half second"
    );
    let sequences: Vec<u32> = audio.iter().map(|a| a.sequence).collect();
    assert_eq!(sequences, (0..audio.len() as u32).collect::<Vec<_>>());
    // The stored session holds both transcripts, marked as spoken.
    let stored = stored_messages(&server.db_path);
    let ours: Vec<_> = stored.iter().filter(|m| m.0 == session).collect();
    assert!(
        ours.iter().any(|m| m.2 == "user" && m.3 == said),
        "the caller's transcript is stored: {ours:?}"
    );
    assert!(
        ours.iter()
            .any(|m| m.2 == "assistant" && m.3 == "I heard you."),
        "the reply's transcript is stored: {ours:?}"
    );
    let metrics = server.get("/metrics").await.1;
    assert_eq!(metric(&metrics, "agentwire_calls_active"), 1.0);
    assert!(metric(&metrics, "agentwire_call_audio_in_bytes_total") >= WEATHER_16K.len() as f64);
    assert_eq!(
        metric(&metrics, "agentwire_call_audio_out_bytes_total"),
        echoed.len() as f64
    );
}

#[tokio::test]
async fn speaking_over_a_reply_interrupts_it_and_none_of_its_audio_follows() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-long&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let next = speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    // Wait for the reply's audio to start, then speak over it.
    let mut heard = 0;
    while heard < 5 {
        if let Frame::Audio(_) = next_frame(&mut client).await {
            heard += 1;
        }
    }
    // The client speaks and reads at once, as a phone does.
    let (_, heard_meanwhile) =
        speak_and_listen(&mut client, &session, 16_000, next, HELLO_16K).await;
    let mut frames = heard_meanwhile.into_iter();
    let interrupt = loop {
        let frame = match frames.next() {
            Some(frame) => frame,
            None => next_frame(&mut client).await,
        };
        if let Frame::Text(value) = frame
            && value["type"] == "interrupt"
        {
            break value;
        }
    };
    let rest: Vec<Frame> = frames.collect();
    assert_eq!(interrupt["session_id"], session.as_str());
    // After the interrupt: the interrupted response's done, then nothing of
    // its audio; the next audio belongs to the answer to "hello there".
    let mut after = Vec::new();
    let mut rest = rest.into_iter();
    loop {
        let frame = match rest.next() {
            Some(frame) => frame,
            None => next_frame(&mut client).await,
        };
        match frame {
            Frame::Audio(_) => after.push("audio".to_owned()),
            Frame::Text(value) => {
                let kind = format!("{}/{}", value["type"], value["role"]);
                let user = value["role"] == "user";
                after.push(kind);
                if user {
                    break;
                }
            }
        }
    }
    assert_eq!(after[0], "\"done\"/null", "{after:?}");
    assert!(
        !after.contains(&"audio".to_owned()),
        "no audio of the interrupted reply after interrupt: {after:?}"
    );
    let metrics = server.get("/metrics").await.1;
    assert_eq!(metric(&metrics, "agentwire_call_barge_ins_total"), 1.0);
    // The interrupted reply is stored as far as it went, marked.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stored = stored_messages(&server.db_path);
    assert!(
        stored
            .iter()
            .any(|m| m.0 == session && m.2 == "assistant" && m.3.starts_with("This reply")),
        "{stored:?}"
    );
}

#[tokio::test]
async fn is_last_ends_the_call_after_its_answer_and_a_later_frame_opens_a_new_one() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-echo&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, true).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let (texts, audio) = until_done(&mut client, &session).await;
    assert_eq!(texts.last().unwrap()["type"], "done");
    assert!(!audio.is_empty(), "the last utterance is still answered");
    // The call is over: its slot is free again.
    let mut active = 1.0;
    for _ in 0..50 {
        active = metric(&server.get("/metrics").await.1, "agentwire_calls_active");
        if active == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(active, 0.0, "IsLast ended the call");
    // A new call: its own session_config, sequences from 0 again.
    speak(&mut client, &session, 16_000, 0, HELLO_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let (texts, audio) = until_done(&mut client, &session).await;
    assert!(
        texts[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("utterance 1")
    );
    assert_eq!(audio[0].sequence, 0);
}

#[tokio::test]
async fn a_text_message_during_a_call_runs_as_an_ordinary_turn() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-long&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    client.say("typed while talking").await;
    let mut echo = None;
    let mut call_done = false;
    while echo.is_none() || !call_done {
        if let Frame::Text(value) = next_frame(&mut client).await {
            match (value["type"].as_str(), value["content"].as_str()) {
                (Some("done"), Some(text)) => echo = Some(text.to_owned()),
                (Some("done"), None) => call_done = true,
                _ => {}
            }
        }
    }
    assert_eq!(echo.as_deref(), Some("Echo: typed while talking"));
}

#[tokio::test]
async fn the_call_cap_answers_rate_limited_and_frees_its_slot_on_close() {
    let server = voice_server().await;
    let mut callers = Vec::new();
    for _ in 0..2 {
        let (mut client, connected) = server.connect("agent=voice-echo&binary=true").await;
        let session = connected["session_id"].as_str().unwrap().to_owned();
        client
            .send_binary(audio_frame(&session, 0, 16_000, 0, &SILENCE_16K[..640]))
            .await;
        assert_eq!(next_text(&mut client).await["type"], "session_config");
        callers.push(client);
    }
    let (mut third, connected) = server.connect("agent=voice-echo&binary=true").await;
    let session = connected["session_id"].as_str().unwrap();
    third
        .send_binary(audio_frame(session, 0, 16_000, 0, &SILENCE_16K[..640]))
        .await;
    let refused = next_text(&mut third).await;
    assert_error(&refused, "RATE_LIMITED", "audio session limit reached");
    assert_eq!(refused["session_id"], session);
    // The connection stays usable.
    third.say("still here").await;
    assert_eq!(next_text(&mut third).await["content"], "Echo: still here");
    // A caller leaves: its slot is the third's.
    drop(callers.pop());
    let mut opened = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        third
            .send_binary(audio_frame(session, 0, 16_000, 0, &SILENCE_16K[..640]))
            .await;
        let answer = next_text(&mut third).await;
        if answer["type"] == "session_config" {
            opened = true;
            break;
        }
        assert_error(&answer, "RATE_LIMITED", "audio session limit reached");
    }
    assert!(opened, "the slot came free");
}

#[tokio::test]
async fn a_provider_failure_is_a_duplex_error_and_the_next_frame_opens_a_new_call() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-broken&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    // The provider fails on the fourth frame.
    speak(
        &mut client,
        &session,
        16_000,
        0,
        &SILENCE_16K[..640 * 4],
        false,
    )
    .await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let failed = next_text(&mut client).await;
    assert_error(&failed, "DUPLEX_ERROR", "duplex session failed");
    assert_eq!(failed["session_id"], session.as_str());
    client.say("text still works").await;
    assert_eq!(
        next_text(&mut client).await["content"],
        "Echo: text still works"
    );
    client
        .send_binary(audio_frame(&session, 0, 16_000, 0, &SILENCE_16K[..640]))
        .await;
    assert_eq!(
        next_text(&mut client).await["type"],
        "session_config",
        "a new call"
    );
    let metrics = server.get("/metrics").await.1;
    // The mock's scripted failure stands for the provider's own error.
    let failures = |code: &str| {
        let series = format!("agentwire_call_failures_total{{code=\"{code}\"}}");
        metric(&metrics, &series)
    };
    assert_eq!(failures("provider_error"), 1.0);
    assert_eq!(failures("unreachable"), 0.0);
    assert_eq!(failures("input_overflow"), 0.0);
    assert_eq!(
        metric(&metrics, "agentwire_errors_total{code=\"DUPLEX_ERROR\"}"),
        1.0
    );
}

/// The power of `frequency` in `samples` at `rate` (Goertzel).
fn goertzel(samples: &[i16], rate: f64, frequency: f64) -> f64 {
    let coefficient = 2.0 * (std::f64::consts::TAU * frequency / rate).cos();
    let (mut s1, mut s2) = (0.0, 0.0);
    for &sample in samples {
        let s0 = f64::from(sample) + coefficient * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    s1 * s1 + s2 * s2 - coefficient * s1 * s2
}

#[tokio::test]
async fn a_24_khz_counter_offer_is_relayed_and_the_tone_is_440_hz_at_that_rate() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-hifi&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    // The client proposes 16 kHz with its first frame.
    client
        .send_binary(audio_frame(&session, 0, 16_000, 0, &SILENCE_16K[..640]))
        .await;
    let config = next_text(&mut client).await;
    assert_eq!(
        config["session_config"],
        json!({"codec": "pcm", "sample_rate": 24000, "channels": 1})
    );
    // A frame still at 16 kHz is refused once, naming the rate to use.
    for sequence in 1..3 {
        client
            .send_binary(audio_frame(
                &session,
                sequence,
                16_000,
                0,
                &SILENCE_16K[..640],
            ))
            .await;
    }
    let refused = next_text(&mut client).await;
    assert_eq!(refused["error"]["code"], "INVALID_MESSAGE");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("24000 Hz"), "{message}");
    // Re-captured at 24 kHz: heard and answered with the tone.
    speak(&mut client, &session, 24_000, 3, WEATHER_24K, false).await;
    let (texts, audio) = until_done(&mut client, &session).await;
    assert!(
        texts.iter().all(|t| t["type"] != "error"),
        "one refusal only: {texts:?}"
    );
    let pcm = joined(&audio);
    let samples: Vec<i16> = pcm
        .chunks_exact(2)
        .map(|s| i16::from_le_bytes([s[0], s[1]]))
        .collect();
    // "A tone at twenty four kilohertz." takes 32 × 80 ms to say.
    assert_eq!(samples.len(), 24_000 * 2560 / 1000);
    let at_440 = goertzel(&samples, 24_000.0, 440.0);
    // The same audio played at 16 kHz would sound at 293 Hz.
    let at_293 = goertzel(&samples, 24_000.0, 440.0 * 16.0 / 24.0);
    assert!(
        at_440 > 100.0 * at_293,
        "440 Hz at 24 kHz: {at_440} vs {at_293}"
    );
}

#[tokio::test]
async fn without_binary_true_call_audio_comes_as_media_chunk_json() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=voice-echo").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let mut chunks = Vec::new();
    loop {
        let frame = next_text(&mut client).await;
        if frame["type"] == "done" {
            break;
        }
        if frame["type"] == "media_chunk" {
            chunks.push(frame);
        }
    }
    assert!(!chunks.is_empty());
    for (i, chunk) in chunks.iter().enumerate() {
        let media = &chunk["media_chunk"];
        assert_eq!(media["media_id"], "");
        assert_eq!(media["mime_type"], "audio/pcm");
        assert_eq!(media["is_last"], false);
        assert_eq!(media["sequence"], i as u64);
        assert!(media["data"].as_str().is_some_and(|d| !d.is_empty()));
    }
}

#[tokio::test]
async fn agents_without_a_voice_provider_refuse_audio_and_bad_voice_config_names_the_key() {
    let server = voice_server().await;
    let (mut client, connected) = server.connect("agent=echo&binary=true").await;
    let session = connected["session_id"].as_str().unwrap();
    client
        .send_binary(audio_frame(session, 0, 16_000, 0, &SILENCE_16K[..640]))
        .await;
    assert_error(
        &next_text(&mut client).await,
        "MEDIA_NOT_ENABLED",
        "audio not supported",
    );
    let listing = server.http("GET", "/api/v1/agents", &[], b"").await.json();
    let voice_of = |name: &str| {
        listing["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .map(|a| a["voice"].clone())
    };
    assert_eq!(voice_of("voice-echo"), Some(json!(true)), "{listing}");
    assert_eq!(voice_of("echo"), Some(json!(false)), "{listing}");
    let bad = "voice_providers: []\nagents:\n  - {name: a, handler: echo, voice: nowhere}\n";
    let error = agentwire::config::parse(bad, |_| None).unwrap_err();
    assert_eq!(error.key, "agents[0].voice");
    let bad = "voice_providers:\n  - {name: v, type: mock, counter_offer: {sample_rate: 1}}\nagents:\n  - {name: a, handler: echo}\n";
    let error = agentwire::config::parse(bad, |_| None).unwrap_err();
    assert_eq!(error.key, "voice_providers[0].counter_offer.sample_rate");
}

//! A voice call on `type: openai_realtime`, end to end: the server's config
//! builds the adapter, the adapter talks to an in-process fake of the
//! OpenAI Realtime API (real WebSocket, its JSON events byte for byte), and
//! the client on `/ws` sees the provider's format, transcripts and audio.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

use crate::support::TestServer;
use crate::voice::{WEATHER_16K, next_text, speak, until_done};

pub(crate) const KEY: &str = "sk-test-realtime-key-0123456789";

/// What the fake saw: the upgrade's Authorization header and query, the
/// `session.update`, and how many audio bytes the appends carried.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    authorization: String,
    query: String,
    session_update: Value,
    appended: usize,
}

/// One provider session: the handshake, then for the first append a
/// transcript, a reply's transcript and 480 ms of 24 kHz audio, and done;
/// what it saw once the adapter closes the socket.
pub(crate) async fn fake_realtime() -> (std::net::SocketAddr, tokio::sync::mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (report, seen) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut saw = Seen::default();
        let mut head = (String::new(), String::new());
        // The callback's signature (its large error type) is tungstenite's.
        #[allow(clippy::result_large_err)]
        let ws =
            tokio_tungstenite::accept_hdr_async(stream, |request: &Request, response: Response| {
                head.0 = request
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                head.1 = request.uri().query().unwrap_or_default().to_owned();
                Ok(response)
            })
            .await
            .unwrap();
        (saw.authorization, saw.query) = head;
        let (mut tx, mut rx) = ws.split();
        let send = |value: Value| Message::text(value.to_string());
        tx.send(send(
            json!({"type": "session.created", "session": {"id": "sess_1"}}),
        ))
        .await
        .unwrap();
        let mut replied = false;
        while let Some(Ok(message)) = rx.next().await {
            let Message::Text(text) = message else {
                continue;
            };
            let event: Value = serde_json::from_str(&text).unwrap();
            match event["type"].as_str().unwrap_or_default() {
                "session.update" => {
                    saw.session_update = event.clone();
                    tx.send(send(
                        json!({"type": "session.updated", "session": event["session"]}),
                    ))
                    .await
                    .unwrap();
                }
                "input_audio_buffer.append" => {
                    saw.appended += BASE64
                        .decode(event["audio"].as_str().unwrap())
                        .unwrap()
                        .len();
                    if replied {
                        continue;
                    }
                    replied = true;
                    let audio = BASE64.encode(vec![7u8; 24_000 * 2 * 480 / 1000]);
                    for event in [
                        json!({"type": "input_audio_buffer.speech_started", "item_id": "item_u"}),
                        json!({"type": "conversation.item.input_audio_transcription.completed",
                               "item_id": "item_u", "content_index": 0, "transcript": "what is the weather"}),
                        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
                        json!({"type": "response.output_audio_transcript.delta", "response_id": "resp_1",
                               "item_id": "item_a", "output_index": 0, "content_index": 0, "delta": "Sunny "}),
                        json!({"type": "response.output_audio_transcript.delta", "response_id": "resp_1",
                               "item_id": "item_a", "output_index": 0, "content_index": 0, "delta": "all day."}),
                        json!({"type": "response.output_audio.delta", "response_id": "resp_1",
                               "item_id": "item_a", "output_index": 0, "content_index": 0, "delta": audio}),
                        json!({"type": "response.done", "response": {"id": "resp_1", "status": "completed"}}),
                    ] {
                        tx.send(send(event)).await.unwrap();
                    }
                }
                _ => {}
            }
        }
        let _ = report.send(saw).await;
    });
    (addr, seen)
}

#[tokio::test]
async fn a_call_on_openai_realtime_relays_its_24_khz_format_transcripts_and_audio() {
    let (fake, mut seen) = fake_realtime().await;
    let top_level = format!(
        "voice_providers:\n  - {{name: realtime, type: openai_realtime, model: gpt-realtime, api_key: {KEY}, url: \"ws://{fake}/v1/realtime\", voice: alloy}}\n"
    );
    let agent = "  - {name: talker, handler: echo, voice: realtime}\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    let (mut client, connected) = server.connect("agent=talker&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, &WEATHER_16K[..640], false).await;
    let config = next_text(&mut client).await;
    assert_eq!(
        config["session_config"],
        json!({"codec": "pcm", "sample_rate": 24000, "channels": 1}),
        "the provider's rate: the client re-captures at it"
    );
    // Re-captured at 24 kHz, as a client must.
    let pcm_24k = vec![1u8; 960 * 40];
    speak(&mut client, &session, 24_000, 1, &pcm_24k, false).await;
    let (texts, audio) = until_done(&mut client, &session).await;
    assert_eq!(texts[0]["role"], "user");
    assert_eq!(texts[0]["content"], "what is the weather");
    let reply: String = texts[1..texts.len() - 1]
        .iter()
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    assert_eq!(reply, "Sunny all day.");
    let bytes: usize = audio.iter().map(|a| a.payload.len()).sum();
    assert_eq!(
        bytes,
        24_000 * 2 * 480 / 1000,
        "the provider's audio, all of it"
    );
    // Hanging up ends the call, and the adapter closes the provider's socket.
    client.send_json(json!({"type": "hangup"})).await;
    drop(client);
    let saw = tokio::time::timeout(Duration::from_secs(10), seen.recv())
        .await
        .expect("the fake finished")
        .unwrap();
    assert_eq!(saw.authorization, format!("Bearer {KEY}"));
    assert_eq!(saw.query, "model=gpt-realtime");
    assert_eq!(
        saw.session_update["session"]["audio"]["output"]["voice"],
        "alloy"
    );
    assert_eq!(saw.appended, 640 + 960 * 40, "every byte the caller sent");
    // The key stays out of what the server shows.
    let effective = server.get("/metrics").await.1;
    assert!(!effective.contains(KEY));
}

#[test]
fn bad_openai_realtime_config_names_the_key_and_never_the_secret() {
    let agents = "agents:\n  - {name: a, handler: echo, voice: v}\n";
    let cases = [
        (
            "{name: v, type: openai_realtime, api_key: k}",
            "voice_providers[0].model",
        ),
        (
            "{name: v, type: openai_realtime, model: m}",
            "voice_providers[0].api_key",
        ),
        (
            "{name: v, type: openai_realtime, model: m, api_key_env: NOT_SET_ANYWHERE}",
            "voice_providers[0].api_key_env",
        ),
        (
            "{name: v, type: openai_realtime, model: m, api_key: k, output: echo}",
            "voice_providers[0].output",
        ),
        (
            "{name: v, type: mock, model: m}",
            "voice_providers[0].model",
        ),
        (
            "{name: v, type: openai_realtime, model: m, api_key: sk-secret-value, url: \"https://x\"}",
            "voice_providers[0].url",
        ),
    ];
    for (provider, key) in cases {
        let yaml = format!("voice_providers:\n  - {provider}\n{agents}");
        let error = agentwire::config::parse(&yaml, |_| None).unwrap_err();
        assert_eq!(error.key, key, "{provider}: {error}");
        assert!(!error.to_string().contains("sk-secret-value"), "{error}");
    }
}

#[tokio::test]
async fn a_call_on_a_local_cascade_transcribes_answers_with_the_text_model_and_speaks() {
    use crate::fake_http::{Answer, FakeHttp};
    let transcription =
        FakeHttp::start(|_, _| Answer::json(r#"{"text":"what is the weather"}"#)).await;
    // 100 ms of 24 kHz PCM16 per sentence (OpenAI's `pcm`), resampled to the call's 16 kHz.
    let speech = FakeHttp::start(|_, _| Answer {
        content_type: "audio/pcm",
        body: "\u{1}".repeat(4_800),
    })
    .await;
    let top_level = format!(
        r#"providers:
  - {{name: local, type: mock, default_response: "It is sunny."}}
voice_providers:
  - name: local-voice
    type: cascade
    provider: local
    transcription: {{base_url: "http://{stt}/v1", model: whisper-1}}
    speech: {{base_url: "http://{tts}/v1", model: tts-1, voice: nova}}
"#,
        stt = transcription.addr,
        tts = speech.addr
    );
    let agent = "  - {name: local-talker, handler: echo, voice: local-voice}\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    let (mut client, connected) = server.connect("agent=local-talker&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    let config = next_text(&mut client).await;
    assert_eq!(config["session_config"]["sample_rate"], 16000);
    let (texts, audio) = until_done(&mut client, &session).await;
    assert_eq!(texts[0]["role"], "user");
    assert_eq!(texts[0]["content"], "what is the weather");
    let reply: String = texts[1..texts.len() - 1]
        .iter()
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    assert_eq!(reply, "It is sunny.");
    let bytes: usize = audio.iter().map(|a| a.payload.len()).sum();
    assert_eq!(bytes, 3_200, "100 ms of speech at the call's 16 kHz");
    let stt = transcription.requests().await;
    assert_eq!(stt.len(), 1);
    assert!(
        stt[0]
            .request_line
            .starts_with("POST /v1/audio/transcriptions ")
    );
    let body = String::from_utf8_lossy(&stt[0].body);
    assert!(
        body.contains("name=\"file\"; filename=\"speech.wav\""),
        "a WAV file part"
    );
    assert!(body.contains("whisper-1"));
    let tts = speech.requests().await;
    assert_eq!(tts[0].json()["input"], "It is sunny.");
    assert_eq!(tts[0].json()["voice"], "nova");
    let stored = crate::support::stored_messages(&server.db_path);
    assert!(
        stored
            .iter()
            .any(|m| m.0 == session && m.2 == "user" && m.3 == "what is the weather"),
        "{stored:?}"
    );
}

#[test]
fn bad_cascade_config_names_the_key() {
    let base = "providers:\n  - {name: local, type: mock}\nagents:\n  - {name: a, handler: echo, voice: v}\nvoice_providers:\n";
    let cases = [
        (
            "{name: v, type: cascade, transcription: {model: w}, speech: {model: t}}",
            "voice_providers[0].provider",
        ),
        (
            "{name: v, type: cascade, provider: nowhere, transcription: {model: w}, speech: {model: t}}",
            "voice_providers[0].provider",
        ),
        (
            "{name: v, type: cascade, provider: local, speech: {model: t}}",
            "voice_providers[0].transcription",
        ),
        (
            "{name: v, type: cascade, provider: local, transcription: {model: w}, speech: {model: t, api_key_env: NOT_SET_ANYWHERE}}",
            "voice_providers[0].speech.api_key_env",
        ),
        (
            "{name: v, type: cascade, provider: local, transcription: {model: w}, speech: {model: t}, reply: hi}",
            "voice_providers[0].reply",
        ),
        (
            "{name: v, type: mock, sample_rate: 16000}",
            "voice_providers[0].sample_rate",
        ),
    ];
    for (provider, key) in cases {
        let yaml = format!("{base}  - {provider}\n");
        let error = agentwire::config::parse(&yaml, |_| None).unwrap_err();
        assert_eq!(error.key, key, "{provider}: {error}");
    }
}

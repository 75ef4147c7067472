//! Wire tests against an in-process fake Realtime server on loopback: real
//! sockets, the provider's JSON text frames byte for byte, real time (the
//! sockets make paused time auto-advance into the timeouts).

use agentwire_core::realtime::PCM;
use agentwire_core::{AudioFormat, ToolSpec};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::SinkExt;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::*;

/// Opening a session, settings, and what the adapter does not know.
mod opening;

const KEY: &str = "sk-test-SECRET-4242";
const MODEL: &str = "gpt-realtime";
const WAIT: Duration = Duration::from_secs(5);

/// What the fake saw of an upgrade request.
struct Upgrade {
    uri: String,
    authorization: Option<String>,
}

/// One connection the fake accepted.
struct Peer {
    ws: WebSocketStream<TcpStream>,
    upgrade: Upgrade,
}

struct Fake {
    url: String,
    peers: mpsc::UnboundedReceiver<Peer>,
}

/// A fake Realtime endpoint; `reject` answers every upgrade with that
/// status and a body the adapter must not repeat.
async fn fake(reject: Option<u16>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
    let (found, peers) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let found = found.clone();
            tokio::spawn(async move {
                let (seen, upgrade) = oneshot::channel();
                // The signature is tungstenite's.
                #[allow(clippy::result_large_err)]
                let callback = move |request: &Request, response: Response| {
                    let authorization = request.headers().get("authorization");
                    let _ = seen.send(Upgrade {
                        uri: request.uri().to_string(),
                        authorization: authorization.map(|v| v.to_str().unwrap().to_owned()),
                    });
                    match reject {
                        None => Ok(response),
                        Some(status) => {
                            let mut refusal =
                                ErrorResponse::new(Some("SECRET provider body".into()));
                            *refusal.status_mut() = StatusCode::from_u16(status).unwrap();
                            Err(refusal)
                        }
                    }
                };
                if let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await {
                    let upgrade = upgrade.await.unwrap();
                    let _ = found.send(Peer { ws, upgrade });
                }
            });
        }
    });
    Fake { url, peers }
}

impl Fake {
    async fn accept(&mut self) -> Peer {
        tokio::time::timeout(WAIT, self.peers.recv())
            .await
            .expect("a connection in time")
            .unwrap()
    }
}

impl Peer {
    async fn send(&mut self, event: Value) {
        self.ws
            .send(Message::text(event.to_string()))
            .await
            .unwrap();
    }

    /// The adapter's next event.
    async fn recv(&mut self) -> Value {
        loop {
            let next = tokio::time::timeout(WAIT, self.ws.next()).await;
            match next.expect("a message in time") {
                Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// The adapter closes the session.
    async fn closed(&mut self, within: Duration) {
        loop {
            let next = tokio::time::timeout(within, self.ws.next()).await;
            match next.expect("the close in time") {
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(other)) => panic!("expected the close, got {other}"),
            }
        }
    }

    /// The opening as the provider does it; the adapter's `session.update`.
    async fn open(&mut self) -> Value {
        self.send(json!({ "type": "session.created", "event_id": "ev_1", "session": {} }))
            .await;
        let update = self.recv().await;
        assert_eq!(update["type"], "session.update");
        self.send(json!({ "type": "session.updated", "event_id": "ev_2", "session": {} }))
            .await;
        update
    }
}

fn settings(url: &str) -> OpenAiRealtimeSettings {
    OpenAiRealtimeSettings {
        url: url.to_owned(),
        voice: Some("marin".into()),
        connect_timeout: Duration::from_secs(2),
        ..OpenAiRealtimeSettings::new(MODEL, KEY.into())
    }
}

fn pcm_format(sample_rate: u32) -> AudioFormat {
    let codec = PCM.to_owned();
    AudioFormat {
        codec,
        sample_rate,
        channels: 1,
    }
}

fn spec() -> CallSpec {
    CallSpec {
        instructions: "You are a weather bot.".into(),
        proposed: pcm_format(16_000),
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "The weather in a city.".into(),
            parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
        }],
    }
}

/// An open call: the fake, its first peer, the `session.update` it got,
/// the link (its `Ready` read) and the provider.
struct Open {
    fake: Fake,
    peer: Peer,
    update: Value,
    link: CallLink,
    provider: OpenAiRealtime,
}

async fn open_with(tune: impl FnOnce(&mut OpenAiRealtimeSettings)) -> Open {
    let mut fake = fake(None).await;
    let mut settings = settings(&fake.url);
    tune(&mut settings);
    let provider = OpenAiRealtime::new(settings).unwrap();
    let opening = {
        let provider = provider.clone();
        tokio::spawn(async move { provider.open(spec()).await })
    };
    let mut peer = fake.accept().await;
    let update = peer.open().await;
    let mut link = opening.await.unwrap().unwrap();
    let ready = CallEvent::Ready {
        effective: pcm_format(24_000),
    };
    assert_eq!(event(&mut link).await, ready);
    Open {
        fake,
        peer,
        update,
        link,
        provider,
    }
}

async fn open() -> Open {
    open_with(|_| {}).await
}

/// An open that fails, with the fake's peer driven by `peer`.
async fn open_failing<F, Fut>(tune: impl FnOnce(&mut OpenAiRealtimeSettings), peer: F) -> CallError
where
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut fake = fake(None).await;
    let mut settings = settings(&fake.url);
    tune(&mut settings);
    tokio::spawn(async move { peer(fake.accept().await).await });
    let provider = OpenAiRealtime::new(settings).unwrap();
    let err = provider.open(spec()).await.err().expect("the open fails");
    assert_no_secret(&err);
    err
}

fn assert_no_secret(err: &CallError) {
    for text in [err.message.clone(), format!("{err:?}")] {
        assert!(!text.contains(KEY), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }
}

async fn event(link: &mut CallLink) -> CallEvent {
    tokio::time::timeout(WAIT, link.events.recv())
        .await
        .expect("an event in time")
        .expect("the call still open")
}

async fn ended(events: &mut mpsc::Receiver<CallEvent>) {
    let next = tokio::time::timeout(WAIT, events.recv()).await;
    assert_eq!(next.expect("the end in time"), None);
}

async fn say(link: &CallLink, input: CallInput) {
    link.input.send(input).await.unwrap();
}

fn audio_out(response: ResponseId, pcm: Vec<u8>) -> CallEvent {
    CallEvent::AudioOut { response, pcm }
}

fn text_out(response: ResponseId, delta: &str) -> CallEvent {
    let delta = delta.to_owned();
    CallEvent::AssistantText { response, delta }
}

fn done(response: ResponseId, interrupted: bool) -> CallEvent {
    CallEvent::ResponseDone {
        response,
        interrupted,
    }
}

/// `millis` of 24 kHz audio, every byte telling its place.
fn pcm(millis: usize) -> Vec<u8> {
    (0..48 * millis).map(|n| (n % 251) as u8).collect()
}

fn audio_delta(kind: &str, response: &str, item: &str, pcm: &[u8]) -> Value {
    json!({
        "type": kind, "event_id": "ev", "response_id": response, "item_id": item,
        "output_index": 0, "content_index": 0, "delta": BASE64.encode(pcm),
    })
}

fn transcript_delta(kind: &str, response: &str, delta: &str) -> Value {
    json!({
        "type": kind, "event_id": "ev", "response_id": response, "item_id": "item_1",
        "output_index": 0, "content_index": 0, "delta": delta,
    })
}

const GA_AUDIO: &str = "response.output_audio.delta";
const GA_TEXT: &str = "response.output_audio_transcript.delta";

fn created(response: &str) -> Value {
    json!({ "type": "response.created", "event_id": "ev", "response": { "id": response } })
}

fn user_said(transcript: &str) -> Value {
    json!({
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "ev", "item_id": "item_user", "content_index": 0, "transcript": transcript,
    })
}

fn provider_error(code: &str, message: &str) -> Value {
    let error = json!({ "type": "invalid_request_error", "code": code, "message": message });
    json!({ "type": "error", "event_id": "ev", "error": error })
}

fn tool_call(call_id: &str, arguments: Value) -> CallEvent {
    let (call_id, name) = (call_id.to_owned(), "get_weather".to_owned());
    CallEvent::ToolCall {
        call_id,
        name,
        arguments,
    }
}

fn response_done(response: &str, status: &str) -> Value {
    json!({ "type": "response.done", "event_id": "ev", "response": { "id": response, "status": status } })
}

fn simple(kind: &str) -> Value {
    json!({ "type": kind, "event_id": "ev", "audio_start_ms": 0, "item_id": "item_user" })
}

#[tokio::test]
async fn open_sends_the_key_and_the_model_and_configures_the_session() {
    let call = open_with(|s| s.model = "gpt-realtime/2025 x+y".into()).await;
    let upgrade = &call.peer.upgrade;
    let bearer = format!("Bearer {KEY}");
    assert_eq!(upgrade.authorization.as_deref(), Some(bearer.as_str()));
    let uri = "/v1/realtime?model=gpt-realtime%2F2025%20x%2By";
    assert_eq!(upgrade.uri, uri);
    let format = json!({ "type": "audio/pcm", "rate": 24000 });
    let expected = json!({
        "type": "session.update",
        "session": {
            "type": "realtime",
            "instructions": "You are a weather bot.",
            "audio": {
                "input": {
                    "format": format,
                    "transcription": { "model": "gpt-4o-mini-transcribe" },
                    "turn_detection": {
                        "type": "server_vad", "create_response": true, "interrupt_response": true,
                    },
                },
                "output": { "format": format, "voice": "marin" },
            },
            "tools": [{
                "type": "function",
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": { "type": "object", "properties": { "city": { "type": "string" } } },
            }],
        },
    });
    assert_eq!(call.update, expected);
}

#[tokio::test]
async fn appends_carry_the_callers_audio_byte_for_byte() {
    let mut call = open().await;
    let chunks = [pcm(20), vec![7], pcm(200)[..4801].to_vec()];
    for chunk in &chunks {
        let input = CallInput::Audio(chunk.clone());
        call.link.input.send(input).await.unwrap();
    }
    for chunk in &chunks {
        let append = call.peer.recv().await;
        assert_eq!(append["type"], "input_audio_buffer.append");
        let audio = append["audio"].as_str().unwrap();
        assert_eq!(audio, BASE64.encode(chunk));
        assert_eq!(BASE64.decode(audio).unwrap().len(), chunk.len());
        assert_eq!(append.as_object().unwrap().len(), 2, "{append}");
    }
}

#[tokio::test]
async fn replies_come_out_under_ga_and_beta_names_and_a_cancelled_one_is_interrupted() {
    let mut call = open().await;
    let (first, second) = (pcm(40), pcm(60));
    let script = [
        user_said("what is the weather"),
        created("resp_A"),
        audio_delta(GA_AUDIO, "resp_A", "item_A", &first),
        transcript_delta(GA_TEXT, "resp_A", "Sunny "),
        response_done("resp_A", "completed"),
        audio_delta("response.audio.delta", "resp_B", "item_B", &second),
        transcript_delta("response.audio_transcript.delta", "resp_B", "and warm"),
        response_done("resp_B", "cancelled"),
    ];
    for event in script {
        call.peer.send(event).await;
    }
    let expected = [
        CallEvent::UserTranscript {
            text: "what is the weather".into(),
        },
        audio_out(0, first),
        text_out(0, "Sunny "),
        done(0, false),
        audio_out(1, second),
        text_out(1, "and warm"),
        done(1, true),
    ];
    for want in expected {
        assert_eq!(event(&mut call.link).await, want);
    }
    assert_eq!(call.provider.unknown_events(), 0);
}

/// Plays `millis` of item `item_1`, waits until the adapter has it, then
/// `wait`s and barges in; the truncate if any, and the elapsed time.
async fn barge_in(call: &mut Open, millis: usize, done: bool, wait: Duration) -> Option<Value> {
    let delta = audio_delta(GA_AUDIO, "resp_1", "item_1", &pcm(millis));
    call.peer.send(delta).await;
    assert!(matches!(
        event(&mut call.link).await,
        CallEvent::AudioOut { .. }
    ));
    if done {
        call.peer.send(response_done("resp_1", "completed")).await;
        assert!(matches!(
            event(&mut call.link).await,
            CallEvent::ResponseDone { .. }
        ));
    }
    tokio::time::sleep(wait).await;
    call.peer
        .send(simple("input_audio_buffer.speech_started"))
        .await;
    assert_eq!(event(&mut call.link).await, CallEvent::SpeechStarted);
    // A frame of the caller's audio marks where the truncate would be.
    let frame = CallInput::Audio(pcm(20));
    call.link.input.send(frame).await.unwrap();
    let next = call.peer.recv().await;
    match next["type"].as_str() {
        Some("conversation.item.truncate") => {
            assert_eq!(call.peer.recv().await["type"], "input_audio_buffer.append");
            Some(next)
        }
        _ => {
            assert_eq!(next["type"], "input_audio_buffer.append");
            None
        }
    }
}

#[tokio::test]
async fn barge_in_truncates_to_what_was_heard_less_the_jitter() {
    let mut call = open().await;
    let started = Instant::now();
    let truncate = barge_in(&mut call, 10_000, false, Duration::from_millis(400)).await;
    let elapsed = started.elapsed().as_millis() as u64;
    let truncate = truncate.expect("a truncate");
    assert_eq!(truncate["item_id"], "item_1");
    assert_eq!(truncate["content_index"], 0);
    let end = truncate["audio_end_ms"].as_u64().unwrap();
    // Wall time, not the 10 s of audio sent; 100 ms of jitter off.
    assert!(end >= 300 && end <= elapsed - 100, "{end} ms of {elapsed}");
}

#[tokio::test]
async fn a_truncate_never_exceeds_the_audio_the_item_has() {
    let mut call = open().await;
    // 200 ms of audio played for 500 ms: all of it, less the jitter.
    let truncate = barge_in(&mut call, 200, false, Duration::from_millis(500)).await;
    assert_eq!(truncate.expect("a truncate")["audio_end_ms"], 100);
}

#[tokio::test]
async fn a_truncate_is_skipped_when_nothing_or_everything_was_heard() {
    let mut call = open().await;
    // Just sent: under the jitter, so 0.
    assert_eq!(barge_in(&mut call, 50, false, Duration::ZERO).await, None);
    // Done and played out long ago.
    let wait = Duration::from_millis(300);
    assert_eq!(barge_in(&mut call, 100, true, wait).await, None);
}

#[tokio::test]
async fn a_tool_call_is_answered_with_its_output_then_a_response() {
    let mut call = open().await;
    let item = json!({ "type": "function_call", "call_id": "call_2", "name": "get_weather" });
    let script = [
        json!({
            "type": "response.function_call_arguments.done", "event_id": "ev",
            "response_id": "resp_1", "item_id": "item_f", "output_index": 0,
            "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}",
        }),
        json!({ "type": "response.output_item.added", "event_id": "ev", "item": item }),
        // Beta: no name here; invalid arguments stay as they are.
        json!({
            "type": "response.function_call_arguments.done", "event_id": "ev",
            "response_id": "resp_1", "item_id": "item_g", "output_index": 1,
            "call_id": "call_2", "arguments": "{\"city\":",
        }),
    ];
    for event in script {
        call.peer.send(event).await;
    }
    assert_eq!(
        event(&mut call.link).await,
        tool_call("call_1", json!({ "city": "Paris" }))
    );
    assert_eq!(
        event(&mut call.link).await,
        tool_call("call_2", json!("{\"city\":"))
    );
    let output = |call_id: &str, output: &str| CallInput::ToolOutput {
        call_id: call_id.into(),
        output: output.into(),
    };
    say(&call.link, output("call_nobody", "{}")).await;
    say(&call.link, output("call_1", "{\"temp\":21}")).await;
    // The unknown call's output is dropped: the first is call_1's.
    let output = call.peer.recv().await;
    let item =
        json!({ "type": "function_call_output", "call_id": "call_1", "output": "{\"temp\":21}" });
    assert_eq!(
        output,
        json!({ "type": "conversation.item.create", "item": item })
    );
    assert_eq!(call.peer.recv().await, json!({ "type": "response.create" }));
}

#[tokio::test]
async fn a_provider_error_fails_the_call_without_its_message() {
    let mut call = open().await;
    let error = provider_error("session_expired", "Your SECRET session expired");
    call.peer.send(error).await;
    let CallEvent::Failed(err) = event(&mut call.link).await else {
        panic!("expected a failure");
    };
    assert_no_secret(&err);
    assert!(err.message.contains("invalid_request_error"), "{err}");
    assert!(err.message.contains("session_expired"), "{err}");
    assert!(err.message.contains(MODEL), "{err}");
    assert_eq!(err.failure, CallFailure::ProviderError);
    ended(&mut call.link.events).await;
    call.peer.closed(WAIT).await;
}

#[tokio::test]
async fn a_provider_close_fails_the_call_with_its_code_only() {
    let mut call = open().await;
    let frame = CloseFrame {
        code: CloseCode::Away,
        reason: "Your session hit the maximum duration of 60 minutes".into(),
    };
    call.peer.ws.close(Some(frame)).await.unwrap();
    let CallEvent::Failed(err) = event(&mut call.link).await else {
        panic!("expected a failure");
    };
    assert!(err.message.contains("1001"), "{err}");
    assert!(!err.message.contains("maximum duration"), "{err}");
    assert_eq!(err.failure, CallFailure::Closed);
    ended(&mut call.link.events).await;
}

#[tokio::test]
async fn end_commits_then_waits_for_the_last_response_before_closing() {
    let mut call = open().await;
    say(&call.link, CallInput::Audio(pcm(20))).await;
    say(&call.link, CallInput::End).await;
    assert_eq!(call.peer.recv().await["type"], "input_audio_buffer.append");
    assert_eq!(
        call.peer.recv().await,
        json!({ "type": "input_audio_buffer.commit" })
    );
    call.peer
        .send(json!({ "type": "input_audio_buffer.committed", "event_id": "ev", "item_id": "item_u" }))
        .await;
    assert_eq!(call.peer.recv().await, json!({ "type": "response.create" }));
    let reply = pcm(20);
    call.peer.send(created("resp_9")).await;
    call.peer
        .send(audio_delta(GA_AUDIO, "resp_9", "item_9", &reply))
        .await;
    call.peer.send(response_done("resp_9", "completed")).await;
    assert_eq!(event(&mut call.link).await, audio_out(0, reply));
    assert_eq!(event(&mut call.link).await, done(0, false));
    ended(&mut call.link.events).await;
    call.peer.closed(WAIT).await;
}

#[tokio::test]
async fn end_with_nothing_left_to_answer_closes_without_a_failure() {
    let mut call = open().await;
    say(&call.link, CallInput::End).await;
    assert_eq!(call.peer.recv().await["type"], "input_audio_buffer.commit");
    let error = provider_error("input_audio_buffer_commit_empty", "SECRET");
    call.peer.send(error).await;
    ended(&mut call.link.events).await;
    call.peer.closed(WAIT).await;
}

#[tokio::test]
async fn dropping_the_input_closes_the_session_at_once() {
    let mut call = open().await;
    drop(call.link.input);
    call.peer.closed(Duration::from_millis(500)).await;
    ended(&mut call.link.events).await;
}

#[tokio::test]
async fn after_the_session_cap_a_seeded_second_session_takes_over() {
    let cap = Duration::from_millis(300);
    let mut call = open_with(|s| s.session_cap = cap).await;
    let script = [
        user_said("what time is it"),
        created("resp_1"),
        transcript_delta(GA_TEXT, "resp_1", "It is noon."),
        response_done("resp_1", "completed"),
    ];
    for event in script {
        call.peer.send(event).await;
    }
    for _ in 0..3 {
        event(&mut call.link).await;
    }
    // After the cap, the adapter dials again with the same session.
    let mut second = call.fake.accept().await;
    let (first, again) = (&call.peer.upgrade, &second.upgrade);
    assert_eq!(again.uri, first.uri);
    assert_eq!(again.authorization, first.authorization);
    assert_eq!(second.open().await, call.update);
    let seeded = [
        ("user", "input_text", "what time is it"),
        ("assistant", "output_text", "It is noon."),
    ];
    for (role, kind, text) in seeded {
        let item = json!({
            "type": "message", "role": role, "content": [{ "type": kind, "text": text }],
        });
        assert_eq!(
            second.recv().await,
            json!({ "type": "conversation.item.create", "item": item })
        );
    }
    call.peer.closed(WAIT).await;
    // The caller's audio goes to the second session now, and its replies
    // come out as the call's next response.
    let frame = pcm(20);
    say(&call.link, CallInput::Audio(frame.clone())).await;
    let append = second.recv().await;
    assert_eq!(append["audio"], BASE64.encode(&frame));
    let reply = pcm(20);
    second
        .send(audio_delta(GA_AUDIO, "resp_X", "item_X", &reply))
        .await;
    assert_eq!(event(&mut call.link).await, audio_out(1, reply));
}

#[tokio::test]
async fn a_rollover_waits_for_a_quiet_moment_unless_the_old_session_ends() {
    let mut call = open_with(|s| s.session_cap = Duration::from_millis(200)).await;
    let created = created("resp_1");
    call.peer.send(created).await;
    call.peer
        .send(transcript_delta(GA_TEXT, "resp_1", "Let me"))
        .await;
    assert!(matches!(
        event(&mut call.link).await,
        CallEvent::AssistantText { response: 0, .. }
    ));
    let mut second = call.fake.accept().await;
    second.open().await;
    // A response is under way: the first session keeps the caller.
    tokio::time::sleep(Duration::from_millis(100)).await;
    say(&call.link, CallInput::Audio(pcm(20))).await;
    assert_eq!(call.peer.recv().await["type"], "input_audio_buffer.append");
    // The provider ends the first session: the second takes over, the
    // unfinished response ends interrupted, and the call goes on.
    let frame = CloseFrame {
        code: CloseCode::Away,
        reason: "Your session hit the maximum duration of 60 minutes".into(),
    };
    call.peer.ws.close(Some(frame)).await.unwrap();
    assert_eq!(event(&mut call.link).await, done(0, true));
    let frame = pcm(20);
    say(&call.link, CallInput::Audio(frame.clone())).await;
    assert_eq!(second.recv().await["audio"], BASE64.encode(&frame));
    second
        .send(simple("input_audio_buffer.speech_started"))
        .await;
    assert_eq!(event(&mut call.link).await, CallEvent::SpeechStarted);
}

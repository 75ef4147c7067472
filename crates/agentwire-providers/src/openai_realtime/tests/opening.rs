//! Opening failures named by step, unknown events, and the settings' checks.

use super::*;

#[tokio::test]
async fn open_failures_name_the_step_and_never_a_body_or_the_key() {
    // The upgrade refused: the status, not the body.
    let mut refusing = fake(Some(401)).await;
    let provider = OpenAiRealtime::new(settings(&refusing.url)).unwrap();
    let err = provider.open(spec()).await.err().unwrap();
    assert_no_secret(&err);
    assert!(err.message.contains("connect: HTTP 401"), "{err}");
    assert!(err.message.contains(MODEL), "{err}");
    assert_eq!(err.failure, CallFailure::Unreachable);
    refusing.peers.close();

    // An error at the session.update: its type and code, not its message.
    let err = open_failing(
        |_| {},
        |mut peer| async move {
            peer.send(json!({ "type": "session.created", "event_id": "ev" }))
                .await;
            peer.recv().await;
            peer.send(provider_error("unknown_parameter", "SECRET"))
                .await;
            let _ = peer.ws.next().await;
        },
    )
    .await;
    assert!(err.message.contains("waiting for session.updated"), "{err}");
    assert!(err.message.contains("unknown_parameter"), "{err}");
    assert_eq!(err.failure, CallFailure::ProviderError);

    // No session.created in time.
    let err = open_failing(
        |s| s.connect_timeout = Duration::from_millis(300),
        |mut peer| async move {
            let _ = peer.ws.next().await;
        },
    )
    .await;
    assert!(
        err.message
            .contains("waiting for session.created: timed out"),
        "{err}"
    );
    assert_eq!(err.failure, CallFailure::Timeout);

    // Closed while opening.
    let err = open_failing(
        |_| {},
        |mut peer| async move {
            let frame = CloseFrame {
                code: CloseCode::Policy,
                reason: "SECRET reason".into(),
            };
            let _ = peer.ws.close(Some(frame)).await;
        },
    )
    .await;
    assert!(err.message.contains("close code 1008"), "{err}");
    assert_eq!(err.failure, CallFailure::Closed);

    // Nobody listening.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
    drop(listener);
    let provider = OpenAiRealtime::new(settings(&url)).unwrap();
    let err = provider.open(spec()).await.err().unwrap();
    assert_no_secret(&err);
    assert!(err.message.contains("connect: I/O error"), "{err}");
    assert_eq!(err.failure, CallFailure::Unreachable);
}

#[tokio::test]
async fn unknown_events_are_counted_and_ignored() {
    let mut call = open().await;
    call.peer
        .send(json!({ "type": "response.brand_new_thing", "secret": "SECRET" }))
        .await;
    call.peer
        .ws
        .send(Message::text("not json SECRET"))
        .await
        .unwrap();
    call.peer
        .send(json!({ "type": "rate_limits.updated", "event_id": "ev", "rate_limits": [] }))
        .await;
    call.peer
        .send(simple("input_audio_buffer.speech_started"))
        .await;
    assert_eq!(event(&mut call.link).await, CallEvent::SpeechStarted);
    assert_eq!(call.provider.unknown_events(), 2);
}

#[test]
fn settings_have_the_documented_defaults() {
    let s = OpenAiRealtimeSettings::new(MODEL, KEY.into());
    assert_eq!(s.url, "wss://api.openai.com/v1/realtime");
    assert_eq!(s.transcription_model, "gpt-4o-mini-transcribe");
    assert_eq!(s.session_cap, Duration::from_secs(55 * 60));
    assert_eq!(s.truncate_jitter, Duration::from_millis(100));
    assert_eq!(s.voice, None);
    assert!(!s.connect_timeout.is_zero());
}

#[test]
fn the_key_never_shows_in_debug_output_or_settings_errors() {
    let s = OpenAiRealtimeSettings::new(MODEL, KEY.into());
    let provider = OpenAiRealtime::new(s.clone()).unwrap();
    for debug in [format!("{s:?}"), format!("{provider:?}")] {
        assert!(!debug.contains(KEY), "{debug}");
        assert!(!debug.contains("SECRET"), "{debug}");
    }
    let bad_key = OpenAiRealtimeSettings::new(MODEL, "sk-SECRET\n".into());
    let err = OpenAiRealtime::new(bad_key).unwrap_err();
    assert!(err.contains("api_key") && !err.contains("SECRET"), "{err}");
}

#[test]
fn bad_settings_are_named() {
    let with = |tune: fn(&mut OpenAiRealtimeSettings)| {
        let mut s = OpenAiRealtimeSettings::new(MODEL, KEY.into());
        tune(&mut s);
        OpenAiRealtime::new(s).unwrap_err()
    };
    assert!(with(|s| s.url = "https://api.openai.com/v1/realtime".into()).contains("ws or wss"));
    assert!(with(|s| s.url = "wss://x/realtime?model=a".into()).contains("query"));
    assert!(with(|s| s.url = "not a url".into()).contains("url"));
    assert!(with(|s| s.model = " ".into()).contains("model is empty"));
    assert!(with(|s| s.session_cap = Duration::ZERO).contains("session_cap"));
    assert!(with(|s| s.connect_timeout = Duration::ZERO).contains("connect_timeout"));
}

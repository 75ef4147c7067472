//! Failing endpoints named by step and status, the settings' checks, and
//! where sentences end.

use super::*;

/// The call's last event after one utterance.
async fn failure(settings: CascadeSettings) -> CallEvent {
    let mut link = open(settings, Vec::new()).await;
    say(&link, 200, 16_000).await;
    link.input.send(CallInput::End).await.unwrap();
    let events = rest(&mut link).await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, CallEvent::ResponseDone { .. }))
    );
    events.last().cloned().unwrap()
}

fn failed(failure: CallFailure, message: &str) -> CallEvent {
    CallEvent::Failed(CallError::new(failure, message))
}

#[tokio::test]
async fn failing_endpoints_fail_the_call_naming_the_step_and_status_only() {
    let fake_stt = fake(Script {
        transcription_status: 500,
        ..Script::default()
    })
    .await;
    let model = model("unused", BTreeMap::new());
    let last = failure(settings(&fake_stt.base_url, model.clone(), 16_000)).await;
    assert_eq!(
        last,
        failed(
            CallFailure::ProviderError,
            "cascade transcription: HTTP 500"
        )
    );

    let fake_tts = fake(Script {
        speech_status: 503,
        ..Script::default()
    })
    .await;
    let last = failure(settings(&fake_tts.base_url, model.clone(), 16_000)).await;
    assert_eq!(
        last,
        failed(CallFailure::ProviderError, "cascade speech: HTTP 503")
    );

    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let last = failure(settings(&base_url, model.clone(), 16_000)).await;
    assert_eq!(
        last,
        failed(
            CallFailure::Unreachable,
            "cascade transcription: unreachable"
        )
    );

    // The fake has no Chat Completions: the model's own error, body-free.
    let fake_ok = fake(Script::default()).await;
    let chat = chat_model(&fake_ok.base_url);
    let last = failure(settings(&fake_ok.base_url, chat, 16_000)).await;
    let rejected = "cascade model: provider openai model llama3.2: request rejected (HTTP 404)";
    assert_eq!(last, failed(CallFailure::ProviderError, rejected));
}

#[test]
fn settings_are_checked_and_never_show_a_key() {
    let good = settings("http://localhost:8000/v1", chat_model(""), 16_000);
    let debug = format!("{good:?}");
    assert!(
        !debug.contains("SECRET") && debug.contains("ApiKey(<redacted>)"),
        "{debug}"
    );
    assert!(Cascade::new(good.clone()).is_ok());
    let mut bad = good.clone();
    bad.transcription.base_url = "localhost:8000".into();
    let err = Cascade::new(bad).unwrap_err();
    assert!(err.contains("transcription: base_url"), "{err}");
    let mut bad = good.clone();
    bad.speech.api_key = Some("sk-SECRET\n".into());
    let err = Cascade::new(bad).unwrap_err();
    assert!(
        err.contains("speech: api_key") && !err.contains("SECRET"),
        "{err}"
    );
    let mut bad = good.clone();
    bad.speech.model = "tts\r\nX-Injected: 1".into();
    assert!(Cascade::new(bad).unwrap_err().contains("speech: model"));
    let mut bad = good.clone();
    bad.sample_rate = 100;
    assert!(Cascade::new(bad).unwrap_err().contains("sample_rate"));
    let mut bad = good;
    bad.timeout = Duration::ZERO;
    assert!(Cascade::new(bad).unwrap_err().contains("timeout"));
}

#[test]
fn sentences_end_at_punctuation_before_white_space() {
    let mut pending = "Sure. It is 3.5 degrees!\nOr not… Next".to_owned();
    assert_eq!(next_sentence(&mut pending).as_deref(), Some("Sure."));
    assert_eq!(
        next_sentence(&mut pending).as_deref(),
        Some(" It is 3.5 degrees!")
    );
    assert_eq!(next_sentence(&mut pending).as_deref(), Some("\n"));
    assert_eq!(next_sentence(&mut pending).as_deref(), Some("Or not…"));
    assert_eq!(next_sentence(&mut pending), None);
    assert_eq!(pending, " Next");
}

//! Faults on the wire, and which are retried: 429 with and without
//! `Retry-After`, 5xx, 401 and other 4xx, unreachable and silent servers,
//! stalled, cut and garbled streams.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::{ProviderError, ProviderErrorKind};
use parking_lot::Mutex;

use crate::support::{
    Fake, PING, Reply, an_start, anthropic, complete, oa_delta, oa_text, oa_text_transcript,
    openai, user,
};

/// What an OpenAI provider with `key` answers to "hi" from a fake server
/// that follows `script`: the error, and the fake that counted requests.
async fn openai_error(script: Vec<Reply>, key: Option<&str>) -> (ProviderError, Fake) {
    let fake = Fake::start(script).await;
    let provider = openai(&fake.url(), key);
    let (result, _) = complete(&provider, &user("hi")).await;
    (result.unwrap_err(), fake)
}

#[tokio::test]
async fn fault_429_then_success_is_retried() {
    let fake = Fake::start(vec![
        Reply::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        ),
        Reply::sse(oa_text_transcript(&["after retry"])),
    ])
    .await;
    let provider = openai(&fake.url(), Some("sk-x"));
    let (result, sink) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "after retry");
    assert_eq!(sink.texts(), ["after retry"]);
    assert_eq!(fake.count(), 2);
}

#[tokio::test]
async fn fault_429_persistent_honours_retry_after_then_rate_limited() {
    let fake = Fake::start(vec![Reply::Status {
        status: 429,
        // Capped by max_retry_delay (100 ms in these tests).
        headers: vec![("retry-after", "30")],
        body: r#"{"error":{"message":"Rate limit reached for sk-SECRET","type":"requests"}}"#,
    }])
    .await;
    let provider = openai(&fake.url(), Some("sk-SECRET"));
    let started = Instant::now();
    let (result, sink) = complete(&provider, &user("hi")).await;
    let elapsed = started.elapsed();
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::RateLimited);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: rate limited (HTTP 429) after 3 attempts"
    );
    assert_eq!(fake.count(), 3);
    assert!(sink.texts().is_empty());
    // Two waits of the capped Retry-After (100 ms), not the 10/20 ms backoff.
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
}

#[tokio::test]
async fn fault_503_persistent_is_unavailable_after_the_retries() {
    let (error, fake) =
        openai_error(vec![Reply::status(503, "upstream connect error")], None).await;
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: unavailable (HTTP 503) after 3 attempts"
    );
    assert_eq!(fake.count(), 3);

    // 502 and 504 the same way, and a recovery within the budget succeeds.
    let fake = Fake::start(vec![
        Reply::status(502, "bad gateway"),
        Reply::status(504, "timeout"),
        Reply::sse(oa_text_transcript(&["third time"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "third time");
    assert_eq!(fake.count(), 3);
}

#[tokio::test]
async fn fault_500_is_unavailable_without_a_retry() {
    let script = vec![
        Reply::status(500, r#"{"error":{"message":"The server had an error"}}"#),
        Reply::sse(oa_text_transcript(&["never"])),
    ];
    let (error, fake) = openai_error(script, None).await;
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: server error (HTTP 500)"
    );
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_401_is_auth_failed_and_never_echoes_the_body() {
    let script = vec![Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-SECRET. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    )];
    let (error, fake) = openai_error(script, Some("sk-SECRET")).await;
    assert_eq!(error.kind, ProviderErrorKind::AuthFailed);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: authentication failed (HTTP 401)"
    );
    assert!(!error.message.contains("SECRET"));
    assert!(!format!("{error:?}").contains("SECRET"));
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_other_4xx_is_failed_without_a_retry() {
    let script = vec![Reply::status(
        400,
        r#"{"error":{"message":"Invalid 'messages[0].content'","type":"invalid_request_error"}}"#,
    )];
    let (error, fake) = openai_error(script, None).await;
    assert_eq!(error.kind, ProviderErrorKind::Failed);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: request rejected (HTTP 400)"
    );
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_unreachable_port_is_unavailable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider = openai(&format!("http://{addr}/v1"), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: unreachable after 3 attempts"
    );
}

#[tokio::test]
async fn fault_server_that_accepts_and_never_answers_is_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(VecDeque::new()));
    let held = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            held.lock().push_back(socket);
        }
    });
    let provider = anthropic(&format!("http://{addr}"), Some("k"));
    let started = Instant::now();
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Timeout);
    assert_eq!(
        error.message,
        "provider anthropic model claude-sonnet-4-5: no response within 400ms"
    );
    assert!(started.elapsed() < Duration::from_millis(1000));
    assert_eq!(accepted.lock().len(), 1, "a timeout is not retried");
}

#[tokio::test]
async fn fault_headers_then_no_body_is_timeout() {
    let fake = Fake::start(vec![Reply::Stream {
        pieces: Vec::new(),
        hang: true,
    }])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Timeout);
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn fault_stream_that_hangs_after_one_chunk_is_stalled() {
    let fake = Fake::start(vec![Reply::Stream {
        pieces: vec![(Duration::ZERO, oa_text("partial").into_bytes())],
        hang: true,
    }])
    .await;
    let provider = openai(&fake.url(), None);
    let started = Instant::now();
    let (result, sink) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Stalled);
    assert_eq!(
        error.message,
        "provider openai model gpt-4o-mini: stream stalled for 300ms"
    );
    assert_eq!(sink.texts(), ["partial"]);
    assert_eq!(fake.count(), 1);
    assert!(started.elapsed() < Duration::from_millis(1000));

    // Anthropic the same, and a ping keeps nothing alive once it stops.
    let mut t = an_start();
    t.push_str(PING);
    let fake = Fake::start(vec![Reply::Stream {
        pieces: vec![(Duration::ZERO, t.into_bytes())],
        hang: true,
    }])
    .await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Stalled);
}

#[tokio::test]
async fn fault_stream_cut_after_text_is_not_retried() {
    // The body ends before `[DONE]` or a finish_reason: interrupted. Text
    // already reached the sink, so no retry (it would repeat the text).
    let fake = Fake::start(vec![
        Reply::sse(oa_text("half an ans")),
        Reply::sse(oa_text_transcript(&["never"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(sink.texts(), ["half an ans"]);
    assert_eq!(fake.count(), 1);

    // Cut before any text: retried.
    let fake = Fake::start(vec![
        Reply::sse(oa_delta(
            "{\"role\":\"assistant\",\"content\":\"\"}",
            "null",
        )),
        Reply::sse(oa_text_transcript(&["whole"])),
    ])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "whole");
    assert_eq!(sink.texts(), ["whole"]);
    assert_eq!(fake.count(), 2);
}

#[tokio::test]
async fn fault_garbage_stream_is_failed() {
    let (error, fake) = openai_error(vec![Reply::sse("data: {not json}\n\n")], None).await;
    assert_eq!(error.kind, ProviderErrorKind::Failed);
    assert_eq!(fake.count(), 1);
}

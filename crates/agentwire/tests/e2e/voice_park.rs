//! Park and resume of voice calls (`omnia-behaviour.md` §3.6, done right):
//! a call whose socket drops stays parked, provider link alive, for
//! `server.limits.call_park_window`; `resume=S` by the same owner within it
//! re-attaches the call to the new socket only. Anonymous calls, hangups,
//! another owner and an expired window never re-attach.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::credentials::sha256_hex;
use crate::support::{Client, TestServer, metric};
use crate::voice::{
    Frame, HELLO_16K, VOICE_AGENTS, VOICE_PROVIDERS, WEATHER_16K, next_frame, next_text, speak,
    until_done,
};

const ALICE: &str = "ak_voice_alice_0123456789";
const BOB: &str = "ak_voice_bob_0123456789";

async fn server() -> TestServer {
    let top = format!(
        "auth:\n  api_keys:\n    - {{id: a, sha256: {}, subject: alice}}\n    - {{id: b, sha256: {}, subject: bob}}\n{VOICE_PROVIDERS}",
        sha256_hex(ALICE),
        sha256_hex(BOB)
    );
    TestServer::with_server_and_runtime(
        "  allow_unauthenticated: true\n  limits:\n    max_calls: 4\n    call_park_window: 1500ms",
        &top,
        VOICE_AGENTS,
    )
    .await
}

/// A connection as `key` (anonymous without one) and its `connected`.
pub(crate) async fn connect(
    server: &TestServer,
    query: &str,
    key: Option<&str>,
) -> (Client, Value) {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    let mut client = server
        .try_connect_with(query, &headers)
        .await
        .expect("upgrade");
    let connected = next_text(&mut client).await;
    assert_eq!(connected["type"], "connected");
    (client, connected)
}

pub(crate) fn resumed(connected: &Value) -> bool {
    connected["connected"]["resumed"] == json!(true)
}

/// A call on `agent` as `key`: the caller speaks and hears the reply begin.
async fn call(server: &TestServer, agent: &str, key: Option<&str>) -> (Client, String) {
    let (mut client, connected) = connect(server, &format!("agent={agent}&binary=true"), key).await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let mut audio = 0;
    while audio < 3 {
        if let Frame::Audio(_) = next_frame(&mut client).await {
            audio += 1;
        }
    }
    (client, session)
}

/// Waits until `/metrics` shows `series` at `value` (2 s at most).
pub(crate) async fn wait_metric(server: &TestServer, series: &str, value: f64) {
    let mut seen = f64::NAN;
    for _ in 0..100 {
        seen = metric(&server.get("/metrics").await.1, series);
        if seen == value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{series} is {seen}, not {value}");
}

/// Closes `client` as a network blip would, without `hangup`: a Close
/// frame, then whatever the server had sent already, until the socket
/// ends. Returns the highest audio `sequence` it still got.
pub(crate) async fn blip(mut client: Client) -> Option<u32> {
    client.close(None).await.unwrap();
    let mut last = None;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(2), client.next_message()).await;
        match next.expect("the server ends the socket") {
            Some(Ok(Message::Binary(frame))) => {
                last = Some(u32::from_be_bytes(frame[16..20].try_into().unwrap()));
            }
            Some(Ok(_)) => {}
            None | Some(Err(_)) => return last,
        }
    }
}

#[tokio::test]
async fn a_dropped_call_resumes_on_the_owners_new_socket_and_its_audio_goes_only_there() {
    let server = server().await;
    let (old, session) = call(&server, "voice-long", Some(ALICE)).await;
    let last_on_old = blip(old)
        .await
        .expect("the old socket heard the reply begin");
    wait_metric(&server, "agentwire_calls_parked", 1.0).await;
    assert_eq!(
        metric(&server.get("/metrics").await.1, "agentwire_calls_active"),
        1.0
    );

    let query = format!("agent=voice-long&binary=true&resume={session}");
    let (mut new, connected) = connect(&server, &query, Some(ALICE)).await;
    assert_eq!(connected["session_id"], session.as_str());
    assert!(resumed(&connected), "{connected}");
    wait_metric(&server, "agentwire_calls_parked", 0.0).await;
    // The format again, then the rest of the same reply: the provider link
    // lived on while no socket held it.
    let config = next_text(&mut new).await;
    assert_eq!(config["type"], "session_config");
    assert_eq!(config["session_config"]["sample_rate"], 16000);
    let (texts, audio) = until_done(&mut new, &session).await;
    assert_eq!(texts.last().unwrap()["type"], "done", "{texts:?}");
    assert!(
        !audio.is_empty(),
        "the reply's audio comes to the new socket"
    );
    // The old socket was over before the resume, and the new one starts
    // where the call is now: what played while parked is dropped.
    assert!(
        audio[0].sequence > last_on_old,
        "{} after {last_on_old}",
        audio[0].sequence
    );
    // The same call goes on: its next utterance is its second.
    speak(&mut new, &session, 16_000, 1, HELLO_16K, false).await;
    let user = loop {
        let frame = next_text(&mut new).await;
        if frame["role"] == "user" {
            break frame;
        }
    };
    assert!(
        user["content"]
            .as_str()
            .unwrap()
            .starts_with("utterance 2 ("),
        "{user}"
    );
}

#[tokio::test]
async fn another_owner_anonymous_callers_and_an_expired_window_get_a_fresh_session() {
    let server = server().await;
    let (old, session) = call(&server, "voice-long", Some(ALICE)).await;
    blip(old).await;
    wait_metric(&server, "agentwire_calls_parked", 1.0).await;
    let query = format!("agent=voice-long&binary=true&resume={session}");
    // Bob cannot take Alice's call, and does not end it.
    let (_bob, connected) = connect(&server, &query, Some(BOB)).await;
    assert_ne!(connected["session_id"], session.as_str());
    assert!(!resumed(&connected), "{connected}");
    // Nor can an anonymous caller.
    let (_anonymous, connected) = connect(&server, &query, None).await;
    assert_ne!(connected["session_id"], session.as_str());
    assert!(!resumed(&connected), "{connected}");
    assert_eq!(
        metric(&server.get("/metrics").await.1, "agentwire_calls_parked"),
        1.0
    );
    // An anonymous call is never parked.
    let (anonymous, _) = call(&server, "voice-long", None).await;
    blip(anonymous).await;
    wait_metric(&server, "agentwire_calls_active", 1.0).await;
    assert_eq!(
        metric(&server.get("/metrics").await.1, "agentwire_calls_parked"),
        1.0
    );
    // The window closes: the call ends, and Alice's resume is fresh.
    wait_metric(&server, "agentwire_calls_parked", 0.0).await;
    wait_metric(&server, "agentwire_calls_active", 0.0).await;
    let (_late, connected) = connect(&server, &query, Some(ALICE)).await;
    assert_ne!(connected["session_id"], session.as_str());
    assert!(!resumed(&connected), "{connected}");
}

#[tokio::test]
async fn a_hangup_then_close_parks_nothing() {
    let server = server().await;
    let (mut client, session) = call(&server, "voice-long", Some(ALICE)).await;
    client.send_json(json!({"type": "hangup"})).await;
    blip(client).await;
    wait_metric(&server, "agentwire_calls_active", 0.0).await;
    assert_eq!(
        metric(&server.get("/metrics").await.1, "agentwire_calls_parked"),
        0.0
    );
    let query = format!("agent=voice-long&binary=true&resume={session}");
    let (_again, connected) = connect(&server, &query, Some(ALICE)).await;
    assert!(!resumed(&connected), "{connected}");
}

#[tokio::test]
async fn a_draining_server_keeps_a_parked_call_and_admits_its_resume() {
    let mut server = server().await;
    let (old, session) = call(&server, "voice-long", Some(ALICE)).await;
    blip(old).await;
    wait_metric(&server, "agentwire_calls_parked", 1.0).await;
    server.begin_shutdown();
    // New sockets are refused while draining...
    let mut refused = None;
    for _ in 0..50 {
        match server.try_connect_with("agent=voice-long", &[]).await {
            Err(refusal) => {
                refused = Some(refusal);
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert_eq!(refused.map(|(status, _)| status), Some(503));
    // ...but the parked call's resume is let through, and the call goes on.
    let query = format!("agent=voice-long&binary=true&resume={session}");
    let (mut new, connected) = connect(&server, &query, Some(ALICE)).await;
    assert!(resumed(&connected), "{connected}");
    assert_eq!(next_text(&mut new).await["type"], "session_config");
    let (texts, _) = until_done(&mut new, &session).await;
    assert_eq!(texts.last().unwrap()["type"], "done");
}

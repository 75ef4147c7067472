//! Voice calls across replicas: a call parked on one replica (its socket
//! dropped) is resumed through another, which relays the new socket to the
//! replica holding the call (`replica.secret`, the call's route on Redis).
//! Replicas over PostgreSQL and Redis as `replicas.rs` starts them; the
//! holder that is killed is a child process.

use std::time::Duration;

use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::credentials::sha256_hex;
use crate::replicas::{deployment, servers, unique_prefix};
use crate::support::{Client, Dialect, TestServer, agentwire_serve, http_get, metric, start_child};
use crate::voice::{
    AudioOut, Frame, HELLO_16K, VOICE_AGENTS, VOICE_PROVIDERS, WEATHER_16K, joined, next_frame,
    next_text, speak, until_done,
};
use crate::voice_park::{blip, resumed};

const ALICE: &str = "ak_move_alice_0123456789";
const BOB: &str = "ak_move_bob_0123456789";
const SECRET: &str = "the replicas' shared secret, 32+ bytes long";
const RELAYED: &str = "agentwire_call_hops_total{outcome=\"relayed\"}";
const FAILED: &str = "agentwire_call_hops_total{outcome=\"failed\"}";

/// Every replica's config but `server.listen` and the agents: the same
/// database, Redis, prefix and secret.
fn shared_config(postgres: &str, redis: &str, prefix: &str) -> String {
    format!(
        "  allow_unauthenticated: true\n  limits:\n    max_calls: 4\n    call_park_window: 5s\n    drain_timeout: 1s\n{}replica:\n  secret: \"{SECRET}\"\nauth:\n  api_keys:\n    - {{id: a, sha256: {}, subject: alice}}\n    - {{id: b, sha256: {}, subject: bob}}\n{VOICE_PROVIDERS}",
        deployment(postgres, redis, prefix, "3s"),
        sha256_hex(ALICE),
        sha256_hex(BOB),
    )
}

async fn replica(shared: &str) -> TestServer {
    TestServer::with_top_level_and_agents(shared, VOICE_AGENTS).await
}

/// `/ws?<query>` at `address` as `key` (anonymous without one), and its
/// `connected`.
async fn connect_at(address: &str, query: &str, key: Option<&str>) -> (Client, Value) {
    let mut request = format!("ws://{address}/ws?{query}")
        .into_client_request()
        .unwrap();
    if let Some(key) = key {
        request
            .headers_mut()
            .insert("Authorization", format!("Bearer {key}").parse().unwrap());
    }
    let (ws, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("upgrade");
    let mut client = Client::new(ws, Dialect::Omnia);
    let connected = next_text(&mut client).await;
    assert_eq!(connected["type"], "connected", "{connected}");
    (client, connected)
}

/// A call on `agent` at `address` as Alice, speaking WEATHER: the format,
/// then the first `frames` audio frames of the reply, which `heard` keeps.
async fn call(address: &str, agent: &str, heard: &mut Vec<AudioOut>) -> (Client, String) {
    let query = format!("agent={agent}&binary=true");
    let (mut client, connected) = connect_at(address, &query, Some(ALICE)).await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    while heard.len() < 3 {
        if let Frame::Audio(bytes) = next_frame(&mut client).await {
            heard.push(crate::voice::decode_audio(&bytes, &session));
        }
    }
    (client, session)
}

/// Waits until `/metrics` at `address` shows `series` at `value` (5 s).
async fn wait_metric_at(address: std::net::SocketAddr, series: &str, value: f64) {
    let mut seen = f64::NAN;
    for _ in 0..250 {
        seen = metric(&http_get(address, "/metrics").await.1, series);
        if seen == value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{series} at {address} is {seen}, not {value}");
}

/// Where `audio` starts in `source`: it must be a contiguous run of it
/// (the caller's audio, echoed byte for byte). Sample-aligned, not frame-
/// aligned: the provider cuts utterances on its own 20 ms windows of the
/// call's whole input, which a second utterance need not share.
fn run_of(source: &[u8], audio: &[AudioOut]) -> usize {
    let bytes = joined(audio);
    assert!(!bytes.is_empty());
    (0..source.len())
        .step_by(2)
        .find(|&at| source[at..].starts_with(&bytes))
        .unwrap_or_else(|| {
            let sequences: Vec<u32> = audio.iter().map(|a| a.sequence).collect();
            panic!(
                "not a run of the caller's audio: {} bytes in frames {sequences:?}",
                bytes.len()
            )
        })
}

#[tokio::test]
async fn a_call_parked_on_one_replica_resumes_through_another_and_its_audio_goes_only_there() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let shared = shared_config(&postgres, &redis, &unique_prefix("move"));
    let (holder, other) = (replica(&shared).await, replica(&shared).await);
    let mut on_old = Vec::new();
    let (old, session) = call(&holder.addr.to_string(), "voice-echo", &mut on_old).await;
    let last_on_old = blip(old)
        .await
        .expect("the old socket heard the echo begin");
    wait_metric_at(holder.addr, "agentwire_calls_parked", 1.0).await;

    let query = format!("agent=voice-echo&binary=true&resume={session}");
    let (mut new, connected) = connect_at(&other.addr.to_string(), &query, Some(ALICE)).await;
    assert_eq!(connected["session_id"], session.as_str(), "{connected}");
    assert!(resumed(&connected), "{connected}");
    wait_metric_at(holder.addr, "agentwire_calls_parked", 0.0).await;
    // The call stayed on its holder: the other replica opened none, and
    // relayed the resume.
    let metrics = other.get("/metrics").await.1;
    assert_eq!(metric(&metrics, "agentwire_calls_active"), 0.0);
    assert_eq!(metric(&metrics, RELAYED), 1.0);
    let config = next_text(&mut new).await;
    assert_eq!(config["type"], "session_config", "{config}");
    assert_eq!(config["session_config"]["sample_rate"], 16000);
    // The rest of the first echo (what played while parked is dropped):
    // later frames, bytes of the caller's own audio after the old socket's.
    let (texts, rest) = until_done(&mut new, &session).await;
    assert_eq!(texts.last().unwrap()["type"], "done", "{texts:?}");
    if let Some(first) = rest.first() {
        assert!(
            first.sequence > last_on_old,
            "{} after {last_on_old}",
            first.sequence
        );
        let old_start = run_of(WEATHER_16K, &on_old);
        assert!(run_of(WEATHER_16K, &rest) > old_start);
    }
    // The same call goes on through the relay, both ways: its second
    // utterance, echoed byte for byte.
    speak(&mut new, &session, 16_000, 0, HELLO_16K, false).await;
    let (texts, echoed) = until_done(&mut new, &session).await;
    let user = texts
        .iter()
        .find(|t| t["role"] == "user")
        .expect("the caller's words");
    assert!(
        user["content"]
            .as_str()
            .unwrap()
            .starts_with("utterance 2 ("),
        "{user}"
    );
    assert!(
        echoed.len() >= 10,
        "half a second of echo: {}",
        echoed.len()
    );
    assert!(run_of(HELLO_16K, &echoed) < 16_000);
    let sequences: Vec<u32> = echoed.iter().map(|a| a.sequence).collect();
    assert!(
        sequences.windows(2).all(|w| w[1] == w[0] + 1),
        "{sequences:?}"
    );
    assert!(sequences[0] > last_on_old);
    // A hangup through the relay ends the call on its holder.
    new.send_json(serde_json::json!({"type": "hangup"})).await;
    blip(new).await;
    wait_metric_at(holder.addr, "agentwire_calls_active", 0.0).await;
    holder.stop().await;
    other.stop().await;
}

#[tokio::test]
async fn another_owner_cannot_resume_a_call_through_another_replica_nor_reach_the_hop() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let shared = shared_config(&postgres, &redis, &unique_prefix("move-owner"));
    let (holder, other) = (replica(&shared).await, replica(&shared).await);
    let (old, session) = call(&holder.addr.to_string(), "voice-long", &mut Vec::new()).await;
    blip(old).await;
    wait_metric_at(holder.addr, "agentwire_calls_parked", 1.0).await;
    let query = format!("agent=voice-long&binary=true&resume={session}");
    let other_at = other.addr.to_string();
    // Bob, and an anonymous caller, get a fresh session; the call stays.
    for key in [Some(BOB), None] {
        let (_client, connected) = connect_at(&other_at, &query, key).await;
        assert_ne!(connected["session_id"], session.as_str(), "{connected}");
        assert!(!resumed(&connected), "{connected}");
    }
    assert_eq!(
        metric(&holder.get("/metrics").await.1, "agentwire_calls_parked"),
        1.0
    );
    assert_eq!(metric(&other.get("/metrics").await.1, RELAYED), 0.0);
    // The hop route is no door from outside: Alice's own credential, but
    // unsigned or with a forged signature, is a path not served.
    let hop = format!("/internal/call-hop?{query}");
    let bearer = format!("Bearer {ALICE}");
    let upgrade = [
        ("Authorization", bearer.as_str()),
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("x-agentwire-hop-client", "-"),
    ];
    let refused = holder.http("GET", &hop, &upgrade, b"").await;
    assert_eq!(refused.status, 404);
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 10;
    let forged = format!("{deadline}.{}", "ab".repeat(32));
    let mut with_forged = upgrade.to_vec();
    with_forged.push(("x-agentwire-hop", forged.as_str()));
    let refused = holder.http("GET", &hop, &with_forged, b"").await;
    assert_eq!(refused.status, 404);
    assert_eq!(
        metric(&holder.get("/metrics").await.1, "agentwire_calls_parked"),
        1.0
    );
    // Alice still can.
    let (mut new, connected) = connect_at(&other_at, &query, Some(ALICE)).await;
    assert!(resumed(&connected), "{connected}");
    assert_eq!(next_text(&mut new).await["type"], "session_config");
    holder.stop().await;
    other.stop().await;
}

#[tokio::test]
async fn a_resume_whose_holder_was_killed_gets_a_fresh_session_at_once() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let shared = shared_config(&postgres, &redis, &unique_prefix("move-kill"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("holder.yaml");
    let holder_yaml = format!("server:\n  listen: 127.0.0.1:0\n{shared}agents:\n{VOICE_AGENTS}");
    std::fs::write(&config, holder_yaml).unwrap();
    let (mut holder, address, mut lines) = start_child(agentwire_serve(&config)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let other = replica(&shared).await;
    let (old, session) = call(&address, "voice-long", &mut Vec::new()).await;
    blip(old).await;
    wait_metric_at(address.parse().unwrap(), "agentwire_calls_parked", 1.0).await;
    holder.start_kill().unwrap();
    holder.wait().await.unwrap();

    // Its route outlives it (for the lease TTL), but the hop finds no one:
    // the resume is what a resume of an ended call gets, at once.
    let started = tokio::time::Instant::now();
    let query = format!("agent=voice-long&binary=true&resume={session}");
    let (mut client, connected) = connect_at(&other.addr.to_string(), &query, Some(ALICE)).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered in {:?}",
        started.elapsed()
    );
    assert_ne!(connected["session_id"], session.as_str(), "{connected}");
    assert!(!resumed(&connected), "{connected}");
    // The fresh session is served on this replica: a new call opens here.
    let fresh = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &fresh, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let metrics = other.get("/metrics").await.1;
    assert_eq!(metric(&metrics, "agentwire_calls_active"), 1.0);
    assert_eq!(metric(&metrics, FAILED), 1.0);
    assert_eq!(metric(&metrics, RELAYED), 0.0);
    other.stop().await;
}

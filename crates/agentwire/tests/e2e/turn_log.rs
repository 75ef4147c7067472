//! The turn log seen from the socket: a turn never waits for its reader, so
//! a client that stops reading costs its own connection (4008 "slow
//! consumer"), never the server's memory or another client's turns; and a
//! client that opted into positions (`stream=2`) and lost its socket
//! rejoins where it was and reads exactly the rest, once.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Client, TestServer, metric};

/// What the `flood` script streams: 40,960 deltas of 1 KiB.
const FLOOD_BYTES: usize = 40 * 1024 * 1024;

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_4008_while_others_stay_fast() {
    let server = TestServer::start().await;
    let (mut flooded, _) = server.connect("agent=test-agent").await;
    let flood_sent = Instant::now();
    flooded.script("flood", "go").await;

    // The flooded client reads nothing; another client's turns go on.
    let (mut other, _) = server.connect("agent=test-agent").await;
    for i in 0..5 {
        let started = Instant::now();
        other.script("echo", &format!("turn {i}")).await;
        let turn = other.recv_turn().await;
        assert_eq!(turn.last().unwrap()["content"], format!("echo: turn {i}"));
        let took = started.elapsed();
        assert!(took < Duration::from_secs(1), "turn {i} took {took:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Past the write timeout (10 s) the server has given up on it; reading
    // now, it gets what was queued for it, then the close that says why.
    tokio::time::sleep_until(flood_sent + Duration::from_secs(12)).await;
    let mut chunk_bytes = 0;
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(15), flooded.next_message()).await {
            Ok(Some(Ok(Message::Text(text)))) => chunk_bytes += text.len(),
            Ok(Some(Ok(Message::Close(frame)))) => break frame,
            Ok(Some(Ok(_))) => {}
            other => panic!("expected frames, then a close frame: {other:?}"),
        }
    };
    let close = close.expect("a close frame");
    assert_eq!(u16::from(close.code), 4008, "{close:?}");
    assert_eq!(close.reason.as_str(), "slow consumer");
    assert!(
        chunk_bytes < FLOOD_BYTES / 2,
        "the server queued {chunk_bytes} bytes for a client that did not read"
    );

    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        metric(&metrics, "agentwire_slow_consumer_closes_total"),
        1.0
    );
    server.stop().await;
}

/// A reader that keeps reading is never closed as slow, however far the
/// turn runs ahead: the `flood` script's 40 MiB all arrive and the turn
/// ends `done` (whether deltas came merged depends on how far behind the
/// reader fell: the log's unit tests hold that).
#[tokio::test]
async fn a_client_that_keeps_reading_gets_the_whole_flood_and_its_done() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client.script("flood", "go").await;
    let mut chunk_bytes = 0;
    let done = loop {
        let frame = client.recv().await;
        match frame["type"].as_str() {
            Some("chunk") => chunk_bytes += frame["content"].as_str().unwrap().len(),
            Some("done") => break frame,
            _ => panic!("expected chunks and done: {frame}"),
        }
    };
    assert_eq!(done["content"], "flooded");
    assert_eq!(chunk_bytes, FLOOD_BYTES, "every delta's text arrived");
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        metric(&metrics, "agentwire_slow_consumer_closes_total"),
        0.0
    );
    server.stop().await;
}

#[tokio::test]
async fn a_gnosari_client_that_stops_reading_is_closed_4008_too() {
    let server = TestServer::start().await;
    let mut flooded = server.connect_gnosari("test-agent").await;
    let flood_sent = Instant::now();
    flooded
        .send_json(json!({"message": "go", "metadata": {"mock_scenario": "flood"}}))
        .await;

    let mut other = server.connect_gnosari("test-agent").await;
    for i in 0..3 {
        let started = Instant::now();
        other
            .send_json(
                json!({"message": format!("turn {i}"), "metadata": {"mock_scenario": "echo"}}),
            )
            .await;
        let turn = other.recv_gnosari_turn().await;
        let done = turn.last().unwrap();
        assert_eq!(done["type"], "agent_completed", "{turn:?}");
        assert_eq!(done["full_response"], format!("echo: turn {i}"));
        let took = started.elapsed();
        assert!(took < Duration::from_secs(1), "turn {i} took {took:?}");
    }

    tokio::time::sleep_until(flood_sent + Duration::from_secs(12)).await;
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(15), flooded.next_message()).await {
            Ok(Some(Ok(Message::Close(frame)))) => break frame,
            Ok(Some(Ok(_))) => {}
            other => panic!("expected events, then a close frame: {other:?}"),
        }
    };
    let close = close.expect("a close frame");
    assert_eq!(u16::from(close.code), 4008, "{close:?}");
    assert_eq!(close.reason.as_str(), "slow consumer");
    server.stop().await;
}

pub(crate) const ALICE: &str = "ak_turnlog_alice_0123456789";
pub(crate) const BOB: &str = "ak_turnlog_bob_0123456789";

pub(crate) fn digest(key: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server whose agents need a credential: two API keys, two owners.
pub(crate) async fn server_with_owners() -> TestServer {
    let top_level = format!(
        "auth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\n    - id: b\n      sha256: {}\n      subject: bob\n",
        digest(ALICE),
        digest(BOB)
    );
    TestServer::with_runtime(&top_level, "").await
}

/// Connects to `/ws?<query>` as the owner of `key`; the client and `connected`.
pub(crate) async fn connect_as(server: &TestServer, query: &str, key: &str) -> (Client, Value) {
    let bearer = format!("Bearer {key}");
    let mut client = server
        .try_connect_with(query, &[("Authorization", &bearer)])
        .await
        .expect("upgrade accepted");
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    (client, connected)
}

pub(crate) const POSITIONED: &str = "agent=test-agent&stream=2";

/// The query of a rejoin after `frame` (the last one the client had) of
/// the turn that `started` (its `turn_started` frame) opened.
pub(crate) fn rejoin_query(started: &Value, frame: &Value) -> String {
    format!(
        "{POSITIONED}&resume={}&after={}&epoch={}",
        started["session_id"].as_str().unwrap(),
        frame["seq"],
        started["turn_started"]["epoch"].as_str().unwrap()
    )
}

/// A frame as two runs of one script compare: without its timestamp,
/// session id and log epoch, which differ from session to session.
pub(crate) fn shape(frame: &Value) -> Value {
    let mut frame = frame.clone();
    let object = frame.as_object_mut().unwrap();
    object.remove("timestamp");
    object.remove("session_id");
    if let Some(started) = object.get_mut("turn_started") {
        started.as_object_mut().unwrap().remove("epoch");
    }
    frame
}

#[tokio::test]
async fn a_client_dropped_after_any_frame_rejoins_and_gets_exactly_the_rest() {
    let server = server_with_owners().await;
    let (mut whole, connected) = connect_as(&server, POSITIONED, ALICE).await;
    let log = &connected["connected"]["capabilities"]["event_log"];
    assert_eq!(*log, json!({"head": 0}), "{connected}");
    whole.script("paced", "go").await;
    let full = whole.recv_turn().await;
    let kinds: Vec<_> = full.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "turn_started",
            "chunk",
            "chunk",
            "tool_call",
            "tool_result",
            "chunk",
            "chunk",
            "chunk",
            "done"
        ]
    );
    let seqs: Vec<u64> = full.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(full[0]["turn_started"]["turn_id"], full[0]["seq"]);

    // One client per cut point, all at once: each drops its socket after
    // `cut` frames and rejoins after the last one it read.
    let runs = (1..full.len()).map(|cut| {
        let server = &server;
        async move {
            let (mut client, _) = connect_as(server, POSITIONED, ALICE).await;
            client.script("paced", "go").await;
            let mut seen = Vec::new();
            for _ in 0..cut {
                seen.push(client.recv().await);
            }
            drop(client);
            let query = rejoin_query(&seen[0], seen.last().unwrap());
            let (mut back, connected) = connect_as(server, &query, ALICE).await;
            assert_eq!(connected["session_id"], seen[0]["session_id"], "cut {cut}");
            assert_eq!(connected["connected"]["resumed"], true, "cut {cut}");
            let log = &connected["connected"]["capabilities"]["event_log"];
            assert_eq!(log["replayed"], true, "cut {cut}: {connected}");
            assert_eq!(log["epoch"], seen[0]["turn_started"]["epoch"], "cut {cut}");
            seen.extend(back.recv_turn().await);
            back.expect_silence(Duration::from_millis(200)).await;
            (cut, seen)
        }
    });
    for (cut, seen) in futures_util::future::join_all(runs).await {
        let seen: Vec<_> = seen.iter().map(shape).collect();
        let expected: Vec<_> = full.iter().map(shape).collect();
        assert_eq!(
            seen, expected,
            "cut after {cut} frames: no gap, no duplicate"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_comes_back_after_its_turn_ended_gets_the_end() {
    let server = server_with_owners().await;
    let (mut client, _) = connect_as(&server, POSITIONED, ALICE).await;
    client.script("paced", "go").await;
    let started = client.recv().await;
    let first = client.recv().await;
    drop(client);
    // The turn ends (five 150 ms steps) with nobody on its session.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (mut back, connected) = connect_as(&server, &rejoin_query(&started, &first), ALICE).await;
    assert_eq!(
        connected["connected"]["capabilities"]["event_log"]["replayed"], true,
        "{connected}"
    );
    let rest = back.recv_turn().await;
    let done = rest.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["content"], "one two three four five");
    assert_eq!(rest[0]["seq"], first["seq"].as_u64().unwrap() + 1);
    // The session is the client's again: its next turn runs on it.
    back.script("echo", "again").await;
    let next = back.recv_turn().await;
    assert_eq!(next[0]["type"], "turn_started");
    assert_eq!(next.last().unwrap()["session_id"], started["session_id"]);
    server.stop().await;
}

#[tokio::test]
async fn another_owner_cannot_rejoin_and_a_stale_epoch_replays_nothing() {
    let server = server_with_owners().await;
    let (mut alice, _) = connect_as(&server, POSITIONED, ALICE).await;
    alice.script("paced", "go").await;
    let started = alice.recv().await;
    let first = alice.recv().await;

    // Bob names Alice's session: a fresh session, as for any unknown id,
    // and `resumed: false` says so.
    let (mut bob, connected) = connect_as(&server, &rejoin_query(&started, &first), BOB).await;
    assert_ne!(connected["session_id"], started["session_id"]);
    assert_eq!(connected["connected"]["resumed"], false, "{connected}");
    assert_eq!(
        connected["connected"]["capabilities"]["event_log"],
        json!({"head": 0})
    );
    bob.expect_silence(Duration::from_millis(300)).await;

    // Alice with an epoch this log never had: attached, nothing replayed
    // (she reloads the history instead), the live rest of the turn follows.
    let stale = rejoin_query(&started, &first).replace(
        started["turn_started"]["epoch"].as_str().unwrap(),
        "00000000000000ff",
    );
    let (mut again, connected) = connect_as(&server, &stale, ALICE).await;
    assert_eq!(connected["session_id"], started["session_id"]);
    let log = &connected["connected"]["capabilities"]["event_log"];
    assert_eq!(log["replayed"], false, "{connected}");
    assert_eq!(log["epoch"], started["turn_started"]["epoch"]);
    let live = again.recv_turn().await;
    assert!(
        live.iter()
            .all(|f| f["seq"].as_u64() > first["seq"].as_u64()),
        "live frames only: {live:?}"
    );
    assert_eq!(live.last().unwrap()["type"], "done");
    assert_eq!(alice.recv_turn().await.last().unwrap()["type"], "done");
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        metric(&metrics, "agentwire_replays_total{outcome=\"refused\"}"),
        1.0
    );
    assert_eq!(
        metric(&metrics, "agentwire_replays_total{outcome=\"served\"}"),
        0.0
    );
    server.stop().await;
}

#[tokio::test]
async fn without_stream_2_resume_rejoins_nothing_and_frames_carry_no_seq() {
    let server = server_with_owners().await;
    let (mut alice, _) = connect_as(&server, POSITIONED, ALICE).await;
    alice.script("paced", "go").await;
    let started = alice.recv().await;
    let first = alice.recv().await;
    let query = rejoin_query(&started, &first).replace("&stream=2", "");
    let (mut plain, connected) = connect_as(&server, &query, ALICE).await;
    assert_ne!(connected["session_id"], started["session_id"]);
    assert!(
        connected["connected"]["capabilities"]
            .get("event_log")
            .is_none()
    );
    plain.expect_silence(Duration::from_millis(200)).await;
    plain.script("stream", "hi").await;
    for frame in plain.recv_turn().await {
        assert!(frame.get("seq").is_none(), "{frame}");
        assert_ne!(frame["type"], "turn_started");
    }
    server.stop().await;
}

/// Connects to `/ws/agent/test-agent?<query>` as the owner of `key`.
pub(crate) async fn connect_gnosari_as(server: &TestServer, query: &str, key: &str) -> Client {
    server
        .try_connect_gnosari(&format!("test-agent?{query}"), &[("X-AUTH-TOKEN", key)])
        .await
        .expect("upgrade accepted")
}

pub(crate) fn paced_message() -> Value {
    json!({"message": "go", "metadata": {"mock_scenario": "paced"}})
}

#[tokio::test]
async fn a_gnosari_client_dropped_after_any_event_rejoins_and_gets_exactly_the_rest() {
    let server = server_with_owners().await;
    let mut whole = connect_gnosari_as(&server, "stream=2", ALICE).await;
    whole.send_json(paced_message()).await;
    let full = whole.recv_gnosari_turn().await;
    let kinds: Vec<_> = full.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "stream_info",
            "agent_started",
            "token",
            "token",
            "tool_call",
            "tool_result",
            "token",
            "token",
            "token",
            "agent_completed"
        ]
    );
    assert_eq!(full[0]["turn_id"], full[0]["seq"]);
    assert_eq!(
        full[0]["seq"], full[1]["seq"],
        "both come from the turn's start"
    );
    assert_eq!(
        full.last().unwrap()["full_response"],
        "one two three four five"
    );

    let runs = (2..full.len()).map(|cut| {
        let server = &server;
        async move {
            let mut client = connect_gnosari_as(server, "stream=2", ALICE).await;
            client.send_json(paced_message()).await;
            let mut seen = Vec::new();
            for _ in 0..cut {
                seen.push(client.recv_event().await);
            }
            drop(client);
            let query = format!(
                "stream=2&session_id={}&after={}&epoch={}",
                seen[0]["session_id"].as_str().unwrap(),
                seen.last().unwrap()["seq"],
                seen[0]["epoch"].as_str().unwrap()
            );
            let mut back = connect_gnosari_as(server, &query, ALICE).await;
            let info = back.recv_event().await;
            assert_eq!(info["type"], "stream_info", "cut {cut}: {info}");
            assert_eq!(info["replayed"], true, "cut {cut}: {info}");
            assert_eq!(info["session_id"], seen[0]["session_id"]);
            seen.extend(back.recv_gnosari_turn().await);
            (cut, seen)
        }
    });
    let shape = |event: &Value| {
        let mut event = event.clone();
        let object = event.as_object_mut().unwrap();
        for key in ["session_id", "epoch"] {
            object.remove(key);
        }
        event
    };
    for (cut, seen) in futures_util::future::join_all(runs).await {
        let seen: Vec<_> = seen.iter().map(shape).collect();
        let expected: Vec<_> = full.iter().map(shape).collect();
        assert_eq!(
            seen, expected,
            "cut after {cut} events: no gap, no duplicate"
        );
    }

    // Another owner naming the session: refused with the unknown-session
    // error; the socket stays open.
    let query = format!(
        "stream=2&session_id={}&after=1&epoch={}",
        full[0]["session_id"].as_str().unwrap(),
        full[0]["epoch"].as_str().unwrap()
    );
    let mut bob = connect_gnosari_as(&server, &query, BOB).await;
    let refused = bob.recv_event().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"], "session not found");
    server.stop().await;
}

#[tokio::test]
async fn a_drain_tells_opted_in_clients_where_to_rejoin_and_lets_the_turn_end() {
    let mut server = server_with_owners().await;
    let (mut client, _) = connect_as(&server, POSITIONED, ALICE).await;
    let (mut plain, _) = connect_as(&server, "agent=test-agent", ALICE).await;
    client.script("paced", "go").await;
    plain.script("paced", "go").await;
    let started = client.recv().await;
    let mut frames = vec![client.recv().await];
    assert_eq!(plain.recv().await["type"], "chunk");
    server.begin_shutdown();

    // The notice, then the rest of the turn, then the drain's close.
    loop {
        let frame = client.recv().await;
        let done = frame["type"] == "done";
        frames.push(frame);
        if done {
            break;
        }
    }
    let at = frames
        .iter()
        .position(|f| f["type"] == "going_away")
        .expect("a going_away frame before done");
    let notice = &frames[at]["going_away"];
    assert!(
        frames[at].get("seq").is_none(),
        "not a log entry: {}",
        frames[at]
    );
    let time_left = notice["time_left_ms"].as_u64().unwrap();
    assert!(time_left > 0 && time_left <= 30_000, "{notice}");
    assert!(
        notice["retry_after_ms"].as_u64().unwrap() <= 2_000,
        "{notice}"
    );
    let resume = &notice["resume"];
    assert_eq!(resume["session_id"], started["session_id"]);
    assert_eq!(resume["epoch"], started["turn_started"]["epoch"]);
    assert_eq!(
        resume["after"],
        frames[at - 1]["seq"],
        "the last frame before it"
    );
    assert_eq!(frames.last().unwrap()["content"], "one two three four five");
    let close = client.expect_close(Duration::from_secs(5)).await;
    assert_eq!(close.map(|c| u16::from(c.code)), Some(1001));

    // A client that did not opt in sees today's frames: no notice.
    let rest = plain.recv_turn().await;
    assert!(rest.iter().all(|f| f["type"] != "going_away"), "{rest:?}");
    server.wait_stopped().await;
}

/// Reads frames up to and including the turn's terminal.
#[tokio::test]
async fn a_pending_client_tool_call_is_answered_from_the_rejoined_socket() {
    let server = server_with_owners().await;
    let (mut client, _) = connect_as(&server, POSITIONED, ALICE).await;
    client.script("client-tool", "where am I?").await;
    let started = client.recv().await;
    let call = client.recv().await;
    assert_eq!(call["type"], "tool_call", "{call}");
    let id = call["tool_call"]["id"].as_str().unwrap().to_owned();
    // Lost before it could answer; back from just after the turn's start,
    // so the call comes again.
    drop(client);
    let (mut back, connected) = connect_as(&server, &rejoin_query(&started, &started), ALICE).await;
    assert_eq!(
        connected["connected"]["capabilities"]["event_log"]["replayed"],
        true
    );
    let again = back.recv().await;
    assert_eq!(again["type"], "tool_call");
    assert_eq!(again["tool_call"]["id"], id.as_str());
    assert_eq!(again["seq"], call["seq"]);
    let answer = json!({"type": "tool_result", "tool_result": {"call_id": id, "result": {"city": "Lisbon"}}});
    back.send_json(answer.clone()).await;
    let done = back.recv_turn().await.pop().unwrap();
    assert_eq!(done["content"], "Tool result received", "{done}");
    // The first answer won; another finds no call.
    back.send_json(answer).await;
    crate::support::assert_error(
        &back.recv().await,
        "INVALID_MESSAGE",
        "no pending tool call",
    );
    server.stop().await;
}

#[tokio::test]
async fn the_readers_gauge_counts_each_socket_following_a_turn() {
    let server = server_with_owners().await;
    // The gauge moves when a connection's loop comes round: polled.
    let readers_reach = |n: f64| {
        let server = &server;
        async move {
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                let (_, metrics) = server.get("/metrics").await;
                let readers = metric(&metrics, "agentwire_log_readers");
                if readers == n {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "agentwire_log_readers {readers}, not {n}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    readers_reach(0.0).await;
    let (mut first, _) = connect_as(&server, POSITIONED, ALICE).await;
    first.script("paced", "go").await;
    let started = first.recv().await;
    let chunk = first.recv().await;
    readers_reach(1.0).await;
    // A second tab of the same owner follows the same turn.
    let (mut second, _) = connect_as(&server, &rejoin_query(&started, &chunk), ALICE).await;
    readers_reach(2.0).await;
    let rest = second.recv_turn().await;
    assert_eq!(rest.last().unwrap()["type"], "done");
    first.recv_turn().await;
    // Each reader lets go once it has read the terminal.
    readers_reach(0.0).await;
    server.stop().await;
}

//! One turn seen from two replicas (`live: redis://…`): a client that
//! comes back through the balancer to the other replica mid-turn rejoins
//! the turn from its position there, on both dialects; a cancel or a
//! client tool's answer sent to the other replica reaches the turn; and a
//! turn whose replica was killed ends, for a client on the survivor, with
//! one `error` "turn interrupted" once its lease has expired.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::replicas::{
    deployment, own_redis, redis_server, servers, unique_prefix, wait_for_socket,
};
use crate::support::{Client, Dialect, TestServer, agentwire_serve, http_get, metric, start_child};
use crate::turn_log::{
    ALICE, BOB, POSITIONED, connect_as, connect_gnosari_as, digest, paced_message, rejoin_query,
    shape,
};

/// The two owners' API keys, as `turn_log`'s servers have them.
pub(crate) fn owners() -> String {
    format!(
        "auth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\n    - id: b\n      sha256: {}\n      subject: bob\n",
        digest(ALICE),
        digest(BOB)
    )
}

/// Two replicas of one deployment, with owners; `None` without the servers.
async fn two_replicas(test: &str, lease_ttl: &str) -> Option<(TestServer, TestServer)> {
    let (postgres, redis) = servers()?;
    let config = format!(
        "{}{}",
        owners(),
        deployment(&postgres, &redis, &unique_prefix(test), lease_ttl)
    );
    let one = TestServer::with_top_level(&config).await;
    let two = TestServer::with_top_level(&config).await;
    Some((one, two))
}

/// A replica as a child process (so it can be killed or paused), from the
/// deployment's `shared` config and the test agent; its address. The temp
/// dir holding its config is returned to be kept.
pub(crate) async fn child_replica(
    shared: &str,
) -> (tokio::process::Child, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.yaml");
    let text = format!(
        "server:\n  listen: 127.0.0.1:0\n{shared}agents:\n  - name: test-agent\n    handler: test\n"
    );
    std::fs::write(&config, text).unwrap();
    let (child, address, mut lines) = start_child(agentwire_serve(&config)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, address, dir)
}

/// Alice's positioned Omnia socket on a child replica (its `connected`
/// frame not read yet).
pub(crate) async fn connect_child(address: &str) -> Client {
    connect_child_at(address, POSITIONED).await
}

/// Alice's Omnia socket on a child replica with `query` (its `connected`
/// frame not read yet).
pub(crate) async fn connect_child_at(address: &str, query: &str) -> Client {
    let mut request = format!("ws://{address}/ws?{query}")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {ALICE}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    Client::new(ws, Dialect::Omnia)
}

#[tokio::test]
async fn an_omnia_client_dropped_after_any_frame_rejoins_on_the_other_replica_and_gets_the_rest() {
    let Some((one, two)) = two_replicas("omnia-rejoin", "10s").await else {
        return;
    };
    let (mut whole, _) = connect_as(&one, POSITIONED, ALICE).await;
    whole.script("paced", "go").await;
    let full = whole.recv_turn().await;
    assert_eq!(full.last().unwrap()["type"], "done", "{full:?}");

    let runs = (1..full.len()).map(|cut| {
        let (one, two) = (&one, &two);
        async move {
            let (mut client, _) = connect_as(one, POSITIONED, ALICE).await;
            client.script("paced", "go").await;
            let mut seen = Vec::new();
            for _ in 0..cut {
                seen.push(client.recv().await);
            }
            drop(client);
            let query = rejoin_query(&seen[0], seen.last().unwrap());
            let (mut back, connected) = connect_as(two, &query, ALICE).await;
            assert_eq!(connected["session_id"], seen[0]["session_id"], "cut {cut}");
            let log = &connected["connected"]["capabilities"]["event_log"];
            assert_eq!(log["replayed"], true, "cut {cut}: {connected}");
            assert_eq!(log["epoch"], seen[0]["turn_started"]["epoch"], "cut {cut}");
            seen.extend(back.recv_turn().await);
            back.expect_silence(Duration::from_millis(200)).await;
            // The session is free on either replica once the end is seen.
            back.script("echo", "next").await;
            let next = back.recv_turn().await;
            assert_eq!(next.last().unwrap()["content"], "echo: next", "cut {cut}");
            assert!(
                next[0]["seq"].as_u64() > seen.last().unwrap()["seq"].as_u64(),
                "cut {cut}: the next turn's seqs go on from the shared head: {next:?}"
            );
            (cut, seen)
        }
    });
    let expected: Vec<_> = full.iter().map(shape).collect();
    for (cut, seen) in futures_util::future::join_all(runs).await {
        let seen: Vec<_> = seen.iter().map(shape).collect();
        assert_eq!(
            seen, expected,
            "cut after {cut} frames: no gap, no duplicate"
        );
    }
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_gnosari_client_dropped_after_any_event_rejoins_on_the_other_replica_and_gets_the_rest() {
    let Some((one, two)) = two_replicas("gnosari-rejoin", "10s").await else {
        return;
    };
    let mut whole = connect_gnosari_as(&one, "stream=2", ALICE).await;
    whole.send_json(paced_message()).await;
    let full = whole.recv_gnosari_turn().await;
    assert_eq!(full.last().unwrap()["type"], "agent_completed", "{full:?}");

    let runs = (2..full.len()).map(|cut| {
        let (one, two) = (&one, &two);
        async move {
            let mut client = connect_gnosari_as(one, "stream=2", ALICE).await;
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
            let mut back = connect_gnosari_as(two, &query, ALICE).await;
            let info = back.recv_event().await;
            assert_eq!(info["type"], "stream_info", "cut {cut}: {info}");
            assert_eq!(info["replayed"], true, "cut {cut}: {info}");
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
    let expected: Vec<_> = full.iter().map(shape).collect();
    for (cut, seen) in futures_util::future::join_all(runs).await {
        let seen: Vec<_> = seen.iter().map(shape).collect();
        assert_eq!(
            seen, expected,
            "cut after {cut} events: no gap, no duplicate"
        );
    }
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_cancel_sent_to_the_other_replica_stops_the_turn_where_it_runs() {
    let Some((one, two)) = two_replicas("cancel", "10s").await else {
        return;
    };
    let (mut runner, _) = connect_as(&one, POSITIONED, ALICE).await;
    runner.script("paced", "go").await;
    let started = runner.recv().await;
    let first = runner.recv().await;
    assert_eq!(first["type"], "chunk", "{first}");
    let (mut other, _) = connect_as(&two, &rejoin_query(&started, &first), ALICE).await;
    other.send_json(json!({"type": "cancel"})).await;
    // Both sockets see the one terminal: cancelled, short of the script.
    let on_one = runner.recv_turn().await;
    let on_two = other.recv_turn().await;
    for frames in [&on_one, &on_two] {
        let done = frames.last().unwrap();
        assert_eq!(done["type"], "done", "{frames:?}");
        assert_eq!(done["cancelled"], true, "{done}");
        assert_ne!(done["content"], "one two three four five", "{done}");
        assert_eq!(frames.iter().filter(|f| f["type"] == "done").count(), 1);
    }
    assert_eq!(on_one.last().unwrap()["seq"], on_two.last().unwrap()["seq"]);
    // Each replica counts its side: the forwarded cancel, the mirror.
    let (_, two_metrics) = two.get("/metrics").await;
    let (_, one_metrics) = one.get("/metrics").await;
    assert_eq!(
        metric(&two_metrics, "agentwire_live_controls_sent_total"),
        1.0
    );
    assert!(metric(&two_metrics, "agentwire_live_log_entries_mirrored_total") >= 3.0);
    assert_eq!(
        metric(&one_metrics, "agentwire_live_controls_received_total"),
        1.0
    );
    assert!(metric(&one_metrics, "agentwire_live_log_batches_published_total") >= 2.0);
    assert_eq!(metric(&one_metrics, "agentwire_live_errors_total"), 0.0);
    other.script("echo", "after").await;
    assert_eq!(
        other.recv_turn().await.last().unwrap()["content"],
        "echo: after"
    );
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_client_tool_call_is_answered_on_the_other_replica() {
    let Some((one, two)) = two_replicas("client-tool", "10s").await else {
        return;
    };
    let (mut client, _) = connect_as(&one, POSITIONED, ALICE).await;
    client.script("client-tool", "where am I?").await;
    let started = client.recv().await;
    let call = client.recv().await;
    assert_eq!(call["type"], "tool_call", "{call}");
    let id = call["tool_call"]["id"].as_str().unwrap().to_owned();
    drop(client);
    let (mut back, _) = connect_as(&two, &rejoin_query(&started, &started), ALICE).await;
    let again = back.recv().await;
    assert_eq!(again["type"], "tool_call", "{again}");
    assert_eq!(again["tool_call"]["id"], id.as_str());
    let answer = json!({"type": "tool_result", "tool_result": {"call_id": id, "result": {"city": "Lisbon"}}});
    back.send_json(answer).await;
    let done = back.recv_turn().await.pop().unwrap();
    assert_eq!(done["content"], "Tool result received", "{done}");
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_turn_whose_replica_is_killed_ends_interrupted_for_a_client_on_the_survivor() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let shared = format!(
        "{}{}",
        owners(),
        deployment(&postgres, &redis, &unique_prefix("orphan"), "3s")
    );
    let (mut child, address, _dir) = child_replica(&shared).await;
    let mut doomed = connect_child(&address).await;
    assert_eq!(doomed.recv().await["type"], "connected");
    doomed.script("echo", "stored").await;
    assert_eq!(
        doomed.recv_turn().await.last().unwrap()["content"],
        "echo: stored"
    );
    doomed.script("slow", "never answered").await;
    let started = doomed.recv().await;
    assert_eq!(started["type"], "turn_started", "{started}");

    let survivor = TestServer::with_top_level(&shared).await;
    let (mut follower, connected) =
        connect_as(&survivor, &rejoin_query(&started, &started), ALICE).await;
    assert_eq!(
        connected["connected"]["capabilities"]["event_log"]["replayed"], true,
        "{connected}"
    );
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed_at = tokio::time::Instant::now();
    let frames = tokio::time::timeout(Duration::from_secs(6), follower.recv_turn())
        .await
        .expect("the orphaned turn ends");
    let ended = killed_at.elapsed();
    let error = frames.last().unwrap();
    assert_eq!(error["type"], "error", "{frames:?}");
    assert_eq!(error["error"]["code"], "INTERNAL_ERROR", "{error}");
    assert_eq!(error["error"]["message"], "turn interrupted", "{error}");
    assert_eq!(frames.iter().filter(|f| f["type"] == "error").count(), 1);
    assert!(
        ended < Duration::from_secs(4),
        "ended {ended:?} after the kill (lease TTL 3 s)"
    );
    let (_, metrics) = survivor.get("/metrics").await;
    assert_eq!(
        metric(&metrics, "agentwire_live_orphaned_turns_ended_total"),
        1.0
    );
    follower.script("history", "again").await;
    let done = follower.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let history = done["content"].as_str().unwrap();
    assert!(history.contains("user: stored\n"), "{history}");
    assert!(history.contains("assistant: echo: stored\n"), "{history}");
    // The orphan's end is stored as a failed turn's is, after its question
    // (the sessions API does not list failures: read the table); or, when
    // the kill came within the 250 ms the question waits to share the
    // turn's write, nothing of it is: what a crash may lose is a question
    // no answer was ever sent for, and a failure stored alone would read
    // as the previous turn's.
    let session = started["session_id"].as_str().unwrap();
    let lines = crate::failover::stored(&postgres, session);
    let rows = format!("{}\n", lines.join("\n"));
    assert_eq!(
        lines[..2],
        ["0|user|stored", "1|assistant|echo: stored"],
        "{rows}"
    );
    let ended_after_its_question =
        rows.contains("2|user|never answered\n3|error|turn interrupted\n4|user|again\n");
    let lost_whole = !rows.contains("|error|") && rows.contains("\n2|user|again\n");
    assert!(ended_after_its_question || lost_whole, "{rows}");
    survivor.stop().await;
}

pub(crate) fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("the child runs").to_string();
    let status = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test]
async fn a_paused_replica_whose_lease_was_taken_over_cannot_write() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let shared = format!(
        "{}{}",
        owners(),
        deployment(&postgres, &redis, &unique_prefix("paused"), "1500ms")
    );
    let (mut child, address, _dir) = child_replica(&shared).await;
    let mut paused = connect_child(&address).await;
    let connected = paused.recv().await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    paused.script("echo", "stored").await;
    paused.recv_turn().await;
    paused.script("slow", "from the paused one").await;
    assert_eq!(paused.recv().await["type"], "turn_started");
    signal(&child, "-STOP");

    // Its lease expires while it sleeps; the survivor takes the session.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let survivor = TestServer::with_top_level(&shared).await;
    let (mut client, _) = connect_as(&survivor, POSITIONED, ALICE).await;
    let ask = |text: &str, scenario: &str| {
        json!({"type": "message", "content": text, "session_id": session,
               "metadata": {"mock_scenario": scenario}})
    };
    // The survivor's turn runs while the old holder wakes: the old one's
    // pending writes (its question, its turn's end) come now, and must not
    // take the seqs the survivor's turn is about to write.
    client.send_json(ask("taken over", "slow")).await;
    assert_eq!(client.recv().await["type"], "turn_started");
    signal(&child, "-CONT");
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["content"], "done: taken over", "{done}");
    // Redis refused the old holder's batches too (once it has woken up
    // enough to try: on a loaded machine that can come after the turn).
    let mut metrics = String::new();
    for _ in 0..50 {
        metrics = http_get(address.parse().unwrap(), "/metrics").await.1;
        if metric(&metrics, "agentwire_live_log_batches_fenced_total") >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        metric(&metrics, "agentwire_live_log_batches_fenced_total") >= 1.0,
        "{metrics}"
    );

    client.send_json(ask("what is stored?", "history")).await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let history = done["content"].as_str().unwrap();
    assert!(history.contains("assistant: echo: stored\n"), "{history}");
    assert!(
        history.contains("assistant: done: taken over\n"),
        "{history}"
    );
    assert!(
        !history.contains("from the paused one"),
        "the paused replica wrote after losing its lease: {history}"
    );
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    survivor.stop().await;
}

#[tokio::test]
async fn a_client_following_a_turn_on_another_replica_is_told_to_reload_when_redis_restarts() {
    let Some((postgres, _)) = servers() else {
        return;
    };
    let Some((dir, mut redis, socket, url)) = own_redis().await else {
        return;
    };
    let shared = format!(
        "{}{}",
        owners(),
        deployment(&postgres, &url, &unique_prefix("restart"), "1500ms")
    );
    let one = TestServer::with_top_level(&shared).await;
    let two = TestServer::with_top_level(&shared).await;
    let (mut runner, _) = connect_as(&one, POSITIONED, ALICE).await;
    runner.script("slow", "during the restart").await;
    let started = runner.recv().await;
    let (mut follower, connected) =
        connect_as(&two, &rejoin_query(&started, &started), ALICE).await;
    assert_eq!(
        connected["connected"]["capabilities"]["event_log"]["replayed"],
        true
    );

    redis.kill().await.unwrap();
    let _ = std::fs::remove_file(&socket);
    let (status, _) = two.get("/readyz").await;
    assert_eq!(status, 503);
    // The follower's replica loses track of the turn: its client is closed
    // as one that cannot be caught up, to come back and reload.
    assert_eq!(
        closed_within(&mut follower, Duration::from_secs(8)).await,
        4008
    );
    // So is the running replica's own: what that replica streamed after
    // Redis went, no other replica will have, and it is not shown.
    assert_eq!(
        closed_within(&mut runner, Duration::from_secs(8)).await,
        4008
    );

    let _redis = redis_server(dir.path()).unwrap();
    wait_for_socket(&socket).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while two.get("/readyz").await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "/readyz not back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Back through the balancer: the old position means nothing in the new
    // epoch, so nothing is replayed and the client reloads from the store.
    let (mut back, connected) = connect_as(&two, &rejoin_query(&started, &started), ALICE).await;
    let log = &connected["connected"]["capabilities"]["event_log"];
    assert_eq!(log["replayed"], false, "{connected}");
    back.script("history", "what is stored?").await;
    let done = back.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert!(
        done["content"]
            .as_str()
            .unwrap()
            .contains("user: during the restart\n"),
        "{done}"
    );
    one.stop().await;
    two.stop().await;
}

/// The close code `client`'s socket is closed with, within `wait`,
/// whatever text frames come before it.
async fn closed_within(client: &mut Client, wait: Duration) -> u16 {
    let closed = tokio::time::timeout(wait, async {
        loop {
            match client.next_message().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                other => panic!("expected a close frame: {other:?}"),
            }
        }
    })
    .await
    .expect("the socket is closed");
    u16::from(closed.expect("a close frame").code)
}

#[tokio::test]
async fn a_callers_turn_limit_counts_its_turns_on_every_replica() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    // Continues the `server:` block `with_top_level` opens.
    let limited = "  limits:\n    turns_per_minute_per_caller: 3\n";
    let config = format!(
        "{limited}{}{}",
        owners(),
        deployment(&postgres, &redis, &unique_prefix("turn-limit"), "10s")
    );
    let one = TestServer::with_top_level(&config).await;
    let two = TestServer::with_top_level(&config).await;
    let (mut on_one, _) = connect_as(&one, POSITIONED, ALICE).await;
    let (mut on_two, _) = connect_as(&two, POSITIONED, ALICE).await;
    for (replica, text) in [(0, "1"), (1, "2"), (0, "3")] {
        let client = if replica == 0 {
            &mut on_one
        } else {
            &mut on_two
        };
        client.script("echo", text).await;
        let done = client.recv_turn().await.pop().unwrap();
        assert_eq!(done["content"], format!("echo: {text}"), "{done}");
    }
    // The fourth in a minute is refused on whichever replica it reaches.
    on_two.script("echo", "4").await;
    crate::support::assert_error(
        &on_two.recv().await,
        "RATE_LIMITED",
        "turn rate limit exceeded",
    );
    // Another caller has a bucket of its own.
    let (mut bob, _) = connect_as(&two, POSITIONED, BOB).await;
    bob.script("echo", "bob").await;
    assert_eq!(bob.recv_turn().await.pop().unwrap()["content"], "echo: bob");
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_cancel_on_one_replica_closes_the_model_stream_of_the_turn_on_the_other() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let (model, closed) = crate::fake_http::openai_endless().await;
    let config = format!(
        "{}{}providers:\n  - name: endless\n    type: openai\n    base_url: http://{model}/v1\n    model: gpt-4o-mini\n",
        owners(),
        deployment(&postgres, &redis, &unique_prefix("cancel-model"), "10s")
    );
    let agents = "  - name: streamer\n    handler: runtime\n    provider: endless\n";
    let one = TestServer::with_top_level_and_agents(&config, agents).await;
    let two = TestServer::with_top_level_and_agents(&config, agents).await;
    let (mut runner, _) = connect_as(&one, "agent=streamer&stream=2", ALICE).await;
    runner.say("go on forever").await;
    let started = runner.recv().await;
    assert_eq!(started["type"], "turn_started");
    let first = runner.recv().await;
    assert_eq!(first["content"], "word ");
    let query = rejoin_query(&started, &first).replace("agent=test-agent", "agent=streamer");
    let (mut other, connected) = connect_as(&two, &query, ALICE).await;
    assert_eq!(
        connected["connected"]["capabilities"]["event_log"]["replayed"],
        true
    );
    other.send_json(json!({"type": "cancel"})).await;
    tokio::time::timeout(Duration::from_secs(3), closed)
        .await
        .expect("the model's stream on the running replica was closed within 3 s of the cancel")
        .unwrap();
    for client in [&mut runner, &mut other] {
        let done = client.recv_turn().await.pop().unwrap();
        assert_eq!(done["cancelled"], true, "{done}");
    }
    one.stop().await;
    two.stop().await;
}

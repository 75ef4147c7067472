//! The tool-call ledger over replicas (PostgreSQL and Redis): a turn's
//! calls are in `tool_calls` as they move, and a replica killed mid-call
//! leaves the truth for the one that takes the session over: the call
//! answered before the kill `answered`, the call its client acknowledged
//! `denied` "turn interrupted" (acknowledged, never answered). What it
//! costs: a statement per move of a call, and nothing for a turn without.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::testing::{FailingSessionStore, FaultSwitch};
use serde_json::json;

use crate::failover::{defaults, psql_rows, start_turn};
use crate::replica_turns::{child_replica, connect_child};
use crate::replicas::{servers, unique_prefix};
use crate::support::{AGENTS, Client, TestServer};
use crate::turn_log::{ALICE, POSITIONED, connect_as, rejoin_query};

/// The session's ledger as `ordinal|name|side|state|reason|acked` lines.
fn ledger(postgres: &str, session: &str) -> Vec<String> {
    psql_rows(
        postgres,
        &format!(
            "SELECT c.call_ordinal, c.name, c.side, c.state, \
                    coalesce(c.outcome->>'reason', c.outcome->>'status', ''), \
                    c.acked_at IS NOT NULL \
             FROM tool_calls c JOIN sessions s ON s.key = c.session_key \
             WHERE s.id = '{session}' ORDER BY c.call_ordinal"
        ),
    )
}

async fn wait_for_ledger(postgres: &str, session: &str, rows: &[&str]) {
    for _ in 0..100 {
        if ledger(postgres, session) == rows {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "ledger never became {rows:?}: {:?}",
        ledger(postgres, session)
    );
}

#[tokio::test]
async fn a_killed_replicas_acknowledged_call_is_denied_as_interrupted_and_its_answered_one_stays() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let shared = defaults(&postgres, &redis, &unique_prefix("ledger-kill"));
    let (mut child, address, _dir) = child_replica(&shared).await;
    let mut runner = connect_child(&address).await;
    let started = start_turn(&mut runner, "server-then-client-tool").await;
    let session = started["session_id"].as_str().unwrap().to_owned();
    let asked = loop {
        let frame = runner.recv().await;
        if frame["type"] == "tool_call" && frame["tool_call"]["name"] == "get_location" {
            break frame;
        }
    };
    // The client's call is in the ledger before the client could answer.
    let requested = [
        "0|search|server|answered|ok|f",
        "1|get_location|client|requested||f",
    ];
    assert_eq!(ledger(&postgres, &session), requested);
    let id = asked["tool_call"]["id"].as_str().unwrap();
    runner
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}))
        .await;
    let acked = [
        "0|search|server|answered|ok|f",
        "1|get_location|client|acked||t",
    ];
    wait_for_ledger(&postgres, &session, &acked).await;
    let survivor = TestServer::with_top_level(&shared).await;
    let (mut follower, _) = connect_as(&survivor, &rejoin_query(&started, &started), ALICE).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let frames = follower.recv_turn().await;
    let end = frames.last().unwrap();
    assert_eq!(end["type"], "error", "{frames:?}");
    assert_eq!(end["error"]["message"], "turn interrupted", "{end}");
    // Settled in the survivor's write of the interruption, before its end
    // reached the log.
    assert_eq!(
        ledger(&postgres, &session),
        [
            "0|search|server|answered|ok|f",
            "1|get_location|client|denied|turn interrupted|t"
        ]
    );
    survivor.stop().await;
}

/// The store calls of one turn, by port method.
#[derive(Debug, PartialEq)]
struct Writes {
    appends: u64,
    moves: u64,
    other: u64,
}

/// What reached the store from `before` to now.
fn writes(switch: &FaultSwitch, before: &Writes) -> Writes {
    let now = counted(switch);
    Writes {
        appends: now.appends - before.appends,
        moves: now.moves - before.moves,
        other: now.other - before.other,
    }
}

fn counted(switch: &FaultSwitch) -> Writes {
    let other = [
        "append_messages",
        "create_session",
        "load_session",
        "fence_session",
    ];
    Writes {
        appends: switch.passed("append_turn_fenced"),
        moves: switch.passed("record_call"),
        other: other.iter().map(|op| switch.passed(op)).sum(),
    }
}

/// Runs `scenario` on `client`, acknowledging and answering its client
/// call at once when it makes one.
async fn run_turn(client: &mut Client, scenario: &str) {
    client.script(scenario, "go").await;
    loop {
        let frame = client.recv().await;
        if frame["type"] == "tool_call" && frame["tool_call"]["name"] == "get_location" {
            let id = frame["tool_call"]["id"].clone();
            client
                .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}))
                .await;
            let answer =
                json!({"type": "tool_result", "tool_result": {"call_id": id, "result": 1}});
            client.send_json(answer).await;
        }
        if frame["type"] == "done" || frame["type"] == "error" {
            assert_eq!(frame["type"], "done", "{frame}");
            return;
        }
    }
}

#[tokio::test]
async fn a_turn_without_tools_writes_once_and_each_move_of_a_call_is_one_statement() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let switch = FaultSwitch::new();
    let wrapped = switch.clone();
    let wrappers = agentwire::app::Wrappers {
        sessions: Some(Box::new(move |store| {
            Arc::new(FailingSessionStore::new(store, wrapped))
        })),
        media: None,
    };
    let shared = defaults(&postgres, &redis, &unique_prefix("ledger-cost"));
    let yaml = format!("server:\n  listen: 127.0.0.1:0\n{shared}{AGENTS}");
    let server = TestServer::with_wrappers(Path::new(""), &yaml, wrappers).await;
    let (mut client, _) = connect_as(&server, POSITIONED, ALICE).await;
    // The session's first turn creates it; the next ones are what count.
    run_turn(&mut client, "echo").await;
    let once = |appends, moves| Writes {
        appends,
        moves,
        other: 0,
    };
    for (scenario, cost) in [
        ("echo", once(1, 0)),
        ("client-tool", once(2, 3)),
        ("server-then-client-tool", once(2, 5)),
        ("echo", once(1, 0)),
    ] {
        let before = counted(&switch);
        run_turn(&mut client, scenario).await;
        assert_eq!(writes(&switch, &before), cost, "{scenario}");
    }
    server.stop().await;
}

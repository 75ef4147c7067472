//! The ledger written as calls move, on a real PostgreSQL: each move of a
//! call as it happens, the turn's end settling the rows it recorded, a
//! takeover settling what its predecessor left open in the write that
//! stores the interruption, and a writer fenced off refused.

use agentwire_core::{
    CallMove, CallState, ErrorCode, Fence, MessageBody, SessionStore, StoreError, Timestamp,
    ToolCall, ToolOutcome, ToolSide,
};
use serde_json::{Value, json};

use crate::conformance::{message, record};
use crate::postgres::PgStore;
use crate::postgres::tests::{call, empty_database, inspect, reply, result, sid, step};

/// A call of the turn answering question 0 of session `s1`.
fn tool(id: &str, side: ToolSide) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "lookup".into(),
        arguments: json!({"q": "secret words"}),
        side,
        consent_message: None,
        categories: Vec::new(),
    }
}

/// Records the move of the turn's `ordinal`-th call at `at`.
async fn record_move(
    store: &PgStore,
    ordinal: u32,
    call: &ToolCall,
    state: CallState,
    outcome: Option<&ToolOutcome>,
    fence: u64,
) -> Result<(), StoreError> {
    let session = sid("s1");
    let step = move_of(&session, ordinal, call, state, outcome);
    store.record_call(&step, Some(Fence(fence))).await
}

/// The move of `session`'s turn 0's `ordinal`-th call.
fn move_of<'a>(
    session: &'a agentwire_core::SessionId,
    ordinal: u32,
    call: &'a ToolCall,
    state: CallState,
    outcome: Option<&'a ToolOutcome>,
) -> CallMove<'a> {
    CallMove {
        session,
        turn: 0,
        ordinal,
        call,
        state,
        outcome,
        at: Timestamp(100 + i64::from(ordinal)),
    }
}

/// A ledger row as a test reads it: the call id, its state, its outcome,
/// whether it was acknowledged, its message's seq.
#[derive(Debug, PartialEq)]
struct Row {
    id: String,
    state: String,
    outcome: Option<Value>,
    acked: bool,
    call_seq: Option<i64>,
}

/// The rows of `s1`'s turn 0, by their place in the turn.
async fn rows(client: &tokio_postgres::Client) -> Vec<Row> {
    client
        .query(
            "SELECT call_id, state, outcome::text, acked_at IS NOT NULL, call_seq
             FROM tool_calls c JOIN sessions s ON s.key = c.session_key
             WHERE s.id = 's1' AND c.turn_id = '0' ORDER BY call_ordinal",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| Row {
            id: row.get(0),
            state: row.get(1),
            outcome: row
                .get::<_, Option<String>>(2)
                .map(|o| serde_json::from_str(&o).unwrap()),
            acked: row.get(3),
            call_seq: row.get(4),
        })
        .collect()
}

fn row(id: &str, state: &str, outcome: Option<Value>, acked: bool, seq: Option<i64>) -> Row {
    Row {
        id: id.into(),
        state: state.into(),
        outcome,
        acked,
        call_seq: seq,
    }
}

/// A store with session `s1` and its question 0 stored under fence 1.
async fn session_with_a_question() -> Option<(PgStore, tokio_postgres::Client, impl Drop)> {
    let (options, database) = empty_database().await?;
    let store = PgStore::connect(&options).await.unwrap();
    store
        .create_session(&record("s1", Some("u"), 1))
        .await
        .unwrap();
    store
        .append_turn_fenced(&[message("s1", 0, 10)], None, Fence(1))
        .await
        .unwrap();
    Some((store, inspect(&options).await, database))
}

#[tokio::test]
async fn each_move_of_a_call_is_in_the_ledger_as_it_happens_and_the_turns_end_settles_it() {
    let Some((store, client, _database)) = session_with_a_question().await else {
        return;
    };
    let asked = tool("a", ToolSide::Client);
    let ran = tool("b", ToolSide::Server);
    let ok = ToolOutcome::Ok(json!({"lat": 1}));
    record_move(&store, 0, &asked, CallState::Requested, None, 1)
        .await
        .unwrap();
    assert_eq!(
        rows(&client).await,
        [row("a", "requested", None, false, None)]
    );
    record_move(&store, 0, &asked, CallState::Acked, None, 1)
        .await
        .unwrap();
    assert_eq!(rows(&client).await, [row("a", "acked", None, true, None)]);
    record_move(&store, 0, &asked, CallState::Answered, Some(&ok), 1)
        .await
        .unwrap();
    let answered = row("a", "answered", Some(json!({"status": "ok"})), true, None);
    assert_eq!(rows(&client).await, [answered]);
    // A move that comes late never takes a settled call back.
    record_move(&store, 0, &asked, CallState::Acked, None, 1)
        .await
        .unwrap();
    assert_eq!(rows(&client).await[0].state, "answered");
    record_move(&store, 1, &ran, CallState::Requested, None, 1)
        .await
        .unwrap();
    assert_eq!(
        rows(&client).await[1],
        row("b", "requested", None, false, None)
    );
    // The turn's end: the same calls, settled, take their messages' seqs;
    // no row is added.
    let end = [
        call(1, "a", ToolSide::Client),
        result(2, "a", ok.clone()),
        call(3, "b", ToolSide::Server),
        result(4, "b", ToolOutcome::Error("boom".into())),
        reply(5, false),
    ];
    store
        .append_turn_fenced(&end, None, Fence(1))
        .await
        .unwrap();
    assert_eq!(
        rows(&client).await,
        [
            row(
                "a",
                "answered",
                Some(json!({"status": "ok"})),
                true,
                Some(1)
            ),
            row(
                "b",
                "answered",
                Some(json!({"status": "error", "message": "boom"})),
                false,
                Some(3)
            ),
        ]
    );
}

#[tokio::test]
async fn denied_and_cancelled_calls_say_so_with_the_reason() {
    let Some((store, client, _database)) = session_with_a_question().await else {
        return;
    };
    let declined = ToolOutcome::Denied("user declined".into());
    let withdrawn = ToolOutcome::Denied("turn cancelled".into());
    for (ordinal, id) in [(0, "a"), (1, "b")] {
        let asked = tool(id, ToolSide::Client);
        record_move(&store, ordinal, &asked, CallState::Requested, None, 1)
            .await
            .unwrap();
    }
    let (first, second) = (tool("a", ToolSide::Client), tool("b", ToolSide::Client));
    record_move(&store, 0, &first, CallState::Denied, Some(&declined), 1)
        .await
        .unwrap();
    record_move(
        &store,
        1,
        &second,
        CallState::Cancelled,
        Some(&withdrawn),
        1,
    )
    .await
    .unwrap();
    let reason = |r: &str| Some(json!({"status": "denied", "reason": r}));
    assert_eq!(
        rows(&client).await,
        [
            row("a", "denied", reason("user declined"), false, None),
            row("b", "cancelled", reason("turn cancelled"), false, None),
        ]
    );
}

#[tokio::test]
async fn a_takeover_settles_the_calls_left_open_in_the_write_of_the_interruption() {
    let Some((store, client, _database)) = session_with_a_question().await else {
        return;
    };
    let (answered, open) = (tool("a", ToolSide::Server), tool("b", ToolSide::Client));
    let ok = ToolOutcome::Ok(json!(1));
    record_move(&store, 0, &answered, CallState::Requested, None, 1)
        .await
        .unwrap();
    record_move(&store, 0, &answered, CallState::Answered, Some(&ok), 1)
        .await
        .unwrap();
    record_move(&store, 1, &open, CallState::Requested, None, 1)
        .await
        .unwrap();
    record_move(&store, 1, &open, CallState::Acked, None, 1)
        .await
        .unwrap();
    // The replica of lease 1 dies; another takes the session over with
    // lease 2: fences it off, then stores the interruption.
    store.fence_session(&sid("s1"), Fence(2)).await.unwrap();
    assert_eq!(
        rows(&client).await[1].state,
        "acked",
        "the fence alone settles nothing"
    );
    let interruption = step(
        1,
        MessageBody::Failure {
            code: ErrorCode::Internal,
            message: "turn interrupted".into(),
        },
    );
    store
        .append_turn_fenced(&[interruption], None, Fence(2))
        .await
        .unwrap();
    let interrupted = Some(json!({"status": "denied", "reason": "turn interrupted"}));
    assert_eq!(
        rows(&client).await,
        [
            row("a", "answered", Some(json!({"status": "ok"})), false, None),
            row("b", "denied", interrupted, true, None),
        ]
    );
}

#[tokio::test]
async fn a_writer_fenced_off_is_refused_and_writes_nothing() {
    let Some((store, client, _database)) = session_with_a_question().await else {
        return;
    };
    let open = tool("b", ToolSide::Client);
    record_move(&store, 0, &open, CallState::Requested, None, 1)
        .await
        .unwrap();
    store.fence_session(&sid("s1"), Fence(2)).await.unwrap();
    let late = ToolOutcome::Ok(json!(1));
    for (ordinal, state, outcome) in [
        (0, CallState::Answered, Some(&late)),
        (0, CallState::Acked, None),
        (1, CallState::Requested, None),
    ] {
        let refused = record_move(&store, ordinal, &open, state, outcome, 1).await;
        assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    }
    assert_eq!(
        rows(&client).await,
        [row("b", "requested", None, false, None)]
    );
    // The lease that fenced it off writes.
    record_move(&store, 0, &open, CallState::Acked, None, 2)
        .await
        .unwrap();
    assert_eq!(rows(&client).await[0].state, "acked");
    // A session the store does not know is no one's to write.
    let stranger = sid("s2");
    let unknown = move_of(&stranger, 0, &open, CallState::Requested, None);
    let refused = store.record_call(&unknown, Some(Fence(1))).await;
    assert!(
        matches!(refused, Err(StoreError::Rejected(_))),
        "{refused:?}"
    );
}

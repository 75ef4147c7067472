//! The behaviour every [`SessionStore`] must show, written once against
//! `&dyn SessionStore` and instantiated per adapter with [`conformance_tests!`].

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use agentwire_core::{
    ContentPart, ErrorCode, MediaContent, MediaId, MessageBody, Metadata, PartKind, ReplyEnd,
    SessionCursor, SessionId, SessionRecord, SessionStore, SessionSummary, StoreError,
    StoredMessage, Timestamp, ToolOutcome, ToolSide, Via,
};

/// Generates one `#[tokio::test]` per conformance check. `$make` is an async
/// fn returning the store and a guard that must outlive it (e.g. a temp dir).
/// With `optional`, `$make` returns an `Option` of them, and `None` (no
/// server to test against) ends each test early.
macro_rules! conformance_tests {
    ($make:path) => {
        $crate::conformance::conformance_tests!(@checks [required] $make);
    };
    (optional $make:path) => {
        $crate::conformance::conformance_tests!(@checks [optional] $make);
    };
    (@checks [$mode:ident] $make:path) => {
        $crate::conformance::conformance_tests!(
            @tests [$mode] $make;
            create_and_load_round_trip,
            create_twice_keeps_the_first,
            messages_round_trip_in_seq_order,
            typed_flags_round_trip_and_client_keys_stay_metadata,
            recent_messages_are_the_latest_by_seq,
            pages_after_a_seq_walk_every_message_once,
            append_advances_last_active_at,
            appending_several_is_all_or_nothing,
            a_turn_and_its_summary_due_are_stored_all_or_none,
            append_to_unknown_session_is_rejected,
            duplicate_seq_is_rejected_alone_in_a_concurrent_batch,
            unknown_ids_load_nothing,
            ping_is_ok,
            owners_list_their_sessions_newest_first_in_pages,
            listing_shows_summaries_and_follows_activity,
            delete_removes_the_session_its_messages_and_summary,
            summaries_are_stored_and_due_times_survive_rescheduling,
        );
    };
    (@tests [$mode:ident] $make:path; $($check:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                let made = $crate::conformance::conformance_tests!(@make [$mode] $make);
                let Some((store, _guard)) = made else {
                    return;
                };
                $crate::conformance::$check(&store).await;
            }
        )+
    };
    (@make [required] $make:path) => {
        Some($make().await)
    };
    (@make [optional] $make:path) => {
        $make().await
    };
}
pub(crate) use conformance_tests;

fn sid(s: &str) -> SessionId {
    SessionId::parse(s).unwrap()
}

pub(crate) fn record(id: &str, owner: Option<&str>, at: i64) -> SessionRecord {
    SessionRecord {
        id: sid(id),
        agent: "echo".into(),
        namespace: "default".into(),
        owner: owner.map(str::to_owned),
        created_at: Timestamp(at),
        last_active_at: Timestamp(at),
        declaration: None,
    }
}

pub(crate) fn message(id: &str, seq: u64, at: i64) -> StoredMessage {
    StoredMessage {
        session_id: sid(id),
        seq,
        body: MessageBody::User {
            text: format!("message {seq}"),
            parts: Vec::new(),
            attachment: None,
        },
        via: Via::Text,
        metadata: Metadata::new(),
        created_at: Timestamp(at),
    }
}

/// Polls every future to completion concurrently (the crate has no
/// `futures` dependency).
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("polled to completion"))
        .collect()
}

pub(crate) async fn create_and_load_round_trip(store: &dyn SessionStore) {
    let anonymous = record("anon", None, 1_700_000_000_123_456_789);
    // What the session declared comes back as it was sent.
    let owned = SessionRecord {
        declaration: Some(serde_json::json!({"sandboxes": {"workspace/left": {
            "mounts": [{"role": "project", "id": "p-1"}]
        }}})),
        ..record("owned", Some("user-hash-1"), -5)
    };
    store.create_session(&anonymous).await.unwrap();
    store.create_session(&owned).await.unwrap();
    assert_eq!(
        store.load_session(&anonymous.id).await.unwrap(),
        Some(anonymous)
    );
    assert_eq!(store.load_session(&owned.id).await.unwrap(), Some(owned));
}

pub(crate) async fn create_twice_keeps_the_first(store: &dyn SessionStore) {
    let first = record("s1", Some("alice"), 10);
    let mut second = record("s1", Some("mallory"), 20);
    second.agent = "other".into();
    store.create_session(&first).await.unwrap();
    store.create_session(&second).await.unwrap();
    assert_eq!(store.load_session(&first.id).await.unwrap(), Some(first));
}

pub(crate) async fn messages_round_trip_in_seq_order(store: &dyn SessionStore) {
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let image = image();
    let mut first = message("s1", 0, 1);
    first.body = MessageBody::User {
        text: "look at this — ünïcode".into(),
        parts: vec![
            ContentPart::text("look at this"),
            ContentPart::media(PartKind::Image, image.clone()),
        ],
        attachment: None,
    };
    first.metadata = Metadata::from([
        ("lang".to_owned(), "en".to_owned()),
        ("client".to_owned(), "web".to_owned()),
    ]);
    // One message of every other kind: each comes back as it went in,
    // with the metadata it had and no more.
    let mut rest: Vec<StoredMessage> = every_other_kind(image)
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            let seq = i as u64 + 1;
            let mut m = message("s1", seq, seq as i64 + 1);
            m.body = body;
            m
        })
        .collect();
    rest.last_mut().unwrap().metadata =
        Metadata::from([("asserted_by".to_owned(), "client".to_owned())]);

    // Appended out of order: loads come back by seq.
    let mut all = vec![first];
    all.append(&mut rest);
    for m in all.iter().rev() {
        store.append_message(m).await.unwrap();
    }
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap(), all);
}

/// A message's typed flags (how it came, how a reply ended, an attachment)
/// come back as they went in, and a client's metadata keys of the same
/// names with other values stay its metadata.
pub(crate) async fn typed_flags_round_trip_and_client_keys_stay_metadata(store: &dyn SessionStore) {
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let client = |pairs: &[(&str, &str)]| -> Metadata {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let reply = |end| MessageBody::Reply {
        text: "answer".into(),
        parts: Vec::new(),
        end,
    };
    let attached = MessageBody::User {
        text: "see the file".into(),
        parts: vec![ContentPart::media(PartKind::Image, image())],
        attachment: Some(MediaId::parse("0123456789abcdef0123456789abcdef").unwrap()),
    };
    let messages = [
        (attached, Via::Text, client(&[("plan", "pro")])),
        (reply(ReplyEnd::Cancelled), Via::Text, Metadata::new()),
        (reply(ReplyEnd::Interrupted), Via::Voice, Metadata::new()),
        (reply(ReplyEnd::Complete), Via::Voice, Metadata::new()),
        (
            MessageBody::ToolCall {
                id: "call-1".into(),
                name: "weather".into(),
                arguments: serde_json::json!({}),
                side: ToolSide::Server,
            },
            Via::Voice,
            Metadata::new(),
        ),
        (
            message("s1", 0, 0).body,
            Via::Text,
            client(&[
                ("via", "text"),
                ("cancelled", "true"),
                ("interrupted", "yes"),
                ("gnosari_asset_id", "not-an-id"),
            ]),
        ),
    ];
    let all: Vec<StoredMessage> = messages
        .into_iter()
        .enumerate()
        .map(|(seq, (body, via, metadata))| StoredMessage {
            body,
            via,
            metadata,
            ..message("s1", seq as u64, seq as i64 + 1)
        })
        .collect();
    store.append_messages(&all).await.unwrap();
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap(), all);
}

/// An image part with every field a store keeps.
fn image() -> MediaContent {
    MediaContent {
        data: Some("iVBORw0KGgo=".into()),
        url: None,
        storage_ref: Some("blob/123".into()),
        mime_type: "image/png".into(),
        filename: Some("cat.png".into()),
        size_bytes: Some(8),
        width: Some(1920),
        height: Some(1080),
        detail: Some("low".into()),
        duration_ms: None,
        sample_rate: None,
        channels: None,
    }
}

/// A body of every kind but the user's, with `image` in the reply.
fn every_other_kind(image: MediaContent) -> Vec<MessageBody> {
    vec![
        MessageBody::Interim {
            text: "let me look".into(),
        },
        MessageBody::ToolCall {
            id: "call-1".into(),
            name: "weather".into(),
            arguments: serde_json::json!({"city": "Zürich", "days": [1, 2]}),
            side: ToolSide::Server,
        },
        MessageBody::ToolResult {
            id: "call-1".into(),
            outcome: ToolOutcome::Ok(serde_json::json!({"t": 3})),
        },
        MessageBody::ToolCall {
            id: "call-2".into(),
            name: "location".into(),
            arguments: serde_json::Value::Null,
            side: ToolSide::Client,
        },
        MessageBody::ToolResult {
            id: "call-2".into(),
            outcome: ToolOutcome::Denied("the client declined the call: no".into()),
        },
        MessageBody::ToolResult {
            id: "call-3".into(),
            outcome: ToolOutcome::Error("{\"not\": \"json\"}".into()),
        },
        MessageBody::Reply {
            text: "sunny".into(),
            parts: vec![ContentPart::media(PartKind::Image, image)],
            end: ReplyEnd::Complete,
        },
        MessageBody::Failure {
            code: ErrorCode::ProviderTimeout,
            message: "the model did not answer in time".into(),
        },
        MessageBody::Event {
            name: "ai.disclosure.displayed".into(),
        },
    ]
}

pub(crate) async fn recent_messages_are_the_latest_by_seq(store: &dyn SessionStore) {
    store.create_session(&record("s1", None, 0)).await.unwrap();
    store.create_session(&record("s2", None, 0)).await.unwrap();
    // Out of order, and beside another session's messages.
    let mut seqs: Vec<u64> = (0..10).collect();
    seqs.rotate_left(4);
    for seq in seqs {
        store.append_message(&message("s1", seq, 1)).await.unwrap();
        store.append_message(&message("s2", seq, 1)).await.unwrap();
    }
    let seqs_of = |messages: Vec<StoredMessage>| -> Vec<u64> {
        assert!(messages.iter().all(|m| m.session_id == sid("s1")));
        messages.iter().map(|m| m.seq).collect()
    };
    let recent = store.load_recent_messages(&sid("s1"), 3).await.unwrap();
    assert_eq!(recent[0], message("s1", 7, 1), "whole messages");
    assert_eq!(seqs_of(recent), [7, 8, 9]);
    let all = store.load_recent_messages(&sid("s1"), 100).await.unwrap();
    assert_eq!(seqs_of(all), (0..10).collect::<Vec<_>>());
    assert!(
        store
            .load_recent_messages(&sid("s1"), 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .load_recent_messages(&sid("ghost"), 5)
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn pages_after_a_seq_walk_every_message_once(store: &dyn SessionStore) {
    store.create_session(&record("s1", None, 0)).await.unwrap();
    store.create_session(&record("s2", None, 0)).await.unwrap();
    let messages: Vec<StoredMessage> = (0..25).map(|seq| message("s1", seq, 1)).collect();
    store.append_messages(&messages).await.unwrap();
    store.append_message(&message("s2", 0, 1)).await.unwrap();
    let mut walked = Vec::new();
    let mut after = None;
    let mut pages = Vec::new();
    loop {
        let page = store
            .load_messages_after(&sid("s1"), after, 10)
            .await
            .unwrap();
        pages.push(page.len());
        let Some(last) = page.last() else { break };
        after = Some(last.seq);
        walked.extend(page);
    }
    assert_eq!(pages, [10, 10, 5, 0]);
    assert_eq!(walked, messages);
    let tail = store
        .load_messages_after(&sid("s1"), Some(21), 10)
        .await
        .unwrap();
    assert_eq!(tail, messages[22..]);
    for after in [Some(24), Some(u64::MAX)] {
        let page = store.load_messages_after(&sid("s1"), after, 10).await;
        assert!(page.unwrap().is_empty(), "{after:?}");
    }
    assert!(
        store
            .load_messages_after(&sid("ghost"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn append_advances_last_active_at(store: &dyn SessionStore) {
    let created = record("s1", None, 100);
    store.create_session(&created).await.unwrap();
    store.append_message(&message("s1", 0, 150)).await.unwrap();
    let loaded = store.load_session(&created.id).await.unwrap().unwrap();
    assert_eq!(loaded.created_at, Timestamp(100));
    assert_eq!(loaded.last_active_at, Timestamp(150));
    store.append_message(&message("s1", 1, 900)).await.unwrap();
    let loaded = store.load_session(&created.id).await.unwrap().unwrap();
    assert_eq!(loaded.last_active_at, Timestamp(900));
}

pub(crate) async fn appending_several_is_all_or_nothing(store: &dyn SessionStore) {
    store
        .create_session(&record("s1", None, 100))
        .await
        .unwrap();
    let turn = [message("s1", 0, 300), message("s1", 1, 200)];
    store.append_messages(&turn).await.unwrap();
    let loaded = store.load_session(&sid("s1")).await.unwrap().unwrap();
    assert_eq!(loaded.last_active_at, Timestamp(300), "the latest of them");
    // seq 1 is taken: seq 2 is not stored either.
    let clash = [message("s1", 2, 400), message("s1", 1, 400)];
    let err = store.append_messages(&clash).await.unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap(), turn);
    let loaded = store.load_session(&sid("s1")).await.unwrap().unwrap();
    assert_eq!(loaded.last_active_at, Timestamp(300));
}

pub(crate) async fn a_turn_and_its_summary_due_are_stored_all_or_none(store: &dyn SessionStore) {
    store
        .create_session(&record("s1", None, 100))
        .await
        .unwrap();
    let question = [message("s1", 0, 200)];
    store.append_turn(&question, None).await.unwrap();
    assert!(store.pending_summaries().await.unwrap().is_empty());
    let turn = [message("s1", 1, 300), message("s1", 2, 300)];
    store
        .append_turn(&turn, Some(Timestamp(900)))
        .await
        .unwrap();
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s1"), Timestamp(900))]
    );
    // seq 2 is taken: neither the rows nor the new due time are stored.
    let clash = [message("s1", 3, 400), message("s1", 2, 400)];
    let err = store
        .append_turn(&clash, Some(Timestamp(1000)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap().len(), 3);
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s1"), Timestamp(900))]
    );
    let err = store
        .append_turn(&[message("ghost", 0, 1)], Some(Timestamp(5)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    assert_eq!(store.pending_summaries().await.unwrap().len(), 1);
}

pub(crate) async fn append_to_unknown_session_is_rejected(store: &dyn SessionStore) {
    let err = store
        .append_message(&message("ghost", 0, 1))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    assert!(store.load_messages(&sid("ghost")).await.unwrap().is_empty());
}

pub(crate) async fn duplicate_seq_is_rejected_alone_in_a_concurrent_batch(
    store: &dyn SessionStore,
) {
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let original = message("s1", 0, 1);
    store.append_message(&original).await.unwrap();

    let mut duplicate = message("s1", 0, 2);
    duplicate.body = MessageBody::User {
        text: "overwrite attempt".into(),
        parts: Vec::new(),
        attachment: None,
    };
    let mut batch: Vec<StoredMessage> = (1..=50).map(|seq| message("s1", seq, 10)).collect();
    batch.insert(25, duplicate);
    let results = join_all(batch.iter().map(|m| store.append_message(m)).collect()).await;

    for (m, result) in batch.iter().zip(&results) {
        if m.seq == 0 {
            assert!(matches!(result, Err(StoreError::Rejected(_))), "{result:?}");
        } else {
            assert!(result.is_ok(), "seq {}: {result:?}", m.seq);
        }
    }
    let loaded = store.load_messages(&sid("s1")).await.unwrap();
    assert_eq!(loaded.len(), 51);
    assert_eq!(loaded[0], original);
    for (i, m) in loaded.iter().enumerate() {
        assert_eq!(m.seq, i as u64);
    }
}

pub(crate) async fn unknown_ids_load_nothing(store: &dyn SessionStore) {
    assert_eq!(store.load_session(&sid("nope")).await.unwrap(), None);
    assert!(store.load_messages(&sid("nope")).await.unwrap().is_empty());
}

pub(crate) async fn ping_is_ok(store: &dyn SessionStore) {
    store.ping().await.unwrap();
}

/// Walks every page of `owner`'s sessions, `limit` at a time; the ids in order.
async fn walk(store: &dyn SessionStore, owner: &str, limit: usize) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<SessionCursor> = None;
    loop {
        let page = store
            .list_sessions(owner, cursor.as_ref(), limit)
            .await
            .unwrap();
        assert!(page.len() <= limit);
        if page.is_empty() {
            return pages;
        }
        cursor = page.last().map(|s| SessionCursor::after(&s.record));
        pages.push(
            page.iter()
                .map(|s| s.record.id.as_str().to_owned())
                .collect(),
        );
    }
}

pub(crate) async fn owners_list_their_sessions_newest_first_in_pages(store: &dyn SessionStore) {
    // Alice's sessions, with a tie on last_active_at (broken by id, descending).
    for (id, at) in [("a1", 10), ("a2", 30), ("a3", 20), ("a4", 30), ("a5", 5)] {
        store
            .create_session(&record(id, Some("alice"), at))
            .await
            .unwrap();
    }
    store
        .create_session(&record("b1", Some("bob"), 25))
        .await
        .unwrap();
    store
        .create_session(&record("anon", None, 40))
        .await
        .unwrap();

    let first = store.list_sessions("alice", None, 10).await.unwrap();
    let ids: Vec<&str> = first.iter().map(|s| s.record.id.as_str()).collect();
    assert_eq!(ids, ["a4", "a2", "a3", "a1", "a5"]);
    assert_eq!(first[0].record, record("a4", Some("alice"), 30));
    assert_eq!(first[0].summary, None);

    assert_eq!(
        walk(store, "alice", 2).await,
        [vec!["a4", "a2"], vec!["a3", "a1"], vec!["a5"]]
    );
    assert_eq!(
        walk(store, "alice", 5).await,
        [vec!["a4", "a2", "a3", "a1", "a5"]]
    );
    assert_eq!(walk(store, "bob", 2).await, [vec!["b1"]]);
    assert!(walk(store, "carol", 2).await.is_empty());
    assert!(
        store
            .list_sessions("alice", None, 0)
            .await
            .unwrap()
            .is_empty()
    );

    // A cursor from the middle of a tie resumes within it.
    let cursor = SessionCursor {
        last_active_at: Timestamp(30),
        id: sid("a4"),
    };
    let rest = store
        .list_sessions("alice", Some(&cursor), 2)
        .await
        .unwrap();
    let ids: Vec<&str> = rest.iter().map(|s| s.record.id.as_str()).collect();
    assert_eq!(ids, ["a2", "a3"]);
}

pub(crate) async fn listing_shows_summaries_and_follows_activity(store: &dyn SessionStore) {
    store
        .create_session(&record("old", Some("alice"), 10))
        .await
        .unwrap();
    store
        .create_session(&record("new", Some("alice"), 20))
        .await
        .unwrap();
    store
        .schedule_summary(&sid("old"), Timestamp(12))
        .await
        .unwrap();
    let summary = summarise(store, "old", "talked about the weather", 15, 12).await;
    // A message makes the old session the most recent.
    store.append_message(&message("old", 0, 30)).await.unwrap();
    let listed = store.list_sessions("alice", None, 10).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.record.id.as_str()).collect();
    assert_eq!(ids, ["old", "new"]);
    assert_eq!(listed[0].record.last_active_at, Timestamp(30));
    assert_eq!(listed[0].summary.as_ref(), Some(&summary));
    assert_eq!(listed[1].summary, None);
}

pub(crate) async fn delete_removes_the_session_its_messages_and_summary(store: &dyn SessionStore) {
    for id in ["doomed", "kept"] {
        store
            .create_session(&record(id, Some("alice"), 1))
            .await
            .unwrap();
        for seq in 0..3 {
            store.append_message(&message(id, seq, 2)).await.unwrap();
        }
        store
            .schedule_summary(&sid(id), Timestamp(50))
            .await
            .unwrap();
    }
    summarise(store, "doomed", "recap", 3, 0).await;

    assert!(store.delete_session(&sid("doomed")).await.unwrap());
    assert_eq!(store.load_session(&sid("doomed")).await.unwrap(), None);
    assert!(
        store
            .load_messages(&sid("doomed"))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.load_summary(&sid("doomed")).await.unwrap(), None);
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("kept"), Timestamp(50))]
    );
    let listed = store.list_sessions("alice", None, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].record.id, sid("kept"));
    assert_eq!(store.load_messages(&sid("kept")).await.unwrap().len(), 3);

    assert!(!store.delete_session(&sid("doomed")).await.unwrap());
    assert!(!store.delete_session(&sid("never")).await.unwrap());
    // The id can be used again, from nothing.
    store
        .create_session(&record("doomed", None, 9))
        .await
        .unwrap();
    store
        .append_message(&message("doomed", 0, 10))
        .await
        .unwrap();
    assert_eq!(store.load_messages(&sid("doomed")).await.unwrap().len(), 1);
    assert_eq!(store.load_summary(&sid("doomed")).await.unwrap(), None);
}

pub(crate) async fn summaries_are_stored_and_due_times_survive_rescheduling(
    store: &dyn SessionStore,
) {
    let err = store
        .schedule_summary(&sid("ghost"), Timestamp(1))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    assert!(store.pending_summaries().await.unwrap().is_empty());
    due_times_are_listed_and_replaced(store).await;
    a_summary_clears_only_the_due_time_it_handled(store).await;
    clearing_clears_only_the_due_time_it_handled(store).await;
    // Sessions deleted meanwhile: nothing to write, no error.
    summarise(store, "ghost", "late", 1, 1).await;
    store
        .clear_summary_due(&sid("ghost"), Timestamp(1))
        .await
        .unwrap();
    assert_eq!(store.load_summary(&sid("ghost")).await.unwrap(), None);
}

/// Stores the summary `text`, written at `at`, for the due time `handled`;
/// the summary.
pub(crate) async fn summarise(
    store: &dyn SessionStore,
    id: &str,
    text: &str,
    at: i64,
    handled: i64,
) -> SessionSummary {
    let summary = SessionSummary {
        text: text.into(),
        created_at: Timestamp(at),
    };
    store
        .store_summary(&sid(id), &summary, Timestamp(handled))
        .await
        .unwrap();
    summary
}

/// Due times of s1 (100, then 200) and s2 (50), listed earliest first.
async fn due_times_are_listed_and_replaced(store: &dyn SessionStore) {
    for id in ["s1", "s2", "s3"] {
        store.create_session(&record(id, None, 0)).await.unwrap();
    }
    for (id, due) in [("s1", 100), ("s2", 50)] {
        store
            .schedule_summary(&sid(id), Timestamp(due))
            .await
            .unwrap();
    }
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s2"), Timestamp(50)), (sid("s1"), Timestamp(100))]
    );
    // A later turn replaces the due time.
    store
        .schedule_summary(&sid("s1"), Timestamp(200))
        .await
        .unwrap();
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s2"), Timestamp(50)), (sid("s1"), Timestamp(200))]
    );
}

/// A summary written for a replaced due time is kept, and the new due time
/// stays; one written for the current due time clears it.
async fn a_summary_clears_only_the_due_time_it_handled(store: &dyn SessionStore) {
    let first = summarise(store, "s1", "first — ünïcode", 150, 100).await;
    assert_eq!(store.load_summary(&sid("s1")).await.unwrap(), Some(first));
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s2"), Timestamp(50)), (sid("s1"), Timestamp(200))]
    );
    let second = summarise(store, "s1", "second", 250, 200).await;
    assert_eq!(store.load_summary(&sid("s1")).await.unwrap(), Some(second));
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s2"), Timestamp(50))]
    );
}

/// Clearing without a summary, too, only clears the due time it handled.
async fn clearing_clears_only_the_due_time_it_handled(store: &dyn SessionStore) {
    store
        .clear_summary_due(&sid("s2"), Timestamp(49))
        .await
        .unwrap();
    assert_eq!(store.pending_summaries().await.unwrap().len(), 1);
    store
        .clear_summary_due(&sid("s2"), Timestamp(50))
        .await
        .unwrap();
    assert!(store.pending_summaries().await.unwrap().is_empty());
    assert_eq!(store.load_summary(&sid("s2")).await.unwrap(), None);
    assert_eq!(store.load_summary(&sid("s3")).await.unwrap(), None);
}

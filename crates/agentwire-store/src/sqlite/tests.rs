use super::schema::MIGRATIONS;
use super::worker::run_batch;
use super::*;
use crate::conformance::{self, conformance_tests, message, record};
use agentwire_core::MessageBody;

async fn make() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("sessions.db"))
        .await
        .unwrap();
    (store, dir)
}

conformance_tests!(make);

fn sid(s: &str) -> SessionId {
    SessionId::parse(s).unwrap()
}

fn unavailable_message(result: Result<SqliteStore, StoreError>) -> String {
    match result {
        Err(StoreError::Unavailable(msg)) => msg,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn data_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let mut stored = message("s1", 0, 42);
    stored.body = MessageBody::User {
        text: "kept".into(),
        parts: vec![agentwire_core::ContentPart::text("kept")],
        attachment: None,
    };
    {
        let store = SqliteStore::open(&path).await.unwrap();
        store
            .create_session(&record("s1", Some("o"), 1))
            .await
            .unwrap();
        store.append_message(&stored).await.unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let mut expected = record("s1", Some("o"), 1);
    expected.last_active_at = Timestamp(42);
    assert_eq!(
        store.load_session(&sid("s1")).await.unwrap(),
        Some(expected)
    );
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap(), vec![stored]);
}

#[tokio::test]
async fn open_creates_missing_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/c/sessions.db");
    let store = SqliteStore::open(&path).await.unwrap();
    store.ping().await.unwrap();
    assert!(path.is_file());
}

#[tokio::test]
async fn newer_schema_version_fails_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let msg = unavailable_message(SqliteStore::open(&path).await);
    assert!(msg.contains("version 99"), "{msg}");
    assert!(msg.contains(&format!("({})", MIGRATIONS.len())), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

#[tokio::test]
async fn opening_a_directory_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let msg = unavailable_message(SqliteStore::open(dir.path()).await);
    assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
}

#[tokio::test]
async fn fresh_database_is_at_the_latest_version_with_wal() {
    let (store, dir) = make().await;
    store.ping().await.unwrap();
    let conn = Connection::open(dir.path().join("sessions.db")).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, MIGRATIONS.len() as i64);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn corrupt_rows_are_reported_as_corrupt() {
    let (store, dir) = make().await;
    store
        .create_session(&record("role", None, 0))
        .await
        .unwrap();
    store
        .create_session(&record("json", None, 0))
        .await
        .unwrap();
    store
        .create_session(&record("meta", None, 0))
        .await
        .unwrap();
    let conn = Connection::open(dir.path().join("sessions.db")).unwrap();
    conn.execute_batch(
        "INSERT INTO messages SELECT key, 0, 'wizard', 'c', NULL, NULL, 1
             FROM sessions WHERE id = 'role';
         INSERT INTO messages SELECT key, 0, 'user', 'c', '[{\"kind\":', NULL, 1
             FROM sessions WHERE id = 'json';
         INSERT INTO messages SELECT key, 0, 'user', 'c', NULL, '{\"k\":1}', 1
             FROM sessions WHERE id = 'meta';",
    )
    .unwrap();
    drop(conn);
    for id in ["role", "json", "meta"] {
        let err = store.load_messages(&sid(id)).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{id}: {err:?}");
    }
}

/// Group commit, deterministically: one batch holding a duplicate in the
/// middle commits everything else, and its reads see its own writes.
#[tokio::test]
async fn one_bad_write_rolls_back_alone_within_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open_connection(&dir.path().join("sessions.db")).unwrap();

    let (create_tx, mut create_rx) = oneshot::channel();
    let mut append_rxs = Vec::new();
    let mut batch = vec![Command::CreateSession {
        record: record("s1", None, 0),
        reply: create_tx,
    }];
    for (seq, at) in [(0, 1), (1, 2), (0, 3), (2, 4)] {
        let (reply, rx) = oneshot::channel();
        append_rxs.push(rx);
        batch.push(Command::Append {
            session_id: sid("s1"),
            rows: vec![row(seq, at)],
            summary_due: None,
            reply,
        });
    }
    let (load_tx, mut load_rx) = oneshot::channel();
    batch.push(Command::LoadMessages {
        id: sid("s1"),
        reply: load_tx,
    });
    let (session_tx, mut session_rx) = oneshot::channel();
    batch.push(Command::LoadSession {
        id: sid("s1"),
        reply: session_tx,
    });

    // Two rows appended all or none: the duplicate seq 1 takes seq 3 down too.
    let (reply, mut pair_rx) = oneshot::channel();
    batch.push(Command::Append {
        session_id: sid("s1"),
        rows: vec![row(3, 5), row(1, 6)],
        summary_due: Some(Timestamp(9)),
        reply,
    });
    // The batch takes every command queued behind the first one.
    let (queue, mut queued) = mpsc::channel(batch.len());
    let mut batch = batch.into_iter();
    let first = batch.next().unwrap();
    for command in batch {
        assert!(queue.try_send(Request::Run(command)).is_ok());
    }
    assert!(run_batch(&mut conn, first, &mut queued).is_none());
    assert!(queued.try_recv().is_err(), "one batch ran everything");
    assert!(matches!(
        pair_rx.try_recv().unwrap(),
        Err(StoreError::Rejected(_))
    ));

    create_rx.try_recv().unwrap().unwrap();
    let appends: Vec<_> = append_rxs
        .iter_mut()
        .map(|rx| rx.try_recv().unwrap())
        .collect();
    assert!(appends[0].is_ok() && appends[1].is_ok() && appends[3].is_ok());
    assert!(matches!(appends[2], Err(StoreError::Rejected(_))));
    let rows = load_rx.try_recv().unwrap().unwrap();
    let seen: Vec<_> = rows.iter().map(|r| (r.seq, r.content.as_str())).collect();
    assert_eq!(seen, [(0, "m0@1"), (1, "m1@2"), (2, "m2@4")]);
    let session = session_rx.try_recv().unwrap().unwrap().unwrap();
    // The rejected write's last_active_at bump never happened; later ones did.
    assert_eq!(session.last_active_at, Timestamp(4));
    assert!(conn.is_autocommit(), "the batch transaction is closed");
}

fn row(seq: i64, at: i64) -> NewRow {
    NewRow {
        seq,
        role: "user",
        content: format!("m{seq}@{at}"),
        parts: None,
        metadata: None,
        created_at: at,
    }
}

#[tokio::test]
async fn rejected_errors_name_ids_not_content() {
    let (store, _dir) = make().await;
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let mut m = message("s1", 0, 1);
    m.body = MessageBody::User {
        text: "top secret".into(),
        parts: Vec::new(),
        attachment: None,
    };
    store.append_message(&m).await.unwrap();
    let err = store.append_message(&m).await.unwrap_err().to_string();
    assert!(err.contains("s1") && !err.contains("secret"), "{err}");
}

#[tokio::test]
async fn dropping_the_store_closes_the_database() {
    let (store, dir) = make().await;
    let clone = store.clone();
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let wal = dir.path().join("sessions.db-wal");
    assert!(wal.exists());
    drop(store);
    clone.ping().await.unwrap();
    drop(clone);
    // SQLite removes the WAL file when the last connection closes.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while wal.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "sqlite thread still open"
        );
        std::thread::yield_now();
    }
}

#[tokio::test]
async fn closing_the_store_leaves_every_row_in_the_database_file() {
    let (store, dir) = make().await;
    let clone = store.clone();
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let messages: Vec<_> = (0..20).map(|seq| message("s1", seq, 5)).collect();
    store.append_messages(&messages).await.unwrap();
    let wal = dir.path().join("sessions.db-wal");
    assert!(wal.metadata().unwrap().len() > 0, "the rows are in the log");
    store.close().await.unwrap();
    assert!(!wal.exists(), "the log file is gone once closed");
    // Later calls, on any clone, fail as on a stopped store; a second close
    // does nothing.
    assert!(matches!(
        clone.ping().await,
        Err(StoreError::Unavailable(msg)) if msg.contains("stopped")
    ));
    clone.close().await.unwrap();
    // The file alone, copied without its log, holds every row.
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join("sessions.db"),
        copy.path().join("sessions.db"),
    )
    .unwrap();
    let reopened = SqliteStore::open(&copy.path().join("sessions.db"))
        .await
        .unwrap();
    assert_eq!(reopened.load_messages(&sid("s1")).await.unwrap(), messages);
}

/// A close queued behind commands ends their batch once it has committed;
/// what was sent after it stays queued, unrun.
#[tokio::test]
async fn a_close_ends_the_batch_it_is_queued_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open_connection(&dir.path().join("sessions.db")).unwrap();
    let (create, mut created) = oneshot::channel();
    let (ping, mut pinged) = oneshot::channel();
    let (close, _) = oneshot::channel();
    let (queue, mut queued) = mpsc::channel(4);
    for request in [
        Request::Run(Command::Ping { reply: ping }),
        Request::Close(close),
        Request::Run(Command::LoadSummary {
            id: sid("s1"),
            reply: oneshot::channel().0,
        }),
    ] {
        assert!(queue.try_send(request).is_ok());
    }
    let first = Command::CreateSession {
        record: record("s1", None, 0),
        reply: create,
    };
    assert!(run_batch(&mut conn, first, &mut queued).is_some());
    created.try_recv().unwrap().unwrap();
    pinged.try_recv().unwrap().unwrap();
    assert!(matches!(
        queued.try_recv(),
        Ok(Request::Run(Command::LoadSummary { .. }))
    ));
    assert!(conn.is_autocommit(), "the batch committed");
}

#[tokio::test]
async fn many_concurrent_appends_all_land() {
    let (store, _dir) = make().await;
    store.create_session(&record("s1", None, 0)).await.unwrap();
    let messages: Vec<_> = (0..600).map(|seq| message("s1", seq, 5)).collect();
    let results =
        conformance::join_all(messages.iter().map(|m| store.append_message(m)).collect()).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap(), messages);
}

#[tokio::test]
async fn summaries_and_their_due_times_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let summary = {
        let store = SqliteStore::open(&path).await.unwrap();
        for id in ["s1", "s2"] {
            store
                .create_session(&record(id, Some("o"), 1))
                .await
                .unwrap();
        }
        store
            .schedule_summary(&sid("s1"), Timestamp(5))
            .await
            .unwrap();
        let summary = conformance::summarise(&store, "s1", "recap", 7, 5).await;
        store
            .schedule_summary(&sid("s2"), Timestamp(99))
            .await
            .unwrap();
        summary
    };
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.load_summary(&sid("s1")).await.unwrap(), Some(summary));
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("s2"), Timestamp(99))]
    );
}

/// A database written by the first schema gains the summary columns and the
/// owner index, and keeps its rows.
#[tokio::test]
async fn a_version_1_database_is_migrated_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions VALUES ('old', 'echo', 'default', 'o', 1, 2);
             INSERT INTO messages VALUES ('old', 0, 'user', 'hi', NULL, NULL, 2);
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let listed = store.list_sessions("o", None, 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].record.last_active_at, Timestamp(2));
    assert_eq!(listed[0].summary, None);
    assert_eq!(store.load_messages(&sid("old")).await.unwrap().len(), 1);
    store
        .schedule_summary(&sid("old"), Timestamp(3))
        .await
        .unwrap();
    drop(store);
    let conn = Connection::open(&path).unwrap();
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        indexes.contains(&"sessions_by_owner".to_owned()),
        "{indexes:?}"
    );
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE owner = 'o'
             ORDER BY last_active_at DESC, id DESC LIMIT 5",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("sessions_by_owner"), "{plan}");
}

/// A database written by schema version 2 (sessions keyed by their text id,
/// messages by (id, seq)) moves to integer keys and keeps every session,
/// message, summary and due time, and the port reads and writes it by the
/// public id as before.
/// A database written by schema version 2 (sessions keyed by their text id,
/// messages by (id, seq)) moves to integer keys and keeps every session,
/// message, summary and due time, and the port reads and writes it by the
/// public id as before.
#[tokio::test]
async fn a_version_2_database_moves_to_integer_session_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let old_messages = version_2_messages();
    write_version_2(&path, &old_messages);
    let store = SqliteStore::open(&path).await.unwrap();
    version_2_rows_read_back(&store, &old_messages).await;
    // Writes after the move: a new message lands, a reused seq is refused,
    // and a new session gets a key of its own.
    store.append_message(&message("b", 1, 21)).await.unwrap();
    assert!(matches!(
        store.append_message(&message("a", 1, 22)).await,
        Err(StoreError::Rejected(_))
    ));
    store.create_session(&record("d", None, 40)).await.unwrap();
    store.append_message(&message("d", 0, 41)).await.unwrap();
    assert_eq!(store.load_messages(&sid("b")).await.unwrap().len(), 2);
    assert_eq!(
        store.load_messages(&sid("d")).await.unwrap(),
        [message("d", 0, 41)]
    );
    drop(store);
    messages_are_keyed_by_integer_session_keys(&path);
}

/// Sessions a, b and c's messages, a's with parts and metadata.
fn version_2_messages() -> Vec<StoredMessage> {
    let mut rich = message("a", 0, 10);
    rich.body = MessageBody::User {
        text: "look — ünïcode".into(),
        parts: vec![agentwire_core::ContentPart::text("look")],
        attachment: None,
    };
    rich.metadata = agentwire_core::Metadata::from([("lang".to_owned(), "en".to_owned())]);
    let mut answer = message("a", 1, 11);
    answer.body = MessageBody::Reply {
        text: "seen".into(),
        parts: Vec::new(),
        end: agentwire_core::ReplyEnd::Complete,
    };
    vec![rich, answer, message("b", 0, 20), message("c", 0, 30)]
}

/// A version 2 file at `path`: sessions a and b (owned, with due times; a
/// with a summary), anonymous c, and `messages`.
fn write_version_2(path: &Path, messages: &[StoredMessage]) {
    let conn = Connection::open(path).unwrap();
    // The released DDL of versions 1 and 2, as a v2 file holds it.
    conn.execute_batch(MIGRATIONS[0]).unwrap();
    conn.execute_batch(MIGRATIONS[1]).unwrap();
    conn.execute_batch(
        "INSERT INTO sessions (id, agent, namespace, owner, created_at, last_active_at,
                               summary, summary_created_at, summary_due_at) VALUES
             ('a', 'echo', 'default', 'o', 1, 11, 'recap', 12, 50),
             ('b', 'echo', 'default', 'o', 2, 20, NULL, NULL, 70),
             ('c', 'echo', 'default', NULL, 3, 30, NULL, NULL, NULL);
         PRAGMA user_version = 2;",
    )
    .unwrap();
    for m in messages {
        let row = codec::encode_body(&m.body).unwrap();
        conn.execute(
            "INSERT INTO messages VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            (
                m.session_id.as_str(),
                m.seq as i64,
                row.role,
                &*row.content,
                codec::encode_parts(row.parts).unwrap(),
                codec::encode_metadata(&m.metadata).unwrap(),
                m.created_at.0,
            ),
        )
        .unwrap();
    }
}

/// Every session, message, summary and due time of [`write_version_2`],
/// through the port.
async fn version_2_rows_read_back(store: &SqliteStore, old_messages: &[StoredMessage]) {
    for (id, owner, created, active) in [
        ("a", Some("o"), 1, 11),
        ("b", Some("o"), 2, 20),
        ("c", None, 3, 30),
    ] {
        let mut expected = record(id, owner, created);
        expected.last_active_at = Timestamp(active);
        assert_eq!(store.load_session(&sid(id)).await.unwrap(), Some(expected));
        let kept: Vec<_> = old_messages
            .iter()
            .filter(|m| m.session_id.as_str() == id)
            .cloned()
            .collect();
        assert_eq!(store.load_messages(&sid(id)).await.unwrap(), kept, "{id}");
    }
    let recap = SessionSummary {
        text: "recap".into(),
        created_at: Timestamp(12),
    };
    assert_eq!(store.load_summary(&sid("a")).await.unwrap(), Some(recap));
    assert_eq!(store.load_summary(&sid("b")).await.unwrap(), None);
    assert_eq!(
        store.pending_summaries().await.unwrap(),
        [(sid("a"), Timestamp(50)), (sid("b"), Timestamp(70))]
    );
    let listed: Vec<_> = store
        .list_sessions("o", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.record.id.as_str().to_owned())
        .collect();
    assert_eq!(listed, ["b", "a"]);
}

/// The file after the move: the latest version, no tables left behind,
/// messages under their session's integer key, no broken foreign key.
fn messages_are_keyed_by_integer_session_keys(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, MIGRATIONS.len() as i64);
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // The sessions' tables, and agent memory's (version 4) with its text
    // index's shadow tables: none of version 2's left.
    let expected = [
        "memories",
        "memories_text",
        "memories_text_config",
        "memories_text_data",
        "memories_text_docsize",
        "memories_text_idx",
        "memory_audit",
        "memory_history",
        "messages",
        "sessions",
    ];
    assert_eq!(tables, expected);
    let keys: Vec<(i64, String)> = conn
        .prepare(
            "SELECT DISTINCT m.session_key, s.id FROM messages m
             JOIN sessions s ON s.key = m.session_key ORDER BY m.session_key",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let ids: Vec<_> = keys.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    let (problems,): (i64,) = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            Ok((r.get(0)?,))
        })
        .unwrap();
    assert_eq!(problems, 0);
}

#[tokio::test]
async fn an_idle_store_frees_its_caches_once_and_keeps_working() {
    let (store, _dir) = make().await;
    store.create_session(&record("s1", None, 1)).await.unwrap();
    // Busy: a command at least every 200 ms, for longer than the idle
    // delay, frees nothing.
    for seq in 0..8 {
        store
            .append_message(&message("s1", seq, 10 + seq as i64))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(store.idle_releases(), 0, "released while busy");
    // Idle: freed within about two idle delays, then not again while
    // nothing happens.
    tokio::time::sleep(IDLE_RELEASE_AFTER * 3).await;
    assert_eq!(store.idle_releases(), 1);
    tokio::time::sleep(IDLE_RELEASE_AFTER * 2).await;
    assert_eq!(
        store.idle_releases(),
        1,
        "released again with nothing to free"
    );
    // What was written is still read, and new writes still land.
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap().len(), 8);
    store.append_message(&message("s1", 8, 30)).await.unwrap();
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap().len(), 9);
}

//! PgStore against a real PostgreSQL: the conformance suite and the engine's
//! write rules unchanged, then what only this store has (migrations under the
//! advisory lock, claiming due summaries, redaction).
//!
//! The server is `AGENTWIRE_TEST_POSTGRES` (`scripts/postgres.sh start`
//! prints it; `scripts/test` exports it). Each test makes a database of its
//! own and drops it after, so tests run in parallel on one server. Without
//! the variable the tests pass with a skip message, except under `CI`.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::AtomicU64;

use super::*;
use crate::conformance::{self, conformance_tests, message, record};
use crate::engine_writes::{Guard, StoreFuture, engine_write_tests};
use agentwire_core::MessageBody;
use tokio_postgres::NoTls;

const ENV: &str = "AGENTWIRE_TEST_POSTGRES";

/// The test server's URL; `None` (after saying so) when none is set, a
/// failure under `CI`.
fn server_url() -> Option<String> {
    match std::env::var(ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the PostgreSQL tests: set {ENV} (scripts/test does, from scripts/postgres.sh)"
            );
            eprintln!(
                "skipped: no PostgreSQL server (set {ENV}; scripts/postgres.sh start prints it)"
            );
            None
        }
    }
}

/// A database of one test's own, dropped (its connections ended) when the
/// guard goes, even if the store still holds connections.
pub(crate) struct TestDatabase {
    admin: tokio_postgres::Config,
    name: String,
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // A thread of its own: the test's runtime may be shutting down, and
        // drop cannot await.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to drop the test database");
            runtime.block_on(async move {
                let (client, connection) = admin.connect(NoTls).await?;
                let connection = tokio::spawn(connection);
                client.batch_execute(&sql).await?;
                drop(client);
                let _ = connection.await;
                Ok::<_, tokio_postgres::Error>(())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let random = RandomState::new().hash_one((std::process::id(), n));
    format!("t_{random:016x}")
}

/// A fresh, empty database on the test server (not migrated) and the
/// options to reach it: the default pool, and no client-side timer, so the
/// tests on a paused clock see no spurious timeout.
pub(crate) async fn empty_database() -> Option<(PgOptions, TestDatabase)> {
    let url = PgUrl::parse(&server_url()?).expect("AGENTWIRE_TEST_POSTGRES is a valid URL");
    let admin = url.config.clone();
    let name = unique_name();
    let (client, connection) = admin
        .connect(NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    let connection = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    drop(client);
    let _ = connection.await;
    let mut config = url.config.clone();
    config.dbname(&name);
    let options = PgOptions {
        url: PgUrl {
            redacted: format!("{} (database {name})", url.redacted),
            config,
            tls: url.tls.clone(),
        },
        pool_size: 4,
        connect_timeout: None,
        statement_timeout: Some(DEFAULT_STATEMENT_TIMEOUT),
        migrations: Migrations::Apply,
    };
    Some((options, TestDatabase { admin, name }))
}

async fn make() -> Option<(PgStore, TestDatabase)> {
    let (options, database) = empty_database().await?;
    let store = PgStore::connect(&options)
        .await
        .expect("connect and migrate");
    Some((store, database))
}

conformance_tests!(optional make);

mod engine_writes {
    use super::*;

    fn make() -> StoreFuture {
        Box::pin(async {
            let (store, database) = super::make().await?;
            let store: Arc<dyn SessionStore> = Arc::new(store);
            Some((store, Box::new(database) as Guard))
        })
    }

    engine_write_tests!(make);
}

pub(super) fn sid(s: &str) -> SessionId {
    SessionId::parse(s).unwrap()
}

/// A plain connection to the test database, for looking under the store.
pub(super) async fn inspect(options: &PgOptions) -> tokio_postgres::Client {
    let (client, connection) = options.url.config.connect(NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn replicas_migrating_an_empty_database_together_apply_each_migration_once() {
    let Some((options, _database)) = empty_database().await else {
        return;
    };
    let stores = conformance::join_all(
        (0..6)
            .map(|_| PgStore::connect(&options))
            .collect::<Vec<_>>(),
    )
    .await;
    for store in &stores {
        assert!(store.is_ok(), "{store:?}");
    }
    let client = inspect(&options).await;
    let rows = client
        .query(
            "SELECT version, name, applied_at IS NOT NULL FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    let applied: Vec<(i32, String, bool)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let expected: Vec<(i32, String, bool)> = schema::MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_owned(), true))
        .collect();
    assert_eq!(applied, expected);
    // A later start applies nothing and works on the same data.
    let store = stores.into_iter().next().unwrap().unwrap();
    store.create_session(&record("s1", None, 1)).await.unwrap();
    let again = PgStore::connect(&options).await.unwrap();
    assert!(again.load_session(&sid("s1")).await.unwrap().is_some());
    let count: i64 = client
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, schema::MIGRATIONS.len() as i64);
}

#[tokio::test]
async fn a_store_that_requires_migrations_refuses_an_unmigrated_database_until_migrated() {
    let Some((mut options, _database)) = empty_database().await else {
        return;
    };
    options.migrations = Migrations::Require;
    let refused = PgStore::connect(&options).await.unwrap_err();
    let text = refused.to_string();
    assert!(matches!(refused, StoreError::Rejected(_)), "{text}");
    assert!(
        text.contains("lacks migrations [1, 2, 3, 4, 5, 6, 7, 8, 9]"),
        "{text}"
    );
    assert!(text.contains("agentwire migrate"), "{text}");
    let applied = PgStore::migrate(&options).await.unwrap();
    assert_eq!(applied, vec![1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert!(PgStore::migrate(&options).await.unwrap().is_empty(), "once");
    let store = PgStore::connect(&options).await.unwrap();
    store.create_session(&record("s1", None, 1)).await.unwrap();
}

#[tokio::test]
async fn a_schema_newer_than_the_build_is_used_not_refused() {
    let Some((options, _database)) = empty_database().await else {
        return;
    };
    PgStore::connect(&options).await.unwrap();
    let client = inspect(&options).await;
    client
        .execute(
            "INSERT INTO schema_migrations (version, name) VALUES (9999, 'from the future')",
            &[],
        )
        .await
        .unwrap();
    let store = PgStore::connect(&options).await.unwrap();
    store.ping().await.unwrap();
}

pub(super) fn step(seq: u64, body: MessageBody) -> StoredMessage {
    StoredMessage {
        body,
        ..message("s1", seq, 10 + seq as i64)
    }
}

pub(super) fn call(seq: u64, id: &str, side: agentwire_core::ToolSide) -> StoredMessage {
    step(
        seq,
        MessageBody::ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: serde_json::json!({"q": "secret words"}),
            side,
        },
    )
}

pub(super) fn result(seq: u64, id: &str, outcome: agentwire_core::ToolOutcome) -> StoredMessage {
    step(
        seq,
        MessageBody::ToolResult {
            id: id.into(),
            outcome,
        },
    )
}

pub(super) fn reply(seq: u64, cancelled: bool) -> StoredMessage {
    step(
        seq,
        MessageBody::Reply {
            text: "done".into(),
            parts: Vec::new(),
            end: match cancelled {
                true => agentwire_core::ReplyEnd::Cancelled,
                false => agentwire_core::ReplyEnd::Complete,
            },
        },
    )
}

/// A ledger row: (turn, call id, side, state, outcome, whether a digest is
/// there).
type LedgerRow = (
    String,
    String,
    String,
    String,
    Option<serde_json::Value>,
    bool,
);

/// The ledger's rows of `s1`, by call seq.
async fn ledger_rows(client: &tokio_postgres::Client) -> Vec<LedgerRow> {
    client
        .query(
            "SELECT turn_id, call_id, side, state, outcome::text, args_digest
             FROM tool_calls c JOIN sessions s ON s.key = c.session_key
             WHERE s.id = 's1' ORDER BY call_seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| {
            let digest: Option<String> = row.get(5);
            let outcome: Option<String> = row.get(4);
            (
                row.get(0),
                row.get(1),
                row.get(2),
                row.get(3),
                outcome.map(|o| serde_json::from_str(&o).unwrap()),
                digest.is_some_and(|d| d.len() == 64 && !d.contains("secret")),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_turns_tool_calls_are_in_the_ledger_with_how_they_ended() {
    use agentwire_core::ToolSide;
    let Some((options, _database)) = empty_database().await else {
        return;
    };
    let store = PgStore::connect(&options).await.unwrap();
    let client = inspect(&options).await;
    write_two_turns_with_tool_calls(&store).await;
    assert_each_call_is_a_row_with_how_it_ended(&ledger_rows(&client).await);
    // A fenced-off write leaves no ledger rows either.
    store.fence_session(&sid("s1"), Fence(5)).await.unwrap();
    let refused = store
        .append_turn_fenced(
            &[message("s1", 13, 30), call(14, "z", ToolSide::Server)],
            None,
            Fence(4),
        )
        .await;
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    assert_eq!(ledger_rows(&client).await.len(), 5);
    // Deleting the session takes its ledger rows with it.
    assert!(store.delete_session(&sid("s1")).await.unwrap());
    let left: i64 = client
        .query_one("SELECT count(*) FROM tool_calls", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}

/// Session s1 and two turns. Turn one: question and records in one write;
/// a server call that ran, a client call denied, a call the model repeated
/// by id (both kept). Turn two: the question went alone before; the records
/// name it. The same call id as turn one's is a row of its own; the turn is
/// cancelled with its client call open.
async fn write_two_turns_with_tool_calls(store: &PgStore) {
    use agentwire_core::{ToolOutcome, ToolSide};
    store
        .create_session(&record("s1", Some("u"), 1))
        .await
        .unwrap();
    store
        .append_turn(
            &[
                message("s1", 0, 10),
                call(1, "a", ToolSide::Server),
                result(2, "a", ToolOutcome::Ok(serde_json::json!({"r": 1}))),
                call(3, "b", ToolSide::Client),
                result(4, "b", ToolOutcome::Denied("timed out".into())),
                call(5, "a", ToolSide::Server),
                result(6, "a", ToolOutcome::Error("boom".into())),
                reply(7, false),
            ],
            None,
        )
        .await
        .unwrap();
    store.append_message(&message("s1", 8, 20)).await.unwrap();
    store
        .append_turn(
            &[
                call(9, "a", ToolSide::Server),
                result(10, "a", ToolOutcome::Ok(serde_json::json!(null))),
                call(11, "c", ToolSide::Client),
                reply(12, true),
            ],
            None,
        )
        .await
        .unwrap();
}

/// The ledger of [`write_two_turns_with_tool_calls`]: per call its turn,
/// id, side, state and outcome, and a digest of its arguments.
fn assert_each_call_is_a_row_with_how_it_ended(rows: &[LedgerRow]) {
    let status = |s: &str| Some(serde_json::json!({ "status": s }));
    let expected = vec![
        ("0", "a", "server", "answered", status("ok")),
        (
            "0",
            "b",
            "client",
            "denied",
            Some(serde_json::json!({"status": "denied", "reason": "timed out"})),
        ),
        (
            "0",
            "a",
            "server",
            "answered",
            Some(serde_json::json!({"status": "error", "message": "boom"})),
        ),
        ("8", "a", "server", "answered", status("ok")),
        ("8", "c", "client", "cancelled", None),
    ];
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for (row, (turn, id, side, state, outcome)) in rows.iter().zip(expected) {
        assert_eq!(
            (
                row.0.as_str(),
                row.1.as_str(),
                row.2.as_str(),
                row.3.as_str()
            ),
            (turn, id, side, state),
            "{row:?}"
        );
        assert_eq!(row.4, outcome, "{row:?}");
        assert!(row.5, "a SHA-256 of the arguments, never the arguments");
    }
}

/// Counts the summaries it writes.
#[derive(Default)]
struct CountingSummarizer(AtomicU64);

#[async_trait::async_trait]
impl agentwire_core::Summarizer for CountingSummarizer {
    async fn summarize(&self, messages: &[StoredMessage]) -> Result<String, String> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(format!("{} messages", messages.len()))
    }
}

#[tokio::test]
async fn two_replicas_with_the_same_summaries_pending_write_each_once() {
    const SESSIONS: usize = 20;
    let Some((options, _database)) = empty_database().await else {
        return;
    };
    let one: Arc<dyn SessionStore> = Arc::new(PgStore::connect(&options).await.unwrap());
    let two: Arc<dyn SessionStore> = Arc::new(PgStore::connect(&options).await.unwrap());
    for i in 0..SESSIONS {
        let id = format!("s{i:03}");
        let mut session = record(&id, None, 1);
        session.agent = "summarised".to_owned();
        one.create_session(&session).await.unwrap();
        one.append_messages(&[message(&id, 0, 2)]).await.unwrap();
        one.schedule_summary(&sid(&id), Timestamp(10))
            .await
            .unwrap();
    }
    let summarizer = Arc::new(CountingSummarizer::default());
    let policies = || {
        std::collections::HashMap::from([(
            "summarised".to_owned(),
            agentwire_core::SummaryPolicy {
                after_idle: Duration::from_secs(1),
                summarizer: summarizer.clone(),
            },
        )])
    };
    let clock: Arc<dyn agentwire_core::Clock> =
        Arc::new(agentwire_core::testing::FixedClock(Timestamp(1_000)));
    // Both start with every summary overdue, as replicas restarted together.
    let (a, b) = tokio::join!(
        agentwire_engine::SummaryScheduler::start(one.clone(), clock.clone(), policies(), None),
        agentwire_engine::SummaryScheduler::start(two.clone(), clock.clone(), policies(), None),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !one.pending_summaries().await.unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "summaries still pending"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Whatever was still running has had its chance to write twice.
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.shutdown().await;
    b.shutdown().await;
    let written = summarizer.0.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(written, SESSIONS as u64, "each summary written once");
    for i in 0..SESSIONS {
        let summary = two.load_summary(&sid(&format!("s{i:03}"))).await.unwrap();
        assert_eq!(summary.unwrap().text, "1 messages");
    }
}

#[tokio::test]
async fn two_claimers_never_get_the_same_due_summary() {
    const SESSIONS: usize = 60;
    let Some((store, _database)) = make().await else {
        return;
    };
    for i in 0..SESSIONS {
        let id = format!("s{i:03}");
        store.create_session(&record(&id, None, 1)).await.unwrap();
        store
            .schedule_summary(&sid(&id), Timestamp(100 + i as i64))
            .await
            .unwrap();
    }
    // One not due yet.
    store
        .create_session(&record("later", None, 1))
        .await
        .unwrap();
    store
        .schedule_summary(&sid("later"), Timestamp(10_000))
        .await
        .unwrap();
    let now = Timestamp(1_000);
    let claim_for = Duration::from_secs(120);
    // Two "replicas" (separate pools) claiming in small batches at once.
    let other = store.clone();
    let (a, b) = {
        let claim_all = |store: PgStore| async move {
            let mut claimed = Vec::new();
            loop {
                let batch = store.claim_due_summaries(now, claim_for, 3).await.unwrap();
                if batch.is_empty() {
                    return claimed;
                }
                claimed.extend(batch.into_iter().map(|(id, _)| id.as_str().to_owned()));
            }
        };
        let a = tokio::spawn(claim_all(store.clone()));
        let b = tokio::spawn(claim_all(other));
        (a.await.unwrap(), b.await.unwrap())
    };
    let mut seen = HashSet::new();
    for id in a.iter().chain(&b) {
        assert!(seen.insert(id.clone()), "{id} claimed twice");
    }
    assert_eq!(seen.len(), SESSIONS, "every due summary claimed once");
    assert!(!seen.contains("later"));
    // Claimed rows stay claimed until the claim runs out...
    let again = store
        .claim_due_summaries(now, claim_for, 100)
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    // ...or the job ends: a summary stored for the claimed due time while a
    // turn rescheduled it is claimable again at once, for the later time.
    store
        .schedule_summary(&sid("s000"), Timestamp(500))
        .await
        .unwrap();
    conformance::summarise(&store, "s000", "recap", 900, 100).await;
    let after_claim = now.plus(claim_for);
    let next = store
        .claim_due_summaries(now, claim_for, 100)
        .await
        .unwrap();
    assert_eq!(next, [(sid("s000"), Timestamp(500))]);
    // Past the claim, the rest is due again, earliest first.
    let expired = store
        .claim_due_summaries(after_claim, claim_for, 2)
        .await
        .unwrap();
    assert_eq!(
        expired,
        [(sid("s001"), Timestamp(101)), (sid("s002"), Timestamp(102))]
    );
}

#[tokio::test]
async fn a_turn_is_one_statement_and_parts_round_trip_through_jsonb() {
    let Some((store, _database)) = make().await else {
        return;
    };
    store.create_session(&record("s1", None, 1)).await.unwrap();
    let messages: Vec<StoredMessage> = (0..50)
        .map(|seq| message("s1", seq, 10 + seq as i64))
        .collect();
    store.append_messages(&messages).await.unwrap();
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap(), messages);
    let loaded = store.load_session(&sid("s1")).await.unwrap().unwrap();
    assert_eq!(loaded.last_active_at, Timestamp(59));
}

#[tokio::test]
async fn a_write_fenced_below_the_sessions_fence_is_refused_and_writes_nothing() {
    let Some((store, _database)) = make().await else {
        return;
    };
    store.create_session(&record("s1", None, 1)).await.unwrap();
    let first = [message("s1", 0, 10)];
    store
        .append_turn_fenced(&first, None, Fence(100))
        .await
        .unwrap();
    // Another replica takes the session over with a larger fence...
    store.fence_session(&sid("s1"), Fence(200)).await.unwrap();
    // ...and the old holder, paused past its lease, can no longer write.
    let late = [message("s1", 1, 11)];
    let refused = store.append_turn_fenced(&late, None, Fence(100)).await;
    assert!(matches!(refused, Err(StoreError::Fenced(_))), "{refused:?}");
    assert_eq!(
        store.load_messages(&sid("s1")).await.unwrap(),
        first.to_vec()
    );
    // The new holder writes; unfenced writes (one process) are never refused.
    let next = [message("s1", 1, 12)];
    store
        .append_turn_fenced(&next, None, Fence(200))
        .await
        .unwrap();
    store
        .append_messages(&[message("s1", 2, 13)])
        .await
        .unwrap();
    assert_eq!(store.load_messages(&sid("s1")).await.unwrap().len(), 3);
    let unknown = store
        .append_turn_fenced(&[message("nope", 0, 1)], None, Fence(1))
        .await;
    assert!(
        matches!(unknown, Err(StoreError::Rejected(_))),
        "{unknown:?}"
    );
}

#[test]
fn parsed_urls_show_redacted_and_bad_ones_do_not_echo_the_password() {
    let url = PgUrl::parse("postgres://aw:s3cret@db.internal/agentwire").unwrap();
    assert!(!format!("{url} {url:?}").contains("s3cret"));
    let options = PgOptions::new(url);
    assert!(!format!("{options:?}").contains("s3cret"));
    for bad in [
        "postgres://aw:s3cret@db.internal:notaport/agentwire",
        "postgres://aw:s3cret@db/agentwire?bogus_option=s3cret",
        "mysql://aw:s3cret@db/agentwire",
    ] {
        let error = PgUrl::parse(bad).unwrap_err();
        assert!(!error.contains("s3cret"), "{error}");
    }
}

#[tokio::test]
async fn an_unreachable_database_is_a_startup_error_without_the_password() {
    // As `main` does: a TCP host may be reached over TLS (sslmode=prefer).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = PgUrl::parse("postgres://aw:s3cret@127.0.0.1:1/agentwire").unwrap();
    let mut options = PgOptions::new(url);
    options.connect_timeout = Some(Duration::from_secs(2));
    let Err(StoreError::Unavailable(message)) = PgStore::connect(&options).await else {
        panic!("nothing listens on port 1");
    };
    assert!(message.contains("127.0.0.1:1"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}

#[tokio::test]
async fn the_postgres_store_passes_the_memory_conformance_suite() {
    let Some((store, _database)) = make().await else {
        return;
    };
    agentwire_core::memory::conformance::all(&store, "pg").await;
}

/// 100,000 random operations over 200 callers, 5 facets and 3 agents: no
/// read crosses a scope, nothing forgotten or deleted is read.
#[tokio::test]
async fn no_memory_scope_is_crossed_in_100000_random_operations() {
    let Some((store, _database)) = make().await else {
        return;
    };
    use agentwire_core::memory::conformance::{Universe, isolation_holds};
    isolation_holds(&store, "iso", Universe::FULL, 100_000, 0x5eed).await;
}

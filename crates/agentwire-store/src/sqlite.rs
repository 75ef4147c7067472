//! The SQLite store: one dedicated thread owns the connection and runs
//! commands in group-committed batches.
//!
//! # Design
//!
//! - Async callers never touch SQLite. Each operation is a [`Command`] sent over
//!   a bounded channel with a oneshot for the reply; the `agentwire-sqlite`
//!   thread blocks on the channel, so no blocking IO runs on async threads.
//! - Group commit: the thread takes one command, then keeps taking what is
//!   queued meanwhile (up to [`MAX_BATCH`]) and runs the whole batch in one
//!   transaction, so a burst of appends costs one commit. Every write runs in
//!   its own savepoint: a failing write (a duplicate `seq`) rolls back alone
//!   and the rest of the batch commits. Reads run in the same transaction and
//!   see the earlier writes of their batch. Replies are sent after the commit,
//!   so an `Ok` write is durable and visible to every later read.
//! - JSON encoding and decoding of parts and metadata happen on the caller's
//!   side; the thread only runs SQL.
//! - Dropping every clone of the [`SqliteStore`] closes the channel; the thread
//!   finishes the queued commands, closes the connection and exits.
//! - Log lines carry session ids, seqs and error kinds, never message content.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentwire_core::{
    SessionCursor, SessionId, SessionOverview, SessionRecord, SessionStore, SessionSummary,
    StoreError, StoredMessage, Timestamp,
};
use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Transaction, ffi};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::codec;
use schema::{IntegrityError, MigrateError, check_integrity, migrate};

/// Commands that may wait for the SQLite thread before senders wait too.
const CHANNEL_CAPACITY: usize = 1024;
/// The most commands run in one transaction.
const MAX_BATCH: usize = 256;
const THREAD_NAME: &str = "agentwire-sqlite";
const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);
const STATEMENT_CACHE_CAPACITY: usize = 32;
/// How long the store must go without a command before SQLite's caches are
/// freed.
const IDLE_RELEASE_AFTER: Duration = Duration::from_secs(1);

/// The embedded, durable session store. Cheap to clone: clones share the
/// one SQLite thread.
#[derive(Clone)]
pub struct SqliteStore {
    commands: mpsc::Sender<Command>,
    path: Arc<Path>,
    /// Commands sent so far, for the idle release.
    activity: Arc<AtomicU64>,
    /// Idle releases done so far.
    releases: Arc<AtomicU64>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating the file and its parent directory if missing) and
    /// migrates the database.
    ///
    /// Fails with [`StoreError::Unavailable`] naming the path when the file
    /// cannot be opened or migrated, including when its schema is newer than
    /// this build knows.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let path: Arc<Path> = Arc::from(path);
        let (commands, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        let (ready_tx, ready_rx) = oneshot::channel();
        let thread_path = Arc::clone(&path);
        std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn(move || {
                let conn = match open_connection(&thread_path) {
                    Ok(conn) => conn,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                if ready_tx.send(Ok(())).is_ok() {
                    run(conn, receiver);
                }
            })
            .map_err(|e| {
                StoreError::Unavailable(format!(
                    "cannot start the sqlite thread for {}: {e}",
                    path.display()
                ))
            })?;
        ready_rx.await.map_err(|_| {
            StoreError::Unavailable(format!(
                "the sqlite thread for {} stopped while opening",
                path.display()
            ))
        })??;
        info!(path = %path.display(), "session database open");
        let store = SqliteStore {
            commands,
            path,
            activity: Arc::default(),
            releases: Arc::default(),
        };
        tokio::spawn(release_when_idle(
            store.commands.downgrade(),
            store.activity.clone(),
            store.releases.clone(),
        ));
        Ok(store)
    }

    async fn call<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        self.activity.fetch_add(1, Ordering::Relaxed);
        let (reply, response) = oneshot::channel();
        self.commands
            .send(command(reply))
            .await
            .map_err(|_| self.stopped())?;
        response.await.map_err(|_| self.stopped())?
    }

    /// How many times the idle store has freed SQLite's caches.
    pub fn idle_releases(&self) -> u64 {
        self.releases.load(Ordering::Relaxed)
    }

    fn stopped(&self) -> StoreError {
        StoreError::Unavailable(format!(
            "the sqlite thread for {} has stopped",
            self.path.display()
        ))
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let record = record.clone();
        self.call(|reply| Command::CreateSession { record, reply })
            .await
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.clone();
        self.call(|reply| Command::LoadSession { id, reply }).await
    }

    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        self.append_turn(messages, None).await
    }

    async fn append_turn(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let rows = messages
            .iter()
            .map(NewMessage::encode)
            .collect::<Result<Vec<_>, _>>()?;
        if rows.is_empty() {
            return Ok(());
        }
        self.call(|reply| Command::Append {
            rows,
            summary_due,
            reply,
        })
        .await
    }

    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        let session_id = id.clone();
        let rows = self
            .call(|reply| Command::LoadMessages {
                id: session_id,
                reply,
            })
            .await?;
        rows.into_iter().map(|row| row.decode(id)).collect()
    }

    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let session_id = id.clone();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .call(|reply| Command::LoadRecentMessages {
                id: session_id,
                limit,
                reply,
            })
            .await?;
        rows.into_iter().map(|row| row.decode(id)).collect()
    }

    async fn load_messages_after(
        &self,
        id: &SessionId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let after = match after.map(i64::try_from) {
            None => -1,
            Some(Ok(after)) => after,
            // No stored seq is that large.
            Some(Err(_)) => return Ok(Vec::new()),
        };
        let session_id = id.clone();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .call(|reply| Command::LoadMessagesAfter {
                id: session_id,
                after,
                limit,
                reply,
            })
            .await?;
        rows.into_iter().map(|row| row.decode(id)).collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.call(|reply| Command::Ping { reply }).await
    }

    async fn list_sessions(
        &self,
        owner: &str,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<Vec<SessionOverview>, StoreError> {
        let owner = owner.to_owned();
        let after = after.cloned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(|reply| Command::ListSessions {
            owner,
            after,
            limit,
            reply,
        })
        .await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        let id = id.clone();
        self.call(|reply| Command::DeleteSession { id, reply })
            .await
    }

    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        let id = id.clone();
        self.call(|reply| Command::LoadSummary { id, reply }).await
    }

    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        let id = id.clone();
        self.call(|reply| Command::ScheduleSummary { id, due, reply })
            .await
    }

    async fn pending_summaries(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        self.call(|reply| Command::PendingSummaries { reply }).await
    }

    async fn store_summary(
        &self,
        id: &SessionId,
        summary: &SessionSummary,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        let (id, summary) = (id.clone(), summary.clone());
        self.call(|reply| Command::StoreSummary {
            id,
            summary,
            handled_due,
            reply,
        })
        .await
    }

    async fn clear_summary_due(
        &self,
        id: &SessionId,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        let id = id.clone();
        self.call(|reply| Command::ClearSummaryDue {
            id,
            handled_due,
            reply,
        })
        .await
    }
}

// ---------------------------------------------------------------------------
// Opening and migrating.

/// Asks the SQLite thread to free its caches whenever a tick finds that
/// commands came before the previous tick and none since. Holds the channel
/// only weakly, so the store's last clone still closes it; ends with it.
async fn release_when_idle(
    commands: mpsc::WeakSender<Command>,
    activity: Arc<AtomicU64>,
    releases: Arc<AtomicU64>,
) {
    let mut ticks = tokio::time::interval(IDLE_RELEASE_AFTER);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = activity.load(Ordering::Relaxed);
    let mut released = seen;
    loop {
        ticks.tick().await;
        let Some(sender) = commands.upgrade() else {
            return;
        };
        let now = activity.load(Ordering::Relaxed);
        if now == seen && now != released {
            let (reply, response) = oneshot::channel();
            if sender.send(Command::ReleaseMemory { reply }).await.is_err() {
                return;
            }
            drop(sender);
            if let Ok(Ok(())) = response.await {
                releases.fetch_add(1, Ordering::Relaxed);
            }
            released = now;
        }
        seen = now;
    }
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let fail = |what: &str, e: &dyn fmt::Display| {
        StoreError::Unavailable(format!(
            "cannot {what} session database {}: {e}",
            path.display()
        ))
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| fail("create the directory of", &e))?;
    }
    let mut conn = Connection::open(path).map_err(|e| fail("open", &e))?;
    configure(&conn).map_err(|e| fail("configure", &e))?;
    check_integrity(&conn).map_err(|e| match e {
        IntegrityError::Damaged(problem) => StoreError::Unavailable(format!(
            "session database {} is damaged ({problem}); restore it from a backup or use another file",
            path.display()
        )),
        IntegrityError::Sqlite(e) => fail("check", &e),
    })?;
    migrate(&mut conn).map_err(|e| match e {
        MigrateError::Newer { found, known } => StoreError::Unavailable(format!(
            "session database {} has schema version {found}, newer than the newest this build \
             knows ({known}); upgrade agentwire or use another file",
            path.display()
        )),
        MigrateError::Invalid(found) => StoreError::Unavailable(format!(
            "session database {} has an invalid schema version {found}",
            path.display()
        )),
        MigrateError::Sqlite(e) => fail("migrate", &e),
    })?;
    Ok(conn)
}

/// Pages (4 KiB) of WAL after which a commit checkpoints.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 4000;

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        warn!(journal_mode = %mode, "session database did not switch to WAL");
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // A checkpoint copies each page changed since the last one back into
    // the database once, however often it changed: appends rewrite the same
    // hot pages (the index of recent messages, the sessions' rows) over and
    // over, so checkpointing every WAL_AUTOCHECKPOINT_PAGES instead of
    // SQLite's 1000 copies far fewer pages per turn, for a WAL file of at
    // most about 16 MiB between checkpoints.
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    Ok(())
}

// ---------------------------------------------------------------------------
// The SQLite thread.

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    CreateSession {
        record: SessionRecord,
        reply: Reply<()>,
    },
    LoadSession {
        id: SessionId,
        reply: Reply<Option<SessionRecord>>,
    },
    /// Messages of one session, appended all or none, with the summary's
    /// new due time if any.
    Append {
        rows: Vec<NewMessage>,
        summary_due: Option<Timestamp>,
        reply: Reply<()>,
    },
    LoadMessages {
        id: SessionId,
        reply: Reply<Vec<MessageRow>>,
    },
    LoadRecentMessages {
        id: SessionId,
        limit: i64,
        reply: Reply<Vec<MessageRow>>,
    },
    LoadMessagesAfter {
        id: SessionId,
        after: i64,
        limit: i64,
        reply: Reply<Vec<MessageRow>>,
    },
    Ping {
        reply: Reply<()>,
    },
    ListSessions {
        owner: String,
        after: Option<SessionCursor>,
        limit: i64,
        reply: Reply<Vec<SessionOverview>>,
    },
    DeleteSession {
        id: SessionId,
        reply: Reply<bool>,
    },
    LoadSummary {
        id: SessionId,
        reply: Reply<Option<SessionSummary>>,
    },
    ScheduleSummary {
        id: SessionId,
        due: Timestamp,
        reply: Reply<()>,
    },
    PendingSummaries {
        reply: Reply<Vec<(SessionId, Timestamp)>>,
    },
    StoreSummary {
        id: SessionId,
        summary: SessionSummary,
        handled_due: Timestamp,
        reply: Reply<()>,
    },
    ClearSummaryDue {
        id: SessionId,
        handled_due: Timestamp,
        reply: Reply<()>,
    },
    /// Frees the connection's caches (the store is idle).
    ReleaseMemory {
        reply: Reply<()>,
    },
}

/// A message as it is written: parts and metadata already encoded.
struct NewMessage {
    session_id: SessionId,
    seq: i64,
    role: &'static str,
    content: String,
    parts: Option<String>,
    metadata: Option<String>,
    created_at: i64,
}

impl NewMessage {
    /// Encodes on the caller's side, so the worker thread only runs SQL.
    fn encode(message: &StoredMessage) -> Result<NewMessage, StoreError> {
        let seq = i64::try_from(message.seq).map_err(|_| {
            StoreError::Rejected(format!(
                "message {} of session {}: seq out of range",
                message.seq, message.session_id
            ))
        })?;
        let row = codec::encode_body(&message.body)?;
        Ok(NewMessage {
            session_id: message.session_id.clone(),
            seq,
            role: row.role,
            parts: codec::encode_parts(row.parts)?,
            metadata: codec::encode_row_metadata(&message.metadata, row.marker)?,
            content: row.content.into_owned(),
            created_at: message.created_at.0,
        })
    }
}

/// A message row as it is read; decoded on the caller's side.
struct MessageRow {
    seq: i64,
    role: String,
    content: String,
    parts: Option<String>,
    metadata: Option<String>,
    created_at: i64,
}

impl MessageRow {
    fn decode(self, session_id: &SessionId) -> Result<StoredMessage, StoreError> {
        let corrupt = |why: &dyn fmt::Display| {
            StoreError::Corrupt(format!(
                "message {} of session {session_id}: {why}",
                self.seq
            ))
        };
        let seq = u64::try_from(self.seq).map_err(|_| corrupt(&"negative seq"))?;
        let parts = codec::decode_parts(self.parts.as_deref()).map_err(|e| corrupt(&e))?;
        let mut metadata =
            codec::decode_metadata(self.metadata.as_deref()).map_err(|e| corrupt(&e))?;
        let body = codec::decode_body(&self.role, self.content, parts, &mut metadata)
            .map_err(|e| corrupt(&e))?;
        Ok(StoredMessage {
            session_id: session_id.clone(),
            seq,
            body,
            metadata,
            created_at: Timestamp(self.created_at),
        })
    }
}

/// A command that has run, holding its reply (and result) until the batch
/// commits.
struct Outcome(Box<Deliver>);

/// Sends a command's result, or the batch's failure (`Some(reason)`) when
/// the batch did not commit.
type Deliver = dyn FnOnce(Option<&str>) + Send;

impl Outcome {
    fn new<T: Send + 'static>(reply: Reply<T>, result: Result<T, StoreError>) -> Outcome {
        Outcome(Box::new(move |failure: Option<&str>| {
            let result = match failure {
                Some(reason) => Err(StoreError::Unavailable(reason.to_owned())),
                None => result,
            };
            // The caller may have stopped waiting; the result is then moot.
            let _ = reply.send(result);
        }))
    }

    /// Sends the result, or `batch_failure` when the batch did not commit.
    fn deliver(self, batch_failure: Option<&str>) {
        (self.0)(batch_failure);
    }
}

impl Command {
    /// Answers without running: the batch failed before reaching it.
    fn skipped(self, reason: &str) -> Outcome {
        fn fail<T: Send + 'static>(reply: Reply<T>, reason: &str) -> Outcome {
            Outcome::new(reply, Err(StoreError::Unavailable(reason.to_owned())))
        }
        match self {
            Command::CreateSession { reply, .. }
            | Command::Append { reply, .. }
            | Command::Ping { reply }
            | Command::ScheduleSummary { reply, .. }
            | Command::StoreSummary { reply, .. }
            | Command::ClearSummaryDue { reply, .. }
            | Command::ReleaseMemory { reply } => fail(reply, reason),
            Command::LoadSession { reply, .. } => fail(reply, reason),
            Command::LoadMessages { reply, .. }
            | Command::LoadRecentMessages { reply, .. }
            | Command::LoadMessagesAfter { reply, .. } => fail(reply, reason),
            Command::ListSessions { reply, .. } => fail(reply, reason),
            Command::DeleteSession { reply, .. } => fail(reply, reason),
            Command::LoadSummary { reply, .. } => fail(reply, reason),
            Command::PendingSummaries { reply } => fail(reply, reason),
        }
    }
}

fn run(mut conn: Connection, mut commands: mpsc::Receiver<Command>) {
    while let Some(first) = commands.blocking_recv() {
        run_batch(&mut conn, first, &mut commands);
    }
    debug!("session store dropped; sqlite thread exiting");
}

/// Runs `first` and every command queued while the batch runs (up to
/// [`MAX_BATCH`]) in one transaction, then replies to each once the
/// transaction has committed or failed. Taking commands that arrive while
/// earlier ones execute, not just those queued at the start, is what makes
/// batches grow with the load.
fn run_batch(conn: &mut Connection, first: Command, commands: &mut mpsc::Receiver<Command>) {
    let mut tx = match conn.transaction() {
        Ok(tx) => tx,
        Err(e) => {
            let reason = format!("cannot begin a transaction: {e}");
            warn!(error = %e, "session store batch failed");
            first.skipped(&reason).deliver(None);
            return;
        }
    };
    let mut outcomes = Vec::new();
    let mut broken: Option<String> = None;
    let mut next = Some(first);
    while let Some(command) = next.take() {
        let outcome = match &broken {
            Some(reason) => command.skipped(reason),
            None => execute(&mut tx, command, &mut broken),
        };
        outcomes.push(outcome);
        if outcomes.len() < MAX_BATCH {
            next = commands.try_recv().ok();
        }
    }
    let failure = match broken {
        Some(reason) => {
            if let Err(e) = tx.rollback() {
                debug!(error = %e, "rollback of a failed batch");
            }
            Some(reason)
        }
        None => tx
            .commit()
            .err()
            .map(|e| format!("cannot commit a transaction: {e}")),
    };
    if let Some(reason) = &failure {
        warn!(error = %reason, commands = outcomes.len(), "session store batch failed");
    }
    for outcome in outcomes {
        outcome.deliver(failure.as_deref());
    }
}

fn execute(tx: &mut Transaction<'_>, command: Command, broken: &mut Option<String>) -> Outcome {
    match command {
        Command::CreateSession { record, reply } => {
            let result = write(tx, broken, |conn| insert_session(conn, &record));
            log_write_failure(&result, &record.id, None);
            Outcome::new(reply, result)
        }
        Command::Append {
            rows,
            summary_due,
            reply,
        } => {
            let result = write(tx, broken, |conn| append_messages(conn, &rows, summary_due));
            if let Some(first) = rows.first() {
                log_write_failure(&result, &first.session_id, Some(first.seq));
            }
            Outcome::new(reply, result)
        }
        Command::LoadSession { id, reply } => Outcome::new(reply, load_session(tx, &id)),
        Command::LoadMessages { id, reply } => Outcome::new(reply, load_messages(tx, &id)),
        Command::LoadRecentMessages { id, limit, reply } => {
            Outcome::new(reply, pages::load_recent_messages(tx, &id, limit))
        }
        Command::LoadMessagesAfter {
            id,
            after,
            limit,
            reply,
        } => Outcome::new(reply, pages::load_messages_after(tx, &id, after, limit)),
        Command::Ping { reply } => Outcome::new(reply, ping(tx)),
        Command::ListSessions {
            owner,
            after,
            limit,
            reply,
        } => Outcome::new(reply, list_sessions(tx, &owner, after.as_ref(), limit)),
        Command::DeleteSession { id, reply } => {
            let result = write(tx, broken, |conn| delete_session(conn, &id));
            log_write_failure(&result, &id, None);
            Outcome::new(reply, result)
        }
        Command::LoadSummary { id, reply } => Outcome::new(reply, load_summary(tx, &id)),
        Command::ScheduleSummary { id, due, reply } => {
            let result = write(tx, broken, |conn| schedule_summary(conn, &id, due));
            log_write_failure(&result, &id, None);
            Outcome::new(reply, result)
        }
        Command::PendingSummaries { reply } => Outcome::new(reply, pending_summaries(tx)),
        Command::ReleaseMemory { reply } => {
            let result = tx
                .release_memory()
                .map_err(|e| StoreError::Unavailable(format!("cannot release the cache: {e}")));
            debug!(ok = result.is_ok(), "session store idle: cache released");
            Outcome::new(reply, result)
        }
        Command::StoreSummary {
            id,
            summary,
            handled_due,
            reply,
        } => {
            let result = write(tx, broken, |conn| {
                store_summary(conn, &id, &summary, handled_due)
            });
            log_write_failure(&result, &id, None);
            Outcome::new(reply, result)
        }
        Command::ClearSummaryDue {
            id,
            handled_due,
            reply,
        } => {
            let result = write(tx, broken, |conn| clear_summary_due(conn, &id, handled_due));
            log_write_failure(&result, &id, None);
            Outcome::new(reply, result)
        }
    }
}

fn log_write_failure<T>(result: &Result<T, StoreError>, session_id: &SessionId, seq: Option<i64>) {
    match result {
        Ok(_) => {}
        Err(e @ StoreError::Rejected(_)) => {
            debug!(session_id = %session_id, seq, error = %e, "session store write rejected");
        }
        Err(e) => warn!(session_id = %session_id, seq, error = %e, "session store write failed"),
    }
}

/// Runs `op` in a savepoint of the batch transaction: on error it rolls back
/// alone. A savepoint that cannot be opened or closed breaks the batch. The
/// savepoint statements are prepared once and cached, not parsed per write.
fn write<T>(
    tx: &mut Transaction<'_>,
    broken: &mut Option<String>,
    op: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut fail = |reason: String| {
        *broken = Some(reason.clone());
        Err(StoreError::Unavailable(reason))
    };
    if let Err(e) = run_cached(tx, "SAVEPOINT write") {
        return fail(format!("cannot open a savepoint: {e}"));
    }
    let result = op(tx);
    let end = match result {
        Ok(_) => run_cached(tx, "RELEASE write"),
        Err(_) => {
            run_cached(tx, "ROLLBACK TO write").and_then(|()| run_cached(tx, "RELEASE write"))
        }
    };
    match end {
        Ok(()) => result,
        Err(e) => fail(format!("cannot close a savepoint: {e}")),
    }
}

fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

mod pages;
mod queries;
mod schema;
use queries::*;

#[cfg(test)]
mod tests;

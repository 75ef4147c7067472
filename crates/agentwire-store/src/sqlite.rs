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
//!   [`SqliteStore::close`] does the same on a clean shutdown and waits for
//!   it, with the write-ahead log checkpointed into the database file first:
//!   a process may exit before a dropped store's thread is done.
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

use crate::codec::{self, NewRow, OVERVIEW_COLUMNS, StoredRow};
use crate::log_write_failure;
use schema::{IntegrityError, MigrateError, check_integrity, migrate};

/// Commands that may wait for the SQLite thread before senders wait too.
const CHANNEL_CAPACITY: usize = 1024;
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
    commands: mpsc::Sender<Request>,
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
            .send(Request::Run(command(reply)))
            .await
            .map_err(|_| self.stopped())?;
        response.await.map_err(|_| self.stopped())?
    }

    /// Closes the store, for a clean shutdown: once the commands sent before
    /// it have run, the write-ahead log is checkpointed into the database
    /// file and truncated and the connection closes, so the file alone holds
    /// every row (a copy of it without its `-wal` file is whole). Returns
    /// when that is done. Every later call, on any clone, fails as on a
    /// stopped store; closing a stopped store does nothing.
    pub async fn close(&self) -> Result<(), StoreError> {
        let (reply, response) = oneshot::channel();
        if self.commands.send(Request::Close(reply)).await.is_err() {
            return Ok(());
        }
        response.await.map_err(|_| self.stopped())?
    }

    /// Runs `read` of session `id`'s message rows; the messages, decoded on
    /// the caller's side.
    async fn load_rows(
        &self,
        id: &SessionId,
        read: impl FnOnce(SessionId, Reply<Vec<StoredRow>>) -> Command,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self.call(|reply| read(id.clone(), reply)).await?;
        rows.into_iter().map(|row| row.decode(id)).collect()
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
        let Some(session_id) = codec::session_of(messages)?.cloned() else {
            return Ok(());
        };
        let rows = messages
            .iter()
            .map(NewRow::encode)
            .collect::<Result<Vec<_>, _>>()?;
        self.call(|reply| Command::Append {
            session_id,
            rows,
            summary_due,
            reply,
        })
        .await
    }

    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.load_rows(id, |id, reply| Command::LoadMessages { id, reply })
            .await
    }

    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.load_rows(id, |id, reply| Command::LoadRecentMessages {
            id,
            limit,
            reply,
        })
        .await
    }

    async fn load_messages_after(
        &self,
        id: &SessionId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let Some(after) = codec::page_start(after) else {
            return Ok(Vec::new());
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.load_rows(id, |id, reply| Command::LoadMessagesAfter {
            id,
            after,
            limit,
            reply,
        })
        .await
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
    commands: mpsc::WeakSender<Request>,
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
            let release = Request::Run(Command::ReleaseMemory { reply });
            if sender.send(release).await.is_err() {
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

mod memories;
mod pages;
mod queries;
mod schema;
mod worker;
use queries::*;
use worker::{Command, Reply, Request, run};

#[cfg(test)]
mod tests;

//! The SQLite thread: it owns the connection, runs the commands it is sent
//! in group-committed batches, and on a close checkpoints the write-ahead
//! log into the database file and closes the connection.

use super::*;

/// The most commands run in one transaction.
const MAX_BATCH: usize = 256;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What the store sends its thread.
pub(super) enum Request {
    Run(Command),
    /// Ends the thread once the commands sent before it have run: see
    /// [`SqliteStore::close`].
    Close(Reply<()>),
}

pub(super) enum Command {
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
        session_id: SessionId,
        rows: Vec<NewRow>,
        summary_due: Option<Timestamp>,
        reply: Reply<()>,
    },
    LoadMessages {
        id: SessionId,
        reply: Reply<Vec<StoredRow>>,
    },
    LoadRecentMessages {
        id: SessionId,
        limit: i64,
        reply: Reply<Vec<StoredRow>>,
    },
    LoadMessagesAfter {
        id: SessionId,
        after: i64,
        limit: i64,
        reply: Reply<Vec<StoredRow>>,
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
    /// Agent memory's commands (`memories.rs`), boxed: a memory's row is
    /// several times the size of any other command.
    Memory(Box<super::memories::MemoryCommand>),
}

/// A command that has run, holding its reply (and result) until the batch
/// commits.
pub(super) struct Outcome(Box<Deliver>);

/// Sends a command's result, or the batch's failure (`Some(reason)`) when
/// the batch did not commit.
type Deliver = dyn FnOnce(Option<&str>) + Send;

impl Outcome {
    pub(super) fn new<T: Send + 'static>(
        reply: Reply<T>,
        result: Result<T, StoreError>,
    ) -> Outcome {
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

/// An answer of `reason`, for a command its batch failed before reaching.
pub(super) fn fail<T: Send + 'static>(reply: Reply<T>, reason: &str) -> Outcome {
    Outcome::new(reply, Err(StoreError::Unavailable(reason.to_owned())))
}

impl Command {
    /// Answers without running: the batch failed before reaching it.
    fn skipped(self, reason: &str) -> Outcome {
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
            Command::Memory(command) => command.skipped(reason),
        }
    }
}

/// The thread's loop: batch after batch until every sender is gone (the
/// connection then closes as it is dropped) or the store is closed.
pub(super) fn run(mut conn: Connection, mut requests: mpsc::Receiver<Request>) {
    while let Some(request) = requests.blocking_recv() {
        let closing = match request {
            Request::Run(first) => run_batch(&mut conn, first, &mut requests),
            Request::Close(reply) => Some(reply),
        };
        if let Some(reply) = closing {
            // What was sent after the close is dropped unanswered: its
            // callers are told the store has stopped.
            requests.close();
            while requests.try_recv().is_ok() {}
            let _ = reply.send(close(conn));
            return;
        }
    }
    debug!("session store dropped; sqlite thread exiting");
}

/// Copies every page of the write-ahead log into the database file,
/// truncates the log to nothing, and closes the connection (the last one
/// closing removes the log file), so the database file alone holds every
/// row.
fn close(conn: Connection) -> Result<(), StoreError> {
    let checkpoint = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(2)?))
    });
    let closed = conn.close().map_err(|(_, e)| e);
    let fail = |what: &str, e: &dyn fmt::Display| {
        warn!(error = %e, "session database {what} on close");
        Err(StoreError::Unavailable(format!(
            "session database {what} on close: {e}"
        )))
    };
    match (checkpoint, closed) {
        (Err(e), _) => fail("not checkpointed", &e),
        // Another connection (another process) was reading an older
        // snapshot: its pages stay in the log.
        (Ok((1, _)), _) => fail("not checkpointed", &"the database is busy"),
        (Ok(_), Err(e)) => fail("not closed", &e),
        (Ok((_, pages)), Ok(())) => {
            info!(pages, "session database checkpointed and closed");
            Ok(())
        }
    }
}

/// Runs `first` and every command queued while the batch runs (up to
/// [`MAX_BATCH`]) in one transaction, then replies to each once the
/// transaction has committed or failed. Taking commands that arrive while
/// earlier ones execute, not just those queued at the start, is what makes
/// batches grow with the load. A close ends the batch: its reply comes
/// back, for after the commit.
pub(super) fn run_batch(
    conn: &mut Connection,
    first: Command,
    requests: &mut mpsc::Receiver<Request>,
) -> Option<Reply<()>> {
    let mut tx = match conn.transaction() {
        Ok(tx) => tx,
        Err(e) => {
            let reason = format!("cannot begin a transaction: {e}");
            warn!(error = %e, "session store batch failed");
            first.skipped(&reason).deliver(None);
            return None;
        }
    };
    let mut outcomes = Vec::new();
    let mut broken: Option<String> = None;
    let mut closing = None;
    let mut next = Some(first);
    while let Some(command) = next.take() {
        let outcome = match &broken {
            Some(reason) => command.skipped(reason),
            None => execute(&mut tx, command, &mut broken),
        };
        outcomes.push(outcome);
        if outcomes.len() < MAX_BATCH {
            next = match requests.try_recv() {
                Ok(Request::Run(command)) => Some(command),
                Ok(Request::Close(reply)) => {
                    closing = Some(reply);
                    None
                }
                Err(_) => None,
            };
        }
    }
    let failure = finish(tx, broken);
    if let Some(reason) = &failure {
        warn!(error = %reason, commands = outcomes.len(), "session store batch failed");
    }
    for outcome in outcomes {
        outcome.deliver(failure.as_deref());
    }
    closing
}

/// Commits the batch, or rolls it back when it `broken`: why it failed.
fn finish(tx: Transaction<'_>, broken: Option<String>) -> Option<String> {
    match broken {
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
    }
}

fn execute(tx: &mut Transaction<'_>, command: Command, broken: &mut Option<String>) -> Outcome {
    match command {
        Command::CreateSession { record, reply } => {
            written(tx, broken, reply, (&record.id, None), |conn| {
                insert_session(conn, &record)
            })
        }
        Command::Append {
            session_id,
            rows,
            summary_due,
            reply,
        } => {
            let first = rows.first().map(|row| row.seq);
            written(tx, broken, reply, (&session_id, first), |conn| {
                append_messages(conn, &session_id, &rows, summary_due)
            })
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
        Command::DeleteSession { id, reply } => written(tx, broken, reply, (&id, None), |conn| {
            delete_session(conn, &id)
        }),
        Command::LoadSummary { id, reply } => Outcome::new(reply, load_summary(tx, &id)),
        Command::ScheduleSummary { id, due, reply } => {
            written(tx, broken, reply, (&id, None), |conn| {
                schedule_summary(conn, &id, due)
            })
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
        } => written(tx, broken, reply, (&id, None), |conn| {
            store_summary(conn, &id, &summary, handled_due)
        }),
        Command::ClearSummaryDue {
            id,
            handled_due,
            reply,
        } => written(tx, broken, reply, (&id, None), |conn| {
            clear_summary_due(conn, &id, handled_due)
        }),
        Command::Memory(command) => super::memories::execute(tx, *command, broken),
    }
}

/// A write's outcome: `op` run in a savepoint of its own ([`write`]), a
/// failure logged by the session and the first `seq` it wrote.
fn written<T: Send + 'static>(
    tx: &mut Transaction<'_>,
    broken: &mut Option<String>,
    reply: Reply<T>,
    (session_id, seq): (&SessionId, Option<i64>),
    op: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Outcome {
    let result = write(tx, broken, op);
    log_write_failure(&result, session_id, seq);
    Outcome::new(reply, result)
}

/// Runs `op` in a savepoint of the batch transaction: on error it rolls back
/// alone. A savepoint that cannot be opened or closed breaks the batch. The
/// savepoint statements are prepared once and cached, not parsed per write.
pub(super) fn write<T>(
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

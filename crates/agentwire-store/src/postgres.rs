//! The PostgreSQL store (cargo feature `postgres`): the durable store for
//! several replicas of the server over one database.
//!
//! # Design
//!
//! - `tokio-postgres` connections in a `deadpool-postgres` pool of
//!   [`PgOptions::pool_size`]; every operation takes a connection, runs one
//!   statement (prepared once per connection and cached) and gives it back.
//!   Nothing blocks a thread: the driver is async end to end.
//! - A turn's writes ([`SessionStore::append_messages`]) are one statement,
//!   so one round trip and one commit: a CTE advances the session's
//!   `last_active_at` and `seq_head` and returns its key, and the insert
//!   takes every message from `unnest` of one array per column. No session
//!   row means nothing inserted (an unknown session); a reused `seq` fails
//!   the whole statement on the primary key (all or none).
//! - Rows are the SQLite store's (the same `codec`): role and content, parts
//!   and metadata as JSON (`jsonb` here), timestamps as the port's integer
//!   nanoseconds.
//! - The schema is migrated on [`PgStore::connect`] (`postgres/schema.rs`).
//! - `statement_timeout` is set on every connection (server side: no timer
//!   of ours races the IO), the connect timeout bounds opening a connection
//!   and waiting for a free one.
//! - The URL's password never reaches a log line or an error: errors name
//!   the database by [`PgUrl`]'s redacted form, and database errors are
//!   reported by their message and code, never their detail (which can
//!   quote values).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{
    Fence, SessionCursor, SessionId, SessionOverview, SessionRecord, SessionStore, SessionSummary,
    StoreError, StoredMessage, Timestamp,
};
use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use crate::codec::{self, NewRow, OVERVIEW_COLUMNS, StoredRow};
use crate::log_write_failure;

mod ledger;
mod memories;
mod open;
mod options;
mod schema;
mod tls;

pub use options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_STATEMENT_TIMEOUT, Migrations, PgOptions,
    PgUrl,
};

/// The PostgreSQL session store. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    url: Arc<PgUrl>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    async fn client(&self, what: &str) -> Result<deadpool_postgres::Client, StoreError> {
        self.pool.get().await.map_err(|e| {
            let why = match &e {
                deadpool_postgres::PoolError::Backend(e) => describe(e),
                e => e.to_string(),
            };
            StoreError::Unavailable(format!("{what}: no connection to {}: {why}", self.url))
        })
    }

    /// A connection and `sql` prepared on it (once per connection: cached).
    async fn prepared(
        &self,
        what: &str,
        sql: &str,
    ) -> Result<(deadpool_postgres::Client, tokio_postgres::Statement), StoreError> {
        let client = self.client(what).await?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|e| db_error(&e, what))?;
        Ok((client, statement))
    }

    /// Runs `sql` and returns its rows.
    async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let (client, statement) = self.prepared(what, sql).await?;
        client
            .query(&statement, params)
            .await
            .map_err(|e| db_error(&e, what))
    }

    /// Runs `sql` and returns the rows it changed.
    async fn execute(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let (client, statement) = self.prepared(what, sql).await?;
        client
            .execute(&statement, params)
            .await
            .map_err(|e| db_error(&e, what))
    }

    /// Claims up to `limit` sessions whose summary is due at `now`, for
    /// `claim_for`: their due times, earliest first. A claimed session is
    /// not handed to another caller (on any replica) until the claim runs
    /// out; rows another claimer is locking are skipped, not waited for
    /// (`FOR UPDATE SKIP LOCKED`). Storing the summary or clearing its due
    /// time ends the claim.
    pub async fn claim_due_summaries(
        &self,
        now: Timestamp,
        claim_for: Duration,
        limit: usize,
    ) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        let until = now.plus(claim_for).0;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = self
            .query(
                "due summaries",
                "UPDATE sessions SET summary_claimed_until = $2
                 WHERE key IN (
                     SELECT key FROM sessions
                     WHERE summary_due_at <= $1
                       AND (summary_claimed_until IS NULL OR summary_claimed_until <= $1)
                     ORDER BY summary_due_at, id
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 RETURNING id, summary_due_at",
                &[&now.0, &until, &limit],
            )
            .await?
            .iter()
            .map(|row| {
                Ok((
                    SessionId::minted(get(row, 0, &"a due summary")?),
                    Timestamp(get(row, 1, &"a due summary")?),
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        rows.sort_by(|a, b| (a.1, a.0.as_str()).cmp(&(b.1, b.0.as_str())));
        Ok(rows)
    }
}

/// A database error without its detail, which may quote values (message
/// content, a key); other errors as the driver words them.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    // The causes say what went wrong (a TLS handshake's: which check of
    // the certificate failed); none carries a password.
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

/// Constraint violations are the caller's fault (a reused seq, an unknown
/// session); anything else is the database's.
fn db_error(e: &tokio_postgres::Error, what: &str) -> StoreError {
    if let Some(code) = e.code() {
        if *code == SqlState::UNIQUE_VIOLATION {
            return StoreError::Rejected(format!("{what}: already stored"));
        }
        if *code == SqlState::FOREIGN_KEY_VIOLATION {
            return StoreError::Rejected(format!("{what}: unknown session"));
        }
        if code.code().starts_with("23") || code.code().starts_with("22") {
            return StoreError::Rejected(format!("{what}: {}", describe(e)));
        }
        if *code == SqlState::QUERY_CANCELED {
            return StoreError::Unavailable(format!("{what}: timed out ({})", describe(e)));
        }
    }
    StoreError::Unavailable(format!("{what}: {}", describe(e)))
}

/// Column `index` of `row`; a value of the wrong type is a corrupt row.
fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
    what: &dyn fmt::Display,
) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|e| StoreError::Corrupt(format!("{what}: column {index}: {e}")))
}

/// A fence as the database's `bigint`.
fn fence_of(fence: Fence) -> Result<i64, StoreError> {
    i64::try_from(fence.0)
        .map_err(|_| StoreError::Rejected(format!("fence {} out of range", fence.0)))
}

/// The columns of a message row, in [`message_row`]'s order.
const MESSAGE_COLUMNS: &str =
    "SELECT seq, role, content, parts::text, metadata::text, created_at FROM messages";

fn message_row(row: &Row, session_id: &SessionId) -> Result<StoredMessage, StoreError> {
    let what = format_args!("a message of session {session_id}");
    StoredRow {
        seq: get(row, 0, &what)?,
        role: get(row, 1, &what)?,
        content: get(row, 2, &what)?,
        parts: get(row, 3, &what)?,
        metadata: get(row, 4, &what)?,
        created_at: get(row, 5, &what)?,
    }
    .decode(session_id)
}

fn summary_of(text: Option<String>, at: Option<i64>) -> Option<SessionSummary> {
    match (text, at) {
        (Some(text), Some(at)) => Some(SessionSummary {
            text,
            created_at: Timestamp(at),
        }),
        _ => None,
    }
}

/// The messages of one append, one array per column (`unnest`'s input).
#[derive(Default)]
struct Columns {
    seq: Vec<i64>,
    role: Vec<&'static str>,
    content: Vec<String>,
    parts: Vec<Option<String>>,
    metadata: Vec<Option<String>>,
    created_at: Vec<i64>,
}

impl Columns {
    fn encode(messages: &[StoredMessage]) -> Result<Columns, StoreError> {
        let mut columns = Columns::default();
        for message in messages {
            let row = NewRow::encode(message)?;
            columns.seq.push(row.seq);
            columns.role.push(row.role);
            columns.content.push(row.content);
            columns.parts.push(row.parts);
            columns.metadata.push(row.metadata);
            columns.created_at.push(row.created_at);
        }
        Ok(columns)
    }
}

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let declaration = codec::encode_declaration(record.declaration.as_ref())?;
        let result = self
            .execute(
                &format!("session {}", record.id),
                "INSERT INTO sessions
                     (id, agent, namespace, owner, created_at, last_active_at, declaration)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &record.id.as_str(),
                    &record.agent,
                    &record.namespace,
                    &record.owner,
                    &record.created_at.0,
                    &record.last_active_at.0,
                    &declaration,
                ],
            )
            .await
            .map(drop);
        log_write_failure(&result, &record.id, None);
        result
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let what = format!("session {id}");
        let rows = self
            .query(
                &what,
                "SELECT agent, namespace, owner, created_at, last_active_at, declaration
                 FROM sessions WHERE id = $1",
                &[&id.as_str()],
            )
            .await?;
        rows.first()
            .map(|row| {
                Ok(SessionRecord {
                    id: id.clone(),
                    agent: get(row, 0, &what)?,
                    namespace: get(row, 1, &what)?,
                    owner: get(row, 2, &what)?,
                    created_at: Timestamp(get(row, 3, &what)?),
                    last_active_at: Timestamp(get(row, 4, &what)?),
                    declaration: codec::decode_declaration(get(row, 5, &what)?, id)?,
                })
            })
            .transpose()
    }

    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        self.append_turn(messages, None).await
    }

    async fn append_turn(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        self.append(messages, summary_due, None).await
    }

    async fn fence_session(&self, id: &SessionId, fence: Fence) -> Result<(), StoreError> {
        let fence = fence_of(fence)?;
        let what = format!("fence of session {id}");
        self.execute(
            &what,
            "UPDATE sessions SET turn_fence = GREATEST(turn_fence, $2) WHERE id = $1",
            &[&id.as_str(), &fence],
        )
        .await
        .map(|_| ())
    }

    /// As `append_turn`, in the same one statement: the session's
    /// `turn_fence` is raised to `fence`, and a session whose fence is
    /// already larger takes nothing.
    async fn append_turn_fenced(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.append(messages, summary_due, Some(fence_of(fence)?))
            .await
    }

    async fn record_call(
        &self,
        step: &agentwire_core::CallMove<'_>,
        fence: Option<Fence>,
    ) -> Result<(), StoreError> {
        self.record(step, fence).await
    }

    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = self
            .query(
                &format!("messages of session {id}"),
                &format!(
                    "{MESSAGE_COLUMNS}
                     WHERE session_key = (SELECT key FROM sessions WHERE id = $1)
                     ORDER BY seq"
                ),
                &[&id.as_str()],
            )
            .await?;
        rows.iter().map(|row| message_row(row, id)).collect()
    }

    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                &format!("latest messages of session {id}"),
                &format!(
                    "{MESSAGE_COLUMNS}
                     WHERE session_key = (SELECT key FROM sessions WHERE id = $1)
                     ORDER BY seq DESC LIMIT $2"
                ),
                &[&id.as_str(), &limit],
            )
            .await?;
        rows.iter().rev().map(|row| message_row(row, id)).collect()
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
        let rows = self
            .query(
                &format!("a page of messages of session {id}"),
                &format!(
                    "{MESSAGE_COLUMNS}
                     WHERE session_key = (SELECT key FROM sessions WHERE id = $1) AND seq > $2
                     ORDER BY seq LIMIT $3"
                ),
                &[&id.as_str(), &after, &limit],
            )
            .await?;
        rows.iter().map(|row| message_row(row, id)).collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.query("ping", "SELECT 1", &[]).await.map(drop)
    }

    async fn list_sessions(
        &self,
        owner: &str,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<Vec<SessionOverview>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let what = "the sessions of an owner";
        let rows = match after {
            None => {
                self.query(
                    what,
                    &format!(
                        "{OVERVIEW_COLUMNS} WHERE owner = $1
                         ORDER BY last_active_at DESC, id DESC LIMIT $2"
                    ),
                    &[&owner, &limit],
                )
                .await?
            }
            Some(cursor) => {
                self.query(
                    what,
                    &format!(
                        "{OVERVIEW_COLUMNS} WHERE owner = $1 AND (last_active_at, id) < ($2, $3)
                         ORDER BY last_active_at DESC, id DESC LIMIT $4"
                    ),
                    &[
                        &owner,
                        &cursor.last_active_at.0,
                        &cursor.id.as_str(),
                        &limit,
                    ],
                )
                .await?
            }
        };
        rows.iter()
            .map(|row| {
                Ok(SessionOverview {
                    record: SessionRecord {
                        id: SessionId::minted(get(row, 0, &what)?),
                        agent: get(row, 1, &what)?,
                        namespace: get(row, 2, &what)?,
                        owner: get(row, 3, &what)?,
                        created_at: Timestamp(get(row, 4, &what)?),
                        last_active_at: Timestamp(get(row, 5, &what)?),
                        // A listing does not read what sessions declared.
                        declaration: None,
                    },
                    summary: summary_of(get(row, 6, &what)?, get(row, 7, &what)?),
                })
            })
            .collect()
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        // Messages (and ledger rows) go with it: ON DELETE CASCADE.
        let result = self
            .execute(
                &format!("session {id}"),
                "DELETE FROM sessions WHERE id = $1",
                &[&id.as_str()],
            )
            .await
            .map(|deleted| deleted > 0);
        log_write_failure(&result, id, None);
        result
    }

    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        let what = format!("summary of session {id}");
        let rows = self
            .query(
                &what,
                "SELECT summary, summary_created_at FROM sessions WHERE id = $1",
                &[&id.as_str()],
            )
            .await?;
        match rows.first() {
            None => Ok(None),
            Some(row) => Ok(summary_of(get(row, 0, &what)?, get(row, 1, &what)?)),
        }
    }

    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        let what = format!("summary schedule of session {id}");
        let result = self
            .execute(
                &what,
                "UPDATE sessions SET summary_due_at = $2 WHERE id = $1",
                &[&id.as_str(), &due.0],
            )
            .await
            .and_then(|updated| {
                if updated == 0 {
                    Err(StoreError::Rejected(format!("{what}: unknown session")))
                } else {
                    Ok(())
                }
            });
        log_write_failure(&result, id, None);
        result
    }

    async fn pending_summaries(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        let what = "pending summaries";
        self.query(
            what,
            "SELECT id, summary_due_at FROM sessions WHERE summary_due_at IS NOT NULL
             ORDER BY summary_due_at, id",
            &[],
        )
        .await?
        .iter()
        .map(|row| {
            Ok((
                SessionId::minted(get(row, 0, &what)?),
                Timestamp(get(row, 1, &what)?),
            ))
        })
        .collect()
    }

    async fn store_summary(
        &self,
        id: &SessionId,
        summary: &SessionSummary,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        let result = self
            .execute(
                &format!("summary of session {id}"),
                "UPDATE sessions SET summary = $2, summary_created_at = $3,
                     summary_due_at = CASE WHEN summary_due_at = $4 THEN NULL
                                           ELSE summary_due_at END,
                     summary_claimed_until = NULL
                 WHERE id = $1",
                &[
                    &id.as_str(),
                    &summary.text,
                    &summary.created_at.0,
                    &handled_due.0,
                ],
            )
            .await
            .map(drop);
        log_write_failure(&result, id, None);
        result
    }

    /// One statement: the claim is taken only while the due time is still
    /// `due` and nobody's claim is running.
    async fn claim_summary(
        &self,
        id: &SessionId,
        due: Timestamp,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        let claimed = self
            .execute(
                &format!("summary claim of session {id}"),
                "UPDATE sessions SET summary_claimed_until = $4
                 WHERE id = $1 AND summary_due_at = $2
                   AND (summary_claimed_until IS NULL OR summary_claimed_until <= $3)",
                &[&id.as_str(), &due.0, &now.0, &until.0],
            )
            .await?;
        Ok(claimed == 1)
    }

    async fn clear_summary_due(
        &self,
        id: &SessionId,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        let result = self
            .execute(
                &format!("summary schedule of session {id}"),
                "UPDATE sessions SET summary_due_at = NULL, summary_claimed_until = NULL
                 WHERE id = $1 AND summary_due_at = $2",
                &[&id.as_str(), &handled_due.0],
            )
            .await
            .map(drop);
        log_write_failure(&result, id, None);
        result
    }
}

/// One append's one statement: the session's row (activity, head, the
/// summary's due time when given as `$10`, the turn fence when given as
/// `$11`), the ledger (`postgres/ledger.rs`): the calls an earlier lease
/// left open settled with `$23`, and the rows of this append's tool calls
/// (`$12`–`$22`) created or, for the calls its turn recorded as it ran,
/// settled; and its messages' rows (`$4`–`$9`, one array per column, under
/// the key the update returns). A call's turn is its question: in the
/// append, else the latest typed one stored.
const APPEND: &str = "WITH s AS (
         UPDATE sessions
         SET last_active_at = GREATEST(last_active_at, $2),
             seq_head = GREATEST(seq_head, $3),
             summary_due_at = COALESCE($10, summary_due_at),
             turn_fence = GREATEST(turn_fence, COALESCE($11, turn_fence))
         WHERE id = $1 AND turn_fence <= COALESCE($11, turn_fence)
         RETURNING key),
     interrupted AS (
         UPDATE tool_calls t
         SET state = 'denied', outcome = $23::text::jsonb, finished_at = $2, updated_at = $2
         FROM s
         WHERE t.session_key = s.key AND t.state IN ('requested', 'acked', 'running')
           AND t.fence < $11),
     calls AS (
         INSERT INTO tool_calls AS t (session_key, call_seq, call_ordinal, call_id, turn_id,
                                      side, name, args_digest, state, outcome, requested_at,
                                      finished_at, updated_at, fence)
         SELECT s.key, c.call_seq, c.call_ordinal, c.call_id,
                COALESCE(c.question_seq,
                         (SELECT max(q.seq) FROM messages q
                          WHERE q.session_key = s.key AND q.role = 'user'
                            AND (q.metadata ->> 'via') IS DISTINCT FROM 'voice'),
                         -1)::text,
                c.side, c.name, c.args_digest, c.state, c.outcome::jsonb,
                c.requested_at, c.finished_at, $2, $11
         FROM s, unnest($12::bigint[], $13::text[], $14::bigint[], $15::text[],
                        $16::text[], $17::text[], $18::text[], $19::text[],
                        $20::bigint[], $21::bigint[], $22::int[])
                 AS c (call_seq, call_id, question_seq, side, name, args_digest, state,
                       outcome, requested_at, finished_at, call_ordinal)
         ON CONFLICT (session_key, turn_id, call_ordinal) DO UPDATE
         SET call_seq = EXCLUDED.call_seq, state = EXCLUDED.state,
             outcome = EXCLUDED.outcome, finished_at = EXCLUDED.finished_at,
             updated_at = EXCLUDED.updated_at, fence = EXCLUDED.fence)
     INSERT INTO messages (session_key, seq, role, content, parts, metadata, created_at)
     SELECT s.key, m.seq, m.role, m.content, m.parts::jsonb, m.metadata::jsonb,
            m.created_at
     FROM s, unnest($4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[],
                    $9::bigint[])
             AS m (seq, role, content, parts, metadata, created_at)";

impl PgStore {
    /// One statement: the session's row (activity, head, the summary's due
    /// time when given, the turn fence when given), the rows of the
    /// messages and the ledger rows of their tool calls.
    async fn append(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        let Some(session_id) = codec::session_of(messages)? else {
            return Ok(());
        };
        let columns = Columns::encode(messages)?;
        let calls = ledger::CallColumns::encode(messages)?;
        let latest = columns.created_at.iter().copied().max().unwrap_or_default();
        let head = columns.seq.iter().copied().max().unwrap_or_default();
        let session = format!("messages of session {session_id}");
        let result = self
            .execute(
                &session,
                APPEND,
                &[
                    &session_id.as_str(),
                    &latest,
                    &head,
                    &columns.seq,
                    &columns.role,
                    &columns.content,
                    &columns.parts,
                    &columns.metadata,
                    &columns.created_at,
                    &summary_due.map(|due| due.0),
                    &fence,
                    &calls.call_seq,
                    &calls.call_id,
                    &calls.question_seq,
                    &calls.side,
                    &calls.name,
                    &calls.args_digest,
                    &calls.state,
                    &calls.outcome,
                    &calls.requested_at,
                    &calls.finished_at,
                    &calls.call_ordinal,
                    &ledger::interrupted()?,
                ],
            )
            .await;
        let result = match result {
            Ok(0) if fence.is_some() => Err(self.why_nothing_written(session_id, &session).await),
            Ok(0) => Err(StoreError::Rejected(format!("{session}: unknown session"))),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        log_write_failure(&result, session_id, columns.seq.first().copied());
        result
    }

    /// Why a fenced write (`what`) wrote nothing: the session is unknown,
    /// or a later lease wrote it (rare: read only then).
    async fn why_nothing_written(&self, id: &SessionId, what: &str) -> StoreError {
        match self
            .query(
                what,
                "SELECT 1 FROM sessions WHERE id = $1",
                &[&id.as_str()],
            )
            .await
        {
            Ok(rows) if rows.is_empty() => StoreError::Rejected(format!("{what}: unknown session")),
            Ok(_) => StoreError::Fenced(format!("{what}: a later turn lease wrote it")),
            Err(e) => e,
        }
    }
}

#[cfg(test)]
mod tests;

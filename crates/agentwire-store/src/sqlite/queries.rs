//! The SQL of each store operation, run on the worker thread's connection.

use super::*;

pub(super) fn insert_session(conn: &Connection, record: &SessionRecord) -> Result<(), StoreError> {
    let declaration = codec::encode_declaration(record.declaration.as_ref())?;
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sessions
             (id, agent, namespace, owner, created_at, last_active_at, declaration)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut stmt| {
        stmt.execute((
            record.id.as_str(),
            &record.agent,
            &record.namespace,
            &record.owner,
            record.created_at.0,
            record.last_active_at.0,
            declaration,
        ))
    })
    .map_err(|e| write_error(e, &format_args!("session {}", record.id)))?;
    Ok(())
}

/// Advances the session's `last_active_at` once, to the latest of `rows`
/// (of one session), and inserts them under its key. The update finds the
/// session by its id and returns the key, so the inserts and their
/// foreign-key checks go by rowid; no row back means no such session.
/// The rows of one session and, when `summary_due` is set, the summary's new
/// due time, in the same update of the session's row (a statement of its
/// own: naming `summary_due_at` in every append would move its index entry
/// on every write).
pub(super) fn append_messages(
    conn: &Connection,
    session_id: &SessionId,
    rows: &[NewRow],
    summary_due: Option<Timestamp>,
) -> Result<(), StoreError> {
    let latest = rows.iter().map(|r| r.created_at).max().unwrap_or_default();
    let session = format_args!("session {session_id}");
    let touched = match summary_due {
        None => conn
            .prepare_cached(
                "UPDATE sessions SET last_active_at = MAX(last_active_at, ?2) WHERE id = ?1
                 RETURNING key",
            )
            .and_then(|mut stmt| {
                stmt.query_row((session_id.as_str(), latest), |row| row.get(0))
                    .optional()
            }),
        Some(due) => conn
            .prepare_cached(
                "UPDATE sessions SET last_active_at = MAX(last_active_at, ?2), summary_due_at = ?3
                 WHERE id = ?1 RETURNING key",
            )
            .and_then(|mut stmt| {
                stmt.query_row((session_id.as_str(), latest, due.0), |row| row.get(0))
                    .optional()
            }),
    };
    let key: i64 = touched
        .map_err(|e| write_error(e, &session))?
        .ok_or_else(|| StoreError::Rejected(format!("{session}: unknown session")))?;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO messages (session_key, seq, role, content, parts, metadata, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(|e| write_error(e, &format_args!("messages of {session}")))?;
    for row in rows {
        insert
            .execute((
                key,
                row.seq,
                row.role,
                &row.content,
                &row.parts,
                &row.metadata,
                row.created_at,
            ))
            .map_err(|e| write_error(e, &format_args!("message {} of {session}", row.seq)))?;
    }
    Ok(())
}

pub(super) fn load_session(
    conn: &Connection,
    id: &SessionId,
) -> Result<Option<SessionRecord>, StoreError> {
    let found = conn
        .prepare_cached(
            "SELECT agent, namespace, owner, created_at, last_active_at, declaration
             FROM sessions WHERE id = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([id.as_str()], |row| {
                let record = SessionRecord {
                    id: id.clone(),
                    agent: row.get(0)?,
                    namespace: row.get(1)?,
                    owner: row.get(2)?,
                    created_at: Timestamp(row.get(3)?),
                    last_active_at: Timestamp(row.get(4)?),
                    declaration: None,
                };
                Ok((record, row.get::<_, Option<String>>(5)?))
            })
            .optional()
        })
        .map_err(|e| read_error(e, &format_args!("session {id}")))?;
    found
        .map(|(record, declaration)| {
            Ok(SessionRecord {
                declaration: codec::decode_declaration(declaration, id)?,
                ..record
            })
        })
        .transpose()
}

pub(super) fn load_messages(
    conn: &Connection,
    id: &SessionId,
) -> Result<Vec<StoredRow>, StoreError> {
    conn.prepare_cached(&format!(
        "{} WHERE session_key = (SELECT key FROM sessions WHERE id = ?1) ORDER BY seq",
        pages::COLUMNS
    ))
    .and_then(|mut stmt| stmt.query_map([id.as_str()], pages::message_row)?.collect())
    .map_err(|e| read_error(e, &format_args!("messages of session {id}")))
}

pub(super) fn list_sessions(
    conn: &Connection,
    owner: &str,
    after: Option<&SessionCursor>,
    limit: i64,
) -> Result<Vec<SessionOverview>, StoreError> {
    let map = |row: &rusqlite::Row<'_>| -> rusqlite::Result<SessionOverview> {
        let summary = match (
            row.get::<_, Option<String>>(6)?,
            row.get::<_, Option<i64>>(7)?,
        ) {
            (Some(text), Some(at)) => Some(SessionSummary {
                text,
                created_at: Timestamp(at),
            }),
            _ => None,
        };
        Ok(SessionOverview {
            record: SessionRecord {
                id: SessionId::minted(row.get(0)?),
                agent: row.get(1)?,
                namespace: row.get(2)?,
                owner: row.get(3)?,
                created_at: Timestamp(row.get(4)?),
                last_active_at: Timestamp(row.get(5)?),
                // A listing does not read what sessions declared.
                declaration: None,
            },
            summary,
        })
    };
    let result = match after {
        None => conn
            .prepare_cached(&format!(
                "{OVERVIEW_COLUMNS} WHERE owner = ?1 ORDER BY last_active_at DESC, id DESC LIMIT ?2"
            ))
            .and_then(|mut stmt| stmt.query_map((owner, limit), map)?.collect()),
        Some(cursor) => conn
            .prepare_cached(&format!(
                "{OVERVIEW_COLUMNS} WHERE owner = ?1 AND (last_active_at, id) < (?2, ?3)
                 ORDER BY last_active_at DESC, id DESC LIMIT ?4"
            ))
            .and_then(|mut stmt| {
                stmt.query_map(
                    (owner, cursor.last_active_at.0, cursor.id.as_str(), limit),
                    map,
                )?
                .collect()
            }),
    };
    result.map_err(|e| read_error(e, &"the sessions of an owner"))
}

pub(super) fn delete_session(conn: &Connection, id: &SessionId) -> Result<bool, StoreError> {
    let what = format_args!("session {id}");
    conn.prepare_cached(
        "DELETE FROM messages WHERE session_key = (SELECT key FROM sessions WHERE id = ?1)",
    )
    .and_then(|mut stmt| stmt.execute([id.as_str()]))
    .map_err(|e| write_error(e, &what))?;
    let deleted = conn
        .prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute([id.as_str()]))
        .map_err(|e| write_error(e, &what))?;
    Ok(deleted > 0)
}

pub(super) fn load_summary(
    conn: &Connection,
    id: &SessionId,
) -> Result<Option<SessionSummary>, StoreError> {
    conn.prepare_cached("SELECT summary, summary_created_at FROM sessions WHERE id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([id.as_str()], |row| {
                Ok(match (row.get::<_, Option<String>>(0)?, row.get(1)?) {
                    (Some(text), Some(at)) => Some(SessionSummary {
                        text,
                        created_at: Timestamp(at),
                    }),
                    _ => None,
                })
            })
            .optional()
        })
        .map(Option::flatten)
        .map_err(|e| read_error(e, &format_args!("summary of session {id}")))
}

pub(super) fn schedule_summary(
    conn: &Connection,
    id: &SessionId,
    due: Timestamp,
) -> Result<(), StoreError> {
    let what = format_args!("summary schedule of session {id}");
    let updated = conn
        .prepare_cached("UPDATE sessions SET summary_due_at = ?2 WHERE id = ?1")
        .and_then(|mut stmt| stmt.execute((id.as_str(), due.0)))
        .map_err(|e| write_error(e, &what))?;
    if updated == 0 {
        return Err(StoreError::Rejected(format!("{what}: unknown session")));
    }
    Ok(())
}

pub(super) fn pending_summaries(
    conn: &Connection,
) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
    conn.prepare_cached(
        "SELECT id, summary_due_at FROM sessions WHERE summary_due_at IS NOT NULL
         ORDER BY summary_due_at, id",
    )
    .and_then(|mut stmt| {
        stmt.query_map([], |row| {
            Ok((SessionId::minted(row.get(0)?), Timestamp(row.get(1)?)))
        })?
        .collect()
    })
    .map_err(|e| read_error(e, &"pending summaries"))
}

pub(super) fn store_summary(
    conn: &Connection,
    id: &SessionId,
    summary: &SessionSummary,
    handled_due: Timestamp,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE sessions SET summary = ?2, summary_created_at = ?3,
             summary_due_at = CASE WHEN summary_due_at = ?4 THEN NULL ELSE summary_due_at END
         WHERE id = ?1",
    )
    .and_then(|mut stmt| {
        stmt.execute((
            id.as_str(),
            &summary.text,
            summary.created_at.0,
            handled_due.0,
        ))
    })
    .map_err(|e| write_error(e, &format_args!("summary of session {id}")))?;
    Ok(())
}

pub(super) fn clear_summary_due(
    conn: &Connection,
    id: &SessionId,
    handled_due: Timestamp,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE sessions SET summary_due_at = NULL WHERE id = ?1 AND summary_due_at = ?2",
    )
    .and_then(|mut stmt| stmt.execute((id.as_str(), handled_due.0)))
    .map_err(|e| write_error(e, &format_args!("summary schedule of session {id}")))?;
    Ok(())
}

pub(super) fn ping(conn: &Connection) -> Result<(), StoreError> {
    conn.prepare_cached("SELECT 1")
        .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, i64>(0)))
        .map(drop)
        .map_err(|e| StoreError::Unavailable(format!("ping: {e}")))
}

/// Constraint violations are the caller's fault (a reused seq, an unknown
/// session); anything else is the database's. SQLite's messages name columns,
/// never values.
pub(super) fn write_error(e: rusqlite::Error, what: &dyn fmt::Display) -> StoreError {
    if let Some(err) = e.sqlite_error()
        && err.code == ErrorCode::ConstraintViolation
    {
        let why = match err.extended_code {
            ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE => "already stored",
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => "unknown session",
            _ => "constraint violated",
        };
        return StoreError::Rejected(format!("{what}: {why}"));
    }
    StoreError::Unavailable(format!("{what}: {e}"))
}

/// A value of the wrong type is a corrupt row; anything else is the database's.
pub(super) fn read_error(e: rusqlite::Error, what: &dyn fmt::Display) -> StoreError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::Utf8Error(..) => StoreError::Corrupt(format!("{what}: {e}")),
        e => StoreError::Unavailable(format!("{what}: {e}")),
    }
}

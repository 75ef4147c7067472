//! The bounded reads of a session's messages: its latest ones (what a
//! resumed session's next turn can see) and a page after a `seq` (the
//! sessions API). Both walk the messages' primary key, (session, `seq`), from
//! one end, so they cost what they return however long the session is.

use super::*;

/// The columns of a message row, in [`message_row`]'s order.
pub(super) const COLUMNS: &str =
    "SELECT seq, role, content, parts, metadata, created_at FROM messages";

/// Newest first, so `LIMIT` stops the walk; reversed by the caller.
const RECENT: &str = "WHERE session_key = (SELECT key FROM sessions WHERE id = ?1)
                      ORDER BY seq DESC LIMIT ?2";

const AFTER: &str = "WHERE session_key = (SELECT key FROM sessions WHERE id = ?1) AND seq > ?2
                     ORDER BY seq LIMIT ?3";

/// The latest `limit` messages of session `id`, by `seq`.
pub(super) fn load_recent_messages(
    conn: &Connection,
    id: &SessionId,
    limit: i64,
) -> Result<Vec<StoredRow>, StoreError> {
    let mut rows: Vec<StoredRow> = conn
        .prepare_cached(&format!("{COLUMNS} {RECENT}"))
        .and_then(|mut stmt| stmt.query_map((id.as_str(), limit), message_row)?.collect())
        .map_err(|e| read_error(e, &format_args!("latest messages of session {id}")))?;
    rows.reverse();
    Ok(rows)
}

/// Up to `limit` messages of session `id` with a `seq` above `after`, by
/// `seq`.
pub(super) fn load_messages_after(
    conn: &Connection,
    id: &SessionId,
    after: i64,
    limit: i64,
) -> Result<Vec<StoredRow>, StoreError> {
    conn.prepare_cached(&format!("{COLUMNS} {AFTER}"))
        .and_then(|mut stmt| {
            stmt.query_map((id.as_str(), after, limit), message_row)?
                .collect()
        })
        .map_err(|e| read_error(e, &format_args!("a page of messages of session {id}")))
}

pub(super) fn message_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRow> {
    Ok(StoredRow {
        seq: row.get(0)?,
        role: row.get(1)?,
        content: row.get(2)?,
        parts: row.get(3)?,
        metadata: row.get(4)?,
        created_at: row.get(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What SQLite plans for `sql`, one line per step.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let steps: Vec<String> = stmt
            .query_map([], |row| row.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        steps.join("\n")
    }

    #[test]
    fn both_reads_search_the_primary_key_and_sort_nothing() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let recent = format!("{COLUMNS} {RECENT}").replace("?2", "100");
        let after = format!("{COLUMNS} {AFTER}")
            .replace("?2", "5")
            .replace("?3", "100");
        for sql in [recent, after] {
            let sql = sql.replace("?1", "'s1'");
            let plan = plan(&conn, &sql);
            assert!(
                plan.contains("SEARCH messages USING") && plan.contains("(session_key=?"),
                "{plan}"
            );
            // Rows come out of the index in order: no sort of the session.
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }
}

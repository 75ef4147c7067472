//! The session database's schema: its numbered migrations, how they are
//! applied (once, under the write lock, when several processes open a fresh
//! file together), and the integrity check run before them.

use rusqlite::{Connection, TransactionBehavior};
use tracing::info;

/// Schema migrations, applied in order; `PRAGMA user_version` counts how many
/// have run. Append new versions; never edit a released one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: sessions and their messages.
    "CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        namespace TEXT NOT NULL,
        owner TEXT,
        created_at INTEGER NOT NULL,
        last_active_at INTEGER NOT NULL
    );
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        parts TEXT,
        metadata TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
    );",
    // 2: summaries (the text, when it was written, when the next one is due)
    // and the owner's listing, newest first.
    "ALTER TABLE sessions ADD COLUMN summary TEXT;
    ALTER TABLE sessions ADD COLUMN summary_created_at INTEGER;
    ALTER TABLE sessions ADD COLUMN summary_due_at INTEGER;
    CREATE INDEX sessions_by_owner ON sessions (owner, last_active_at, id);
    CREATE INDEX sessions_summary_due ON sessions (summary_due_at)
        WHERE summary_due_at IS NOT NULL;",
    // 3: an integer session key. Messages keyed by (36-character id, seq)
    // scattered every insert over a wide index; keyed by (rowid of the
    // session, seq) the index is a quarter the size and its pages stay hot,
    // and the per-append `last_active_at` update and the foreign-key check
    // find the session by rowid. The owner's listing never reads anonymous
    // sessions (`owner = ?` implies `owner IS NOT NULL`), so they leave its
    // index, and bumping their `last_active_at` touches the row alone. The
    // public id stays the session's name everywhere outside this file.
    // Messages can only be orphaned with foreign keys off (this store always
    // has them on); such rows were unreachable and are not carried over.
    "ALTER TABLE sessions RENAME TO sessions_v2;
    ALTER TABLE messages RENAME TO messages_v2;
    CREATE TABLE sessions (
        key INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        agent TEXT NOT NULL,
        namespace TEXT NOT NULL,
        owner TEXT,
        created_at INTEGER NOT NULL,
        last_active_at INTEGER NOT NULL,
        summary TEXT,
        summary_created_at INTEGER,
        summary_due_at INTEGER
    );
    CREATE TABLE messages (
        session_key INTEGER NOT NULL REFERENCES sessions(key),
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        parts TEXT,
        metadata TEXT,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (session_key, seq)
    );
    INSERT INTO sessions (id, agent, namespace, owner, created_at, last_active_at,
                          summary, summary_created_at, summary_due_at)
        SELECT id, agent, namespace, owner, created_at, last_active_at,
               summary, summary_created_at, summary_due_at
        FROM sessions_v2 ORDER BY rowid;
    INSERT INTO messages (session_key, seq, role, content, parts, metadata, created_at)
        SELECT s.key, m.seq, m.role, m.content, m.parts, m.metadata, m.created_at
        FROM messages_v2 m JOIN sessions s ON s.id = m.session_id
        ORDER BY s.key, m.seq;
    DROP TABLE messages_v2;
    DROP TABLE sessions_v2;
    CREATE INDEX sessions_by_owner ON sessions (owner, last_active_at, id)
        WHERE owner IS NOT NULL;
    CREATE INDEX sessions_summary_due ON sessions (summary_due_at)
        WHERE summary_due_at IS NOT NULL;",
    // 4: agent memory. A memory's scope is four strings (empty where its
    // tier has no such key) and a token of them the text index holds, so a
    // recall searches one scope's rows (`crate::agent_memory`). A live
    // memory's subject (`about_kind`, `about_key`) is unique in its scope;
    // the versions it replaced are in `memory_history`. A forgotten memory
    // keeps its row, hidden from every read, until the grace purges it.
    "CREATE TABLE memories (
        key INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        tier TEXT NOT NULL,
        owner TEXT NOT NULL,
        agent TEXT NOT NULL,
        facet TEXT NOT NULL,
        scope_token TEXT NOT NULL,
        kind TEXT NOT NULL,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL,
        confidence REAL NOT NULL,
        category TEXT,
        about_kind TEXT,
        about_key TEXT,
        purpose TEXT,
        title TEXT,
        summary TEXT,
        session_id TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        expires_at INTEGER,
        forgotten_at INTEGER
    );
    CREATE INDEX memories_by_scope ON memories (owner, agent, facet, tier, updated_at)
        WHERE forgotten_at IS NULL;
    CREATE UNIQUE INDEX memories_by_subject
        ON memories (owner, agent, facet, tier, about_kind, about_key)
        WHERE about_kind IS NOT NULL AND forgotten_at IS NULL;
    CREATE INDEX memories_forgotten ON memories (forgotten_at)
        WHERE forgotten_at IS NOT NULL;
    CREATE TABLE memory_history (
        memory_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL,
        confidence REAL NOT NULL,
        category TEXT,
        purpose TEXT,
        title TEXT,
        summary TEXT,
        session_id TEXT,
        valid_from INTEGER NOT NULL,
        valid_until INTEGER NOT NULL
    );
    CREATE INDEX memory_history_by_memory ON memory_history (memory_id);
    CREATE VIRTUAL TABLE memories_text USING fts5(
        scope_token, content, title, summary, content='memories', content_rowid='key'
    );
    CREATE TRIGGER memories_text_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_text (rowid, scope_token, content, title, summary)
            VALUES (new.key, new.scope_token, new.content, new.title, new.summary);
    END;
    CREATE TRIGGER memories_text_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_text (memories_text, rowid, scope_token, content, title, summary)
            VALUES ('delete', old.key, old.scope_token, old.content, old.title, old.summary);
    END;
    CREATE TRIGGER memories_text_update
    AFTER UPDATE OF scope_token, content, title, summary ON memories BEGIN
        INSERT INTO memories_text (memories_text, rowid, scope_token, content, title, summary)
            VALUES ('delete', old.key, old.scope_token, old.content, old.title, old.summary);
        INSERT INTO memories_text (rowid, scope_token, content, title, summary)
            VALUES (new.key, new.scope_token, new.content, new.title, new.summary);
    END;",
    // 5: the owners' requests to delete all their memories: who, how many,
    // when; never what.
    "CREATE TABLE memory_audit (
        at INTEGER NOT NULL,
        owner TEXT NOT NULL,
        action TEXT NOT NULL,
        memories INTEGER NOT NULL
    );",
    // 6: expired memories are purged like forgotten ones.
    "CREATE INDEX memories_expiring ON memories (expires_at)
        WHERE expires_at IS NOT NULL;",
    // 7: a memory's embedding (little-endian f32s), when the agent's memory
    // has an embedder; searched exactly within a scope, through
    // `memories_by_scope`.
    "ALTER TABLE memories ADD COLUMN vector BLOB;",
    // 8: what a session declared when it opened (Omnia's `declare`, JSON),
    // for its resumption; NULL when it declared nothing.
    "ALTER TABLE sessions ADD COLUMN declaration TEXT;",
];

pub(super) enum IntegrityError {
    /// The first problem SQLite found.
    Damaged(String),
    Sqlite(rusqlite::Error),
}

/// `PRAGMA quick_check`: a file damaged past its header opens and answers
/// until a query reaches the bad pages, so it is read once, whole, before
/// the server binds its port (about 0.4 s for 240 MB, warm). Damage is then
/// a startup error instead of turns that fail later.
pub(super) fn check_integrity(conn: &Connection) -> Result<(), IntegrityError> {
    let first: String = conn
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(IntegrityError::Sqlite)?;
    if first.eq_ignore_ascii_case("ok") {
        Ok(())
    } else {
        Err(IntegrityError::Damaged(first.replace('\n', " ")))
    }
}

#[derive(Debug)]
pub(super) enum MigrateError {
    Newer { found: i64, known: usize },
    Invalid(i64),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for MigrateError {
    fn from(e: rusqlite::Error) -> MigrateError {
        MigrateError::Sqlite(e)
    }
}

/// The number of migrations already applied, checked against [`MIGRATIONS`].
fn schema_version(conn: &Connection) -> Result<usize, MigrateError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let applied = usize::try_from(found).map_err(|_| MigrateError::Invalid(found))?;
    if applied > MIGRATIONS.len() {
        return Err(MigrateError::Newer {
            found,
            known: MIGRATIONS.len(),
        });
    }
    Ok(applied)
}

pub(super) fn migrate(conn: &mut Connection) -> Result<(), MigrateError> {
    if schema_version(conn)? == MIGRATIONS.len() {
        return Ok(());
    }
    // Immediate: take the write lock before re-reading the version, so two
    // processes opening a fresh file cannot both apply a migration.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let applied = schema_version(&tx)?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(sql)?;
        info!(version = index + 1, "migrating session database");
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64)?;
    tx.commit()?;
    Ok(())
}

//! The PostgreSQL schema: numbered, additive migrations embedded in the
//! binary, applied once per database under an advisory lock, so replicas
//! starting together on an empty database apply each exactly once.
//!
//! `schema_migrations` records each applied version with its name and time.
//! Migrations only add (expand now, contract a release later), so a binary
//! runs against a schema newer than it knows (a rolling deploy's old
//! replicas): it applies what it knows and is missing, and ignores versions
//! above its own.

use tokio_postgres::Client;
use tracing::info;

/// The migrations, in order. Append new versions; never edit a released one.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "sessions",
        sql: include_str!("0001_sessions.sql"),
    },
    Migration {
        version: 2,
        name: "tool_calls",
        sql: include_str!("0002_tool_calls.sql"),
    },
    Migration {
        version: 3,
        name: "tool_calls_per_turn",
        sql: include_str!("0003_tool_calls_per_turn.sql"),
    },
    Migration {
        version: 4,
        name: "memories",
        sql: include_str!("0004_memories.sql"),
    },
    Migration {
        version: 5,
        name: "memory_audit",
        sql: include_str!("0005_memory_audit.sql"),
    },
    Migration {
        version: 6,
        name: "memories_expiring",
        sql: include_str!("0006_memories_expiring.sql"),
    },
    Migration {
        version: 7,
        name: "memory_vectors",
        sql: include_str!("0007_memory_vectors.sql"),
    },
    Migration {
        version: 8,
        name: "session_declarations",
        sql: include_str!("0008_session_declarations.sql"),
    },
    Migration {
        version: 9,
        name: "tool_calls_as_they_move",
        sql: include_str!("0009_tool_calls_as_they_move.sql"),
    },
];

pub(super) struct Migration {
    pub(super) version: i32,
    pub(super) name: &'static str,
    pub(super) sql: &'static str,
}

/// The advisory lock key migrations run under ("agentwir" in ASCII):
/// session-level, so it is released when the migrating connection closes,
/// whatever happened on it.
const MIGRATION_LOCK: i64 = 0x6167_656e_7477_6972;

const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// Applies the missing migrations on `client` (a connection of its own).
/// Returns the versions this call applied.
pub(super) async fn migrate(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let result = apply_missing(client).await;
    // Released explicitly on success and failure alike; closing the
    // connection would release it too.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    let applied = result?;
    unlocked?;
    Ok(applied)
}

/// The migrations this build knows that the database has not applied
/// (every one, on a database never migrated). Takes no lock: it only reads.
pub(super) async fn missing(client: &Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    let ledger: Option<String> = client
        .query_one("SELECT to_regclass('schema_migrations')::text", &[])
        .await?
        .get(0);
    let done: Vec<i32> = match ledger {
        None => Vec::new(),
        Some(_) => client
            .query("SELECT version FROM schema_migrations", &[])
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect(),
    };
    Ok(MIGRATIONS
        .iter()
        .map(|m| m.version)
        .filter(|version| !done.contains(version))
        .collect())
}

async fn apply_missing(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    // Under the lock: two replicas cannot race on creating it.
    client.batch_execute(CREATE_LEDGER).await?;
    let done: Vec<i32> = client
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut applied = Vec::new();
    for migration in MIGRATIONS {
        if done.contains(&migration.version) {
            continue;
        }
        let tx = client.transaction().await?;
        tx.batch_execute(migration.sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await?;
        tx.commit().await?;
        info!(
            version = migration.version,
            name = migration.name,
            "migrated session database"
        );
        applied.push(migration.version);
    }
    if let Some(newest) = done.iter().max()
        && *newest > MIGRATIONS.last().map_or(0, |m| m.version)
    {
        info!(
            found = newest,
            "session database schema is newer than this build; its additions are ignored"
        );
    }
    Ok(applied)
}

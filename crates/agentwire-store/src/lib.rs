//! Session store adapters for the [`SessionStore`](agentwire_core::SessionStore)
//! port.
//!
//! - [`SqliteStore`]: the embedded, durable default. One dedicated thread owns
//!   the connection and group-commits batches of commands; async callers only
//!   exchange messages with it.
//! - [`PgStore`] (feature `postgres`): PostgreSQL through a connection
//!   pool, for several replicas over one database; a turn's writes are one
//!   statement.
//! - [`MemoryStore`]: `storage.sessions: memory`; nothing survives a restart.
//!
//! All behave the same way (the tests run one conformance suite against
//! each): creating an existing session leaves it untouched, appending advances
//! the session's `last_active_at`, and reusing a `seq` or appending to an
//! unknown session is rejected. An owner's sessions are listed newest first
//! by keyset (`last_active_at`, `id`, both descending); a summary's due time
//! is cleared only by the job that handled that due time.

mod agent_memory;
mod codec;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod engine_writes;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod redact;
mod sqlite;

pub use memory::{DEFAULT_MAX_SESSIONS, MemoryLimits, MemoryStore};
#[cfg(feature = "postgres")]
pub use postgres::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_STATEMENT_TIMEOUT, Migrations, PgOptions,
    PgStore, PgUrl,
};
pub use redact::{REDACTED, redact_url};
pub use sqlite::SqliteStore;

use agentwire_core::{SessionId, StoreError};
use tracing::{debug, warn};

/// Logs a failed write by session and seq, never by content: a rejected
/// one (the caller's: a reused seq, an unknown session) at debug, any other
/// as a warning.
fn log_write_failure<T>(result: &Result<T, StoreError>, session_id: &SessionId, seq: Option<i64>) {
    match result {
        Ok(_) => {}
        Err(e @ StoreError::Rejected(_)) => {
            debug!(session_id = %session_id, seq, error = %e, "session store write rejected");
        }
        Err(e) => warn!(session_id = %session_id, seq, error = %e, "session store write failed"),
    }
}

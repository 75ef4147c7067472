//! Session store adapters for the [`SessionStore`](agentwire_core::SessionStore)
//! port.
//!
//! - [`SqliteStore`]: the embedded, durable default. One dedicated thread owns
//!   the connection and group-commits batches of commands; async callers only
//!   exchange messages with it.
//! - [`MemoryStore`]: `storage.sessions: memory`; nothing survives a restart.
//!
//! Both behave the same way (the tests run one conformance suite against
//! both): creating an existing session leaves it untouched, appending advances
//! the session's `last_active_at`, and reusing a `seq` or appending to an
//! unknown session is rejected. An owner's sessions are listed newest first
//! by keyset (`last_active_at`, `id`, both descending); a summary's due time
//! is cleared only by the job that handled that due time.

mod codec;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod engine_writes;
mod memory;
mod sqlite;

pub use memory::{DEFAULT_MAX_SESSIONS, MemoryLimits, MemoryStore};
pub use sqlite::SqliteStore;

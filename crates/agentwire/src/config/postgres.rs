//! `storage.sessions: postgres://…` and `storage.postgres`: the PostgreSQL
//! session store's URL, pool and timeouts.
//!
//! The URL may carry a password: no error here quotes it, and the parsed
//! [`agentwire_store::PgUrl`] prints itself redacted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// `storage.postgres`: used when `storage.sessions` is a `postgres://` URL.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawPostgres {
    /// The most connections each server process opens to the database (at
    /// least 1). With N replicas the database sees up to N × this.
    pub(super) pool_size: usize,
    /// How long opening a connection, or waiting for a free one in the
    /// pool, may take before the operation fails (a turn then fails, and
    /// `/readyz` reports the store down).
    pub(super) connect_timeout: ConfigDuration,
    /// The server-side `statement_timeout` of every connection: a statement
    /// running longer is cancelled by PostgreSQL and the operation fails.
    /// Migrations at startup run under it too.
    pub(super) statement_timeout: ConfigDuration,
    /// Apply the schema's missing migrations when the server starts (once,
    /// under an advisory lock, however many replicas start together). With
    /// `false` the server applies none and refuses to start on a schema
    /// that lacks one: run `agentwire migrate` first (for a database role
    /// the servers' lacks, or migrations as a deploy step of their own).
    pub(super) migrate_on_start: bool,
}

impl Default for RawPostgres {
    fn default() -> RawPostgres {
        RawPostgres {
            pool_size: 16,
            connect_timeout: ConfigDuration::secs(5),
            statement_timeout: ConfigDuration::secs(30),
            migrate_on_start: true,
        }
    }
}

/// Whether `value` of `storage.sessions` names a PostgreSQL database.
pub(super) fn is_postgres_url(value: &str) -> bool {
    value.starts_with("postgres://") || value.starts_with("postgresql://")
}

/// The store's options from the URL in `storage.sessions` and
/// `storage.postgres`.
#[cfg(feature = "postgres")]
pub(super) fn validate(
    url: &str,
    raw: RawPostgres,
) -> Result<agentwire_store::PgOptions, ConfigError> {
    let url = agentwire_store::PgUrl::parse(url)
        .map_err(|why| ConfigError::new("storage.sessions", why))?;
    if raw.pool_size == 0 {
        return Err(ConfigError::new(
            "storage.postgres.pool_size",
            "must be at least 1",
        ));
    }
    for (key, value) in [
        ("connect_timeout", &raw.connect_timeout),
        ("statement_timeout", &raw.statement_timeout),
    ] {
        if value.0.is_zero() {
            return Err(ConfigError::new(
                format!("storage.postgres.{key}"),
                "must be greater than 0",
            ));
        }
    }
    Ok(agentwire_store::PgOptions {
        url,
        pool_size: raw.pool_size,
        connect_timeout: Some(raw.connect_timeout.0),
        statement_timeout: Some(raw.statement_timeout.0),
        migrations: match raw.migrate_on_start {
            true => agentwire_store::Migrations::Apply,
            false => agentwire_store::Migrations::Require,
        },
    })
}

/// Without the `postgres` feature: a startup error naming the key.
#[cfg(not(feature = "postgres"))]
pub(super) fn validate(
    _url: &str,
    _raw: RawPostgres,
) -> Result<std::convert::Infallible, ConfigError> {
    Err(ConfigError::new(
        "storage.sessions",
        "postgres is not built into this binary (cargo feature `postgres`)",
    ))
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::super::{SessionStorage, parse};

    fn storage(block: &str) -> Result<SessionStorage, super::ConfigError> {
        let text = format!("storage:\n{block}\nagents: [{{name: a, handler: echo}}]\n");
        parse(&text, |_| None).map(|config| config.sessions)
    }

    #[test]
    fn a_postgres_url_with_its_pool_and_timeouts() {
        let SessionStorage::Postgres(options) = storage(
            "  sessions: postgres://aw:s3cret@db.internal:5432/agentwire\n  postgres: {pool_size: 4, connect_timeout: 2s, statement_timeout: 10s}",
        )
        .unwrap() else {
            panic!("a postgres store");
        };
        assert_eq!(options.pool_size, 4);
        assert_eq!(
            options.connect_timeout,
            Some(std::time::Duration::from_secs(2))
        );
        assert_eq!(
            options.statement_timeout,
            Some(std::time::Duration::from_secs(10))
        );
        assert_eq!(
            options.url.redacted(),
            "postgres://aw:<redacted>@db.internal:5432/agentwire"
        );
        // What a log line or a panic would show of the whole config.
        assert!(!format!("{options:?}").contains("s3cret"));

        let SessionStorage::Postgres(options) =
            storage("  sessions: postgresql:///agentwire?host=/run/postgresql").unwrap()
        else {
            panic!("a postgres store");
        };
        // The config's defaults are the store's.
        assert_eq!(options.pool_size, agentwire_store::DEFAULT_POOL_SIZE);
        assert_eq!(
            options.connect_timeout,
            Some(agentwire_store::DEFAULT_CONNECT_TIMEOUT)
        );
        assert_eq!(
            options.statement_timeout,
            Some(agentwire_store::DEFAULT_STATEMENT_TIMEOUT)
        );
    }

    #[test]
    fn bad_urls_and_settings_name_their_key_and_never_the_password() {
        for (block, key) in [
            (
                "  sessions: postgres://aw:s3cret@db:notaport/agentwire",
                "storage.sessions",
            ),
            (
                "  sessions: postgres://aw:s3cret@db/agentwire?nonsense=s3cret",
                "storage.sessions",
            ),
            (
                "  sessions: postgress://aw:s3cret@db/agentwire",
                "storage.sessions",
            ),
            (
                "  sessions: postgres://db/agentwire\n  postgres: {pool_size: 0}",
                "storage.postgres.pool_size",
            ),
            (
                "  sessions: postgres://db/agentwire\n  postgres: {statement_timeout: 0s}",
                "storage.postgres.statement_timeout",
            ),
        ] {
            let error = storage(block).unwrap_err();
            assert_eq!(error.key, key, "{block}: {error}");
            assert!(!error.to_string().contains("s3cret"), "{error}");
        }
    }
}

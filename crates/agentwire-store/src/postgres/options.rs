//! How the PostgreSQL store is reached: its URL (shown redacted) and the
//! pool, timeouts and migration policy from `storage.postgres`.

use std::fmt;
use std::time::Duration;

use super::tls::PgTls;
use crate::redact::{REDACTED, redact_url};

/// `storage.postgres.pool_size` unless set.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// `storage.postgres.connect_timeout` unless set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `storage.postgres.statement_timeout` unless set.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed PostgreSQL connection URL (`postgres://` or `postgresql://`, as
/// libpq and `tokio-postgres` read it). Its `Debug` and `Display` show it
/// with the password replaced, so it can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    pub(super) config: tokio_postgres::Config,
    /// `sslmode` and `sslrootcert` ([`PgTls`]).
    pub(super) tls: PgTls,
    pub(super) redacted: String,
}

impl PgUrl {
    /// Parses `url`. The error never quotes the URL (it may hold a password).
    pub fn parse(url: &str) -> Result<PgUrl, String> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err("expected a URL starting with postgres:// or postgresql://".to_owned());
        }
        let (rest, tls) = PgTls::take_from(url)?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e: tokio_postgres::Error| {
                scrub(&format!("not a valid PostgreSQL URL ({e})"), &rest)
            })?;
        if config.get_hosts().is_empty() {
            return Err(
                "not a valid PostgreSQL URL (no host: name one, or a socket directory \
                        with ?host=/path)"
                    .to_owned(),
            );
        }
        let tcp = config
            .get_hosts()
            .iter()
            .any(|host| matches!(host, tokio_postgres::config::Host::Tcp(_)));
        // As libpq: no TLS over a Unix socket (PostgreSQL offers none).
        config.ssl_mode(match tcp {
            true => tls.ssl_mode(),
            false => tokio_postgres::config::SslMode::Disable,
        });
        Ok(PgUrl {
            redacted: redact_url(url),
            config,
            tls,
        })
    }

    /// The URL with its password (in the user info or `?password=`)
    /// replaced by `<redacted>`.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PgUrl").field(&self.redacted).finish()
    }
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

/// `text` with every occurrence of `url`'s password taken out.
fn scrub(text: &str, url: &str) -> String {
    let redacted = redact_url(url);
    let mut text = text.replace(url, &redacted);
    if let Ok(config) = url.parse::<tokio_postgres::Config>()
        && let Some(password) = config.get_password()
        && let Ok(password) = std::str::from_utf8(password)
        && !password.is_empty()
    {
        text = text.replace(password, REDACTED);
    }
    text
}

/// How [`PgStore::connect`] connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgOptions {
    pub url: PgUrl,
    /// The most connections the pool opens (at least 1).
    pub pool_size: usize,
    /// Bounds opening a connection and waiting for a free one; `None`: no
    /// bound (tests on a paused clock).
    pub connect_timeout: Option<Duration>,
    /// `statement_timeout` of every connection; `None`: the server's.
    pub statement_timeout: Option<Duration>,
    /// What [`PgStore::connect`] does about the schema.
    pub migrations: Migrations,
}

/// Whether opening the store migrates the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrations {
    /// Applies the missing migrations (under the advisory lock).
    Apply,
    /// Applies nothing and refuses a schema that lacks one: migrations are
    /// run beforehand ([`PgStore::migrate`], `agentwire migrate`), by a
    /// role the servers' may not have.
    Require,
}

impl PgOptions {
    /// `url` with the default pool size and timeouts.
    pub fn new(url: PgUrl) -> PgOptions {
        PgOptions {
            url,
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            statement_timeout: Some(DEFAULT_STATEMENT_TIMEOUT),
            migrations: Migrations::Apply,
        }
    }

    pub(super) fn pg_config(&self) -> tokio_postgres::Config {
        let mut config = self.url.config.clone();
        if let Some(timeout) = self.connect_timeout {
            config.connect_timeout(timeout);
        }
        if let Some(timeout) = self.statement_timeout {
            let millis = timeout.as_millis().max(1);
            let options = match config.get_options() {
                Some(options) if !options.is_empty() => {
                    format!("{options} -c statement_timeout={millis}")
                }
                _ => format!("-c statement_timeout={millis}"),
            };
            config.options(options);
        }
        if config.get_application_name().is_none() {
            config.application_name("agentwire");
        }
        config
    }
}

//! Opening the PostgreSQL store: the schema migrated (or checked) on a
//! connection of its own, then the pool.

use std::fmt;
use std::sync::Arc;

use agentwire_core::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{NoTls, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;
use tracing::{debug, info};

use super::{Migrations, PgOptions, PgStore, describe, schema};

impl PgStore {
    /// Connects, migrates the schema (once, under an advisory lock, however
    /// many replicas start together) or, with [`Migrations::Require`],
    /// checks that nothing is missing, and opens the pool.
    ///
    /// Fails with [`StoreError::Unavailable`] naming the database (password
    /// redacted) when it cannot be reached or migrated, and with
    /// [`StoreError::Rejected`] when a required migration is missing.
    pub async fn connect(options: &PgOptions) -> Result<PgStore, StoreError> {
        let applied = match options.migrations {
            Migrations::Apply => PgStore::migrate(options).await?,
            Migrations::Require => {
                PgStore::require_migrated(options).await?;
                Vec::new()
            }
        };
        let url = Arc::new(options.url.clone());
        let fail = |what: &str, e: &dyn fmt::Display| {
            StoreError::Unavailable(format!("cannot {what} session database {url}: {e}"))
        };
        let config = options.pg_config();
        let recycling = || ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match connector(options)? {
            Connector::Plain => Manager::from_config(config, NoTls, recycling()),
            Connector::Tls(tls) => Manager::from_config(config, tls, recycling()),
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(options.connect_timeout)
            .create_timeout(options.connect_timeout)
            .recycle_timeout(options.connect_timeout)
            .build()
            .map_err(|e| fail("open a pool for", &e))?;
        info!(url = %url, migrated = ?applied, pool_size = options.pool_size, "session database open");
        Ok(PgStore { pool, url })
    }

    /// Applies the migrations this build knows and the database lacks (on a
    /// connection of its own, under the advisory lock); returns their
    /// versions.
    pub async fn migrate(options: &PgOptions) -> Result<Vec<i32>, StoreError> {
        let (mut client, connection) = PgStore::connect_once(options).await?;
        let applied = schema::migrate(&mut client).await;
        drop(client);
        // The connection ends with its client; the lock goes with it.
        let _ = connection.await;
        applied.map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot migrate session database {}: {}",
                options.url,
                describe(&e)
            ))
        })
    }

    async fn require_migrated(options: &PgOptions) -> Result<(), StoreError> {
        let (client, connection) = PgStore::connect_once(options).await?;
        let missing = schema::missing(&client).await;
        drop(client);
        let _ = connection.await;
        let missing = missing.map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot read the schema of session database {}: {}",
                options.url,
                describe(&e)
            ))
        })?;
        if missing.is_empty() {
            return Ok(());
        }
        Err(StoreError::Rejected(format!(
            "session database {} lacks migrations {missing:?}: run `agentwire migrate`",
            options.url
        )))
    }

    /// One connection outside the pool, and its task.
    async fn connect_once(
        options: &PgOptions,
    ) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), StoreError> {
        let fail = |e: &dyn fmt::Display| {
            StoreError::Unavailable(format!(
                "cannot connect to session database {}: {e}",
                options.url
            ))
        };
        let config = options.pg_config();
        let connect = async {
            match connector(options)? {
                Connector::Plain => Ok(spawned(&config, NoTls).await),
                Connector::Tls(tls) => Ok(spawned(&config, tls).await),
            }
        };
        let connected = match options.connect_timeout {
            Some(timeout) => tokio::time::timeout(timeout, connect)
                .await
                .map_err(|_| fail(&format_args!("no answer within {timeout:?}")))?,
            None => connect.await,
        }?;
        connected.map_err(|e| fail(&describe(&e)))
    }
}

/// How a connection to the database is made.
enum Connector {
    /// No TLS: `sslmode=disable`, or Unix sockets only.
    Plain,
    Tls(MakeRustlsConnect),
}

fn connector(options: &PgOptions) -> Result<Connector, StoreError> {
    if options.url.config.get_ssl_mode() == SslMode::Disable {
        return Ok(Connector::Plain);
    }
    options
        .url
        .tls
        .connector()
        .map(Connector::Tls)
        .map_err(|e| StoreError::Rejected(format!("session database {}: {e}", options.url)))
}

/// A connection made with `tls`, its task spawned.
async fn spawned<T>(
    config: &tokio_postgres::Config,
    tls: T,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    let (client, connection) = config.connect(tls).await?;
    let connection = tokio::spawn(async move {
        if let Err(e) = connection.await {
            debug!(error = %describe(&e), "schema connection ended");
        }
    });
    Ok((client, connection))
}

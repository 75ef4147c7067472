//! Live state shared by the replicas of one deployment, on Redis
//! (`../shared/design/scale-out.md` §3): [`RedisLive`], the shared adapter
//! of the [`TurnLeases`] and [`SharedLogs`](agentwire_core::live::SharedLogs) ports (the log and the control
//! bus are in `logs` and `controls`), and of [`CallRoutes`](agentwire_core::live::CallRoutes)
//! (voice calls' routes, in `routes`).
//!
//! Each session's keys carry its id as a hash tag (`{prefix}{<session>}:…`),
//! so they live in one Redis Cluster slot and a script may touch them all.
//! Every operation is one Lua script, so what it reads and what it writes
//! are atomic; scripts are sent by SHA (`EVALSHA`, loaded on first use).
//!
//! Losing Redis loses no message (those are in the session store): a
//! lease's fence is seeded from Redis's clock when its counter is missing,
//! so fences still grow after a restart wiped it, and a turn whose
//! renewals fail for a whole lease's life stops.

use std::time::Duration;

use agentwire_core::live::Control;
use agentwire_core::{Acquired, Fence, LiveError, SessionId, TurnLeases};
use async_trait::async_trait;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use tokio::sync::mpsc;

/// The Lua that takes the next fence from the counter KEYS[2] into `fence`
/// (its TTL in the local `fence_ttl`): the counter plus one, or Redis's
/// clock in microseconds when the counter is gone, so fences still grow
/// after Redis lost its data. Shared by the turn lease and the call route.
macro_rules! next_fence {
    () => {
        r"
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('INCR', KEYS[2])
else
  local now = redis.call('TIME')
  redis.call('SET', KEYS[2], now[1] .. string.format('%06d', tonumber(now[2])))
end
redis.call('PEXPIRE', KEYS[2], fence_ttl)
local fence = redis.call('GET', KEYS[2])
"
    };
}

mod asks;
pub mod codec;
mod controls;
mod logs;
mod rates;
mod routes;

/// How the adapter reaches Redis and names its keys.
#[derive(Clone)]
pub struct RedisSettings {
    /// `redis://[user:password@]host:port[/db]`, `rediss://…` (TLS, the
    /// server's certificate checked) or `redis+unix:///path`.
    pub url: String,
    /// With `rediss://`: the PEM certificates of the CAs the server's
    /// certificate must chain to; `None`: the system's roots.
    pub tls_roots: Option<Vec<u8>>,
    /// Put before every key, so deployments (or tests) can share a server.
    pub key_prefix: String,
    /// How long a lease lives without a renewal; renewed every third of it.
    pub lease_ttl: Duration,
    /// How long a command (and opening a connection) may take.
    pub timeout: Duration,
    /// This process among the replicas: written into the leases it holds.
    pub replica_id: String,
}

impl std::fmt::Debug for RedisSettings {
    /// Without the URL, which may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("key_prefix", &self.key_prefix)
            .field("lease_ttl", &self.lease_ttl)
            .field("timeout", &self.timeout)
            .field("replica_id", &self.replica_id)
            .finish_non_exhaustive()
    }
}

/// Why [`RedisLive::connect`] failed. Never quotes the URL.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("not a Redis URL ({0})")]
    InvalidUrl(String),
    #[error("cannot reach Redis: {0}")]
    Unreachable(String),
}

impl ConnectError {
    /// A failure to connect, with what the connection's own error says
    /// (a TLS handshake's check, a refused port): its causes carry no key,
    /// value or password.
    fn unreachable(e: &RedisError) -> ConnectError {
        let mut text = e.kind_text();
        let mut cause = std::error::Error::source(e);
        while let Some(inner) = cause {
            text.push_str(": ");
            text.push_str(&inner.to_string());
            cause = inner.source();
        }
        ConnectError::Unreachable(text)
    }
}

/// How long the fence counter outlives the last turn: after that a
/// session's next lease is seeded from the clock and counts as changed
/// hands, both of which are safe.
const SESSION_KEYS_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest wait between two attempts to reconnect to Redis.
const RECONNECT_DELAY_MS: u64 = 100;

/// Deletes the lease if it is still the one named.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Turn leases, turn logs and the control bus on Redis, shared by every
/// replica given the same server and key prefix.
pub struct RedisLive {
    client: redis::Client,
    connection: ConnectionManager,
    settings: RedisSettings,
    asks: asks::Asks,
    renew: Script,
    release: Script,
    scripts: logs::Scripts,
    mailboxes: controls::Mailboxes,
    spend: Script,
    check: Script,
    /// This replica's controls, until the engine takes them.
    controls: Mutex<Option<mpsc::Receiver<(SessionId, Control)>>>,
}

impl RedisLive {
    /// Connects (within `settings.timeout`) and checks the server answers:
    /// a server that cannot be reached is a startup error, never a
    /// fallback to this process's memory.
    /// Needs a tokio runtime: it subscribes to this replica's controls.
    pub async fn connect(settings: RedisSettings) -> Result<RedisLive, ConnectError> {
        let client = match &settings.tls_roots {
            Some(roots) => redis::Client::build_with_tls(
                settings.url.as_str(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(roots.clone()),
                },
            ),
            None => redis::Client::open(settings.url.as_str()),
        }
        .map_err(|e| ConnectError::InvalidUrl(e.kind_text()))?;
        // One plain connection first: the manager retries a failed connect
        // until the timeout, and would hide why (a certificate, a refused
        // port) behind "timed out".
        let probe = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(settings.timeout)
            .set_response_timeout(settings.timeout);
        let first = client.get_multiplexed_async_connection_with_config(&probe);
        answering(settings.timeout, first).await?;
        // The manager's reconnect backs off from a second between attempts
        // unless capped: after a cut that heals, renewals would wait that
        // long for the new connection and a short lease would be lost to a
        // blip. Capped at RECONNECT_DELAY_MS; a reconnect that fails all its
        // tries makes the next command start another.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(settings.timeout)
            .set_response_timeout(settings.timeout)
            .set_number_of_retries(2)
            .set_max_delay(RECONNECT_DELAY_MS);
        let connect = client.get_connection_manager_with_config(config);
        let connection = answering(settings.timeout, connect).await?;
        let (engine, controls) = mpsc::channel(controls::CONTROL_QUEUE);
        let live = RedisLive {
            client,
            connection,
            settings,
            asks: asks::Asks::new(),
            renew: Script::new(controls::RENEW),
            release: Script::new(RELEASE),
            scripts: logs::Scripts::new(),
            mailboxes: controls::Mailboxes::new(engine),
            spend: Script::new(rates::SPEND),
            check: Script::new(rates::CHECK),
            controls: Mutex::new(Some(controls)),
        };
        live.spawn_control_listener();
        Ok(live)
    }

    fn key(&self, session: &SessionId, what: &str) -> String {
        session_key(&self.settings.key_prefix, session, what)
    }

    /// What the turn key holds while `fence` is the lease.
    fn holder(&self, fence: Fence) -> String {
        format!("{}:{}", self.settings.replica_id, fence.0)
    }

    fn millis(duration: Duration) -> u64 {
        duration.as_millis().max(1) as u64
    }
}

/// A key of `session`'s, with its id as the hash tag.
fn session_key(prefix: &str, session: &SessionId, what: &str) -> String {
    format!("{prefix}{{{}}}:{what}", session.as_str())
}

/// The connection `connect` makes within `timeout`, once it answers PING.
async fn answering<C>(
    timeout: Duration,
    connect: impl Future<Output = Result<C, RedisError>>,
) -> Result<C, ConnectError>
where
    C: redis::aio::ConnectionLike + Send,
{
    let mut connection = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| ConnectError::Unreachable("timed out".to_owned()))?
        .map_err(|e| ConnectError::unreachable(&e))?;
    redis::cmd("PING")
        .query_async::<()>(&mut connection)
        .await
        .map_err(|e| ConnectError::unreachable(&e))?;
    Ok(connection)
}

/// A Redis error in words that name no key, value or URL.
trait KindText {
    fn kind_text(&self) -> String;
}

impl KindText for RedisError {
    fn kind_text(&self) -> String {
        if self.is_timeout() {
            "timed out".to_owned()
        } else if self.is_connection_dropped() || self.is_io_error() {
            "connection lost".to_owned()
        } else {
            format!("{:?}", self.kind())
        }
    }
}

fn unavailable(e: RedisError) -> LiveError {
    LiveError::Unavailable(format!("redis: {}", e.kind_text()))
}

#[async_trait]
impl TurnLeases for RedisLive {
    async fn acquire(
        &self,
        session: &SessionId,
        known: Option<Fence>,
    ) -> Result<Acquired, LiveError> {
        self.ask(session, known).await
    }

    /// Also hands the engine what waits in the session's control mailbox
    /// (`controls`): what was sent while this replica was cut off.
    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<bool, LiveError> {
        let mut connection = self.connection.clone();
        let mailbox = self.mailbox(session);
        let (renewed, taken): (u8, Vec<Vec<u8>>) = self
            .renew
            .key(self.key(session, "turn"))
            .key(&mailbox)
            .arg(self.holder(fence))
            .arg(Self::millis(self.settings.lease_ttl))
            .invoke_async(&mut connection)
            .await
            .map_err(unavailable)?;
        self.mailboxes.deliver(&taken);
        // Renewed either way: a failed acknowledgement only means the
        // controls come again with the next renewal.
        let acked = self.mailboxes.acknowledge(&mut connection, mailbox, &taken);
        if let Err(e) = acked.await {
            tracing::warn!(error = %e, "acknowledging delivered controls failed");
        }
        Ok(renewed == 1)
    }

    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError> {
        let _: u8 = self
            .release
            .key(self.key(session, "turn"))
            .arg(self.holder(fence))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    fn renew_every(&self) -> Option<Duration> {
        Some(self.settings.lease_ttl / 3)
    }

    fn ttl(&self) -> Duration {
        self.settings.lease_ttl
    }

    async fn ping(&self) -> Result<(), LiveError> {
        redis::cmd("PING")
            .query_async::<()>(&mut self.connection.clone())
            .await
            .map_err(unavailable)
    }
}

#[cfg(test)]
mod tests;

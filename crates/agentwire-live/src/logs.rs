//! The shared turn log and the control bus on Redis.
//!
//! A session's log is a stream, `{…}:log`, one stream entry per batch, its
//! id the seq of the batch's last entry (so `XRANGE`/`XREAD` after a seq
//! find every batch with something newer), trimmed to about
//! [`KEPT_BATCHES`]; beside it a hash, `{…}:meta`, with the log's epoch
//! (`e`), head (`s`) and running turn (`r`). Appending checks the lease,
//! adds the batch, moves the head and, for a turn's last batch, deletes the
//! lease, all in one script: a reader that sees a terminal finds the session
//! free.
//!
//! Controls (`controls`) go to the replica holding the lease through the
//! session's mailbox.

use std::time::Duration;

use agentwire_core::live::{
    Append, Appended, Control, LogFollower, LogPage, SharedHead, SharedLogs, batch_end,
};
use agentwire_core::{Epoch, LiveError, LogEntry, SessionId, TurnId};
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Script};
use tokio::sync::mpsc;

use super::{RedisLive, unavailable};
use crate::codec::{decode_batch, encode_batch};

/// Batches a session's stream keeps, about (`MAXLEN ~`): a long turn's
/// whole log at [`agentwire_core::live::MAX_BATCH`] entries a batch, and
/// more than a replica's own log keeps.
pub(crate) const KEPT_BATCHES: u64 = 512;

/// How long a session's log outlives its last append: far longer than any
/// client stays away and still rejoins (the engine's grace is 2 minutes).
const LOG_TTL: Duration = Duration::from_secs(30 * 60);

/// The most batches one read returns.
const READ_BATCHES: u64 = 1024;

pub(crate) struct Scripts {
    open: Script,
    append: Script,
    read: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            open: Script::new(OPEN),
            append: Script::new(APPEND),
            read: Script::new(READ),
        }
    }
}

/// Creates the log's meta with the proposed epoch unless it exists;
/// returns `{epoch, head, running}`.
const OPEN: &str = r"
redis.call('HSETNX', KEYS[1], 'e', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local meta = redis.call('HMGET', KEYS[1], 'e', 's', 'r')
return {meta[1], meta[2] or '0', meta[3] or '0'}
";

/// Appends a batch if the lease is still the one named. A log of another
/// epoch, or one that does not reach the batch (lost), is replaced by the
/// producer's; entries it has already are not added again. Returns 1, or 0
/// when fenced.
const APPEND: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local meta = redis.call('HMGET', KEYS[2], 'e', 's')
local head = tonumber(meta[2] or '0')
local first = tonumber(ARGV[3])
local last = tonumber(ARGV[4])
if meta[1] ~= ARGV[2] or first > head + 1 then
  redis.call('DEL', KEYS[3])
  head = first - 1
end
if last > head then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], ARGV[4] .. '-0', 'b', ARGV[5])
  redis.call('HSET', KEYS[2], 'e', ARGV[2], 's', ARGV[4], 'r', ARGV[7])
end
redis.call('PEXPIRE', KEYS[2], ARGV[9])
redis.call('PEXPIRE', KEYS[3], ARGV[9])
if ARGV[6] == '1' then
  redis.call('DEL', KEYS[1])
end
return 1
";

/// The meta and the batches from stream id ARGV[1] on (an exclusive
/// `(` bound or an inclusive one), at most ARGV[2] of them.
const READ: &str = r"
local meta = redis.call('HMGET', KEYS[1], 'e', 's', 'r')
local batches = redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2])
return {meta[1] or '', meta[2] or '0', meta[3] or '0', batches}
";

type Batches = Vec<(String, Vec<Vec<u8>>)>;

fn epoch_of(text: &str) -> Option<Epoch> {
    u64::from_str_radix(text, 16).ok().map(Epoch)
}

fn bad_reply(what: &str) -> LiveError {
    LiveError::Unavailable(format!("redis: an unexpected {what}"))
}

fn shared_head(epoch: &str, head: &str, running: &str) -> Result<SharedHead, LiveError> {
    let head = head.parse().map_err(|_| bad_reply("log head"))?;
    let running = running
        .parse::<u64>()
        .map_err(|_| bad_reply("running turn"))?;
    Ok(SharedHead {
        // A log without meta has no epoch yet: nothing of it can be
        // matched, which `Epoch(0)` (never minted) says.
        epoch: epoch_of(epoch).unwrap_or(Epoch(0)),
        head,
        running: (running != 0).then_some(TurnId(running)),
    })
}

/// The entries of `batches` after seq `after`. A batch that does not
/// decode ends the page there: the reader sees a gap, never a wrong entry.
fn entries_after(batches: &Batches, after: u64) -> Vec<LogEntry> {
    let mut entries = Vec::new();
    for (_, fields) in batches {
        let decoded = match fields.get(1).map(|data| decode_batch(data)) {
            Some(Ok(decoded)) => decoded,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "skipping the rest of a shared log page");
                break;
            }
            None => break,
        };
        entries.extend(decoded.into_iter().filter(|entry| entry.seq > after));
    }
    entries
}

impl RedisLive {
    fn meta_and_log(&self, session: &SessionId) -> (String, String) {
        (self.key(session, "meta"), self.key(session, "log"))
    }

    async fn read_from(
        &self,
        session: &SessionId,
        from: String,
        count: u64,
    ) -> Result<(SharedHead, Batches), LiveError> {
        let (meta, log) = self.meta_and_log(session);
        let (epoch, head, running, batches): (String, String, String, Batches) = self
            .scripts
            .read
            .key(meta)
            .key(log)
            .arg(from)
            .arg(count)
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok((shared_head(&epoch, &head, &running)?, batches))
    }
}

#[async_trait]
impl SharedLogs for RedisLive {
    async fn open(&self, session: &SessionId, proposed: Epoch) -> Result<SharedHead, LiveError> {
        let (epoch, head, running): (String, String, String) = self
            .scripts
            .open
            .key(self.key(session, "meta"))
            .arg(proposed.to_string())
            .arg(Self::millis(LOG_TTL))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        shared_head(&epoch, &head, &running)
    }

    async fn append(&self, session: &SessionId, batch: Append<'_>) -> Result<Appended, LiveError> {
        let Some((last, running)) = batch_end(batch.entries) else {
            return Ok(Appended::Done);
        };
        let (meta, log) = self.meta_and_log(session);
        let appended: u8 = self
            .scripts
            .append
            .key(self.key(session, "turn"))
            .key(meta)
            .key(log)
            .arg(self.holder(batch.fence))
            .arg(batch.epoch.to_string())
            .arg(batch.entries[0].seq)
            .arg(last)
            .arg(encode_batch(batch.entries))
            .arg(if batch.release { "1" } else { "0" })
            .arg(running.map_or(0, |turn| turn.0))
            .arg(KEPT_BATCHES)
            .arg(Self::millis(LOG_TTL))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(match appended {
            1 => Appended::Done,
            _ => Appended::Fenced,
        })
    }

    async fn read_after(&self, session: &SessionId, after: u64) -> Result<LogPage, LiveError> {
        let (head, batches) = self
            .read_from(session, format!("({after}-0"), READ_BATCHES)
            .await?;
        Ok(LogPage {
            head,
            entries: entries_after(&batches, after),
        })
    }

    async fn read_turn_of(&self, session: &SessionId, seq: u64) -> Result<LogPage, LiveError> {
        let (head, holding) = self.read_from(session, format!("{seq}-0"), 1).await?;
        let turn = entries_after(&holding, seq.saturating_sub(1))
            .first()
            .filter(|entry| entry.seq == seq)
            .map(|entry| entry.turn);
        let Some(turn) = turn else {
            return Ok(LogPage {
                head,
                entries: Vec::new(),
            });
        };
        let mut page = self.read_after(session, turn.0 - 1).await?;
        let starts_turn = page.entries.first().is_some_and(|entry| {
            entry.seq == turn.0
                && matches!(*entry.event, agentwire_core::TurnEvent::TurnStarted { .. })
        });
        if !starts_turn {
            page.entries.clear();
        }
        Ok(page)
    }

    async fn follow(&self, session: &SessionId) -> Result<Box<dyn LogFollower>, LiveError> {
        // A connection of its own: `XREAD BLOCK` holds a connection, and
        // the shared one carries every other session's leases.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.settings.timeout)
            .set_response_timeout(self.settings.timeout);
        let connect = self
            .client
            .get_multiplexed_async_connection_with_config(&config);
        let connection = tokio::time::timeout(self.settings.timeout, connect)
            .await
            .map_err(|_| LiveError::Unavailable("redis: timed out".to_owned()))?
            .map_err(unavailable)?;
        let (meta, log) = self.meta_and_log(session);
        Ok(Box::new(RedisFollower {
            connection,
            meta,
            log,
            timeout: self.settings.timeout,
        }))
    }

    async fn send(&self, session: &SessionId, control: &Control) -> Result<bool, LiveError> {
        self.send_control(session, control).await
    }

    fn take_controls(&self) -> Option<mpsc::Receiver<(SessionId, Control)>> {
        self.controls.lock().take()
    }
}

struct RedisFollower {
    connection: MultiplexedConnection,
    meta: String,
    log: String,
    timeout: Duration,
}

#[async_trait]
impl LogFollower for RedisFollower {
    async fn read_after(&mut self, after: u64, wait: Duration) -> Result<LogPage, LiveError> {
        self.connection.set_response_timeout(wait + self.timeout);
        let read: Option<Vec<(String, Batches)>> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(READ_BATCHES)
            .arg("BLOCK")
            .arg(wait.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(&self.log)
            .arg(format!("{after}-0"))
            .query_async(&mut self.connection)
            .await
            .map_err(unavailable)?;
        self.connection.set_response_timeout(self.timeout);
        let (epoch, head, running): (Option<String>, Option<String>, Option<String>) =
            redis::cmd("HMGET")
                .arg(&self.meta)
                .arg("e")
                .arg("s")
                .arg("r")
                .query_async(&mut self.connection)
                .await
                .map_err(unavailable)?;
        let head = shared_head(
            epoch.as_deref().unwrap_or(""),
            head.as_deref().unwrap_or("0"),
            running.as_deref().unwrap_or("0"),
        )?;
        let batches = read
            .into_iter()
            .flatten()
            .flat_map(|(_, batches)| batches)
            .collect();
        Ok(LogPage {
            head,
            entries: entries_after(&batches, after),
        })
    }
}

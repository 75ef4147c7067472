//! Shared rate limits on Redis: one key per bucket,
//! `{prefix}rate:<key>`, holding its theoretical arrival time (GCRA) in
//! Redis's own clock, so replicas whose clocks differ agree; it expires
//! once the bucket is full again.

use std::time::Duration;

use agentwire_core::LiveError;
use agentwire_core::live::{SharedRates, token_interval_us};
use async_trait::async_trait;

use super::{RedisLive, unavailable};

/// The head of both scripts: leaves `tat` (the bucket's theoretical
/// arrival time, at least now) and `now`, or returns the µs until the
/// bucket's next token when it has none. ARGV: the interval between tokens
/// and the burst tolerance (interval × (capacity − 1)), both in µs.
macro_rules! gcra_wait {
    () => {
        r"
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local allowed_from = tat - tolerance
if allowed_from > now then
  return allowed_from - now
end
"
    };
}

/// Spends a token if the bucket has one: returns -1, or the µs until its
/// next token. Times are printed with `%d`: Lua's numbers print large
/// integers in exponent form.
pub(crate) const SPEND: &str = concat!(
    gcra_wait!(),
    r"local next_tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', math.ceil((next_tat - now) / 1000) + 1)
return -1
"
);

/// Whether the bucket has a token, spending none: -1, or the µs until its
/// next token.
pub(crate) const CHECK: &str = concat!(gcra_wait!(), "return -1\n");

#[async_trait]
impl SharedRates for RedisLive {
    async fn spend(&self, key: &str, per_minute: u32) -> Result<Option<Duration>, LiveError> {
        self.bucket(&self.spend, key, per_minute).await
    }

    async fn check(&self, key: &str, per_minute: u32) -> Result<Option<Duration>, LiveError> {
        self.bucket(&self.check, key, per_minute).await
    }
}

impl RedisLive {
    async fn bucket(
        &self,
        script: &redis::Script,
        key: &str,
        per_minute: u32,
    ) -> Result<Option<Duration>, LiveError> {
        let interval = token_interval_us(per_minute);
        let tolerance = interval * u64::from(per_minute.max(1) - 1);
        let wait: i64 = script
            .key(format!("{}rate:{key}", self.settings.key_prefix))
            .arg(interval)
            .arg(tolerance)
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(u64::try_from(wait).ok().map(Duration::from_micros))
    }
}

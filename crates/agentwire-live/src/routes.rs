//! Voice call routes on Redis ([`CallRoutes`]): a session's route is a
//! hash, `{…}:route`, holding the claim's fence (`f`), the holder's
//! address (`a`) and the call's owner (`o`), expiring after the lease TTL
//! unless renewed; beside it the session's route fence counter,
//! `{…}:route_fence`, seeded from Redis's clock when missing (as the turn
//! lease's is), so a claim after a Redis restart still outranks the ones
//! before. Each change is one script: the fence check and the write are
//! atomic.

use std::sync::LazyLock;
use std::time::Duration;

use agentwire_core::live::{CallRoute, CallRoutes, Renewal};
use agentwire_core::{Fence, LiveError, SessionId};
use async_trait::async_trait;
use redis::Script;

use super::{RedisLive, unavailable};

/// How long the fence counter outlives the session's last claim.
const FENCE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Replaces the route with ARGV's under the next fence; returns the fence
/// (as a string: Lua prints large integers in exponent form).
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        r"
local fence_ttl = ARGV[4]
",
        next_fence!(),
        r"
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'f', fence, 'a', ARGV[1], 'o', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return fence
",
    ))
});

/// Extends the route if its fence is ARGV[1]: 1; 0 when another claim
/// holds it; -1 when there is none.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local fence = redis.call('HGET', KEYS[1], 'f')
if not fence then
  return -1
end
if fence ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
",
    )
});

/// Deletes the route if its fence is ARGV[1].
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'f') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
",
    )
});

#[async_trait]
impl CallRoutes for RedisLive {
    async fn claim(&self, session: &SessionId, route: &CallRoute) -> Result<Fence, LiveError> {
        let fence: String = CLAIM
            .key(self.key(session, "route"))
            .key(self.key(session, "route_fence"))
            .arg(&route.address)
            .arg(&route.owner)
            .arg(Self::millis(self.settings.lease_ttl))
            .arg(Self::millis(FENCE_TTL))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        fence
            .parse::<u64>()
            .map(Fence)
            .map_err(|_| LiveError::Unavailable("redis: a fence that is not a number".into()))
    }

    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<Renewal, LiveError> {
        let renewed: i8 = RENEW
            .key(self.key(session, "route"))
            .arg(fence.0.to_string())
            .arg(Self::millis(self.settings.lease_ttl))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(match renewed {
            1 => Renewal::Kept,
            0 => Renewal::Replaced,
            _ => Renewal::Gone,
        })
    }

    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError> {
        let _: u8 = RELEASE
            .key(self.key(session, "route"))
            .arg(fence.0.to_string())
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn find(&self, session: &SessionId) -> Result<Option<CallRoute>, LiveError> {
        let (address, owner): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(self.key(session, "route"))
            .arg("a")
            .arg("o")
            .query_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(address
            .zip(owner)
            .map(|(address, owner)| CallRoute { address, owner }))
    }

    fn ttl(&self) -> Duration {
        self.settings.lease_ttl
    }
}

#[cfg(test)]
mod tests {
    //! Against the Redis server of `AGENTWIRE_TEST_REDIS`, as the crate's
    //! other tests (skipped without it, except under `CI`).

    use std::time::Duration;

    use agentwire_core::SessionId;
    use agentwire_core::live::routes_conformance as suite;

    use crate::{RedisLive, RedisSettings};

    async fn two_replicas(ttl: Duration) -> Option<(RedisLive, RedisLive)> {
        let url = match std::env::var("AGENTWIRE_TEST_REDIS") {
            Ok(url) if !url.is_empty() => url,
            _ => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must run the Redis tests: set AGENTWIRE_TEST_REDIS"
                );
                return None;
            }
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let prefix = format!("test-routes-{}-{nanos}:", std::process::id());
        let replica = |id: &str| RedisSettings {
            url: url.clone(),
            key_prefix: prefix.clone(),
            lease_ttl: ttl,
            timeout: Duration::from_secs(2),
            replica_id: id.to_owned(),
            tls_roots: None,
        };
        let one = RedisLive::connect(replica("r1")).await.unwrap();
        let two = RedisLive::connect(replica("r2")).await.unwrap();
        Some((one, two))
    }

    fn session(name: &str) -> SessionId {
        SessionId::parse(name).unwrap()
    }

    #[tokio::test]
    async fn redis_routes_pass_the_conformance_suite_across_two_replicas() {
        let Some((one, two)) = two_replicas(Duration::from_millis(600)).await else {
            return;
        };
        suite::the_latest_claim_wins(&one, &two, &session("call-1")).await;
        suite::sessions_are_independent(&two, &session("call-2"), &session("call:3")).await;
        suite::an_unrenewed_route_expires(&one, &two, &session("call-4")).await;
    }
}

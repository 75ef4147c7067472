//! `live` and `redis`: where the state that replicas share lives (who runs
//! each session's turn). `memory`, the default, is this process alone; a
//! `redis://` URL is every replica given the same server and key prefix.
//!
//! The URL may carry a password: no error here quotes it unredacted.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// `redis`: used when `live` is a Redis URL.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawRedis {
    /// Put before every key the server writes, so several deployments can
    /// share one Redis. Every replica of one deployment must use the same.
    pub(super) key_prefix: String,
    /// How long a turn's lease on its session lives without a renewal (it
    /// is renewed every third of it): how long a crashed replica's
    /// sessions stay busy. At least 1s.
    pub(super) lease_ttl: ConfigDuration,
    /// How long a Redis command, or opening the connection, may take before
    /// it fails (a message is then refused with an internal error, and
    /// `/readyz` reports the live state down).
    pub(super) timeout: ConfigDuration,
}

impl Default for RawRedis {
    fn default() -> RawRedis {
        RawRedis {
            key_prefix: "agentwire:".to_owned(),
            lease_ttl: ConfigDuration::secs(10),
            timeout: ConfigDuration::secs(2),
        }
    }
}

/// Where the live state is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveConfig {
    /// In this process: one replica.
    Memory,
    Redis(RedisConfig),
}

/// `live: redis://…` with `redis`.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    pub url: String,
    pub key_prefix: String,
    pub lease_ttl: Duration,
    pub timeout: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &agentwire_store::redact_url(&self.url))
            .field("key_prefix", &self.key_prefix)
            .field("lease_ttl", &self.lease_ttl)
            .field("timeout", &self.timeout)
            .finish()
    }
}

pub(super) const DEFAULT_LIVE: &str = "memory";

pub(super) fn validate(live: &str, raw: RawRedis) -> Result<LiveConfig, ConfigError> {
    if live == DEFAULT_LIVE {
        return Ok(LiveConfig::Memory);
    }
    let redis = ["redis://", "redis+unix://", "unix://"]
        .iter()
        .any(|scheme| live.starts_with(scheme));
    if !redis {
        let hint = if live.starts_with("rediss://") {
            " (TLS to Redis is not supported yet)"
        } else {
            ""
        };
        return Err(ConfigError::new(
            "live",
            format!(
                "expected `memory`, `redis://HOST:PORT[/DB]` or `redis+unix:///PATH`, got {:?}{hint}",
                agentwire_store::redact_url(live)
            ),
        ));
    }
    if raw.key_prefix.is_empty() || raw.key_prefix.contains(['{', '}']) {
        return Err(ConfigError::new(
            "redis.key_prefix",
            "must be non-empty and hold no `{` or `}` (they would change the keys' hash slot)",
        ));
    }
    if raw.lease_ttl.0 < Duration::from_secs(1) {
        return Err(ConfigError::new("redis.lease_ttl", "must be at least 1s"));
    }
    if raw.timeout.0.is_zero() {
        return Err(ConfigError::new("redis.timeout", "must be greater than 0"));
    }
    if raw.timeout.0 >= raw.lease_ttl.0 / 3 {
        return Err(ConfigError::new(
            "redis.timeout",
            "must be shorter than a third of redis.lease_ttl, or one slow renewal loses a lease",
        ));
    }
    Ok(LiveConfig::Redis(RedisConfig {
        url: live.to_owned(),
        key_prefix: raw.key_prefix,
        lease_ttl: raw.lease_ttl.0,
        timeout: raw.timeout.0,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn live(block: &str) -> Result<LiveConfig, ConfigError> {
        let text = format!("{block}\nagents: [{{name: a, handler: echo}}]\n");
        parse(&text, |_| None).map(|config| config.live)
    }

    #[test]
    fn memory_is_the_default() {
        assert_eq!(live("").unwrap(), LiveConfig::Memory);
        assert_eq!(live("live: memory").unwrap(), LiveConfig::Memory);
    }

    #[test]
    fn a_redis_url_with_its_settings() {
        let LiveConfig::Redis(redis) = live(
            "live: redis://:s3cret@cache.internal:6379/2\nredis: {key_prefix: 'prod:', lease_ttl: 6s, timeout: 500ms}",
        )
        .unwrap() else {
            panic!("redis");
        };
        assert_eq!(redis.key_prefix, "prod:");
        assert_eq!(redis.lease_ttl, Duration::from_secs(6));
        assert_eq!(redis.timeout, Duration::from_millis(500));
        assert!(!format!("{redis:?}").contains("s3cret"));
        let LiveConfig::Redis(redis) = live("live: redis+unix:///run/redis.sock").unwrap() else {
            panic!("redis");
        };
        assert_eq!(redis.lease_ttl, Duration::from_secs(10));
    }

    #[test]
    fn bad_settings_name_their_key_and_never_the_password() {
        let cases = [
            ("live: http://:s3cret@cache:6379", "live"),
            ("live: rediss://:s3cret@cache:6379", "live"),
            ("live: redis\n", "live"),
            (
                "live: redis://cache:6379\nredis: {key_prefix: 'a{b}:'}",
                "redis.key_prefix",
            ),
            (
                "live: redis://cache:6379\nredis: {lease_ttl: 500ms}",
                "redis.lease_ttl",
            ),
            (
                "live: redis://cache:6379\nredis: {lease_ttl: 3s, timeout: 1s}",
                "redis.timeout",
            ),
            (
                "live: redis://cache:6379\nstorage: {media: {backend: local, path: /tmp/m}}",
                "storage.media.backend",
            ),
        ];
        for (block, key) in cases {
            let error = live(block).unwrap_err();
            assert_eq!(error.key, key, "{block}: {error}");
            assert!(!error.to_string().contains("s3cret"), "{error}");
        }
    }
}

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
    /// sessions stay busy when it died without its connections closing
    /// (a lost host; a killed process's are taken at once), and how long a
    /// replica cut off from Redis keeps running a turn before it stops it.
    /// At least 1s.
    pub(super) lease_ttl: ConfigDuration,
    /// How long a Redis command, or opening the connection, may take before
    /// it fails (a message is then refused with an internal error, and
    /// `/readyz` reports the live state down).
    pub(super) timeout: ConfigDuration,
    /// With a `rediss://` URL: a PEM file of the CAs the server's
    /// certificate must chain to (a private CA). Default: the system's
    /// roots.
    pub(super) tls_ca_file: Option<String>,
}

impl Default for RawRedis {
    fn default() -> RawRedis {
        RawRedis {
            key_prefix: "agentwire:".to_owned(),
            lease_ttl: ConfigDuration::secs(10),
            timeout: ConfigDuration::secs(2),
            tls_ca_file: None,
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
    /// `redis.tls_ca_file`, read: PEM certificates.
    pub tls_roots: Option<Vec<u8>>,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &agentwire_store::redact_url(&self.url))
            .field("key_prefix", &self.key_prefix)
            .field("lease_ttl", &self.lease_ttl)
            .field("timeout", &self.timeout)
            .field("tls_roots", &self.tls_roots.as_ref().map(Vec::len))
            .finish()
    }
}

pub(super) const DEFAULT_LIVE: &str = "memory";

pub(super) fn validate(live: &str, raw: RawRedis) -> Result<LiveConfig, ConfigError> {
    if live == DEFAULT_LIVE {
        return Ok(LiveConfig::Memory);
    }
    let redis = ["redis://", "rediss://", "redis+unix://", "unix://"]
        .iter()
        .any(|scheme| live.starts_with(scheme));
    if !redis {
        return Err(ConfigError::new(
            "live",
            format!(
                "expected `memory`, `redis://HOST:PORT[/DB]`, `rediss://HOST:PORT[/DB]` or `redis+unix:///PATH`, got {:?}",
                agentwire_store::redact_url(live)
            ),
        ));
    }
    let tls = live.starts_with("rediss://");
    if tls && live.contains('#') {
        // `#insecure` would turn the certificate checks off.
        return Err(ConfigError::new(
            "live",
            "a rediss:// URL takes no fragment (`#insecure` would skip the certificate checks: name a private CA with redis.tls_ca_file instead)",
        ));
    }
    let tls_roots = match (&raw.tls_ca_file, tls) {
        (None, _) => None,
        (Some(_), false) => {
            return Err(ConfigError::new(
                "redis.tls_ca_file",
                "only with a rediss:// URL in live",
            ));
        }
        (Some(path), true) => Some(read_roots(path)?),
    };
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
        tls_roots,
    }))
}

/// `redis.tls_ca_file`'s certificates, checked to be PEM certificates.
fn read_roots(path: &str) -> Result<Vec<u8>, ConfigError> {
    let key = "redis.tls_ca_file";
    let pem = std::fs::read(path)
        .map_err(|e| ConfigError::new(key, format!("cannot read {path}: {e}")))?;
    let holds_one =
        std::str::from_utf8(&pem).is_ok_and(|text| text.contains("-----BEGIN CERTIFICATE-----"));
    if !holds_one {
        return Err(ConfigError::new(
            key,
            format!("{path} holds no PEM certificate"),
        ));
    }
    Ok(pem)
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
        assert_eq!(redis.timeout, Duration::from_secs(2));
    }

    #[test]
    fn rediss_takes_the_system_roots_or_a_ca_file() {
        let LiveConfig::Redis(redis) = live("live: rediss://:s3cret@cache:6380").unwrap() else {
            panic!("redis");
        };
        assert_eq!(redis.tls_roots, None);
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(&ca, pem).unwrap();
        let block = format!(
            "live: rediss://cache:6380\nredis: {{tls_ca_file: {}}}",
            ca.display()
        );
        let LiveConfig::Redis(redis) = live(&block).unwrap() else {
            panic!("redis");
        };
        assert_eq!(redis.tls_roots.as_deref(), Some(pem.as_bytes()));
        std::fs::write(&ca, "not a certificate").unwrap();
        let error = live(&block).unwrap_err();
        assert_eq!(error.key, "redis.tls_ca_file");
        assert!(
            error.to_string().contains("holds no PEM certificate"),
            "{error}"
        );
    }

    #[test]
    fn bad_settings_name_their_key_and_never_the_password() {
        let cases = [
            ("live: http://:s3cret@cache:6379", "live"),
            ("live: rediss://:s3cret@cache:6379/#insecure", "live"),
            (
                "live: redis://:s3cret@cache:6379\nredis: {tls_ca_file: /etc/ca.pem}",
                "redis.tls_ca_file",
            ),
            (
                "live: rediss://:s3cret@cache:6379\nredis: {tls_ca_file: /nonexistent/ca.pem}",
                "redis.tls_ca_file",
            ),
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

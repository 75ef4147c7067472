//! Rate limits the replicas share ([`SharedRates`]): a caller's turns per
//! minute count on every replica, so spreading connections over the
//! replicas behind a balancer does not multiply a caller's allowance.

use std::time::Duration;

use async_trait::async_trait;

use super::LiveError;

/// Token buckets shared by the replicas.
#[async_trait]
pub trait SharedRates: Send + Sync + 'static {
    /// Spends one token of the bucket `key`, which refills `per_minute`
    /// tokens a minute and holds at most `per_minute`: `Ok(None)` when
    /// spent, `Ok(Some(wait))` when it is empty and its next token comes
    /// in `wait`.
    async fn spend(&self, key: &str, per_minute: u32) -> Result<Option<Duration>, LiveError>;

    /// Whether the bucket `key` has a token now, without spending it:
    /// `Ok(None)` when it has, `Ok(Some(wait))` when its next one comes in
    /// `wait`. For limits spent only on failure (failed authentications):
    /// checked before the attempt, spent after it failed.
    async fn check(&self, key: &str, per_minute: u32) -> Result<Option<Duration>, LiveError>;
}

/// The spacing of a bucket's tokens (its emission interval), in µs.
pub fn token_interval_us(per_minute: u32) -> u64 {
    60_000_000 / u64::from(per_minute.max(1))
}

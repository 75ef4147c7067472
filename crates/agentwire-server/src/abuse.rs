//! What one source may cost the server, whatever it sends: failed
//! authentications per client address and per agent, open sockets per
//! client address, and turns per caller across all its connections.
//!
//! Where replicas share live state ([`SharedRates`], Redis) the failed
//! authentications and the turns count in buckets every replica shares,
//! so a guesser spreading its attempts over the replicas gets no more than
//! against one; each replica also keeps its own, which limit alone while
//! the shared state cannot be reached. Sockets per address stay per
//! replica (a socket lives on one).
//!
//! Each limit is a token bucket per key (an address, an agent, a caller),
//! held in a table of bounded size: a key whose bucket has refilled is the
//! same as no entry and is dropped when the table needs room, so an
//! attacker cycling through addresses costs at most [`MAX_TRACKED_KEYS`]
//! entries per table. When the table is full of live entries a new key is
//! not tracked (it is let through): the per-agent limit still holds a
//! distributed guesser.
//!
//! A refused attempt never reaches the authenticator, so a flood of
//! guesses costs a hash lookup each, not an Argon2 verification; the
//! verifications that do run are bounded by the authenticator's own pool.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::live::SharedRates;
use parking_lot::Mutex;
use tokio::time::Instant;

/// Entries a table keeps at most (per table: addresses, agents, callers).
pub const MAX_TRACKED_KEYS: usize = 100_000;

/// The abuse limits (`server.limits.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbuseLimits {
    /// Failed authentications a client address may make per minute (also
    /// its burst); past it, upgrades from the address that carry a
    /// credential get 429 with `Retry-After`. 0 is no limit.
    pub auth_failures_per_address_per_minute: u32,
    /// Failed authentications per minute against one agent or team, from
    /// anywhere: the bound on a distributed guesser. 0 is no limit.
    pub auth_failures_per_agent_per_minute: u32,
    /// Open sockets per client address; `None` is no limit.
    pub max_connections_per_address: Option<usize>,
    /// Turns a caller (its owner id, else its address) may start per
    /// minute across all its connections; `None` is no limit.
    pub turns_per_minute_per_caller: Option<u32>,
}

/// Which limit refused a request, as the metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    AuthPerAddress,
    AuthPerAgent,
    ConnectionsPerAddress,
    TurnsPerCaller,
}

impl Limit {
    pub const ALL: [Limit; 4] = [
        Limit::AuthPerAddress,
        Limit::AuthPerAgent,
        Limit::ConnectionsPerAddress,
        Limit::TurnsPerCaller,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Limit::AuthPerAddress => "auth_per_address",
            Limit::AuthPerAgent => "auth_per_agent",
            Limit::ConnectionsPerAddress => "connections_per_address",
            Limit::TurnsPerCaller => "turns_per_caller",
        }
    }
}

/// A refusal by one of the limits: which, and when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) limit: Limit,
    /// Whole seconds, at least 1: the `Retry-After` of RFC 9110 §10.2.3.
    pub(crate) retry_after_secs: u64,
}

/// Who starts turns, for the per-caller rate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CallerKey {
    Owner(String),
    Address(IpAddr),
}

/// The server's abuse state.
pub struct AbuseGuard {
    limits: AbuseLimits,
    /// Buckets every replica shares; `None`: this process alone.
    shared: Option<Arc<dyn SharedRates>>,
    auth_by_address: Buckets<IpAddr>,
    auth_by_agent: Buckets<String>,
    turns_by_caller: Buckets<CallerKey>,
    connections_by_address: Mutex<HashMap<IpAddr, usize>>,
}

impl AbuseGuard {
    /// The guard of one process (`shared: None`), or of a replica whose
    /// failed authentications and turns count with every other's.
    pub fn new(limits: AbuseLimits, shared: Option<Arc<dyn SharedRates>>) -> AbuseGuard {
        let per_minute = |n: u32| Rate::per_minute(n);
        AbuseGuard {
            auth_by_address: Buckets::new(per_minute(limits.auth_failures_per_address_per_minute)),
            auth_by_agent: Buckets::new(per_minute(limits.auth_failures_per_agent_per_minute)),
            turns_by_caller: Buckets::new(per_minute(
                limits.turns_per_minute_per_caller.unwrap_or(0),
            )),
            connections_by_address: Mutex::new(HashMap::new()),
            shared,
            limits,
        }
    }

    /// Whether `address` and `agent` may try a credential now: refused
    /// while either has spent its failures (an unknown address only by the
    /// agent's).
    pub(crate) async fn check_auth(
        &self,
        address: Option<IpAddr>,
        agent: &str,
    ) -> Result<(), Refused> {
        self.check_address_auth(address).await?;
        let per_minute = self.limits.auth_failures_per_agent_per_minute;
        let key = format!("auth:agent:{agent}");
        match self.shared_check(&key, per_minute).await {
            Some(checked) => checked,
            None => self.auth_by_agent.check(agent, Instant::now()),
        }
        .map_err(|wait| refused(Limit::AuthPerAgent, wait))
    }

    /// A credential from `address` for `agent` did not validate.
    pub(crate) async fn auth_failed(&self, address: Option<IpAddr>, agent: &str) {
        self.address_auth_failed(address).await;
        self.auth_by_agent.spend(agent, Instant::now());
        let per_minute = self.limits.auth_failures_per_agent_per_minute;
        self.shared_spend(&format!("auth:agent:{agent}"), per_minute)
            .await;
    }

    /// Whether `address` may try a credential now on a route no agent
    /// guards (the sessions and media APIs): only the address's failures
    /// count there, since their credentials are keys and tokens, not an
    /// agent's password a distributed guesser could aim at.
    pub(crate) async fn check_address_auth(&self, address: Option<IpAddr>) -> Result<(), Refused> {
        let Some(address) = address else {
            return Ok(());
        };
        let per_minute = self.limits.auth_failures_per_address_per_minute;
        let key = format!("auth:address:{address}");
        match self.shared_check(&key, per_minute).await {
            Some(checked) => checked,
            None => self.auth_by_address.check(&address, Instant::now()),
        }
        .map_err(|wait| refused(Limit::AuthPerAddress, wait))
    }

    /// A credential from `address` did not validate on such a route.
    pub(crate) async fn address_auth_failed(&self, address: Option<IpAddr>) {
        let Some(address) = address else {
            return;
        };
        self.auth_by_address.spend(&address, Instant::now());
        let per_minute = self.limits.auth_failures_per_address_per_minute;
        self.shared_spend(&format!("auth:address:{address}"), per_minute)
            .await;
    }

    /// Takes one of a caller's turns, if it has one left this minute: the
    /// caller is its owner, else its address (unknown: not limited).
    /// Shared, a caller's turns count wherever its connections are.
    pub(crate) async fn take_turn(
        &self,
        owner: Option<&str>,
        address: Option<IpAddr>,
    ) -> Result<(), Refused> {
        let Some(per_minute) = self.limits.turns_per_minute_per_caller else {
            return Ok(());
        };
        let caller = match (owner, address) {
            (Some(owner), _) => CallerKey::Owner(owner.to_owned()),
            (None, Some(address)) => CallerKey::Address(address),
            (None, None) => return Ok(()),
        };
        if let Some(rates) = &self.shared {
            let key = match &caller {
                CallerKey::Owner(owner) => format!("turns:owner:{owner}"),
                CallerKey::Address(address) => format!("turns:address:{address}"),
            };
            match rates.spend(&key, per_minute).await {
                Ok(None) => return Ok(()),
                Ok(Some(wait)) => return Err(refused(Limit::TurnsPerCaller, wait)),
                Err(e) => {
                    tracing::warn!(error = %e, "the shared turn limit is unreachable; this replica's applies");
                }
            }
        }
        let now = Instant::now();
        self.turns_by_caller
            .check(&caller, now)
            .map_err(|wait| refused(Limit::TurnsPerCaller, wait))?;
        self.turns_by_caller.spend(&caller, now);
        Ok(())
    }

    /// The shared bucket's verdict on `key`; `None` when there is none to
    /// ask (no shared state, no limit) or it cannot be reached (then this
    /// replica's bucket decides).
    async fn shared_check(&self, key: &str, per_minute: u32) -> Option<Result<(), Duration>> {
        let rates = self.shared.as_ref().filter(|_| per_minute > 0)?;
        match rates.check(key, per_minute).await {
            Ok(None) => Some(Ok(())),
            Ok(Some(wait)) => Some(Err(wait)),
            Err(e) => {
                tracing::warn!(error = %e, "the shared authentication limit is unreachable; this replica's applies");
                None
            }
        }
    }

    /// Spends a token of the shared bucket `key` (this replica's own was
    /// spent already).
    async fn shared_spend(&self, key: &str, per_minute: u32) {
        let Some(rates) = self.shared.as_ref().filter(|_| per_minute > 0) else {
            return;
        };
        if let Err(e) = rates.spend(key, per_minute).await {
            tracing::warn!(error = %e, "a failed authentication was not counted across the replicas");
        }
    }

    /// Counts a socket from `address`, unless it has its limit open; the
    /// returned hold uncounts it when dropped. An unknown address is not
    /// limited.
    pub(crate) fn open_connection(
        self: &Arc<Self>,
        address: Option<IpAddr>,
    ) -> Result<AddressHold, Refused> {
        let (Some(max), Some(address)) = (self.limits.max_connections_per_address, address) else {
            return Ok(AddressHold(None));
        };
        let mut open = self.connections_by_address.lock();
        let count = open.entry(address).or_default();
        if *count >= max {
            return Err(Refused {
                limit: Limit::ConnectionsPerAddress,
                retry_after_secs: 1,
            });
        }
        *count += 1;
        Ok(AddressHold(Some((self.clone(), address))))
    }
}

fn refused(limit: Limit, wait: Duration) -> Refused {
    Refused {
        limit,
        retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
    }
}

/// One socket counted against its address's limit (`None`: not counted).
pub(crate) struct AddressHold(Option<(Arc<AbuseGuard>, IpAddr)>);

impl Drop for AddressHold {
    fn drop(&mut self) {
        let Some((guard, address)) = &self.0 else {
            return;
        };
        let mut open = guard.connections_by_address.lock();
        if let Some(count) = open.get_mut(address) {
            *count -= 1;
            if *count == 0 {
                open.remove(address);
            }
        }
    }
}

/// A sustained rate and the burst above it; `None` is no limit.
#[derive(Debug, Clone, Copy)]
struct Rate {
    burst: f64,
    per_second: f64,
}

impl Rate {
    /// `n` per minute, `n` at once; 0 is no limit.
    fn per_minute(n: u32) -> Option<Rate> {
        (n > 0).then(|| Rate {
            burst: f64::from(n),
            per_second: f64::from(n) / 60.0,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(self, rate: Rate, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        (self.tokens + elapsed * rate.per_second).min(rate.burst)
    }
}

/// Token buckets by key, in a table of at most [`MAX_TRACKED_KEYS`].
struct Buckets<K> {
    rate: Option<Rate>,
    table: Mutex<HashMap<K, Bucket>>,
}

impl<K: Hash + Eq + Clone> Buckets<K> {
    fn new(rate: Option<Rate>) -> Buckets<K> {
        Buckets {
            rate,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(wait)` while `key` has no whole token: the time until it has.
    fn check<Q>(&self, key: &Q, now: Instant) -> Result<(), Duration>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(rate) = self.rate else {
            return Ok(());
        };
        let Some(bucket) = self.table.lock().get(key).copied() else {
            return Ok(());
        };
        let tokens = bucket.refilled(rate, now);
        match tokens >= 1.0 {
            true => Ok(()),
            false => Err(Duration::from_secs_f64((1.0 - tokens) / rate.per_second)),
        }
    }

    /// Takes a token from `key` (none left stays none).
    fn spend<Q>(&self, key: &Q, now: Instant)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let Some(rate) = self.rate else {
            return;
        };
        let mut table = self.table.lock();
        if let Some(bucket) = table.get_mut(key) {
            let tokens = bucket.refilled(rate, now);
            *bucket = Bucket {
                tokens: (tokens - 1.0).max(0.0),
                at: now,
            };
            return;
        }
        if table.len() >= MAX_TRACKED_KEYS {
            // Full buckets are the same as none.
            table.retain(|_, bucket| bucket.refilled(rate, now) < rate.burst);
            if table.len() >= MAX_TRACKED_KEYS {
                return;
            }
        }
        table.insert(
            key.to_owned(),
            Bucket {
                tokens: rate.burst - 1.0,
                at: now,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use agentwire_engine::{MemoryLive, MemoryLiveState};

    use super::*;

    const ALICE: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    const BOB: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

    fn limits(address: u32, agent: u32) -> AbuseLimits {
        AbuseLimits {
            auth_failures_per_address_per_minute: address,
            auth_failures_per_agent_per_minute: agent,
            max_connections_per_address: Some(2),
            turns_per_minute_per_caller: Some(3),
        }
    }

    fn guard(address: u32, agent: u32) -> Arc<AbuseGuard> {
        Arc::new(AbuseGuard::new(limits(address, agent), None))
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_that_keeps_failing_waits_and_others_do_not() {
        let guard = guard(3, 0);
        for _ in 0..3 {
            assert_eq!(guard.check_auth(Some(ALICE), "a").await, Ok(()));
            guard.auth_failed(Some(ALICE), "a").await;
        }
        let refused = guard.check_auth(Some(ALICE), "a").await.unwrap_err();
        assert_eq!(refused.limit, Limit::AuthPerAddress);
        // One failure back every 20 s at 3 per minute.
        assert_eq!(refused.retry_after_secs, 20);
        assert_eq!(guard.check_auth(Some(BOB), "a").await, Ok(()));
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(guard.check_auth(Some(ALICE), "a").await, Ok(()));
        guard.auth_failed(Some(ALICE), "a").await;
        assert!(guard.check_auth(Some(ALICE), "a").await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn many_addresses_failing_against_one_agent_lock_that_agent_only() {
        let guard = guard(0, 4);
        for last in 1..=4u8 {
            guard
                .auth_failed(Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, last))), "vault")
                .await;
        }
        let refused = guard.check_auth(Some(ALICE), "vault").await.unwrap_err();
        assert_eq!(refused.limit, Limit::AuthPerAgent);
        assert_eq!(guard.check_auth(Some(ALICE), "other").await, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_callers_turns_are_counted_across_its_connections() {
        let guard = guard(0, 0);
        // Alice's turns count whichever address they come from.
        for address in [ALICE, BOB, ALICE] {
            assert_eq!(guard.take_turn(Some("alice"), Some(address)).await, Ok(()));
        }
        let refused = guard.take_turn(Some("alice"), Some(BOB)).await.unwrap_err();
        assert_eq!(refused.limit, Limit::TurnsPerCaller);
        // An anonymous caller is its address.
        assert_eq!(guard.take_turn(None, Some(ALICE)).await, Ok(()));
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(guard.take_turn(Some("alice"), None).await, Ok(()));
    }

    /// Two replicas' guards over one shared state.
    fn replicas(address: u32, agent: u32) -> (AbuseGuard, AbuseGuard, Arc<MemoryLiveState>) {
        let state = MemoryLiveState::new();
        let replica = |name: &str| {
            let live: Arc<dyn SharedRates> =
                Arc::new(MemoryLive::new(&state, name, Duration::from_secs(10)));
            AbuseGuard::new(limits(address, agent), Some(live))
        };
        (replica("a"), replica("b"), state)
    }

    #[tokio::test(start_paused = true)]
    async fn failed_authentications_count_across_the_replicas() {
        let (one, two, _state) = replicas(4, 6);
        // A guesser alternating between the replicas gets 4 in all, not 8.
        for guard in [&one, &two, &one, &two] {
            assert_eq!(guard.check_auth(Some(ALICE), "vault").await, Ok(()));
            guard.auth_failed(Some(ALICE), "vault").await;
        }
        for guard in [&one, &two] {
            let refused = guard.check_auth(Some(ALICE), "vault").await.unwrap_err();
            assert_eq!(refused.limit, Limit::AuthPerAddress);
            assert_eq!(refused.retry_after_secs, 15);
        }
        // Checks spend nothing: Bob still has all of his.
        for _ in 0..10 {
            assert_eq!(two.check_auth(Some(BOB), "vault").await, Ok(()));
        }
        // The agent's 6 are spent by two addresses on two replicas.
        one.auth_failed(Some(BOB), "vault").await;
        two.auth_failed(Some(BOB), "vault").await;
        let carol = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 3));
        let refused = one.check_auth(Some(carol), "vault").await.unwrap_err();
        assert_eq!(refused.limit, Limit::AuthPerAgent);
        assert_eq!(one.check_auth(Some(carol), "other").await, Ok(()));
        // The sessions API's routes count the address only, shared too.
        let dave = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 4));
        for guard in [&one, &two, &one, &two] {
            guard.address_auth_failed(Some(dave)).await;
        }
        assert!(one.check_address_auth(Some(dave)).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn while_the_shared_state_is_down_each_replica_counts_its_own() {
        let (one, two, state) = replicas(2, 0);
        state.set_down(true);
        one.auth_failed(Some(ALICE), "a").await;
        two.auth_failed(Some(ALICE), "a").await;
        // Neither replica has seen two failures: both let Alice try.
        assert_eq!(one.check_auth(Some(ALICE), "a").await, Ok(()));
        assert_eq!(two.check_auth(Some(ALICE), "a").await, Ok(()));
        one.auth_failed(Some(ALICE), "a").await;
        assert!(one.check_auth(Some(ALICE), "a").await.is_err());
        assert_eq!(two.check_auth(Some(ALICE), "a").await, Ok(()));
    }

    #[test]
    fn sockets_per_address_are_counted_until_dropped() {
        let guard = guard(0, 0);
        let first = guard.open_connection(Some(ALICE)).unwrap();
        let _second = guard.open_connection(Some(ALICE)).unwrap();
        let refused = guard.open_connection(Some(ALICE)).err().unwrap();
        assert_eq!(refused.limit, Limit::ConnectionsPerAddress);
        assert!(guard.open_connection(Some(BOB)).is_ok());
        assert!(guard.open_connection(None).is_ok());
        drop(first);
        assert!(guard.open_connection(Some(ALICE)).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_never_holds_more_than_its_bound() {
        let buckets: Buckets<u32> = Buckets::new(Rate::per_minute(1));
        let now = Instant::now();
        for key in 0..(MAX_TRACKED_KEYS as u32 + 10) {
            buckets.spend(&key, now);
        }
        assert_eq!(buckets.table.lock().len(), MAX_TRACKED_KEYS);
        // Once the first ones have refilled, they make room.
        tokio::time::advance(Duration::from_secs(60)).await;
        buckets.spend(&u32::MAX, Instant::now());
        assert_eq!(buckets.table.lock().len(), 1);
    }
}

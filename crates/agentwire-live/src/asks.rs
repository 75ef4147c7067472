//! Asking for a session's turn lease, and calling off an ask whose answer
//! was lost.
//!
//! An ask that times out (the link to Redis cut: packets held, nothing
//! closed) has still been sent, and Redis runs it when its bytes land,
//! after the link heals: it would grant a lease its replica never hears
//! of, and the session would answer "busy" on every replica until that
//! lease ran out. So every ask carries an id, and an ask that gets no
//! answer is called off by that id: if it was granted, the lease is freed;
//! if it has not landed yet, it is refused when it does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentwire_core::{Acquired, Fence, LiveError, SessionId, TurnLease};
use redis::Script;
use redis::aio::ConnectionManager;

use super::{RedisLive, SESSION_KEYS_TTL, session_key, unavailable};

/// Takes the lease unless the turn key exists and its holder is alive: a
/// holder (another replica) whose control subscription is gone
/// (`PUBSUB NUMSUB` of its channel, ARGV[4] the prefix) is a process that
/// died, whose connections the kernel closed, so its lease is taken at
/// once instead of after its TTL. A partition drops packets and closes
/// nothing: a cut-off holder keeps its lease until the TTL. An ask called
/// off before it landed (KEYS[3] exists) takes nothing; a granted one
/// leaves its id (ARGV[6]) in KEYS[4] for as long as the lease's first
/// life, so it can still be called off. The fence is the session's counter
/// plus one, or Redis's clock in microseconds when the counter is gone (so
/// it still exceeds every fence handed out before). The lease changed
/// hands unless the counter, before this grant, was the fence of the last
/// grant the caller heard of (ARGV[5]; empty: none): comparing replicas
/// instead would take a grant whose answer was lost for the caller's own,
/// though the caller never wrote under it nor read what the replicas
/// before it wrote. Returns `{fence, changed_hands}` or `{0, 0}` when
/// held. The fence travels as a string: Lua's numbers print large integers
/// in exponent form.
const ACQUIRE: &str = concat!(
    r"
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {'0', 0}
end
local holder = redis.call('GET', KEYS[1])
if holder then
  local replica = string.match(holder, '^(.*):%d+$')
  if replica == ARGV[1] then
    return {'0', 0}
  end
  local listening = redis.call('PUBSUB', 'NUMSUB', ARGV[4] .. 'ctl:' .. replica)
  if tonumber(listening[2]) > 0 then
    return {'0', 0}
  end
end
local fence_ttl = ARGV[3]
local before = redis.call('GET', KEYS[2])
",
    next_fence!(),
    r"
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'PX', ARGV[2])
redis.call('SET', KEYS[4], ARGV[6], 'PX', ARGV[2])
if before and before == ARGV[5] then
  return {fence, 0}
end
return {fence, 1}
"
);

/// Calls the ask ARGV[1] off: it is refused if it lands from now on
/// (KEYS[2], for ARGV[2] ms), and the lease it was granted, if it is still
/// that grant's (KEYS[3] names the ask), is freed.
const CALL_OFF: &str = r"
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
if redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
end
return 1
";

/// How long an ask stays called off: longer than its bytes can take to
/// land (a TCP connection whose peer stopped answering retransmits for
/// about a quarter of an hour before it gives up).
const CALLED_OFF_TTL: Duration = Duration::from_secs(20 * 60);

/// How long the call-off itself is tried while Redis cannot be reached.
const CALL_OFF_FOR: Duration = Duration::from_secs(60);

/// How long after a failed call-off the next is tried.
const CALL_OFF_RETRY: Duration = Duration::from_millis(200);

/// The scripts, and the ids of this process's asks: unique across the
/// replica's restarts (its start time is in them), since a called-off id
/// stays refused for [`CALLED_OFF_TTL`].
pub(crate) struct Asks {
    acquire: Script,
    /// Shared with the asks in flight: a `Script` holds its code.
    call_off: Arc<Script>,
    process: String,
    next: AtomicU64,
}

impl Asks {
    pub(crate) fn new() -> Asks {
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        Asks {
            acquire: Script::new(ACQUIRE),
            call_off: Arc::new(Script::new(CALL_OFF)),
            process: format!("{started:x}"),
            next: AtomicU64::new(0),
        }
    }

    fn next_id(&self, replica: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{replica}.{}.{n:x}", self.process)
    }
}

/// An ask on its way: unless its answer is read ([`Pending::answered`]),
/// dropping it calls the ask off in a task of its own.
struct Pending {
    call_off: Option<CallOff>,
}

impl Pending {
    fn answered(mut self) {
        self.call_off = None;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(call_off) = self.call_off.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(call_off.run());
        }
    }
}

/// What calling one ask off takes.
pub(crate) struct CallOff {
    script: Arc<Script>,
    connection: ConnectionManager,
    turn: String,
    called_off: String,
    asked: String,
    id: String,
}

impl CallOff {
    /// Tries until Redis answers, for up to [`CALL_OFF_FOR`]: an ask whose
    /// bytes land after that holds the session for one lease at most.
    pub(crate) async fn run(mut self) {
        let deadline = tokio::time::Instant::now() + CALL_OFF_FOR;
        loop {
            let sent: Result<u8, _> = self
                .script
                .key(&self.turn)
                .key(&self.called_off)
                .key(&self.asked)
                .arg(&self.id)
                .arg(RedisLive::millis(CALLED_OFF_TTL))
                .invoke_async(&mut self.connection)
                .await;
            if sent.is_ok() || tokio::time::Instant::now() + CALL_OFF_RETRY >= deadline {
                if let Err(e) = sent {
                    tracing::warn!(error = %unavailable(e), "calling off an unanswered lease ask failed");
                }
                return;
            }
            tokio::time::sleep(CALL_OFF_RETRY).await;
        }
    }
}

impl RedisLive {
    /// [`agentwire_core::TurnLeases::acquire`]: one ask, called off unless
    /// its answer is read.
    pub(crate) async fn ask(
        &self,
        session: &SessionId,
        known: Option<Fence>,
    ) -> Result<Acquired, LiveError> {
        let id = self.asks.next_id(&self.settings.replica_id);
        self.ask_as(session, known, id).await
    }

    /// [`RedisLive::ask`] with the ask's id given.
    pub(crate) async fn ask_as(
        &self,
        session: &SessionId,
        known: Option<Fence>,
        id: String,
    ) -> Result<Acquired, LiveError> {
        let call_off = self.call_off(session, id);
        let known = known.map(|fence| fence.0.to_string()).unwrap_or_default();
        let mut invocation = self.asks.acquire.prepare_invoke();
        invocation
            .key(&call_off.turn)
            .key(session_key(&self.settings.key_prefix, session, "fence"))
            .key(&call_off.called_off)
            .key(&call_off.asked)
            .arg(&self.settings.replica_id)
            .arg(RedisLive::millis(self.settings.lease_ttl))
            .arg(RedisLive::millis(SESSION_KEYS_TTL))
            .arg(&self.settings.key_prefix)
            .arg(known)
            .arg(&call_off.id);
        let pending = Pending {
            call_off: Some(call_off),
        };
        let answer: Result<(String, u8), _> =
            invocation.invoke_async(&mut self.connection.clone()).await;
        let (fence, changed) = answer.map_err(unavailable)?;
        pending.answered();
        let fence = fence
            .parse::<u64>()
            .map_err(|_| LiveError::Unavailable("redis: a fence that is not a number".into()))?;
        if fence == 0 {
            return Ok(Acquired::Held);
        }
        Ok(Acquired::Granted(TurnLease {
            fence: Fence(fence),
            changed_hands: changed == 1,
        }))
    }

    /// What calling off the ask `id` on `session` takes.
    pub(crate) fn call_off(&self, session: &SessionId, id: String) -> CallOff {
        let prefix = &self.settings.key_prefix;
        CallOff {
            script: self.asks.call_off.clone(),
            connection: self.connection.clone(),
            turn: session_key(prefix, session, "turn"),
            called_off: session_key(prefix, session, &format!("off:{id}")),
            asked: session_key(prefix, session, "asked"),
            id,
        }
    }
}

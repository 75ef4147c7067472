//! Against a real Redis server: `AGENTWIRE_TEST_REDIS` (`scripts/test`
//! starts one with `scripts/redis.sh`). Without it the tests are skipped,
//! except under `CI`. Each test uses a key prefix of its own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agentwire_core::live::conformance;
use agentwire_core::{Acquired, Fence, SessionId, TurnLease, TurnLeases};

use super::{ConnectError, RedisLive, RedisSettings};

fn redis_url() -> Option<String> {
    match std::env::var("AGENTWIRE_TEST_REDIS") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the Redis tests: set AGENTWIRE_TEST_REDIS (scripts/test does)"
            );
            eprintln!("skipped: no Redis server (set AGENTWIRE_TEST_REDIS)");
            None
        }
    }
}

/// A prefix no other test (or run) uses.
fn prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "test-{}-{}-{}:",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Replica `id` on the server at `url`, its keys under `prefix`.
fn settings(url: &str, prefix: &str, id: &str, lease_ttl: Duration) -> RedisSettings {
    RedisSettings {
        url: url.to_owned(),
        key_prefix: prefix.to_owned(),
        lease_ttl,
        timeout: Duration::from_secs(2),
        replica_id: id.to_owned(),
        tls_roots: None,
    }
}

async fn replica(url: &str, prefix: &str, id: &str, lease_ttl: Duration) -> RedisLive {
    RedisLive::connect(settings(url, prefix, id, lease_ttl))
        .await
        .unwrap()
}

/// Replicas r1 and r2 sharing a key prefix of their own on the test server,
/// with leases of `lease_ttl`; `None` when there is no server (skipped).
async fn two_replicas(lease_ttl: Duration) -> Option<(RedisLive, RedisLive)> {
    let url = redis_url()?;
    let prefix = prefix();
    let one = replica(&url, &prefix, "r1", lease_ttl).await;
    let two = replica(&url, &prefix, "r2", lease_ttl).await;
    Some((one, two))
}

fn session(name: &str) -> SessionId {
    SessionId::parse(name).unwrap()
}

fn granted(acquired: Acquired) -> TurnLease {
    match acquired {
        Acquired::Granted(lease) => lease,
        Acquired::Held => panic!("expected the lease to be granted"),
    }
}

#[tokio::test]
async fn redis_leases_pass_the_conformance_suite_across_two_replicas() {
    let Some((one, two)) = two_replicas(Duration::from_secs(10)).await else {
        return;
    };
    conformance::one_holder_at_a_time(&one, &two, &session("s-1")).await;
    conformance::sessions_are_independent(&one, &session("s-2"), &session("s-3")).await;
    conformance::sessions_are_independent(&two, &session("s-4"), &session("s:5")).await;
}

#[tokio::test]
async fn a_lease_changes_hands_unless_the_last_grant_was_the_one_the_caller_knows() {
    let Some((one, two)) = two_replicas(Duration::from_secs(10)).await else {
        return;
    };
    let id = session("hands");
    // No grant known: what this process read may be stale.
    let first = granted(one.acquire(&id, None).await.unwrap());
    assert!(first.changed_hands);
    one.release(&id, first.fence).await.unwrap();
    let again = granted(one.acquire(&id, Some(first.fence)).await.unwrap());
    assert!(!again.changed_hands, "no grant in between");
    one.release(&id, again.fence).await.unwrap();
    let other = granted(two.acquire(&id, None).await.unwrap());
    assert!(other.changed_hands);
    two.release(&id, other.fence).await.unwrap();
    let back = granted(one.acquire(&id, Some(again.fence)).await.unwrap());
    assert!(back.changed_hands, "r2 held it in between");
    one.release(&id, back.fence).await.unwrap();
    // A grant to this replica whose answer it never heard (an ask that
    // timed out, executed once its bytes arrived): another holder all the
    // same, since the replica neither wrote under it nor read before it.
    let unheard = granted(one.acquire(&id, None).await.unwrap());
    one.release(&id, unheard.fence).await.unwrap();
    let after = granted(one.acquire(&id, Some(back.fence)).await.unwrap());
    assert!(
        after.changed_hands,
        "a grant it did not hear of came between"
    );
    one.release(&id, after.fence).await.unwrap();
}

#[tokio::test]
async fn an_ask_called_off_frees_what_it_was_granted_and_takes_nothing_if_it_lands_after() {
    let Some((one, two)) = two_replicas(Duration::from_secs(10)).await else {
        return;
    };
    // Granted, but its answer never read: called off, the session is free
    // at once instead of after the lease's 10 s.
    let id = session("called-off");
    let lost = granted(one.ask_as(&id, None, "ask-1".to_owned()).await.unwrap());
    one.call_off(&id, "ask-1".to_owned()).run().await;
    assert!(!one.renew(&id, lost.fence).await.unwrap());
    let other = granted(two.acquire(&id, None).await.unwrap());
    // Calling off an ask that was answered long ago frees nobody else's.
    one.call_off(&id, "ask-1".to_owned()).run().await;
    assert!(two.renew(&id, other.fence).await.unwrap());
    two.release(&id, other.fence).await.unwrap();
    // Called off before it lands: it takes nothing.
    one.call_off(&id, "ask-2".to_owned()).run().await;
    let late = one.ask_as(&id, None, "ask-2".to_owned()).await.unwrap();
    assert_eq!(late, Acquired::Held);
    granted(two.acquire(&id, None).await.unwrap());
}

#[tokio::test]
async fn an_unrenewed_lease_expires_and_its_holder_can_no_longer_renew_it() {
    let ttl = Duration::from_millis(300);
    let Some((one, two)) = two_replicas(ttl).await else {
        return;
    };
    assert_eq!(one.renew_every(), Some(Duration::from_millis(100)));
    let id = session("expiry");
    let held = granted(one.acquire(&id, None).await.unwrap());
    // Renewed, it outlives its TTL.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(one.renew(&id, held.fence).await.unwrap());
    }
    assert_eq!(two.acquire(&id, None).await.unwrap(), Acquired::Held);
    // Not renewed, it is gone after its TTL and the next holder gets a
    // larger fence; the old holder's renewal and release do nothing.
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let taken = granted(two.acquire(&id, None).await.unwrap());
    assert!(taken.fence > held.fence);
    assert!(!one.renew(&id, held.fence).await.unwrap());
    one.release(&id, held.fence).await.unwrap();
    assert_eq!(one.acquire(&id, None).await.unwrap(), Acquired::Held);
    two.release(&id, taken.fence).await.unwrap();
}

#[tokio::test]
async fn fences_keep_growing_after_the_counter_is_lost() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix();
    let one = replica(&url, &prefix, "r1", Duration::from_secs(10)).await;
    let id = session("wiped");
    let mut fences = Vec::new();
    for _ in 0..3 {
        let lease = granted(one.acquire(&id, None).await.unwrap());
        fences.push(lease.fence);
        one.release(&id, lease.fence).await.unwrap();
    }
    // As after a Redis restart without persistence: the counter is gone.
    let mut connection = one.connection.clone();
    redis::cmd("DEL")
        .arg(one.key(&id, "fence"))
        .query_async::<()>(&mut connection)
        .await
        .unwrap();
    let after = granted(one.acquire(&id, None).await.unwrap());
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    assert!(
        after.fence > *fences.last().unwrap(),
        "{after:?} after {fences:?}"
    );
    assert!(
        after.fence > Fence(1_700_000_000_000_000),
        "seeded from the clock"
    );
    one.release(&id, after.fence).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_that_does_not_quote_the_url() {
    let error = refused("redis://:redis-s3cret-42@127.0.0.1:1/0").await;
    assert!(matches!(error, ConnectError::Unreachable(_)), "{error:?}");
    let error = refused("http://:redis-s3cret-42@127.0.0.1:1/0").await;
    assert!(matches!(error, ConnectError::InvalidUrl(_)), "{error:?}");
}

/// Why connecting to `url` fails; the error never quotes its password.
async fn refused(url: &str) -> ConnectError {
    let settings = settings(url, "x:", "r1", Duration::from_secs(10));
    let Err(error) = RedisLive::connect(settings).await else {
        panic!("connected to {url}")
    };
    assert!(!error.to_string().contains("s3cret"), "{error}");
    error
}

#[tokio::test]
async fn redis_logs_pass_the_shared_log_conformance_suite_across_two_replicas() {
    let Some((one, two)) = two_replicas(Duration::from_secs(10)).await else {
        return;
    };
    use agentwire_core::live::logs_conformance as suite;
    suite::appends_are_fenced_and_read_back(&one, &two, &session("s-append")).await;
    suite::turns_are_found_and_epochs_replaced(&one, &two, &session("s-turns")).await;
    suite::followers_wait_for_appends(&one, &two, &session("s-follow")).await;
    suite::controls_reach_the_holder(&one, &two, &session("s-controls")).await;
    suite::rates_are_shared(&one, &two, "turns:alice").await;
}

#[tokio::test]
async fn a_control_the_holder_missed_or_never_heard_of_reaches_it_with_its_next_renewal() {
    let Some((one, two)) = two_replicas(Duration::from_secs(5)).await else {
        return;
    };
    let mut controls = agentwire_core::live::SharedLogs::take_controls(&one).unwrap();
    let id = session("mailbox");
    let held = granted(one.acquire(&id, None).await.unwrap());
    // Woken at once: the listener empties the mailbox.
    let cancel = agentwire_core::live::Control::Cancel {
        turn: agentwire_core::TurnId(3),
    };
    assert!(
        agentwire_core::live::SharedLogs::send(&two, &id, &cancel)
            .await
            .unwrap()
    );
    let woken = tokio::time::timeout(Duration::from_secs(5), controls.recv()).await;
    assert_eq!(woken.unwrap().unwrap(), (id.clone(), cancel.clone()));
    // A control whose wake-up the holder missed (cut off from Redis when
    // it was published) waits in the mailbox for the next renewal.
    let missed = agentwire_core::live::Control::Cancel {
        turn: agentwire_core::TurnId(4),
    };
    put_in_mailbox(&one, &id, &missed).await;
    assert!(controls.try_recv().is_err(), "nothing delivers it yet");
    assert!(one.renew(&id, held.fence).await.unwrap());
    assert_eq!(controls.try_recv().unwrap(), (id.clone(), missed));
    // Taken once: the next renewal finds the mailbox empty.
    assert!(one.renew(&id, held.fence).await.unwrap());
    assert!(controls.try_recv().is_err(), "delivered twice");
    // A renewal whose reply was lost (Redis ran it, the link timed out
    // before the answer came back) leaves the control for the next one.
    let unanswered = agentwire_core::live::Control::Cancel {
        turn: agentwire_core::TurnId(5),
    };
    put_in_mailbox(&one, &id, &unanswered).await;
    let _lost_reply: (u8, Vec<Vec<u8>>) = one
        .renew
        .key(one.key(&id, "turn"))
        .key(one.mailbox(&id))
        .arg(one.holder(held.fence))
        .arg(RedisLive::millis(one.settings.lease_ttl))
        .invoke_async(&mut one.connection.clone())
        .await
        .unwrap();
    assert!(controls.try_recv().is_err(), "nothing delivered it");
    assert!(one.renew(&id, held.fence).await.unwrap());
    assert_eq!(controls.try_recv().unwrap(), (id.clone(), unanswered));
    assert!(one.renew(&id, held.fence).await.unwrap());
    assert!(controls.try_recv().is_err(), "acknowledged once delivered");
    one.release(&id, held.fence).await.unwrap();
}

/// Puts `control` in the session's mailbox as a sender would, without the
/// wake-up: what a holder cut off from Redis when it was sent missed.
async fn put_in_mailbox(live: &RedisLive, id: &SessionId, control: &agentwire_core::live::Control) {
    let _: () = redis::cmd("RPUSH")
        .arg(live.mailbox(id))
        .arg(crate::codec::encode_control(id, control))
        .query_async(&mut live.connection.clone())
        .await
        .unwrap();
}

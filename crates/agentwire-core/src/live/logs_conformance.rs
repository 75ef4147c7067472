//! The conformance suite every [`SharedLogs`](super::SharedLogs) adapter passes, for the
//! adapters' own tests. `one` and `two` are two replicas' views of the same
//! shared state (each its own [`TurnLeases`](super::TurnLeases) too); `session` is an id no
//! other test uses.

use std::sync::Arc;
use std::time::Duration;

use super::logs::{Append, Appended, Control};
use super::{Acquired, Fence};
use crate::ids::SessionId;
use crate::log::{Epoch, LogEntry, TurnId};
use crate::turn::{Reply, TurnEvent};

use super::logs::SharedLive as Live;

fn entry(seq: u64, turn: u64, event: TurnEvent) -> LogEntry {
    LogEntry {
        seq,
        turn: TurnId(turn),
        event: Arc::new(event),
    }
}

fn started(seq: u64) -> LogEntry {
    entry(
        seq,
        seq,
        TurnEvent::TurnStarted {
            agent: "agent".to_owned(),
            question: Some(seq),
        },
    )
}

fn delta(seq: u64, turn: u64, text: &str) -> LogEntry {
    entry(seq, turn, TurnEvent::TextDelta(text.to_owned()))
}

fn completed(seq: u64, turn: u64) -> LogEntry {
    entry(seq, turn, TurnEvent::Completed(Reply::text("done")))
}

async fn fence(live: &dyn Live, session: &SessionId) -> Fence {
    match live.acquire(session, None).await.unwrap() {
        Acquired::Granted(lease) => lease.fence,
        Acquired::Held => panic!("expected the lease to be granted"),
    }
}

async fn append(
    live: &dyn Live,
    session: &SessionId,
    fence: Fence,
    epoch: Epoch,
    entries: &[LogEntry],
    release: bool,
) -> Appended {
    let batch = Append {
        fence,
        epoch,
        entries,
        release,
    };
    live.append(session, batch).await.unwrap()
}

/// The first epoch proposed stays; the holder's appends are read back by
/// the other replica, in order, once each (a retry adds nothing); anyone
/// else's are fenced off; a terminal batch sent with `release` frees the
/// lease with it.
pub async fn appends_are_fenced_and_read_back(one: &dyn Live, two: &dyn Live, session: &SessionId) {
    let epoch = Epoch(0x1234);
    let head = one.open(session, epoch).await.unwrap();
    assert_eq!((head.epoch, head.head, head.running), (epoch, 0, None));
    assert_eq!(two.open(session, Epoch(0x9999)).await.unwrap().epoch, epoch);

    let held = fence(one, session).await;
    let first = [started(1), delta(2, 1, "Hel")];
    assert_eq!(
        append(one, session, held, epoch, &first, false).await,
        Appended::Done
    );
    assert_eq!(
        append(one, session, held, epoch, &first, false).await,
        Appended::Done
    );
    let page = two.read_after(session, 0).await.unwrap();
    assert_eq!(page.entries, first.to_vec());
    assert_eq!((page.head.head, page.head.running), (2, Some(TurnId(1))));
    assert_eq!(
        two.read_after(session, 1).await.unwrap().entries,
        first[1..].to_vec()
    );

    let intruder = Fence(held.0 + 1_000);
    let stray = [delta(3, 1, "x")];
    assert_eq!(
        append(two, session, intruder, epoch, &stray, false).await,
        Appended::Fenced
    );
    assert_eq!(two.acquire(session, None).await.unwrap(), Acquired::Held);

    let last = [delta(3, 1, "lo"), completed(4, 1)];
    assert_eq!(
        append(one, session, held, epoch, &last, true).await,
        Appended::Done
    );
    let page = two.read_after(session, 2).await.unwrap();
    assert_eq!(page.entries, last.to_vec());
    assert_eq!((page.head.head, page.head.running), (4, None));
    // Released with the terminal: the other replica takes the next turn,
    // and the old fence appends nothing more.
    let next = fence(two, session).await;
    assert_eq!(
        append(one, session, held, epoch, &[started(5)], false).await,
        Appended::Fenced
    );
    two.release(session, next).await.unwrap();
}

/// `read_turn_of` reads from the start of the turn holding a seq, across
/// batches; a log of another epoch is replaced by the producer's.
pub async fn turns_are_found_and_epochs_replaced(
    one: &dyn Live,
    two: &dyn Live,
    session: &SessionId,
) {
    let epoch = Epoch(0xabc);
    one.open(session, epoch).await.unwrap();
    let held = fence(one, session).await;
    let first_turn = [started(1), delta(2, 1, "a"), completed(3, 1)];
    append(one, session, held, epoch, &first_turn, false).await;
    append(
        one,
        session,
        held,
        epoch,
        &[started(4), delta(5, 4, "b")],
        false,
    )
    .await;
    append(one, session, held, epoch, &[delta(6, 4, "c")], false).await;

    let from_start =
        |page: super::logs::LogPage| -> Vec<u64> { page.entries.iter().map(|e| e.seq).collect() };
    assert_eq!(
        from_start(two.read_turn_of(session, 6).await.unwrap()),
        vec![4, 5, 6]
    );
    assert_eq!(
        from_start(two.read_turn_of(session, 4).await.unwrap()),
        vec![4, 5, 6]
    );
    assert_eq!(
        from_start(two.read_turn_of(session, 2).await.unwrap()),
        vec![1, 2, 3, 4, 5, 6]
    );
    assert!(
        two.read_turn_of(session, 7)
            .await
            .unwrap()
            .entries
            .is_empty()
    );

    let other = Epoch(0xdef);
    append(one, session, held, other, &[completed(7, 4)], true).await;
    let page = two.read_after(session, 0).await.unwrap();
    assert_eq!(page.head.epoch, other);
    assert_eq!(page.entries, vec![completed(7, 4)]);
    assert_eq!(page.head.head, 7);
}

/// A follower waits for the next batch and returns with it; with nothing
/// appended it returns empty after its wait.
pub async fn followers_wait_for_appends(one: &dyn Live, two: &dyn Live, session: &SessionId) {
    let epoch = Epoch(0x77);
    one.open(session, epoch).await.unwrap();
    let held = fence(one, session).await;
    append(one, session, held, epoch, &[started(1)], false).await;
    let mut follower = two.follow(session).await.unwrap();
    let quiet = follower
        .read_after(1, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(quiet.entries.is_empty());
    assert_eq!(quiet.head.head, 1);
    let waiting = follower.read_after(1, Duration::from_secs(5));
    let appending = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        append(one, session, held, epoch, &[delta(2, 1, "late")], false).await
    };
    let (page, _) = tokio::join!(waiting, appending);
    assert_eq!(page.unwrap().entries, vec![delta(2, 1, "late")]);
    one.release(session, held).await.unwrap();
}

/// A control reaches the replica holding the session's lease, and only
/// while someone holds it.
pub async fn controls_reach_the_holder(one: &dyn Live, two: &dyn Live, session: &SessionId) {
    let mut controls = one
        .take_controls()
        .expect("the first call takes the controls");
    assert!(one.take_controls().is_none());
    let cancel = Control::Cancel { turn: TurnId(9) };
    assert!(
        !two.send(session, &cancel).await.unwrap(),
        "nobody holds it"
    );
    let held = fence(one, session).await;
    assert!(two.send(session, &cancel).await.unwrap());
    let received = tokio::time::timeout(Duration::from_secs(5), controls.recv())
        .await
        .expect("the control arrives")
        .unwrap();
    assert_eq!(received, (session.clone(), cancel));
    one.release(session, held).await.unwrap();
}

/// A bucket spent on one replica is spent on the other: `per_minute`
/// tokens at once, then a wait of about one token's interval; other keys
/// are their own.
pub async fn rates_are_shared(one: &dyn Live, two: &dyn Live, key: &str) {
    for spender in [one, two, one] {
        // A check spends nothing, however often it is made.
        for _ in 0..4 {
            assert_eq!(two.check(key, 3).await.unwrap(), None);
        }
        assert_eq!(spender.spend(key, 3).await.unwrap(), None);
    }
    let checked = one
        .check(key, 3)
        .await
        .unwrap()
        .expect("a spent bucket checks empty on the other replica too");
    let wait = two
        .spend(key, 3)
        .await
        .unwrap()
        .expect("the fourth token in a minute is refused");
    assert!(
        wait > Duration::from_secs(10) && wait <= Duration::from_secs(20),
        "{wait:?}: the next token comes a third of a minute after the first"
    );
    assert!(checked >= wait, "{checked:?} then {wait:?}");
    assert!(one.spend(key, 3).await.unwrap().is_some());
    let other = format!("{key}-other");
    assert_eq!(two.spend(&other, 3).await.unwrap(), None);
}

use super::*;
use crate::turn::Reply;

fn delta(text: &str) -> TurnEvent {
    TurnEvent::TextDelta(text.to_owned())
}

fn completed(text: &str) -> TurnEvent {
    TurnEvent::Completed(Reply::text(text))
}

/// Everything a reader after `after` can read now, without waiting.
fn drain(log: &Arc<SessionLog>, after: u64) -> Vec<LogEntry> {
    let mut reader = log.reader_after(after);
    let mut read = Vec::new();
    while let Some(entry) = reader.try_next().expect("not lagged") {
        read.push(entry);
    }
    read
}

fn seqs(entries: &[LogEntry]) -> Vec<u64> {
    entries.iter().map(|e| e.seq).collect()
}

/// A scripted turn with every kind of event a turn has.
fn scripted_turn(log: &Arc<SessionLog>) {
    let writer = log.start_turn("assistant", None);
    writer.append(delta("Hel"));
    writer.append(TurnEvent::AgentSwitched {
        name: "helper".to_owned(),
        delegated: true,
    });
    writer.append(delta("lo"));
    writer.append(TurnEvent::ToolCall(crate::turn::ToolCall {
        id: "call-1".to_owned(),
        name: "lookup".to_owned(),
        arguments: serde_json::json!({"q": "x"}),
        side: crate::turn::ToolSide::Client,
        consent_message: None,
        categories: Vec::new(),
    }));
    writer.append(TurnEvent::ToolResult {
        id: "call-1".to_owned(),
        outcome: ToolOutcome::Ok(serde_json::json!(1)),
        side: crate::turn::ToolSide::Client,
    });
    writer.finish(completed("Hello"));
}

#[test]
fn seqs_count_from_one_without_gaps_across_turns() {
    let log = SessionLog::new(Epoch(7));
    scripted_turn(&log);
    scripted_turn(&log);
    let all = drain(&log, 0);
    assert_eq!(seqs(&all), (1..=14).collect::<Vec<_>>());
    assert_eq!(log.head(), 14);
    // Each turn: its TurnStarted (whose seq is the turn id) first, one
    // terminal last.
    for turn in [TurnId(1), TurnId(8)] {
        let entries: Vec<_> = all.iter().filter(|e| e.turn == turn).collect();
        assert_eq!(entries[0].seq, turn.0);
        assert!(matches!(*entries[0].event, TurnEvent::TurnStarted { .. }));
        let terminals = entries.iter().filter(|e| e.event.is_terminal()).count();
        assert_eq!(terminals, 1);
        assert!(entries.last().unwrap().event.is_terminal());
    }
}

#[test]
fn nothing_is_appended_to_a_turn_after_its_terminal() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    writer.finish(completed("done"));
    writer.append(delta("late"));
    writer.finish(TurnEvent::Failed(TurnFailure::internal()));
    drop(writer);
    assert_eq!(log.head(), 2);
    assert_eq!(log.running(), None);
}

#[test]
fn a_writer_dropped_without_a_terminal_ends_its_turn_failed() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    writer.append(delta("par"));
    drop(writer);
    let all = drain(&log, 0);
    assert_eq!(all.len(), 3);
    assert!(matches!(&*all[2].event, TurnEvent::Failed(f) if f.code == crate::ErrorCode::Internal));
    assert_eq!(log.running(), None);
}

#[test]
fn a_turn_started_while_another_is_open_ends_that_one_first() {
    let log = SessionLog::new(Epoch(1));
    let first = log.start_turn("a", None);
    let second = log.start_turn("a", None);
    first.finish(completed("too late"));
    second.finish(completed("ok"));
    let all = drain(&log, 0);
    let kinds: Vec<_> = all
        .iter()
        .map(|e| match &*e.event {
            TurnEvent::TurnStarted { .. } => "start",
            TurnEvent::Failed(_) => "failed",
            TurnEvent::Completed(_) => "completed",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["start", "failed", "start", "completed"]);
    assert_eq!(all[1].turn, TurnId(1));
    assert_eq!(all[3].turn, TurnId(3));
}

#[test]
fn a_reader_from_any_cut_point_reads_exactly_the_rest() {
    let log = SessionLog::new(Epoch(1));
    scripted_turn(&log);
    scripted_turn(&log);
    let full = drain(&log, 0);
    for k in 0..=log.head() {
        let rest = drain(&log, k);
        assert_eq!(
            seqs(&rest),
            ((k + 1)..=log.head()).collect::<Vec<_>>(),
            "after {k}"
        );
        for (read, expected) in rest.iter().zip(&full[k as usize..]) {
            assert_eq!(*read.event, *expected.event);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiting_reader_gets_what_is_appended_later_in_order_once() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    let mut reader = log.reader_after(0);
    let read = tokio::spawn(async move {
        let mut read = Vec::new();
        loop {
            let entry = reader.next().await.expect("not lagged");
            let terminal = entry.event.is_terminal();
            read.push(entry.seq);
            if terminal {
                return read;
            }
        }
    });
    for i in 0..50 {
        writer.append(delta(&i.to_string()));
        if i % 7 == 0 {
            tokio::task::yield_now().await;
        }
    }
    writer.finish(completed("x"));
    assert_eq!(read.await.unwrap(), (1..=52).collect::<Vec<_>>());
}

#[test]
fn the_log_keeps_the_running_turn_and_the_two_before_it() {
    let log = SessionLog::new(Epoch(1));
    for _ in 0..4 {
        scripted_turn(&log);
    }
    let writer = log.start_turn("a", None);
    writer.append(delta("x"));
    let kept = drain(&log, 14);
    let turns: std::collections::BTreeSet<_> = kept.iter().map(|e| e.turn).collect();
    assert_eq!(
        turns.into_iter().collect::<Vec<_>>(),
        [TurnId(15), TurnId(22), TurnId(29)]
    );
    let mut behind = log.reader_after(0);
    assert_eq!(
        behind.try_next(),
        Err(Lagged {
            after: 0,
            oldest: 15
        })
    );
}

#[test]
fn the_log_is_bounded_in_entries_and_bytes_whatever_a_turn_sends() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    for _ in 0..(MAX_ENTRIES * 3) {
        writer.append(delta("abc"));
    }
    let (entries, bytes) = log.held();
    assert_eq!(entries, MAX_ENTRIES);
    assert!(bytes <= MAX_BYTES);
    let big = "x".repeat(100 * 1024);
    for _ in 0..100 {
        writer.append(TurnEvent::TextDelta(big.clone()));
    }
    let (entries, bytes) = log.held();
    assert!(bytes <= MAX_BYTES, "{bytes}");
    assert!(entries <= MAX_BYTES / big.len(), "{entries}");
    // One entry over the byte bound still stays: the newest is always kept.
    writer.finish(TurnEvent::Completed(Reply::text("y".repeat(2 * MAX_BYTES))));
    assert_eq!(log.held().0, 1);
    let last = drain(&log, log.head() - 1);
    assert!(last[0].event.is_terminal());
}

#[test]
fn a_reader_far_behind_reads_merged_deltas_with_the_last_seq() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    let count = COALESCE_BEHIND as usize + 100;
    for i in 0..count {
        writer.append(delta(&format!("{i},")));
    }
    writer.append(TurnEvent::Interrupt);
    writer.append(delta("tail"));
    writer.finish(completed("x"));
    let full: String = (0..count).map(|i| format!("{i},")).collect();

    let mut reader = log.reader_after(1);
    let mut read = Vec::new();
    while let Some(entry) = reader.try_next().expect("not lagged") {
        read.push(entry);
    }
    assert_eq!(reader.take_merged(), count as u64 - 1);
    assert_eq!(reader.take_merged(), 0);
    // The first read merges every delta up to the interrupt, which is a
    // control event and never merged; close to the head, deltas come as
    // they were.
    let TurnEvent::TextDelta(merged) = &*read[0].event else {
        panic!("a merged delta first: {:?}", read[0]);
    };
    assert_eq!(*merged, full);
    assert_eq!(read[0].seq, 1 + count as u64);
    assert!(matches!(*read[1].event, TurnEvent::Interrupt));
    assert_eq!(*read[2].event, delta("tail"));
    assert!(read[3].event.is_terminal());
    assert_eq!(read.last().unwrap().seq, log.head());

    // Near the head nothing is merged.
    let near = drain(&log, log.head() - 10);
    assert_eq!(near.len(), 10);
}

#[tokio::test(start_paused = true)]
async fn a_reader_is_slow_by_age_never_by_how_far_behind_it_is() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    let idle = log.reader_after(0);
    assert!(!idle.is_slow());
    tokio::time::advance(SLOW_AGE + Duration::from_millis(1)).await;
    assert!(idle.is_slow(), "its next entry is older than the age bound");

    let log = SessionLog::new(Epoch(2));
    let writer2 = log.start_turn("a", None);
    let behind = log.reader_after(0);
    for _ in 0..MAX_ENTRIES - 1 {
        writer2.append(delta("x"));
    }
    assert!(
        !behind.is_slow(),
        "a whole log behind, but its next entry is new"
    );
    let mut caught_up = log.reader_after(log.head());
    assert!(!caught_up.is_slow());
    assert_eq!(caught_up.try_next(), Ok(None));
    drop(writer);
}

/// A turn writing far faster than its reader reads (the `flood` script: 40
/// MiB of 1 KiB deltas) is held at the log's bound, never overtaking a
/// reader that reads: every byte arrives, far behind reads come merged.
#[tokio::test]
async fn a_paced_writer_never_overtakes_a_reader_that_reads() {
    const DELTAS: usize = 8 * 1024;
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    let mut reader = log.reader_after(0);
    let delta_text = "x".repeat(1024);
    let writing = tokio::spawn(async move {
        for _ in 0..DELTAS {
            writer.append_paced(delta(&delta_text)).await;
        }
        writer.finish(completed("flooded"));
    });
    let (mut text_bytes, mut merged) = (0, 0);
    loop {
        let entry = reader.next().await.expect("never overtaken");
        merged += reader.take_merged();
        match &*entry.event {
            TurnEvent::TextDelta(text) => text_bytes += text.len(),
            event if event.is_terminal() => break,
            _ => {}
        }
        // A reader slower than the writer: it yields after every entry.
        tokio::task::yield_now().await;
    }
    writing.await.unwrap();
    assert_eq!(text_bytes, DELTAS * 1024, "every delta's text arrived");
    assert!(merged > 0, "far behind, deltas came merged");
    let (entries, bytes) = log.held();
    assert!(entries <= MAX_ENTRIES && bytes <= MAX_BYTES);
}

/// A reader that stops reading holds a paced writer back for [`SLOW_AGE`]
/// at most: then it lags, and the writer goes on within the bounds.
#[tokio::test(start_paused = true)]
async fn a_reader_that_stops_holds_a_paced_writer_for_the_slow_age_at_most() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    let mut stopped = log.reader_after(0);
    let started = Instant::now();
    for _ in 0..MAX_ENTRIES * 2 {
        writer.append_paced(delta("x")).await;
    }
    let held = started.elapsed();
    assert!(held >= SLOW_AGE, "held {held:?}");
    assert!(held < SLOW_AGE * 2, "held {held:?}");
    assert!(stopped.try_next().is_err(), "it lagged");
    assert!(log.held().0 <= MAX_ENTRIES);

    // Once gone, a reader holds nothing back.
    drop(stopped);
    let started = Instant::now();
    for _ in 0..MAX_ENTRIES * 2 {
        writer.append_paced(delta("x")).await;
    }
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn memory_stays_flat_however_long_a_reader_does_not_read() {
    let log = SessionLog::new(Epoch(1));
    let _never_reads = log.reader_after(0);
    let mut peak = 0;
    for _turn in 0..50 {
        let writer = log.start_turn("a", None);
        for _ in 0..500 {
            writer.append(delta("some words of a reply "));
        }
        writer.finish(completed("x"));
        peak = peak.max(log.held().1);
    }
    assert!(peak <= MAX_BYTES);
    assert!(log.held().0 <= MAX_ENTRIES);
}

#[test]
fn epochs_travel_as_sixteen_hex_digits() {
    assert_eq!(Epoch(0xab).to_string(), "00000000000000ab");
}

#[test]
fn a_rejoin_reads_from_the_start_of_the_turn_that_holds_the_next_entry() {
    let log = SessionLog::new(Epoch(1));
    scripted_turn(&log); // seqs 1..=7
    let writer = log.start_turn("a", None); // 8
    writer.append(delta("one")); // 9
    writer.append(delta("two")); // 10
    // Entry 7 is turn 1's terminal: a rejoin after it starts at turn 8.
    // Caught up mid-turn (after 10, the head) still starts at the turn's
    // start, for the dialect's state.
    for (after, start) in [(0, 1), (3, 1), (6, 1), (7, 8), (8, 8), (9, 8), (10, 8)] {
        let mut reader = log.rejoin_reader(after).expect("in the log");
        let first = reader.try_next().unwrap().unwrap();
        assert_eq!(first.seq, start, "after {after}");
        assert!(matches!(*first.event, TurnEvent::TurnStarted { .. }));
    }
    let mut caught_up = log.rejoin_reader(10).expect("at the head");
    for _ in 8..=10 {
        caught_up.try_next().unwrap().unwrap();
    }
    assert_eq!(caught_up.try_next(), Ok(None));
    writer.finish(completed("x"));
    assert_eq!(caught_up.try_next().unwrap().unwrap().seq, 11);
    // After a finished turn, at the head: nothing to replay, the next
    // turn follows.
    let mut idle = log.rejoin_reader(11).expect("at the head");
    assert_eq!(idle.try_next(), Ok(None));
    // A position this log never gave.
    assert!(log.rejoin_reader(12).is_none());
}

#[test]
fn a_rejoin_the_log_no_longer_reaches_is_refused() {
    let log = SessionLog::new(Epoch(1));
    for _ in 0..4 {
        scripted_turn(&log);
    }
    // Turn 1 is gone; 8, 15 and 22 are kept whole.
    assert!(log.rejoin_reader(6).is_none());
    assert_eq!(log.rejoin_reader(13).unwrap().cursor(), 7);
    assert_eq!(log.rejoin_reader(14).unwrap().cursor(), 14);
    // The running turn's own start trimmed by the entry bound: refused.
    let writer = log.start_turn("a", None);
    for _ in 0..MAX_ENTRIES {
        writer.append(delta("x"));
    }
    assert!(log.rejoin_reader(log.head() - 5).is_none());
}

#[test]
fn finished_turns_shrink_to_their_own_bound_when_the_next_turn_starts() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("a", None);
    let media = "m".repeat(256 * 1024);
    for _ in 0..16 {
        writer.append(TurnEvent::TextDelta(media.clone()));
    }
    writer.finish(completed("x"));
    // The whole 4 MiB turn stays while nothing else happens: its reader may
    // still be catching up.
    assert!(log.held().1 > 4 * 1024 * 1024);
    let next = log.start_turn("a", None);
    assert!(
        log.held().1 <= FINISHED_MAX_BYTES + 1024,
        "{:?}",
        log.held()
    );
    next.finish(completed("y"));
}

/// Every entry of `log`, exactly as appended.
fn exact(log: &Arc<SessionLog>, after: u64) -> Vec<LogEntry> {
    let mut reader = log.publishing_reader(after);
    let mut read = Vec::new();
    while let Some(entry) = reader.try_next_exact().expect("not lagged") {
        read.push(entry);
    }
    read
}

#[test]
fn a_mirror_holds_the_entries_of_the_log_it_follows_at_the_same_seqs() {
    let source = SessionLog::new(Epoch(7));
    source
        .start_turn("assistant", None)
        .finish(completed("one"));
    let mirror = SessionLog::starting_at(Epoch(7), source.head());
    scripted_turn(&source);
    let after_first = exact(&source, 2);
    // In two parts, the second overlapping the first (a retried batch).
    mirror.mirror(&after_first[..3]).unwrap();
    assert_eq!(mirror.running(), Some(TurnId(3)));
    mirror.mirror(&after_first[1..]).unwrap();
    assert_eq!(exact(&mirror, 2), after_first);
    assert_eq!((mirror.head(), mirror.running()), (source.head(), None));
    // A client rejoins the mirror as it would the source: from the start
    // of the turn holding its position.
    let mut reader = mirror.rejoin_reader(5).unwrap();
    assert_eq!(reader.try_next().unwrap().map(|e| e.seq), Some(3));
    assert!(mirror.rejoin_reader(1).is_none(), "not mirrored: reload");
}

#[test]
fn a_mirror_refuses_a_gap_and_a_reset_makes_its_readers_lag() {
    let source = SessionLog::new(Epoch(1));
    scripted_turn(&source);
    let entries = exact(&source, 0);
    let mirror = SessionLog::starting_at(Epoch(1), 0);
    assert_eq!(
        mirror.mirror(&entries[2..]),
        Err(MirrorGap { expected: 1 }),
        "entries 1 and 2 are missing"
    );
    mirror.mirror(&entries[..2]).unwrap();
    let mut reader = mirror.reader_after(0);
    assert!(reader.try_next().unwrap().is_some());
    mirror.reset(Epoch(2), 40);
    assert!(reader.try_next().is_err(), "the old epoch's reader lagged");
    assert!(reader.is_slow());
    assert_eq!(
        (mirror.epoch(), mirror.head(), mirror.held().0),
        (Epoch(2), 40, 0)
    );
    let fresh = mirror.reader_after(40);
    assert_eq!(fresh.epoch(), Epoch(2));
}

#[test]
fn a_backfill_reaches_back_from_the_head_and_a_turn_left_open_ends_interrupted() {
    let source = SessionLog::new(Epoch(3));
    let writer = source.start_turn("assistant", None);
    writer.append(delta("partial"));
    std::mem::forget(writer);
    let entries = exact(&source, 0);
    let mirror = SessionLog::starting_at(Epoch(3), source.head());
    assert!(mirror.backfill(&entries));
    assert_eq!(exact(&mirror, 0), entries);
    assert_eq!(mirror.running(), Some(TurnId(1)));
    // The next turn here ends the one its replica left open.
    let next = mirror.start_turn("assistant", None);
    let ended = exact(&mirror, 2);
    match &*ended[0].event {
        TurnEvent::Failed(failure) => {
            assert_eq!(failure.message, crate::turn::TURN_INTERRUPTED);
            assert_eq!(ended[0].turn, TurnId(1));
        }
        other => panic!("expected the open turn's end, got {other:?}"),
    }
    assert_eq!(next.turn(), TurnId(4));
}

#[test]
fn a_mirrored_turn_names_its_question_while_its_start_is_held() {
    let source = SessionLog::new(Epoch(3));
    source
        .start_turn("assistant", Some(7))
        .finish(completed("one"));
    let writer = source.start_turn("assistant", Some(9));
    writer.append(delta("partial"));
    let mirror = SessionLog::starting_at(Epoch(3), source.head());
    assert!(mirror.backfill(&exact(&source, 0)));
    assert_eq!(mirror.question_of(TurnId(1)), Some(7));
    assert_eq!(mirror.question_of(TurnId(3)), Some(9));
    // An entry that is not a turn's start, or one past the head, names none.
    assert_eq!(mirror.question_of(TurnId(2)), None);
    assert_eq!(mirror.question_of(TurnId(9)), None);
    assert_eq!(
        source.start_turn("a", None).log().question_of(TurnId(6)),
        None
    );
}

#[test]
fn exact_reads_never_merge_deltas() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("assistant", None);
    for _ in 0..(COALESCE_BEHIND + 10) {
        writer.append(delta("x"));
    }
    assert_eq!(exact(&log, 0).len() as u64, COALESCE_BEHIND + 11);
    assert!(drain(&log, 0).len() < exact(&log, 0).len());
}

#[test]
fn a_pending_client_call_is_known_until_its_outcome() {
    let log = SessionLog::new(Epoch(1));
    let writer = log.start_turn("assistant", None);
    writer.append(TurnEvent::ToolCall(crate::turn::ToolCall {
        id: "c1".to_owned(),
        name: "where".to_owned(),
        arguments: serde_json::json!({}),
        side: crate::turn::ToolSide::Client,
        consent_message: None,
        categories: Vec::new(),
    }));
    assert!(log.awaits_client_call("c1"));
    assert!(!log.awaits_client_call("c2"));
    writer.append(TurnEvent::ToolResult {
        id: "c1".to_owned(),
        outcome: crate::turn::ToolOutcome::Ok(serde_json::json!("here")),
        side: crate::turn::ToolSide::Client,
    });
    assert!(!log.awaits_client_call("c1"));
}

#[test]
fn a_copy_of_a_shared_log_shows_its_clients_only_what_is_published() {
    let log = SessionLog::starting_at(Epoch(3), 10);
    let writer = log.start_turn("assistant", Some(4));
    writer.append(delta("Hel"));
    writer.append(delta("lo"));
    let mut client = log.reader_after(10);
    let mut publisher = log.publishing_reader(10);
    assert_eq!(client.try_next(), Ok(None));
    assert!(
        !client.is_slow(),
        "waiting for publication is not being slow"
    );
    assert_eq!(seqs(&[publisher.try_next_exact().unwrap().unwrap()]), [11]);
    assert_eq!(log.readable_head(), 10);
    log.mark_published(12);
    assert_eq!(log.readable_head(), 12);
    assert_eq!(client.try_next().unwrap().map(|e| e.seq), Some(11));
    assert_eq!(client.try_next().unwrap().map(|e| e.seq), Some(12));
    assert_eq!(client.try_next(), Ok(None), "13 is not published yet");
    assert!(log.rejoin_reader(13).is_none(), "a position never shown");
    // A log that is its own has nothing to wait for.
    let own = SessionLog::new(Epoch(4));
    own.start_turn("assistant", None).append(delta("x"));
    assert_eq!(seqs(&drain(&own, 0)), [1, 2, 3]);
}

#[test]
fn a_merged_delta_stops_at_the_last_published_entry() {
    let log = SessionLog::starting_at(Epoch(3), 0);
    let writer = log.start_turn("assistant", None);
    for _ in 0..COALESCE_BEHIND + 10 {
        writer.append(delta("a"));
    }
    let published = COALESCE_BEHIND + 5;
    log.mark_published(published);
    let read = drain(&log, 1);
    assert_eq!(read.last().map(|e| e.seq), Some(published));
}

#[test]
fn withdrawn_entries_go_and_their_turn_writes_no_more_until_the_shared_log_ends_it() {
    let log = SessionLog::starting_at(Epoch(3), 0);
    scripted_turn(&log);
    log.mark_published(7);
    let writer = log.start_turn("assistant", Some(9));
    writer.append(delta("published"));
    log.mark_published(9);
    writer.append(delta("never published"));
    assert!(
        log.withdraw_unpublished(),
        "the turn is open in the shared log"
    );
    assert_eq!(log.head(), 9);
    assert_eq!(
        log.running(),
        Some(TurnId(8)),
        "the shared log has its start"
    );
    writer.append(delta("late"));
    writer.finish(completed("late"));
    drop(writer);
    assert_eq!(log.head(), 9, "the withdrawn turn's writer is stopped");
    // The shared log's own entries at the same seqs come in by the mirror.
    let shared_end = LogEntry {
        seq: 10,
        turn: TurnId(8),
        event: Arc::new(TurnEvent::Failed(TurnFailure::new(
            crate::error::ErrorCode::Internal,
            crate::turn::TURN_INTERRUPTED,
        ))),
    };
    log.mirror(std::slice::from_ref(&shared_end))
        .expect("no gap");
    let read = drain(&log, 7);
    assert_eq!(seqs(&read), [8, 9, 10]);
    assert_eq!(read[2], shared_end);
    assert_eq!(log.running(), None);
    // A turn whose start was never published is gone whole.
    let next = log.start_turn("assistant", Some(11));
    next.append(delta("x"));
    assert!(!log.withdraw_unpublished());
    assert_eq!((log.head(), log.running()), (10, None));
}

/// A turn that streams `parts` and ends with `reply`.
fn streamed_turn(log: &Arc<SessionLog>, parts: &[&str], reply: &str) {
    let writer = log.start_turn("a", None);
    for part in parts {
        writer.append(delta(part));
    }
    writer.finish(completed(reply));
}

/// Text deltas the log holds as spans of their turn's reply.
fn packed_deltas(log: &SessionLog) -> usize {
    let state = log.state.lock();
    let spans = state.entries.iter();
    spans
        .filter(|kept| matches!(kept.held, Held::ReplySpan { .. }))
        .count()
}

/// The texts of the text deltas among `entries`.
fn delta_texts(entries: &[LogEntry]) -> Vec<String> {
    let texts = entries.iter().filter_map(|entry| match &*entry.event {
        TurnEvent::TextDelta(text) => Some(text.clone()),
        _ => None,
    });
    texts.collect()
}

/// What every kind of reader reads after each position: plain, exact,
/// and a rejoin.
fn every_read(log: &Arc<SessionLog>, last: u64) -> Vec<[Vec<LogEntry>; 3]> {
    let rejoin = |after| {
        let mut reader = log.rejoin_reader(after).expect("the log reaches back");
        std::iter::from_fn(|| reader.try_next().expect("not lagged")).collect()
    };
    (0..=last)
        .map(|after| [drain(log, after), exact(log, after), rejoin(after)])
        .collect()
}

#[test]
fn a_finished_turn_reads_the_same_once_its_deltas_are_held_as_spans() {
    let log = SessionLog::new(Epoch(3));
    streamed_turn(&log, &["Hel", "lo ", "wörld", "!"], "Hello wörld!");
    let last = log.head();
    let before = every_read(&log, last);
    let writer = log.start_turn("a", None);
    assert_eq!(packed_deltas(&log), 4);
    let after = every_read(&log, last);
    for (position, (old, new)) in before.iter().zip(&after).enumerate() {
        for (old, new) in old.iter().zip(new) {
            // The new turn's TurnStarted follows what was there before.
            assert_eq!(&new[..old.len()], &old[..], "after {position}");
            assert_eq!(new.len(), old.len() + 1, "after {position}");
        }
    }
    writer.finish(completed(""));
}

#[test]
fn a_turn_whose_deltas_do_not_spell_its_reply_keeps_them_as_appended() {
    let log = SessionLog::new(Epoch(3));
    // Text before a tool call, then another answer.
    streamed_turn(&log, &["Let me look. "], "It is sunny.");
    let writer = log.start_turn("a", None);
    assert_eq!(packed_deltas(&log), 0);
    writer.append(delta("cut "));
    writer.finish(TurnEvent::Failed(TurnFailure::internal()));
    // A reply longer than its deltas.
    streamed_turn(&log, &["It is"], "It is sunny.");
    assert_eq!(packed_deltas(&log), 0);
    log.start_turn("a", None).finish(completed(""));
    assert_eq!(packed_deltas(&log), 0);
    let texts = delta_texts(&drain(&log, 3));
    assert_eq!(texts, ["cut ", "It is"]);
}

#[test]
fn a_reader_far_behind_merges_spans_as_it_merged_the_deltas() {
    let log = SessionLog::new(Epoch(3));
    let parts: Vec<String> = (0..300).map(|i| format!("<{i}>")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    streamed_turn(&log, &parts, &parts.concat());
    let merged_before = drain(&log, 0);
    log.start_turn("a", None);
    assert_eq!(packed_deltas(&log), 300);
    let merged_after = drain(&log, 0);
    assert_eq!(&merged_after[..merged_before.len()], &merged_before[..]);
    // The start, the 300 deltas as one, the terminal.
    assert_eq!(seqs(&merged_before), [1, 301, 302]);
}

#[test]
fn a_settled_log_reads_the_same_and_keeps_no_spare_places() {
    let log = SessionLog::new(Epoch(3));
    streamed_turn(&log, &["Hel", "lo ", "wörld", "!"], "Hello wörld!");
    streamed_turn(&log, &["Bye", "."], "Bye.");
    let last = log.head();
    let before = every_read(&log, last);
    log.settle();
    // The last turn's deltas too, which a turn's start would pack.
    assert_eq!(packed_deltas(&log), 6);
    assert_eq!(every_read(&log, last), before);
    let state = log.state.lock();
    assert_eq!(state.entries.capacity(), state.entries.len());
}

#[test]
fn settling_leaves_a_running_turn_as_it_is() {
    let log = SessionLog::new(Epoch(3));
    streamed_turn(&log, &["a", "b"], "ab");
    let writer = log.start_turn("a", None);
    writer.append(delta("c"));
    log.settle();
    // The finished turn was packed by the start; the running one is not.
    assert_eq!(packed_deltas(&log), 2);
    writer.append(delta("d"));
    writer.finish(completed("cd"));
    let texts = delta_texts(&drain(&log, 4));
    assert_eq!(texts, ["c", "d"]);
}

#[test]
fn a_turn_start_gives_back_the_places_a_long_turn_grew() {
    let log = SessionLog::new(Epoch(3));
    let parts: Vec<String> = (0..500).map(|i| format!("<{i}>")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    streamed_turn(&log, &parts, &parts.concat());
    for _ in 0..=KEPT_TURNS {
        streamed_turn(&log, &["a", "b"], "ab");
    }
    // The long turn is gone; what is kept is three short turns' entries
    // and the room the next one starts with.
    let _writer = log.start_turn("a", None);
    let state = log.state.lock();
    assert!(state.entries.iter().all(|kept| kept.turn().0 > 502));
    assert!(
        state.entries.capacity() <= state.entries.len() + RUNNING_TURN_ROOM,
        "{} places for {} entries",
        state.entries.capacity(),
        state.entries.len()
    );
}

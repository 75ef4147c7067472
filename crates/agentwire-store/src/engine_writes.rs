//! The engine's write rules and memory bounds against a real store: a
//! turn's user message is written beside the turn, yet the terminal event
//! comes only once it and the turn's records are stored; a failed write ends
//! the turn `Failed` and takes its messages out of the live history again.
//! A live session keeps only its window in memory, however many turns it
//! has had, and a resume reads only its window from the store, however long
//! the session is (counted in messages the store hands out, not in time).
//!
//! Written once against any store and instantiated per adapter with
//! [`engine_write_tests!`]: here on [`MemoryStore`], in `postgres/tests.rs`
//! on `PgStore`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentwire_core::testing::{CountingIds, FixedClock};
use agentwire_core::{
    ConnectionScope, DEFAULT_HISTORY_WINDOW, Handler, MessageBody, Metadata, Reply, ReplyEnd,
    SessionCursor, SessionId, SessionOverview, SessionRecord, SessionStore, SessionSummary,
    StoreError, StoredMessage, Timestamp, TurnContext, TurnEvent, TurnFailure, Via, context_window,
};
use agentwire_engine::{Agent, Engine, SessionLease, SubmitRequest};
use async_trait::async_trait;

use crate::MemoryStore;

mod opening;
pub(crate) use opening::a_declaration_is_stored_and_prepared_again_after_a_restart;

/// What a fixture's store must outlive (a database to drop, a temp dir).
pub(crate) type Guard = Box<dyn Send + Sync>;

/// A store for one fixture and its guard; `None` skips the test (no server
/// to test against).
pub(crate) type StoreFuture =
    Pin<Box<dyn Future<Output = Option<(Arc<dyn SessionStore>, Guard)>> + Send>>;

/// Makes a fresh, empty store for one fixture.
pub(crate) type MakeStore = fn() -> StoreFuture;

/// Generates one `#[tokio::test]` per write-rule check, each fixture on a
/// store from `$make` (a [`MakeStore`]).
macro_rules! engine_write_tests {
    ($make:path) => {
        $crate::engine_writes::engine_write_tests!(
            @tests $make;
            done_comes_after_the_user_message_and_the_reply_are_stored,
            a_failed_write_fails_the_turn_and_leaves_the_history_as_it_was,
            a_write_made_but_reported_failed_is_read_back_before_the_next_turn,
            a_write_that_cannot_be_read_back_fails_and_the_next_turn_reads_the_window_again,
            thousands_of_turns_keep_only_the_window_live,
            an_idle_sessions_window_leaves_memory_and_its_next_turn_reads_it,
            resuming_a_long_session_reads_what_resuming_a_short_one_does,
            a_declaration_is_stored_and_prepared_again_after_a_restart,
        );
        #[tokio::test(start_paused = true)]
        async fn a_cancel_at_any_moment_ends_the_turn_with_exactly_one_terminal() {
            $crate::engine_writes::a_cancel_at_any_moment_ends_the_turn_with_exactly_one_terminal(
                $make,
            )
            .await;
        }
    };
    (@tests $make:path; $($check:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                $crate::engine_writes::$check($make).await;
            }
        )+
    };
}
pub(crate) use engine_write_tests;

mod memory {
    use super::*;

    fn make() -> StoreFuture {
        Box::pin(async {
            let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
            Some((store, Box::new(()) as Guard))
        })
    }

    engine_write_tests!(make);
}

/// A store whose appends fail while `failing` is set, or are made and then
/// reported timed out while `late` is (a database that committed as the
/// connection dropped), whose page reads fail while `unreadable` is, and
/// which counts the messages its loads hand out.
struct FlakyStore {
    inner: Arc<dyn SessionStore>,
    failing: AtomicBool,
    late: AtomicBool,
    unreadable: AtomicBool,
    messages_read: AtomicUsize,
}

impl FlakyStore {
    fn read(&self, messages: Vec<StoredMessage>) -> Vec<StoredMessage> {
        self.messages_read
            .fetch_add(messages.len(), Ordering::SeqCst);
        messages
    }
}

#[async_trait]
impl SessionStore for FlakyStore {
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        self.inner.create_session(record).await
    }
    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        self.inner.load_session(id).await
    }
    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("disk full".to_owned()));
        }
        self.inner.append_messages(messages).await?;
        if self.late.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("timed out".to_owned()));
        }
        Ok(())
    }
    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.load_messages(id).await.map(|m| self.read(m))
    }
    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let recent = self.inner.load_recent_messages(id, limit).await;
        recent.map(|m| self.read(m))
    }
    async fn load_messages_after(
        &self,
        id: &SessionId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        if self.unreadable.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("timed out".to_owned()));
        }
        let page = self.inner.load_messages_after(id, after, limit).await;
        page.map(|m| self.read(m))
    }
    fn hold_session(&self, id: &SessionId) {
        self.inner.hold_session(id);
    }
    fn release_session(&self, id: &SessionId) {
        self.inner.release_session(id);
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    async fn list_sessions(
        &self,
        owner: &str,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<Vec<SessionOverview>, StoreError> {
        self.inner.list_sessions(owner, after, limit).await
    }
    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.inner.delete_session(id).await
    }
    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        self.inner.load_summary(id).await
    }
    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        self.inner.schedule_summary(id, due).await
    }
    async fn pending_summaries(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        self.inner.pending_summaries().await
    }
    async fn store_summary(
        &self,
        id: &SessionId,
        summary: &SessionSummary,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        self.inner.store_summary(id, summary, handled_due).await
    }
    async fn clear_summary_due(
        &self,
        id: &SessionId,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        self.inner.clear_summary_due(id, handled_due).await
    }
}

/// Answers with `answer` of the history it was given, and asks for
/// `window` messages of it.
struct HistoryEcho {
    window: usize,
    answer: fn(&[StoredMessage]) -> String,
}

#[async_trait]
impl Handler for HistoryEcho {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        Ok(Reply::text((self.answer)(&turn.history)))
    }

    fn history_window(&self) -> usize {
        self.window
    }
}

/// The texts of `history`, joined.
fn joined(history: &[StoredMessage]) -> String {
    let texts: Vec<&str> = history.iter().filter_map(|m| m.body.text()).collect();
    texts.join("|")
}

/// The `seq`s of `history`: answers that stay short however many turns
/// run (texts of texts would grow without end).
fn seqs(history: &[StoredMessage]) -> String {
    let seqs: Vec<String> = history.iter().map(|m| m.seq.to_string()).collect();
    seqs.join(",")
}

struct Fixture {
    store: Arc<FlakyStore>,
    _guard: Guard,
    engine: Engine,
    agent: Arc<Agent>,
    scope: Arc<ConnectionScope>,
    session: SessionId,
    /// The session's lease, kept between turns as a connection keeps it, so
    /// the session stays live and its history is not reloaded.
    lease: parking_lot::Mutex<Option<SessionLease>>,
}

impl Fixture {
    /// `None`: `make` has no store to test against.
    async fn new(make: MakeStore) -> Option<Fixture> {
        Fixture::with_handler(
            make,
            Arc::new(HistoryEcho {
                window: DEFAULT_HISTORY_WINDOW,
                answer: joined,
            }),
        )
        .await
    }

    async fn with_handler(make: MakeStore, handler: Arc<dyn Handler>) -> Option<Fixture> {
        let (inner, guard) = make().await?;
        let store = Arc::new(FlakyStore {
            inner,
            failing: AtomicBool::new(false),
            late: AtomicBool::new(false),
            unreadable: AtomicBool::new(false),
            messages_read: AtomicUsize::new(0),
        });
        let engine = Engine::new(
            store.clone(),
            Arc::new(FixedClock(Timestamp(1_000))),
            Arc::new(CountingIds::default()),
        );
        let agent = Arc::new(Agent {
            name: "echo".to_owned(),
            context_ttl: Duration::from_secs(60),
            ack_timeout: Duration::from_secs(1),
            client_tool_timeout: Duration::from_secs(1),
            handler,
            session_init: None,
        });
        let session = engine.mint_session_id();
        Some(Fixture {
            store,
            _guard: guard,
            engine,
            agent,
            scope: ConnectionScope::new(),
            session,
            lease: parking_lot::Mutex::new(None),
        })
    }

    /// Runs a turn on the fixture's session and returns its terminal event.
    async fn turn(&self, text: &str) -> TurnEvent {
        self.turn_on(&self.session, text).await
    }

    /// Starts a turn on session `id` as the fixture's connection.
    async fn submit(&self, id: &SessionId, text: &str) -> agentwire_engine::TurnHandle {
        self.engine
            .submit(SubmitRequest {
                agent: &self.agent,
                namespace: "default",
                owner: None,
                memory_facet: None,
                current: &self.session,
                minted: &self.session,
                requested: Some(id.as_str()),
                content: Some(text.to_owned()),
                parts: Vec::new(),
                attachment: None,
                metadata: Metadata::new(),
                scope: &self.scope,
                opening: agentwire_core::Opening::Continues,
                grants: &[],
            })
            .await
            .expect("accepted")
    }

    /// Runs a turn on session `id` (resuming it when it is not live), as the
    /// fixture's connection, and returns its terminal event.
    async fn turn_on(&self, id: &SessionId, text: &str) -> TurnEvent {
        let handle = self.submit(id, text).await;
        let mut events = handle.events;
        let terminal = loop {
            let entry = events.next().await.expect("the turn's entries");
            if entry.event.is_terminal() {
                break Arc::unwrap_or_clone(entry.event);
            }
        };
        *self.lease.lock() = Some(handle.session);
        terminal
    }

    async fn stored_texts(&self) -> Vec<String> {
        let stored = self.store.load_messages(&self.session).await.unwrap();
        stored
            .iter()
            .filter_map(|m| m.body.text().map(str::to_owned))
            .collect()
    }
}

pub(crate) async fn done_comes_after_the_user_message_and_the_reply_are_stored(make: MakeStore) {
    let Some(fixture) = Fixture::new(make).await else {
        return;
    };
    let TurnEvent::Completed(reply) = fixture.turn("hello").await else {
        panic!("the turn completes");
    };
    // The handler saw its own message in the history.
    assert_eq!(reply.text, "hello");
    assert_eq!(fixture.stored_texts().await, ["hello", "hello"]);
}

pub(crate) async fn a_failed_write_fails_the_turn_and_leaves_the_history_as_it_was(
    make: MakeStore,
) {
    let Some(fixture) = Fixture::new(make).await else {
        return;
    };
    assert!(matches!(fixture.turn("one").await, TurnEvent::Completed(_)));

    fixture.store.failing.store(true, Ordering::SeqCst);
    let TurnEvent::Failed(failure) = fixture.turn("lost").await else {
        panic!("a turn whose message could not be stored fails");
    };
    assert_eq!(failure.code, agentwire_core::ErrorCode::Internal);
    assert_eq!(fixture.stored_texts().await, ["one", "one"]);

    // The next turn sees only what was stored: the lost message is gone
    // from the live history, and seqs stay dense.
    fixture.store.failing.store(false, Ordering::SeqCst);
    let TurnEvent::Completed(reply) = fixture.turn("two").await else {
        panic!("the session works again");
    };
    assert_eq!(reply.text, "one|one|two");
    let stored = fixture.store.load_messages(&fixture.session).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
}

pub(crate) async fn a_write_made_but_reported_failed_is_read_back_before_the_next_turn(
    make: MakeStore,
) {
    let Some(fixture) = Fixture::new(make).await else {
        return;
    };
    assert!(matches!(fixture.turn("one").await, TurnEvent::Completed(_)));
    fixture.store.late.store(true, Ordering::SeqCst);
    // The store committed the write and then reported a failure: the
    // engine reads it back, so the client is not told its turn failed while
    // its answer is stored.
    let TurnEvent::Completed(late) = fixture.turn("late").await else {
        panic!("a write the store holds is the turn's end");
    };
    assert_eq!(late.text, "one|one|late");
    fixture.store.late.store(false, Ordering::SeqCst);
    the_next_turn_follows_the_late_one(&fixture).await;
}

pub(crate) async fn a_write_that_cannot_be_read_back_fails_and_the_next_turn_reads_the_window_again(
    make: MakeStore,
) {
    let Some(fixture) = Fixture::new(make).await else {
        return;
    };
    assert!(matches!(fixture.turn("one").await, TurnEvent::Completed(_)));
    fixture.store.late.store(true, Ordering::SeqCst);
    fixture.store.unreadable.store(true, Ordering::SeqCst);
    // Neither the write nor the read-back gets an answer: the turn fails
    // (after the read-back's bound), though its write was made.
    assert!(matches!(fixture.turn("late").await, TurnEvent::Failed(_)));
    fixture.store.late.store(false, Ordering::SeqCst);
    fixture.store.unreadable.store(false, Ordering::SeqCst);
    // The next turn reads the window again.
    the_next_turn_follows_the_late_one(&fixture).await;
}

/// The turn after "late", whose write the store made: it takes the seqs
/// after that write, neither reusing them ("already stored") nor missing
/// the late turn.
async fn the_next_turn_follows_the_late_one(fixture: &Fixture) {
    let TurnEvent::Completed(reply) = fixture.turn("two").await else {
        panic!("the next turn takes the seqs after what was stored");
    };
    assert_eq!(reply.text, "one|one|late|one|one|late|two");
    let stored = fixture.store.load_messages(&fixture.session).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5]);
}

/// A session that has had `turns` turns of a user message and an answer,
/// written to the store directly.
async fn stored_session(store: &FlakyStore, id: &str, turns: u64) -> SessionId {
    let id = SessionId::parse(id).unwrap();
    let record = SessionRecord {
        id: id.clone(),
        agent: "echo".to_owned(),
        namespace: "default".to_owned(),
        owner: None,
        created_at: Timestamp(1_000),
        last_active_at: Timestamp(1_000),
        declaration: None,
    };
    store.create_session(&record).await.unwrap();
    let messages: Vec<StoredMessage> = (0..turns * 2)
        .map(|seq| StoredMessage {
            session_id: id.clone(),
            seq,
            body: if seq % 2 == 0 {
                MessageBody::User {
                    text: format!("m{seq}"),
                    parts: Vec::new(),
                    attachment: None,
                }
            } else {
                MessageBody::Reply {
                    text: format!("m{seq}"),
                    parts: Vec::new(),
                    end: ReplyEnd::Complete,
                }
            },
            via: Via::Text,
            metadata: Metadata::new(),
            created_at: Timestamp(1_000),
        })
        .collect();
    store.append_messages(&messages).await.unwrap();
    id
}

pub(crate) async fn thousands_of_turns_keep_only_the_window_live(make: MakeStore) {
    const WINDOW: usize = 9;
    const TURNS: usize = 3_000;
    let handler = Arc::new(HistoryEcho {
        window: WINDOW,
        answer: seqs,
    });
    let Some(fixture) = Fixture::with_handler(make, handler).await else {
        return;
    };
    let mut longest = 0;
    for turn in 0..TURNS {
        let TurnEvent::Completed(reply) = fixture.turn(&format!("q{turn}")).await else {
            panic!("turn {turn} completes");
        };
        let live = fixture.engine.live_history_len(&fixture.session);
        let live = live.expect("the connection keeps the session live");
        longest = longest.max(live);
        // What the handler saw is the window of the whole session, as if
        // the engine had kept all of it. Checked now and then: the check
        // reads the whole session.
        if turn % 500 == 499 {
            let mut stored = fixture.store.load_messages(&fixture.session).await.unwrap();
            assert_eq!(stored.len(), 2 * (turn + 1));
            stored.pop();
            assert_eq!(reply.text, seqs(context_window(&stored, WINDOW)));
        }
    }
    // Between turns: what the next turn's window can reach, less its own
    // message, never more.
    assert!(longest < WINDOW, "{longest} messages live");
    let stored = fixture.store.load_messages(&fixture.session).await.unwrap();
    assert_eq!(stored.len(), 2 * TURNS);
    assert!(stored.iter().enumerate().all(|(i, m)| m.seq == i as u64));
}

pub(crate) async fn an_idle_sessions_window_leaves_memory_and_its_next_turn_reads_it(
    make: MakeStore,
) {
    const WINDOW: usize = 9;
    let handler = Arc::new(HistoryEcho {
        window: WINDOW,
        answer: seqs,
    });
    let Some(fixture) = Fixture::with_handler(make, handler).await else {
        return;
    };
    for turn in 0..8 {
        fixture.turn(&format!("q{turn}")).await;
    }
    let engine = &fixture.engine;
    let held = engine.live_history_len(&fixture.session).unwrap();
    assert!(held > 0, "a talking session holds its window");
    // Not idle long enough (the fixture's clock stands still): kept.
    assert_eq!(engine.release_idle_windows(Duration::from_secs(1)), 0);
    assert_eq!(engine.live_history_len(&fixture.session), Some(held));
    assert_eq!(engine.release_idle_windows(Duration::ZERO), 1);
    assert_eq!(engine.live_history_len(&fixture.session), Some(0));
    assert_eq!(engine.windows_released(), 1);
    // Nothing left to let go.
    assert_eq!(engine.release_idle_windows(Duration::ZERO), 0);

    let before = fixture.store.messages_read.load(Ordering::SeqCst);
    let TurnEvent::Completed(reply) = fixture.turn("back").await else {
        panic!("the turn after the release completes");
    };
    let read = fixture.store.messages_read.load(Ordering::SeqCst) - before;
    assert!(
        (1..=WINDOW).contains(&read),
        "the next turn read its window once: {read} messages"
    );
    // It saw the window a session that had kept it would have.
    let mut stored = fixture.store.load_messages(&fixture.session).await.unwrap();
    assert_eq!(stored.len(), 18);
    assert!(stored.iter().enumerate().all(|(i, m)| m.seq == i as u64));
    stored.pop();
    assert_eq!(reply.text, seqs(context_window(&stored, WINDOW)));
    assert!(engine.live_history_len(&fixture.session).unwrap() > 0);
}

pub(crate) async fn resuming_a_long_session_reads_what_resuming_a_short_one_does(make: MakeStore) {
    let Some(fixture) = Fixture::new(make).await else {
        return;
    };
    let short = stored_session(&fixture.store, "short", 50).await;
    let long = stored_session(&fixture.store, "long", 1_000).await;
    let mut read = Vec::new();
    for (id, messages) in [(&short, 100), (&long, 2_000)] {
        let before = fixture.store.messages_read.load(Ordering::SeqCst);
        let TurnEvent::Completed(reply) = fixture.turn_on(id, "more").await else {
            panic!("the resumed turn completes");
        };
        read.push(fixture.store.messages_read.load(Ordering::SeqCst) - before);
        // The turn saw the session's latest messages, from a user message
        // (an even seq) on, and its own: a window of them.
        let first = messages + 2 - DEFAULT_HISTORY_WINDOW;
        let expected: Vec<String> = (first..messages)
            .map(|seq| format!("m{seq}"))
            .chain(["more".to_owned()])
            .collect();
        assert_eq!(reply.text, expected.join("|"));
        // And the session goes on from its last seq.
        let tail = fixture.store.load_recent_messages(id, 2).await.unwrap();
        let seqs: Vec<u64> = tail.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, [messages as u64, messages as u64 + 1]);
    }
    // Reads before the check above: one window's worth for each session.
    assert_eq!(read, [DEFAULT_HISTORY_WINDOW, DEFAULT_HISTORY_WINDOW]);
}

/// Streams `words`, one every [`WORD_STEP`], and answers with all of them.
struct Words;

const WORDS: [&str; 6] = ["a ", "b ", "c ", "d ", "e ", "f"];
const WORD_STEP: Duration = Duration::from_millis(10);

#[async_trait]
impl Handler for Words {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        for word in WORDS {
            tokio::time::sleep(WORD_STEP).await;
            turn.events().text_delta(word).await;
        }
        Ok(Reply::text(WORDS.concat()))
    }
}

pub(crate) async fn a_cancel_at_any_moment_ends_the_turn_with_exactly_one_terminal(
    make: MakeStore,
) {
    // Every moment of the turn, in steps of half a word, and past its end.
    for half_steps in 0..(2 * WORDS.len() as u32 + 3) {
        let Some(fixture) = Fixture::with_handler(make, Arc::new(Words)).await else {
            return;
        };
        let handle = fixture.submit(&fixture.session, "go").await;
        let mut events = handle.events;
        tokio::time::sleep(WORD_STEP / 2 * half_steps).await;
        let outcome = handle.session.cancel_turn(None, None);
        // A second cancel changes nothing.
        handle.session.cancel_turn(None, None);

        let mut streamed = String::new();
        let terminal = loop {
            let entry = events.next().await.expect("not lagged");
            match Arc::unwrap_or_clone(entry.event) {
                TurnEvent::TextDelta(delta) => streamed.push_str(&delta),
                event if event.is_terminal() => break event,
                _ => {}
            }
        };
        tokio::time::sleep(WORD_STEP * 10).await;
        assert_eq!(events.try_next(), Ok(None), "nothing after the terminal");
        let stored = fixture.stored_texts().await;
        match terminal {
            TurnEvent::Cancelled(partial) => {
                assert!(
                    matches!(outcome, agentwire_engine::CancelOutcome::Cancelled(_)),
                    "{half_steps}: {outcome:?}"
                );
                assert_eq!(
                    partial.text, streamed,
                    "{half_steps}: the partial is what was streamed"
                );
                assert_eq!(stored, ["go".to_owned(), streamed.clone()], "{half_steps}");
                let messages = fixture.store.load_messages(&fixture.session).await.unwrap();
                let reply = messages.last().unwrap();
                assert!(
                    matches!(
                        reply.body,
                        MessageBody::Reply {
                            end: ReplyEnd::Cancelled,
                            ..
                        }
                    ),
                    "{half_steps}: {reply:?}"
                );
                assert!(reply.metadata.is_empty(), "{half_steps}: {reply:?}");
            }
            TurnEvent::Completed(reply) => {
                assert_eq!(reply.text, WORDS.concat(), "{half_steps}");
                assert_eq!(
                    outcome,
                    agentwire_engine::CancelOutcome::NothingRunning,
                    "{half_steps}"
                );
            }
            other => panic!("{half_steps}: {other:?}"),
        }
        // The session takes the next turn at once.
        assert!(matches!(
            fixture.turn("again").await,
            TurnEvent::Completed(_)
        ));
    }
}

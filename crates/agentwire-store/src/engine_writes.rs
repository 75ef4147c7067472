//! The engine's write rules against a real store: a turn's user message is
//! written beside the turn, yet the terminal event comes only once it and
//! the turn's records are stored; a failed write ends the turn `Failed` and
//! takes its messages out of the live history again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentwire_core::testing::{CountingIds, FixedClock};
use agentwire_core::{
    Agent, ConnectionScope, Engine, Handler, Metadata, Reply, SessionCursor, SessionId,
    SessionLease, SessionOverview, SessionRecord, SessionStore, SessionSummary, StoreError,
    StoredMessage, SubmitRequest, Timestamp, TurnContext, TurnEvent, TurnFailure,
};
use async_trait::async_trait;

use crate::MemoryStore;

/// A [`MemoryStore`] whose appends fail while `failing` is set.
#[derive(Default)]
struct FlakyStore {
    inner: MemoryStore,
    failing: AtomicBool,
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
        self.inner.append_messages(messages).await
    }
    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.load_messages(id).await
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

/// Answers with the texts of the history it was given, joined.
struct HistoryEcho;

#[async_trait]
impl Handler for HistoryEcho {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        let texts: Vec<&str> = turn.history.iter().map(|m| m.content.as_str()).collect();
        Ok(Reply::text(texts.join("|")))
    }
}

struct Fixture {
    store: Arc<FlakyStore>,
    engine: Engine,
    agent: Arc<Agent>,
    scope: Arc<ConnectionScope>,
    session: SessionId,
    /// The session's lease, kept between turns as a connection keeps it, so
    /// the session stays live and its history is not reloaded.
    lease: parking_lot::Mutex<Option<SessionLease>>,
}

impl Fixture {
    fn new() -> Fixture {
        let store = Arc::new(FlakyStore::default());
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
            handler: Arc::new(HistoryEcho),
        });
        let session = engine.mint_session_id();
        Fixture {
            store,
            engine,
            agent,
            scope: ConnectionScope::new(),
            session,
            lease: parking_lot::Mutex::new(None),
        }
    }

    /// Runs a turn on the fixture's session and returns its terminal event.
    async fn turn(&self, text: &str) -> TurnEvent {
        let handle = self
            .engine
            .submit(SubmitRequest {
                agent: &self.agent,
                namespace: "default",
                owner: None,
                current: &self.session,
                minted: &self.session,
                requested: None,
                content: Some(text.to_owned()),
                parts: Vec::new(),
                metadata: Metadata::new(),
                scope: &self.scope,
            })
            .await
            .expect("accepted");
        let mut events = handle.events;
        let terminal = loop {
            let event = events.recv().await.expect("a terminal event");
            if event.is_terminal() {
                break event;
            }
        };
        *self.lease.lock() = Some(handle.session);
        terminal
    }

    async fn stored_texts(&self) -> Vec<String> {
        let stored = self.store.load_messages(&self.session).await.unwrap();
        stored.into_iter().map(|m| m.content).collect()
    }
}

#[tokio::test]
async fn done_comes_after_the_user_message_and_the_reply_are_stored() {
    let fixture = Fixture::new();
    let TurnEvent::Completed(reply) = fixture.turn("hello").await else {
        panic!("the turn completes");
    };
    // The handler saw its own message in the history.
    assert_eq!(reply.text, "hello");
    assert_eq!(fixture.stored_texts().await, ["hello", "hello"]);
}

#[tokio::test]
async fn a_failed_write_fails_the_turn_and_leaves_the_history_as_it_was() {
    let fixture = Fixture::new();
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

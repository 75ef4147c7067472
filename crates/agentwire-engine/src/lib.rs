//! The engine: live sessions, the one-turn-per-session rule, resumption, and
//! persistence of every accepted message. It drives the core's ports
//! (`agentwire-core`) and does no IO of its own: the store, the shared live
//! state and the handlers it is given do.
//!
//! A connection asks the engine to [`Engine::submit`] a user message. The
//! engine picks the session (the connection's own, a resumed one, or a new
//! one a client named), refuses if that session is busy or expired, stores the
//! message, and starts the turn on its own task. The connection reads the
//! turn's events from the returned [`TurnHandle`].
//!
//! A live session keeps only what its next turn can see: the latest
//! [`Handler::history_window`] messages (from a user message on) and the
//! running turn's, trimmed after each write; a resume loads just as many
//! from the store ([`SessionStore::load_recent_messages`]). So a session's
//! memory follows its window, not its length, and `seq` comes from a
//! counter, not from the history's length.
//!
//! After a turn completes, the engine (re)schedules the session's summary
//! with the [`SummaryScheduler`], when it has one, before it sends the
//! terminal event; the due time reaches the connection through
//! [`TurnHandle::summary`]. [`Engine::delete_session`] removes a session
//! that no turn is running on.
//!
//! The turn's own task is `turn_task`; what stops a turn, `cancel`; a
//! connection coming back to a session's log, and the grace that keeps a
//! session for it, `rejoin`; a turn's lease and the session's window,
//! `leases`; a log the replicas share, `shared`. The live state of one
//! process: [`LocalLeases`], and [`MemoryLive`] for tests of several
//! replicas in one process (feature `testing`). Summaries: [`summary`].

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use agentwire_core::assets::MediaResolver;
use agentwire_core::content::{ContentPart, Metadata};
use agentwire_core::ids::{IdSource, InvalidSessionId, SessionId};
use agentwire_core::live::{Acquired, Fence, LiveError, SharedLogs, TurnLeases};
use agentwire_core::log::{Epoch, LogReader, SessionLog, TurnId};
use agentwire_core::media::{MediaId, MediaStore};
use agentwire_core::scope::ConnectionScope;
use agentwire_core::session::{MessageBody, SessionRecord, StoredMessage, retained_start};
use agentwire_core::session_init::{InitRefusal, Opening, SessionInit};
use agentwire_core::store::{SessionStore, StoreError};
use agentwire_core::time::{Clock, Timestamp};
use agentwire_core::tools::ClientToolBroker;
use agentwire_core::turn::Handler;

mod cancel;
mod counters;
mod idle_windows;
mod leases;
mod ledger;
mod local_leases;
#[cfg(any(test, feature = "testing"))]
mod memory_live;
mod opening;
mod records;
mod rejoin;
mod shared;
mod submit;
pub mod summary;
mod turn_task;
mod voice;
mod write;

pub use cancel::CancelOutcome;
pub use counters::LiveCounters;
pub use local_leases::LocalLeases;
#[cfg(any(test, feature = "testing"))]
pub use memory_live::{MemoryLive, MemoryLiveState};
use opening::OpenedWith;
use records::record;
pub use rejoin::{AnonymousRejoin, REJOIN_GRACE, RejoinRequest, Rejoined};
pub use summary::{MemoryPurge, SummaryScheduler};
pub use voice::{VoiceExchange, VoiceToolStep};

/// An agent as the engine sees it: its rules and the handler that answers.
pub struct Agent {
    pub name: String,
    /// How long after its last message a session can still be resumed.
    pub context_ttl: Duration,
    /// How long a client has to acknowledge a client-side tool call.
    pub ack_timeout: Duration,
    /// How long a client has to answer an acknowledged tool call.
    pub client_tool_timeout: Duration,
    pub handler: Arc<dyn Handler>,
    /// What the agent prepares when a session opens on a connection (its
    /// sandboxes, a pack compiled for the session); `None` takes no
    /// declarations.
    pub session_init: Option<Arc<dyn SessionInit>>,
}

/// The engine. Cheap to clone; every clone shares the same live sessions.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdSource>,
    /// Who runs each session's turn: this process alone ([`LocalLeases`])
    /// or every replica sharing the store.
    leases: Arc<dyn TurnLeases>,
    /// The turn logs shared with the other replicas (`shared`); `None`: one
    /// process, whose logs are its own.
    logs: Option<Arc<dyn SharedLogs>>,
    /// The rate limits shared with the other replicas; `None`: one process.
    rates: Option<Arc<dyn agentwire_core::live::SharedRates>>,
    /// What was done with the leases and shared logs, for `/metrics`.
    live_counters: crate::LiveCounters,
    /// Sessions some connection or turn holds a lease on. An entry leaves the
    /// map when its last lease is dropped, so memory follows attached clients.
    /// The store is told ([`SessionStore::hold_session`]) while an id is in
    /// here, so a store that evicts leaves it alone.
    live: Mutex<HashMap<SessionId, Arc<LiveSession>>>,
    /// Parent of every turn's cancellation token.
    turns_cancel: CancellationToken,
    /// Schedules a session's summary after each completed turn; `None`: no
    /// summaries.
    summaries: Option<SummaryScheduler>,
    /// Handed to each turn to resolve stored media per model call; `None`:
    /// media is off.
    media: Option<MediaResolver>,
    /// Idle sessions' windows let go so far (`idle_windows`).
    windows_released: std::sync::atomic::AtomicU64,
}

struct LiveSession {
    record: SessionRecord,
    /// The handler's [`Handler::history_window`]: how much of the history
    /// the next turn can see, and so how much stays in memory.
    window: usize,
    state: Mutex<LiveState>,
    /// Serialises appends: a turn's records and an out-of-turn event must
    /// not be given the same `seq`, and a session's writes reach the store
    /// in `seq` order. Held until the write is durable (or has failed).
    appending: Arc<tokio::sync::Mutex<()>>,
    /// Every event of the session's turns, for its readers. Lives as long
    /// as the session is live: a session that leaves memory starts a new
    /// epoch when it comes back.
    log: Arc<SessionLog>,
    /// Client tool calls pending on the session's turns, answerable from any
    /// connection on it (each is the owner's: a rejoin checks), so a client
    /// that lost its socket answers from the new one.
    client_tools: Arc<ClientToolBroker>,
    /// Held by the task publishing this replica's running turn to the
    /// shared log (`shared`): the next turn here waits for it.
    publishing: Arc<tokio::sync::Mutex<()>>,
    /// A follower mirrors a turn running on another replica (`shared`).
    following: std::sync::atomic::AtomicBool,
}

struct LiveState {
    /// False until the first message creates the record in the store.
    persisted: bool,
    last_active_at: Timestamp,
    turn_running: bool,
    /// The turn this replica runs on the session, as its log numbers it,
    /// from its start until it has ended here (its records stored or
    /// refused). Where logs are shared, the log may show another replica's
    /// turn meanwhile: this one lost its lease while it stored.
    own_turn: Option<TurnId>,
    /// The running turn and what cancels it, once it has started.
    turn_cancel: Option<(TurnId, CancellationToken)>,
    /// The latest messages, as far back as the next turn's window reaches
    /// ([`retained_start`]), plus the running turn's. Shared with running
    /// turns; appends copy only while a turn still holds the previous
    /// snapshot, and trimming waits for a moment none does.
    history: Arc<Vec<StoredMessage>>,
    /// The `seq` of the next message appended.
    next_seq: u64,
    /// Deleted through [`Engine::delete_session`]: whoever still holds a
    /// lease is refused as for an expired session.
    deleted: bool,
    /// The running turn's lease fence, where logs are shared: its writes
    /// are fenced with it ([`SessionStore::append_turn_fenced`]).
    write_fence: Option<Fence>,
    /// What the session opened with, once a message opened it (or it was
    /// loaded from the store); `None` while no message has.
    opened_with: Option<Arc<OpenedWith>>,
    /// Whether the agent's [`SessionInit`] has prepared the session in this
    /// process.
    prepared: bool,
    /// The next turn reads the window from the store before it writes: the
    /// store may hold messages this history does not. A write failed without
    /// saying whether it was made (the store timed out), the session was
    /// taken over from another replica and its window could not be read, or
    /// the window left memory while the session was idle (`idle_windows`).
    reread_window: bool,
    /// Where leases are shared: the fence of the last grant this process
    /// heard of for the session, the one its window follows. The next ask
    /// names it, so a grant this process never heard of (an ask whose
    /// answer was lost, which took the lease when it landed late) counts
    /// as another holder's (`SessionLease::ask_for_lease`).
    known_grant: Option<Fence>,
}

impl LiveState {
    /// A session loaded from the store: `history` is its window, `next_seq`
    /// the `seq` its next message takes.
    fn stored(record: &SessionRecord, history: Vec<StoredMessage>, next_seq: u64) -> LiveState {
        LiveState {
            persisted: true,
            last_active_at: record.last_active_at,
            turn_running: false,
            own_turn: None,
            turn_cancel: None,
            history: Arc::new(history),
            next_seq,
            deleted: false,
            write_fence: None,
            opened_with: Some(Arc::new(OpenedWith::stored(record))),
            prepared: false,
            reread_window: false,
            known_grant: None,
        }
    }

    /// A session no message has been stored for yet.
    fn unstored(now: Timestamp) -> LiveState {
        LiveState {
            persisted: false,
            last_active_at: now,
            turn_running: false,
            own_turn: None,
            turn_cancel: None,
            history: Arc::new(Vec::new()),
            next_seq: 0,
            deleted: false,
            write_fence: None,
            opened_with: None,
            prepared: false,
            reread_window: false,
            known_grant: None,
        }
    }
}

impl LiveSession {
    fn new(
        record: SessionRecord,
        window: usize,
        log: Arc<SessionLog>,
        state: LiveState,
    ) -> LiveSession {
        LiveSession {
            window,
            appending: Arc::default(),
            log,
            client_tools: ClientToolBroker::new(),
            publishing: Arc::default(),
            following: Default::default(),
            record,
            state: Mutex::new(state),
        }
    }
}

/// A message a connection wants answered.
pub struct SubmitRequest<'a> {
    pub agent: &'a Arc<Agent>,
    pub namespace: &'a str,
    /// The pseudonymous owner of the caller, `None` when anonymous.
    pub owner: Option<&'a str>,
    /// The connection's `memory_facet`: with the owner, whose memory the
    /// turn sees.
    pub memory_facet: Option<&'a str>,
    /// The session the connection is on now.
    pub current: &'a SessionId,
    /// The session id announced in `connected`.
    pub minted: &'a SessionId,
    /// The `session_id` the message named, if any.
    pub requested: Option<&'a str>,
    pub content: Option<String>,
    pub parts: Vec<ContentPart>,
    /// An uploaded item the message attaches, already one of `parts`.
    pub attachment: Option<MediaId>,
    /// The client's metadata, as it sent it.
    pub metadata: Metadata,
    /// The connection's state: its client tool calls are answered there, and
    /// handlers cache per-connection resources in it.
    pub scope: &'a Arc<ConnectionScope>,
    /// Whether the message opens its session on the connection, and what
    /// it declares.
    pub opening: Opening<'a>,
    /// The resource ids the caller's credential grants
    /// ([`agentwire_core::Identity::grants`]).
    pub grants: &'a [String],
}

/// Why a message was not accepted. Nothing was stored for it.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    InvalidSessionId(#[from] InvalidSessionId),
    /// The named session cannot be resumed: expired, another agent's or
    /// another owner's. One variant for all, so ids cannot be probed.
    #[error("session context has expired; start a new session")]
    Expired { requested: SessionId },
    #[error("the session's previous turn is still running")]
    TurnInProgress { session: SessionId },
    /// The session did not open: its declaration was refused or its
    /// agent's pack did not compile. Nothing was stored.
    #[error(transparent)]
    Init(#[from] InitRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The shared leases could not be asked; nothing was stored.
    #[error(transparent)]
    Live(#[from] LiveError),
}

/// A running turn, as its connection sees it.
pub struct TurnHandle {
    pub session: SessionLease,
    /// The session's log from this turn's `TurnStarted` on: the turn's
    /// events, the last of them terminal (then the next turns', should the
    /// reader go on).
    pub events: LogReader,
    /// The `seq` of the user message the turn answers: with the session,
    /// what names the turn in the store once it has ended (an A2A task).
    pub question_seq: u64,
    /// When the session's summary is due after this turn: set before a
    /// `Completed` event is sent, so it can be read as soon as that arrives.
    pub summary: SummaryNotice,
}

/// When a completed turn scheduled its session's summary.
pub struct SummaryNotice(oneshot::Receiver<Timestamp>);

impl SummaryNotice {
    /// The summary's due time, once the turn has completed and scheduled it;
    /// `None` before, after a failed turn, or when the agent has no summaries.
    pub fn scheduled_at(&mut self) -> Option<Timestamp> {
        self.0.try_recv().ok()
    }
}

/// Why a session was not deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("the session's turn is still running")]
    TurnInProgress,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Keeps a session live in memory while held. Connections hold one on their
/// current session; turns hold one while they run.
pub struct SessionLease {
    inner: Arc<Inner>,
    session: Arc<LiveSession>,
}

impl Engine {
    pub fn new(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
    ) -> Engine {
        Engine::build(store, clock, ids, None)
    }

    /// An engine that schedules a session's summary after each completed
    /// turn with `summaries`.
    pub fn with_summaries(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
        summaries: SummaryScheduler,
    ) -> Engine {
        Engine::build(store, clock, ids, Some(summaries))
    }

    fn build(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
        summaries: Option<SummaryScheduler>,
    ) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                store,
                clock,
                ids,
                leases: Arc::new(LocalLeases::new()),
                logs: None,
                rates: None,
                live_counters: Default::default(),
                live: Mutex::new(HashMap::new()),
                turns_cancel: CancellationToken::new(),
                summaries,
                media: None,
                windows_released: Default::default(),
            }),
        }
    }

    /// The engine, whose turns resolve stored media ([`agentwire_core::assets`])
    /// through `media` for each model call
    /// ([`TurnContext::resolve_media`]). Call before the engine is cloned.
    pub fn with_media(mut self, media: Arc<dyn MediaStore>) -> Engine {
        Arc::get_mut(&mut self.inner)
            .expect("with_media is called before the engine is shared")
            .media = Some(MediaResolver::new(media));
        self
    }

    /// The rate limits the replicas share, when they share live state: the
    /// server's per-caller turn limit spends from them.
    pub fn shared_rates(&self) -> Option<&Arc<dyn agentwire_core::live::SharedRates>> {
        self.inner.rates.as_ref()
    }

    /// What this engine did with leases, shared logs and controls.
    pub fn live_counters(&self) -> &crate::LiveCounters {
        &self.inner.live_counters
    }

    /// Whether the shared live state answers (`/readyz`).
    pub async fn ping_live_state(&self) -> Result<(), LiveError> {
        self.inner.leases.ping().await
    }

    /// Stops the summary scheduler, if any (after the server has drained).
    /// Summaries not written yet keep their due time in the store.
    pub async fn shutdown(&self) {
        if let Some(summaries) = &self.inner.summaries {
            summaries.shutdown().await;
        }
    }

    /// Deletes the session of `record` (loaded by the caller, who checked
    /// its owner): its messages, summary and scheduled summary. Refused while
    /// a turn runs on it. A connection still on the session afterwards is
    /// answered as for an expired session. `Ok(false)`: it was not stored.
    pub async fn delete_session(&self, record: &SessionRecord) -> Result<bool, DeleteError> {
        let id = &record.id;
        // A placeholder in the live map, when the session is not live, keeps
        // a concurrent resume from loading it while it is being deleted.
        let (session, placeholder) = match self.inner.live.lock().entry(id.clone()) {
            Entry::Occupied(live) => (live.get().clone(), false),
            Entry::Vacant(vacant) => {
                self.inner.store.hold_session(id);
                let log = SessionLog::new(Epoch(self.inner.ids.log_epoch()));
                let state = LiveState::stored(record, Vec::new(), 0);
                let placeholder = LiveSession::new(record.clone(), 0, log, state);
                (vacant.insert(Arc::new(placeholder)).clone(), true)
            }
        };
        let lease = self.lease(session);
        let _appending = lease.session.appending.lock().await;
        {
            let mut state = lease.session.state.lock();
            if state.turn_running {
                return Err(DeleteError::TurnInProgress);
            }
            state.deleted = true;
        }
        match self.inner.store.delete_session(id).await {
            Ok(existed) => {
                if let Some(summaries) = &self.inner.summaries {
                    summaries.forget(id);
                }
                Ok(existed)
            }
            Err(e) => {
                // A placeholder stays refused until it leaves the map (with
                // this lease): it holds no history, so it must not take turns.
                if !placeholder {
                    lease.session.state.lock().deleted = false;
                }
                Err(e.into())
            }
        }
    }

    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    pub fn mint_session_id(&self) -> SessionId {
        self.inner.ids.session_id()
    }

    pub fn new_call_id(&self) -> String {
        self.inner.ids.call_id()
    }

    /// Sessions held in memory right now.
    pub fn live_sessions(&self) -> usize {
        self.inner.live.lock().len()
    }

    /// How many messages of session `id` are in memory; `None` when it is
    /// not live. Bounded by the window and the running turn, however long
    /// the session is.
    pub fn live_history_len(&self, id: &SessionId) -> Option<usize> {
        let session = self.inner.live.lock().get(id).cloned()?;
        let len = session.state.lock().history.len();
        Some(len)
    }

    /// Cancels every running turn; used when a drain outlasts its timeout.
    pub fn cancel_all_turns(&self) {
        self.inner.turns_cancel.cancel();
    }

    /// Records an event on the connection's current session (such as the
    /// client's `disclosure_ack`), creating the session if it has no record.
    pub async fn record_event(
        &self,
        agent: &Agent,
        namespace: &str,
        owner: Option<&str>,
        session: &SessionId,
        name: &str,
        metadata: Metadata,
    ) -> Result<(), SubmitError> {
        let lease = self.attach(session, agent, namespace, owner, true).await?;
        let event = record(
            session,
            MessageBody::Event {
                name: name.to_owned(),
            },
            metadata,
            self.inner.clock.now(),
        );
        lease.store_outside_turn(vec![event]).await
    }

    /// Leases `id`, loading it from the store when it is not live. `own` skips
    /// the resumability checks for the connection's own session.
    async fn attach(
        &self,
        id: &SessionId,
        agent: &Agent,
        namespace: &str,
        owner: Option<&str>,
        own: bool,
    ) -> Result<SessionLease, SubmitError> {
        let live = self.inner.live.lock().get(id).cloned();
        if let Some(session) = live {
            let lease = self.lease(session);
            return self.check_resumable(lease, id, agent, owner, own);
        }
        // Held from before the load, so an evicting store cannot drop it
        // between the load and the live map.
        let hold = Hold::new(&*self.inner.store, id);
        let window = agent.handler.history_window();
        let log = self.inner.open_log(id).await?;
        let loaded = match self.inner.store.load_session(id).await? {
            Some(record) => {
                // At least one message, for the next `seq`.
                let mut history = self
                    .inner
                    .store
                    .load_recent_messages(id, window.max(1))
                    .await?;
                let next_seq = history.last().map_or(0, |m| m.seq + 1);
                history.drain(..retained_start(&history, window));
                let state = LiveState::stored(&record, history, next_seq);
                LiveSession::new(record, window, log, state)
            }
            None => {
                let now = self.inner.clock.now();
                let record = SessionRecord {
                    id: id.clone(),
                    agent: agent.name.clone(),
                    namespace: namespace.to_owned(),
                    owner: owner.map(str::to_owned),
                    created_at: now,
                    last_active_at: now,
                    declaration: None,
                };
                LiveSession::new(record, window, log, LiveState::unstored(now))
            }
        };
        let session = match self.inner.live.lock().entry(id.clone()) {
            // Loaded meanwhile by another connection: that one is the session.
            Entry::Occupied(live) => live.get().clone(),
            Entry::Vacant(vacant) => {
                hold.keep();
                vacant.insert(Arc::new(loaded)).clone()
            }
        };
        let lease = self.lease(session);
        self.check_resumable(lease, id, agent, owner, own)
    }

    fn check_resumable(
        &self,
        lease: SessionLease,
        id: &SessionId,
        agent: &Agent,
        owner: Option<&str>,
        own: bool,
    ) -> Result<SessionLease, SubmitError> {
        let (last_active_at, deleted) = {
            let state = lease.session.state.lock();
            (state.last_active_at, state.deleted)
        };
        if deleted {
            return Err(SubmitError::Expired {
                requested: id.clone(),
            });
        }
        if own {
            return Ok(lease);
        }
        let record = &lease.session.record;
        let expired = self.inner.clock.now() > last_active_at.plus(agent.context_ttl);
        let resumable = record.agent == agent.name && record.owner.as_deref() == owner && !expired;
        if resumable {
            Ok(lease)
        } else {
            Err(SubmitError::Expired {
                requested: id.clone(),
            })
        }
    }

    fn lease(&self, session: Arc<LiveSession>) -> SessionLease {
        SessionLease {
            inner: self.inner.clone(),
            session,
        }
    }
}

impl SessionLease {
    pub fn id(&self) -> &SessionId {
        &self.session.record.id
    }

    /// Whether this lease is the only one on its session (the live map
    /// holds the other reference).
    fn is_sole(&self) -> bool {
        Arc::strong_count(&self.session) == 2
    }

    fn clone_lease(&self) -> SessionLease {
        let _guard = self.inner.live.lock();
        SessionLease {
            inner: self.inner.clone(),
            session: self.session.clone(),
        }
    }

    fn begin_turn(&self) -> Result<(), SubmitError> {
        let mut state = self.session.state.lock();
        if state.deleted {
            return Err(SubmitError::Expired {
                requested: self.id().clone(),
            });
        }
        if state.turn_running {
            return Err(SubmitError::TurnInProgress {
                session: self.id().clone(),
            });
        }
        state.turn_running = true;
        Ok(())
    }

    fn end_turn(&self) {
        let mut state = self.session.state.lock();
        state.turn_running = false;
        state.own_turn = None;
        state.write_fence = None;
    }

    /// Frees the session and runs `finish` (which appends the terminal)
    /// under the same lock `begin_turn` takes, so no turn begins between.
    fn end_turn_then(&self, finish: impl FnOnce()) {
        let mut state = self.session.state.lock();
        state.turn_running = false;
        state.own_turn = None;
        state.turn_cancel = None;
        state.write_fence = None;
        finish();
    }

    /// When a turn of this session completing now makes its summary due;
    /// `None` without summaries or a policy for the agent.
    fn summary_due_after_turn(&self) -> Option<Timestamp> {
        let summaries = self.inner.summaries.as_ref()?;
        summaries.due_after_turn(&self.session.record.agent)
    }

    /// Queues the summary whose due time the turn's write stored, and tells
    /// the connection when it is due.
    fn queue_summary(&self, due: Timestamp, notice: oneshot::Sender<Timestamp>) {
        if let Some(summaries) = &self.inner.summaries {
            summaries.queue(self.id(), due);
            let _ = notice.send(due);
        }
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        let mut live = self.inner.live.lock();
        // The map holds one reference and this lease another; new leases are
        // only made under this lock, so the count cannot grow meanwhile.
        let id = &self.session.record.id;
        if Arc::strong_count(&self.session) == 2
            && live.get(id).is_some_and(|s| Arc::ptr_eq(s, &self.session))
        {
            live.remove(id);
            self.inner.store.release_session(id);
        }
    }
}

/// A [`SessionStore::hold_session`] released on drop unless it is kept (it
/// then belongs to the live map's entry, released with it).
struct Hold<'a> {
    store: &'a dyn SessionStore,
    id: &'a SessionId,
    kept: bool,
}

impl<'a> Hold<'a> {
    fn new(store: &'a dyn SessionStore, id: &'a SessionId) -> Hold<'a> {
        store.hold_session(id);
        Hold {
            store,
            id,
            kept: false,
        }
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.store.release_session(self.id);
        }
    }
}

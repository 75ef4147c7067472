//! The connection driver: one task per socket, whatever the dialect.
//!
//! The driver owns the socket and everything a connection does regardless
//! of its wire format: the `select!` over the running turn's events, the
//! socket, the keepalive, the credential deadline and the server's drain and
//! force-close; up to [`socket::EVENT_BATCH`] ready events handled per
//! wake-up and one flush after it; read errors mapped to their close codes;
//! the close on exit. A [`Dialect`] plugs in what differs: what a text or
//! binary frame means, how a turn event is encoded, what is sent before the
//! first frame is read, and when an idle connection should close.
//!
//! The task owns the socket outright: a connection costs one task, and the
//! running turn is read from its session's log ([`LogReader`]), so the
//! log's cursor is the outbound queue and a slow client slows the turn only
//! at the log's bound, for at most `agentwire_core::log::SLOW_AGE`. A
//! client that falls too far behind (the log overtakes it, it is
//! [`LogReader::is_slow`], or a write stalls while a turn runs) is closed
//! with 4008 "slow consumer".

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentwire_core::{Epoch, Lagged, LogEntry, LogReader};

use super::link::{CredentialClock, Link};
use crate::AppState;
use crate::lifecycle::ConnectionSlot;
use crate::socket::{
    self, CLOSE_GOING_AWAY, Exit, Keepalive, SendFailed, classify_read_error, until,
};
use crate::websocket::{Message, Transport, WebSocket};

/// One wire dialect's side of a connection. Each hook gets the [`Link`]:
/// the socket to queue frames on (the driver flushes), the server's state
/// and the caller's credential clock. The hooks are generic over the
/// socket's [`Transport`], so a dialect runs over channels in its tests.
pub(crate) trait Dialect: Send {
    /// What the dialect's own sources produce beside the turn and the
    /// socket (Omnia: its voice call's output and its upload answers).
    type Side: Send;

    /// The running turn's reader of the session's log; `None` when no turn
    /// runs.
    fn turn(&mut self) -> Option<&mut LogReader>;

    /// Whether work is going on (a turn, a voice call): only an idle
    /// connection is asked [`Dialect::when_idle`].
    fn is_busy(&mut self) -> bool {
        self.turn().is_some()
    }

    /// The running turn's next entry, or the next output of the dialect's
    /// own sources; pending while there is neither. Cancel-safe: the
    /// driver waits on it beside the socket.
    async fn next_work(&mut self) -> Work<Self::Side> {
        Work::Turn(next_entry(self.turn()).await)
    }

    /// What a side source produced.
    async fn on_side<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        _side: Self::Side,
    ) -> Result<(), SendFailed> {
        Ok(())
    }

    /// Frames sent before the first client frame is read; an `Err` ends the
    /// connection before it starts.
    async fn greet<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), Exit>;

    /// A text or binary frame, already counted.
    async fn on_frame<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        message: Message,
    ) -> Result<(), Exit>;

    /// An entry of the running turn. The log gives every turn exactly one
    /// terminal entry, its last: the dialect ends its turn there.
    async fn on_turn_event<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        entry: LogEntry,
    ) -> Result<(), SendFailed>;

    /// Asked before every wait while nothing runs: the exit, if the
    /// connection should end now (the server drains, or the credential
    /// expired and nothing is left to answer).
    async fn when_idle<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        draining: Draining,
    ) -> Result<Option<Exit>, SendFailed>;

    /// The server began to drain while a turn runs: the turn goes on (the
    /// drain waits for turns); a client that asked for positions is told
    /// ahead, with where to rejoin.
    async fn on_drain<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
        _notice: DrainNotice,
    ) -> Result<(), SendFailed> {
        Ok(())
    }

    /// The drain timed out: last words before the 1001 close.
    async fn on_force_close<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), SendFailed>;

    /// The connection ended without the client's Close (its socket broke,
    /// or the server closed it): the client may come back to rejoin.
    fn on_lost(&mut self) {}

    /// The socket is closed: the dialect ends what else it holds open (a
    /// call relay, its hop to the call's holder).
    async fn on_end(&mut self) {}
}

/// What [`Dialect::next_work`] waited for.
pub(crate) enum Work<S> {
    Turn(Result<LogEntry, Lagged>),
    Side(S),
}

/// Whether the server is draining, as [`Dialect::when_idle`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Draining {
    No,
    Yes,
}

/// Runs `dialect` on `socket` until the connection ends, then closes it as
/// the exit says.
///
/// Not an `async fn`: one would keep its arguments beside the moved copies
/// for the life of the connection. The future holds each part once, and
/// so does every idle connection's task.
pub(crate) fn run<T: Transport, D: Dialect>(
    socket: WebSocket<T>,
    slot: ConnectionSlot,
    credential: CredentialClock,
    dialect: D,
) -> impl Future<Output = ()> {
    let state = slot.state().clone();
    socket::count_connection(&state);
    let mut link = Link {
        state,
        socket,
        credential,
    };
    let mut dialect = dialect;
    async move {
        let exit = serve(&mut link, &mut dialect).await;
        socket::close(&mut link.socket, exit).await;
        if !link.socket.client_closed() {
            dialect.on_lost();
        }
        Box::pin(dialect.on_end()).await;
        drop(slot);
    }
}

async fn serve<T: Transport, D: Dialect>(link: &mut Link<T>, dialect: &mut D) -> Exit {
    // Boxed like the loop's handlers: a rejoin's greeting (a store load)
    // would otherwise size every idle connection's task.
    if let Err(exit) = Box::pin(dialect.greet(link)).await {
        return exit;
    }
    if socket::flush(&mut link.socket).await.is_err() {
        return Exit::Gone;
    }
    let lifecycle = &link.state.lifecycle();
    let (drain, force_close) = (lifecycle.drain.clone(), lifecycle.force_close.clone());
    let mut keepalive = Keepalive::new(&link.state.settings().limits);
    let mut drain_noticed = false;
    let mut following = Following::new(link.state.clone());
    loop {
        following.set(dialect.turn().is_some());
        let idle = !dialect.is_busy();
        if idle {
            let draining = match drain.is_cancelled() {
                true => Draining::Yes,
                false => Draining::No,
            };
            match dialect.when_idle(link, draining).await {
                Ok(None) => {}
                Ok(Some(exit)) => return exit,
                Err(SendFailed) => return Exit::Gone,
            }
        }
        // The handlers are boxed: inline, their futures would size every
        // idle connection's task for its busiest moment.
        tokio::select! {
            () = force_close.cancelled() => return Box::pin(force_closed(link, dialect)).await,
            () = until(&mut link.credential.deadline), if !link.credential.expired => {
                link.credential.expired = true;
            }
            // Idle: acted on by `when_idle` at the top of the loop.
            () = drain.cancelled(), if idle || !drain_noticed => {
                if !idle {
                    drain_noticed = true;
                    let notice = DrainNotice::now(&link.state);
                    if Box::pin(dialect.on_drain(link, notice)).await.is_err() {
                        return Exit::Gone;
                    }
                }
            }
            work = dialect.next_work() => {
                if let Err(exit) = Box::pin(on_work(link, dialect, work)).await {
                    return exit;
                }
            }
            frame = link.socket.recv() => {
                keepalive.heard();
                if let Err(exit) = Box::pin(on_frame(link, dialect, frame)).await {
                    return exit;
                }
            }
            tick = keepalive.tick() => {
                if let Err(exit) = Box::pin(Keepalive::act(tick, &link.state, &mut link.socket)).await {
                    return exit;
                }
            }
        }
        if socket::flush(&mut link.socket).await.is_err() {
            return send_failed(link, dialect);
        }
    }
}

/// The drain timed out: the dialect's last words, then the 1001 close.
async fn force_closed<T: Transport, D: Dialect>(link: &mut Link<T>, dialect: &mut D) -> Exit {
    if dialect.on_force_close(link).await.is_err() || socket::flush(&mut link.socket).await.is_err()
    {
        return Exit::Gone;
    }
    Exit::Close(CLOSE_GOING_AWAY, "server shutdown")
}

async fn on_work<T: Transport, D: Dialect>(
    link: &mut Link<T>,
    dialect: &mut D,
    work: Work<D::Side>,
) -> Result<(), Exit> {
    match work {
        Work::Turn(entry) => on_turn_events(link, dialect, entry).await,
        Work::Side(side) => match dialect.on_side(link, side).await {
            Ok(()) => Ok(()),
            Err(SendFailed) => Err(send_failed(link, dialect)),
        },
    }
}

/// The connection's share of the `agentwire_log_readers` gauge: counted
/// while a turn's reader is held, and given back however the loop ends.
struct Following {
    state: Arc<AppState>,
    counted: bool,
}

impl Following {
    fn new(state: Arc<AppState>) -> Following {
        Following {
            state,
            counted: false,
        }
    }

    fn set(&mut self, following: bool) {
        if following == self.counted {
            return;
        }
        self.counted = following;
        let gauge = &self.state.metrics().log_readers;
        match following {
            true => gauge.fetch_add(1, Ordering::Relaxed),
            false => gauge.fetch_sub(1, Ordering::Relaxed),
        };
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// The exit after a write failed: a write that stalled while a turn runs
/// is a slow consumer's; anything else leaves nothing to say.
fn send_failed<T: Transport, D: Dialect>(link: &Link<T>, dialect: &mut D) -> Exit {
    if link.socket.write_stalled() && dialect.turn().is_some() {
        slow_consumer(link)
    } else {
        Exit::Gone
    }
}

/// The exit of a reader that fell too far behind, counted.
fn slow_consumer<T>(link: &Link<T>) -> Exit {
    link.state
        .metrics()
        .slow_consumer_closes_total
        .fetch_add(1, Ordering::Relaxed);
    Exit::SlowConsumer
}

async fn on_frame<T: Transport, D: Dialect>(
    link: &mut Link<T>,
    dialect: &mut D,
    frame: Option<Result<Message, tungstenite::Error>>,
) -> Result<(), Exit> {
    let message = match frame {
        None => return Err(Exit::Gone),
        Some(Ok(message)) => message,
        Some(Err(error)) => return Err(classify_read_error(error)),
    };
    match message {
        Message::Text(_) | Message::Binary(_) => {
            socket::count_received(&link.state);
            dialect.on_frame(link, message).await
        }
        Message::Close(_) => Err(Exit::Gone),
        // Pongs and pings only reset the keepalive, which the caller did;
        // tungstenite answers pings itself.
        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Ok(()),
    }
}

/// `first` and the entries already in the log after it, up to
/// [`socket::EVENT_BATCH`], queued for one flush. A reader the log has
/// overtaken, or that is [`LogReader::is_slow`] after the batch, is closed.
async fn on_turn_events<T: Transport, D: Dialect>(
    link: &mut Link<T>,
    dialect: &mut D,
    first: Result<LogEntry, Lagged>,
) -> Result<(), Exit> {
    let mut entry = first.map_err(|_| slow_consumer(link))?;
    for round in 1..=socket::EVENT_BATCH {
        // Taken before the entry is handed on: a terminal ends the reader.
        if let Some(merged) = dialect.turn().map(LogReader::take_merged)
            && merged > 0
        {
            link.state
                .metrics()
                .coalesced_deltas_total
                .fetch_add(merged, Ordering::Relaxed);
        }
        if dialect.on_turn_event(link, entry).await.is_err() {
            return Err(send_failed(link, dialect));
        }
        let Some(reader) = dialect.turn().filter(|_| round < socket::EVENT_BATCH) else {
            break;
        };
        entry = match reader.try_next() {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            Err(_) => return Err(slow_consumer(link)),
        };
    }
    match dialect.turn() {
        Some(reader) if reader.is_slow() => Err(slow_consumer(link)),
        _ => Ok(()),
    }
}

/// Waits for the running turn's next entry; never resolves when idle.
pub(crate) async fn next_entry(turn: Option<&mut LogReader>) -> Result<LogEntry, Lagged> {
    match turn {
        Some(reader) => reader.next().await,
        None => std::future::pending().await,
    }
}

/// Waits for a side source's next output; never resolves without one.
/// `None`: the source ended.
pub(crate) async fn next_from<S>(source: &mut Option<tokio::sync::mpsc::Receiver<S>>) -> Option<S> {
    match source {
        Some(source) => source.recv().await,
        None => std::future::pending().await,
    }
}

/// What a drain notice tells a client: how long its turn still has before
/// the drain gives up, and how long to wait before reconnecting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DrainNotice {
    pub(crate) time_left_ms: u64,
    /// 0 to [`RETRY_JITTER_MS`], different for each connection, so a drained
    /// server's clients do not all come back at once.
    pub(crate) retry_after_ms: u64,
}

/// The widest spread of [`DrainNotice::retry_after_ms`].
const RETRY_JITTER_MS: u64 = 2_000;

impl DrainNotice {
    fn now(state: &AppState) -> DrainNotice {
        use std::hash::{BuildHasher, Hasher};
        let time_left = state.lifecycle().drain_time_left().unwrap_or_default();
        // Randomly keyed per call by the standard library: jitter, not
        // secrecy.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        DrainNotice {
            time_left_ms: u64::try_from(time_left.as_millis()).unwrap_or(u64::MAX),
            retry_after_ms: random % (RETRY_JITTER_MS + 1),
        }
    }
}

/// A rejoin as the upgrade's query asked for it (`stream=2` and a session).
pub(crate) struct RejoinAt {
    pub(crate) session: String,
    /// The epoch and seq the client named; `None` when either was missing
    /// or malformed (nothing can be replayed then).
    pub(crate) position: Option<(Epoch, u64)>,
}

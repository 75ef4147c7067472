//! The Gnosari dialect of a connection (`/ws/agent/{agent}`,
//! `/ws/team/{team}`, `/ws/team/{team}/agent/{agent}`), run by the
//! connection driver (`driver`): it screens message frames, hands them to the
//! same engine the Omnia dialect uses, and encodes each turn's events once,
//! with `agentwire_gnosari::TurnEncoder`.
//!
//! **Order.** Frames are answered strictly in the order they arrive, as a
//! Gnosari receive loop would: one turn runs at a time, and a frame that
//! arrives while a turn runs waits in a small per-connection queue with its
//! answer (a turn to run, or an `error` / `message_rejected` already
//! decided at arrival). The queue holds [`MAX_QUEUED`] frames; past that a
//! message is answered at once with an `error` and not processed. Nothing is
//! stored for a message until its turn starts.
//!
//! **Sessions.** A message without `session_id` opens a new session under a
//! freshly minted id, announced in `agent_started`; one with `session_id`
//! continues that session under the engine's rules (same agent, same owner,
//! within `context_ttl`; an id never seen opens a session under that id).
//!
//! **Summaries.** A completed turn that scheduled its session's summary is
//! followed by `session_summary_scheduled` with the due time, right after
//! `agent_completed`; a failed turn schedules nothing.
//!
//! **Client-side tools** have no flow in this dialect: a call a handler makes
//! is denied at once (the turn goes on with the denial) and is not shown.
//!
//! **Shutdown.** On a drain the running turn finishes and queued messages
//! are told they were not processed; if the drain times out first, the turn
//! is cut short with an `error` and the queue is still answered, so every
//! frame the client sent gets its reply before the 1001 close.

use std::collections::VecDeque;
use std::sync::Arc;

use agentwire_core::{
    ClientAnswer, ConnectionScope, ErrorCode, LogEntry, LogReader, MediaId, Opening, SessionId,
    ToolSide, TurnEvent, TurnFailure,
};
use agentwire_engine::{Agent, CancelOutcome, RejoinRequest, SessionLease, SummaryNotice};
use agentwire_gnosari::{self as gnosari, ErrorEvent, InboundMessage, RejectReason, TurnEncoder};

use crate::AppState;
use crate::budget::InboundPermit;
use crate::connection::driver::Draining;
use crate::connection::{
    Admission, Busy, CredentialClock, Dialect, DialectWords, DrainNotice, Link, Refusal, RejoinAt,
    TurnIntent, driver,
};
use crate::identity::Caller;
use crate::lifecycle::ConnectionSlot;
use crate::socket::{CLOSE_GOING_AWAY, CLOSE_POLICY_VIOLATION, Exit, SendFailed};
use crate::websocket::{Message, Transport, WebSocket};

/// Frames that may wait behind the running turn.
pub(crate) const MAX_QUEUED: usize = 8;

/// Sessions have no namespace in this dialect.
const NAMESPACE: &str = "default";

const CLIENT_TOOLS_UNAVAILABLE: &str = "client-side tools are not available on this endpoint";
const QUEUE_FULL: &str =
    "too many messages waiting for a reply; send this one again after the replies arrive";
const BINARY_UNSUPPORTED: &str = "binary frames are not supported";
const CREDENTIAL_EXPIRED: &str = "credential expired";
const SHUTTING_DOWN: &str = "server is shutting down; the message was not processed";
const TURN_CUT_SHORT: &str = "server is shutting down; the reply was cut short";

/// What this dialect says where the dialects differ. Unknown, another
/// session's and another owner's attachments get the same answer, so ids
/// cannot be probed.
const WORDS: DialectWords = DialectWords {
    session_expired: "session not found",
    media_unknown: "attachment not found",
    media_other_session: "attachment not found",
};

/// What the upgrade learned from the request.
pub(crate) struct GnosariParams {
    /// What answers: an agent, or a team's orchestrator or member.
    pub(crate) agent: Arc<Agent>,
    /// The `agent_name` of the events (a turn's events follow its handoffs).
    pub(crate) agent_name: String,
    /// Who is calling; anonymous when the agent is public and no credential came.
    pub(crate) caller: Caller,
    /// `stream=2`: every logged event carries its `seq`, and each turn
    /// opens with `stream_info`.
    pub(crate) positions: bool,
    /// `stream=2&session_id=S&after=N&epoch=E`: follow S again from after N.
    pub(crate) rejoin: Option<RejoinAt>,
}

/// A frame waiting for its turn to be answered.
enum Pending {
    /// With its attachment (checked for shape at arrival) and its share of
    /// the inbound budget, held until its turn ends.
    Message(InboundMessage, Option<MediaId>, InboundPermit),
    /// An answer decided at arrival (a frame error, a rejection).
    Reply(Reply),
}

/// An event to send; `code` is counted in the metrics when it is sent.
struct Reply {
    frame: String,
    code: Option<ErrorCode>,
}

struct RunningTurn {
    /// The turn's reader of the session's log.
    events: LogReader,
    /// The message's share of the inbound budget, given back with the turn
    /// (`None` for a turn this connection follows but did not start).
    _bytes: Option<InboundPermit>,
    encoder: TurnEncoder,
    /// When the completed turn scheduled the session's summary: announced
    /// by `session_summary_scheduled` right after `agent_completed`. `None`
    /// for turns this connection follows but did not start (a rejoin).
    summary: Option<SummaryNotice>,
    /// Entries up to this seq are a rejoin's warm-up: they rebuild the
    /// encoder's state and are not sent again.
    send_after: u64,
    /// The encoder has seen a `TurnStarted`: the next one needs a new one.
    encoder_used: bool,
}

struct Gnosari {
    params: GnosariParams,
    /// The session this socket used last; before the first turn, a minted id
    /// no client knows.
    current: SessionId,
    /// Keeps `current` live in the engine while the socket is open.
    lease: Option<SessionLease>,
    turn: Option<RunningTurn>,
    queue: VecDeque<Pending>,
    /// Per-connection state: the client-tool broker (used only to deny),
    /// handler caches such as MCP sessions.
    scope: Arc<ConnectionScope>,
    /// The frame rate; the path every message takes to a turn.
    admission: Admission,
}

/// The connection's future, its parts built before it starts (see
/// [`driver::run`]).
pub(crate) fn run<T: Transport>(
    socket: WebSocket<T>,
    slot: ConnectionSlot,
    params: GnosariParams,
) -> impl Future<Output = ()> + Send {
    let state = slot.state();
    let limits = &state.settings().limits;
    // Past the deadline no new turn starts, and the socket closes with 1008
    // once the running turn and the queue are done.
    let credential = CredentialClock::new(state, params.caller.identity.as_ref());
    let gnosari = Gnosari {
        admission: Admission::new(limits),
        scope: ConnectionScope::new(),
        current: state.engine().mint_session_id(),
        lease: None,
        turn: None,
        queue: VecDeque::new(),
        params,
    };
    driver::run(socket, slot, credential, gnosari)
}

impl Dialect for Gnosari {
    /// Nothing beside the turn and the socket.
    type Side = std::convert::Infallible;

    fn turn(&mut self) -> Option<&mut LogReader> {
        self.turn.as_mut().map(|turn| &mut turn.events)
    }

    /// A rejoin attaches to its session and says where its log stands; a
    /// connection without one says nothing first, as the contract has it.
    async fn greet<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), Exit> {
        match self.params.rejoin.take() {
            Some(at) => self.rejoin(link, at).await,
            None => Ok(()),
        }
    }

    async fn on_frame<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        message: Message,
    ) -> Result<(), Exit> {
        let pending = match message {
            // A cancel is not queued behind the turn it stops.
            Message::Text(text)
                if self.params.positions
                    && let Some(named) = gnosari::decode_cancel(text.as_str()) =>
            {
                match self.admission.control() {
                    Ok(()) => {
                        self.cancel(link, named.as_deref());
                        return Ok(());
                    }
                    Err(refusal) => Pending::Reply(self.refusal_reply(&refusal, None, None)),
                }
            }
            Message::Text(text) => self.ingress(&link.state, text.as_str()),
            Message::Binary(_) => Pending::Reply(match self.admission.control() {
                Ok(()) => {
                    self.error_reply(ErrorCode::InvalidMessage, BINARY_UNSUPPORTED, None, None)
                }
                Err(refusal) => self.refusal_reply(&refusal, None, None),
            }),
            // The driver hands on data frames only.
            Message::Close(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {
                return Ok(());
            }
        };
        self.accept(link, pending)
            .await
            .map_err(|SendFailed| Exit::Gone)
    }

    async fn on_turn_event<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        entry: LogEntry,
    ) -> Result<(), SendFailed> {
        let Some(turn) = self.turn.as_mut() else {
            return Ok(());
        };
        let event = &*entry.event;
        if let TurnEvent::TurnStarted { .. } = event {
            // Each turn encodes from a fresh state; the first one the
            // encoder sees is the turn it was made for.
            if std::mem::replace(&mut turn.encoder_used, true) {
                let session = turn.encoder.session_id().to_owned();
                turn.encoder = TurnEncoder::new(&self.params.agent_name, session, None);
            }
        }
        if let TurnEvent::ToolCall(call) = event
            && call.side == ToolSide::Client
        {
            let denial = ClientAnswer::Nack(CLIENT_TOOLS_UNAVAILABLE.to_owned());
            if let Some(lease) = &self.lease {
                lease.answer_client_call(&call.id, denial);
            }
        }
        let replaying = entry.seq <= turn.send_after;
        if let TurnEvent::Failed(failure) = event
            && !replaying
        {
            link.state.metrics().count_error(failure.code);
        }
        // A client that cannot cancel saw a server-side one (the drain gave
        // up on the turn): an internal error, as before.
        let internal;
        let event = match event {
            TurnEvent::Cancelled(_) if !self.params.positions => {
                internal = TurnEvent::Failed(TurnFailure::internal());
                if !replaying {
                    link.state.metrics().count_error(ErrorCode::Internal);
                }
                &internal
            }
            _ => event,
        };
        let frames = turn.encoder.encode(event);
        let terminal = event.is_terminal();
        // The engine sets the due time before it sends `Completed`.
        let summary_scheduled = match event {
            TurnEvent::Completed(_) => turn
                .summary
                .as_mut()
                .and_then(SummaryNotice::scheduled_at)
                .map(|at| gnosari::encode_session_summary_scheduled(turn.encoder.session_id(), at)),
            _ => None,
        };
        let positions = self.params.positions;
        let stream_info = match event {
            TurnEvent::TurnStarted { .. } if positions => {
                Some(gnosari::encode_stream_info(&gnosari::StreamInfo {
                    session_id: turn.encoder.session_id(),
                    epoch: &turn.events.epoch().to_string(),
                    head: entry.seq,
                    turn_id: Some(entry.turn.0),
                    replayed: None,
                }))
            }
            _ => None,
        };
        // A rejoin replaying several turns, or a turn another connection
        // started meanwhile, keeps the reader.
        if terminal && !turn.events.is_live() {
            self.turn = None;
        }
        if !replaying {
            let positioned = |frame: String| match positions {
                true => gnosari::with_seq(frame, entry.seq),
                false => frame,
            };
            for frame in stream_info.into_iter().chain(frames) {
                link.send(positioned(frame)).await?;
            }
            if let Some(frame) = summary_scheduled {
                link.send(frame).await?;
            }
        }
        if terminal && self.turn.is_none() {
            self.advance(link).await?;
        }
        Ok(())
    }

    async fn when_idle<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        draining: Draining,
    ) -> Result<Option<Exit>, SendFailed> {
        if draining == Draining::Yes {
            self.refuse_queued(link).await?;
            return Ok(Some(Exit::Close(CLOSE_GOING_AWAY, "server shutdown")));
        }
        if link.credential.expired() && self.queue.is_empty() {
            return Ok(Some(Exit::Close(
                CLOSE_POLICY_VIOLATION,
                CREDENTIAL_EXPIRED,
            )));
        }
        Ok(None)
    }

    async fn on_drain<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        notice: DrainNotice,
    ) -> Result<(), SendFailed> {
        let Some(turn) = self.turn.as_ref().filter(|_| self.params.positions) else {
            return Ok(());
        };
        let epoch = turn.events.epoch().to_string();
        let frame = gnosari::encode_going_away(&gnosari::GoingAway {
            session_id: turn.encoder.session_id(),
            time_left_ms: notice.time_left_ms,
            retry_after_ms: notice.retry_after_ms,
            epoch: &epoch,
            after: turn.events.cursor(),
        });
        link.send(frame).await
    }

    /// The drain timed out: what the running turn has sent already goes
    /// out, a turn that did not end gets its `error`, and every queued frame
    /// is answered as on a drain (a message: not processed), before the close.
    async fn on_force_close<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), SendFailed> {
        // Entries the reader lost to the log's tail are lost to it anyway.
        while let Some(entry) = self
            .turn
            .as_mut()
            .and_then(|t| t.events.try_next().ok().flatten())
        {
            self.on_turn_event(link, entry).await?;
        }
        if let Some(mut turn) = self.turn.take() {
            let failure = TurnFailure::new(ErrorCode::Internal, TURN_CUT_SHORT);
            link.state.metrics().count_error(failure.code);
            for frame in turn.encoder.encode(&TurnEvent::Failed(failure)) {
                link.send(frame).await?;
            }
        }
        self.refuse_queued(link).await
    }

    /// Whatever it last read may not have reached the client: its session
    /// stays for a rejoin a while.
    fn on_lost(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.keep_for_rejoin();
        }
    }
}

impl Gnosari {
    fn agent_name(&self) -> &str {
        &self.params.agent_name
    }

    /// Cancels the running turn of the connection's session (if the frame
    /// names a session, only that one); idempotent, and nothing to do when
    /// no turn runs. Its terminal says the rest.
    fn cancel<T: Transport>(&self, link: &Link<T>, named: Option<&str>) {
        let outcome = match &self.lease {
            Some(lease) if named.is_none_or(|named| named == lease.id().as_str()) => {
                lease.cancel_turn(self.params.caller.owner.as_deref(), None)
            }
            _ => CancelOutcome::NothingRunning,
        };
        link.state.metrics().count_cancel(outcome);
    }

    /// Attaches to the session a rejoin names, if the engine lets this
    /// caller (same owner, not expired; never anonymous): `stream_info` with
    /// `replayed`, then what the client missed (when replayed) and the live
    /// rest. A refused rejoin is an `error` event, as for a message naming
    /// an unknown session; the socket stays open. A session that could not
    /// be reached just now closes it instead, telling the client to try
    /// again rather than that the session is gone.
    async fn rejoin<T: Transport>(&mut self, link: &mut Link<T>, at: RejoinAt) -> Result<(), Exit> {
        let request = RejoinRequest {
            agent: &self.params.agent,
            namespace: NAMESPACE,
            owner: self.params.caller.owner.as_deref(),
            anonymous: agentwire_engine::AnonymousRejoin::Refused,
            session: &at.session,
            position: at.position,
        };
        let rejoined = match link.state.engine().rejoin(request).await {
            Ok(rejoined) => rejoined,
            Err(e) => {
                crate::connection::rejoin_refused(&e)?;
                let reply = self.refusal_reply(&Refusal::of_engine(e), None, None);
                return self
                    .send_reply(link, reply)
                    .await
                    .map_err(|SendFailed| Exit::Gone);
            }
        };
        link.state.metrics().count_replay(rejoined.replayed);
        let session = rejoined.session.id().clone();
        let info = gnosari::encode_stream_info(&gnosari::StreamInfo {
            session_id: session.as_str(),
            epoch: &rejoined.epoch.to_string(),
            head: rejoined.head,
            turn_id: None,
            replayed: Some(rejoined.replayed),
        });
        if rejoined.reader.is_live() {
            let send_after = match (rejoined.replayed, at.position) {
                (true, Some((_, after))) => after,
                _ => 0,
            };
            self.turn = Some(RunningTurn {
                events: rejoined.reader,
                _bytes: None,
                encoder: TurnEncoder::new(self.agent_name(), session.as_str(), None),
                summary: None,
                send_after,
                // Replayed from a turn's start or followed from the head:
                // either way the encoder is fresh.
                encoder_used: false,
            });
        }
        self.current = session;
        self.lease = Some(rejoined.session);
        link.send(info).await.map_err(|SendFailed| Exit::Gone)
    }

    /// Everything decided about a frame when it arrives, in the behaviour
    /// notes' order (§5.13): rate, parse and schema, screening, attachments.
    fn ingress(&mut self, state: &AppState, text: &str) -> Pending {
        let bytes = match self.admission.text(state, text.len()) {
            Ok(bytes) => bytes,
            Err(refusal) => return Pending::Reply(self.refusal_reply(&refusal, None, None)),
        };
        let message = match gnosari::decode_inbound(text) {
            Ok(message) => message,
            Err(e) => {
                return Pending::Reply(self.error_reply(
                    ErrorCode::InvalidMessage,
                    &e.message,
                    None,
                    e.client_message_id.as_deref(),
                ));
            }
        };
        if let Some(screen) = &state.settings().screening
            && let Some(phrase) = screen.find(&message.message)
        {
            tracing::info!(agent = %self.agent_name(), phrase, "message rejected: prompt injection");
            let frame = gnosari::encode_message_rejected(
                RejectReason::PromptInjection,
                message.client_message_id.as_deref(),
                message.session_id.as_deref(),
                state.engine().clock().now(),
            );
            return Pending::Reply(Reply { frame, code: None });
        }
        match message.check_attachments() {
            Ok(attach) => Pending::Message(message, attach, bytes),
            Err(e) => Pending::Reply(self.error_reply(
                ErrorCode::InvalidMessage,
                &e.message,
                message.session_id.as_deref(),
                e.client_message_id.as_deref(),
            )),
        }
    }

    /// Answers `pending` now when nothing runs, else queues it behind the
    /// running turn.
    async fn accept<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        pending: Pending,
    ) -> Result<(), SendFailed> {
        if self.turn.is_none() && self.queue.is_empty() {
            return self.answer(link, pending).await;
        }
        if self.queue.len() < MAX_QUEUED {
            self.queue.push_back(pending);
            return Ok(());
        }
        // Full: answered out of order, and a message is not processed.
        let reply = match pending {
            Pending::Reply(reply) => reply,
            Pending::Message(message, ..) => self.error_reply(
                ErrorCode::RateLimited,
                QUEUE_FULL,
                message.session_id.as_deref(),
                message.client_message_id.as_deref(),
            ),
        };
        self.send_reply(link, reply).await
    }

    async fn answer<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        pending: Pending,
    ) -> Result<(), SendFailed> {
        match pending {
            Pending::Reply(reply) => self.send_reply(link, reply).await,
            Pending::Message(message, attach, bytes) => {
                self.start_turn(link, message, attach, bytes).await
            }
        }
    }

    async fn send_reply<T: Transport>(
        &self,
        link: &mut Link<T>,
        reply: Reply,
    ) -> Result<(), SendFailed> {
        if let Some(code) = reply.code {
            link.state.metrics().count_error(code);
        }
        link.send(reply.frame).await
    }

    /// Answers queued frames until one starts a turn.
    async fn advance<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), SendFailed> {
        while self.turn.is_none() && !link.state.lifecycle().drain.is_cancelled() {
            let Some(pending) = self.queue.pop_front() else {
                break;
            };
            self.answer(link, pending).await?;
        }
        Ok(())
    }

    /// On shutdown: every queued frame still gets its answer, and a queued
    /// message is told it was not processed.
    async fn refuse_queued<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), SendFailed> {
        while let Some(pending) = self.queue.pop_front() {
            let reply = match pending {
                Pending::Message(message, ..) => self.error_reply(
                    ErrorCode::Internal,
                    SHUTTING_DOWN,
                    message.session_id.as_deref(),
                    message.client_message_id.as_deref(),
                ),
                Pending::Reply(reply) => reply,
            };
            self.send_reply(link, reply).await?;
        }
        Ok(())
    }

    async fn start_turn<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        message: InboundMessage,
        attach: Option<MediaId>,
        bytes: InboundPermit,
    ) -> Result<(), SendFailed> {
        let InboundMessage {
            message: text,
            session_id,
            client_message_id,
            metadata,
            attachments: _,
        } = message;
        // No `session_id`: a new session, under an id minted now.
        let fresh;
        let current = match session_id {
            None => {
                fresh = link.state.engine().mint_session_id();
                &fresh
            }
            Some(_) => &self.current,
        };
        let intent = TurnIntent {
            agent: &self.params.agent,
            namespace: NAMESPACE,
            caller: &self.params.caller,
            // Gnosari has no facet: its memory is the caller's container
            // without one.
            memory_facet: None,
            credential: &link.credential,
            // Queued behind the running turn, a message asks once it ended.
            busy: Busy::Idle,
            current,
            minted: current,
            requested: session_id.as_deref(),
            content: Some(text),
            parts: Vec::new(),
            attach,
            metadata,
            scope: &self.scope,
            // Declares nothing: prepared with what the session opened with.
            opening: Opening::Continues,
        };
        let refusal = match Admission::turn(&link.state, intent).await {
            Ok(handle) => {
                let session = handle.session.id().clone();
                let encoder =
                    TurnEncoder::new(self.agent_name(), session.as_str(), client_message_id);
                self.current = session;
                self.lease = Some(handle.session);
                // `agent_started` is the encoding of the turn's first entry.
                self.turn = Some(RunningTurn {
                    events: handle.events,
                    _bytes: Some(bytes),
                    encoder,
                    summary: Some(handle.summary),
                    send_after: 0,
                    encoder_used: false,
                });
                return Ok(());
            }
            Err(refusal) => refusal,
        };
        // The engine names the session its refusal is about; the others
        // are about the message's.
        let session = match &refusal {
            Refusal::Submit(_) => refusal.session().map(SessionId::as_str),
            _ => session_id.as_deref(),
        };
        let reply = self.refusal_reply(&refusal, session, client_message_id.as_deref());
        self.send_reply(link, reply).await
    }

    /// An `error` event for what admission refused.
    fn refusal_reply(
        &self,
        refusal: &Refusal,
        session_id: Option<&str>,
        client_message_id: Option<&str>,
    ) -> Reply {
        let text = refusal.text(&WORDS);
        self.error_reply(refusal.code(), &text, session_id, client_message_id)
    }

    /// An `error` event.
    fn error_reply(
        &self,
        code: ErrorCode,
        error: &str,
        session_id: Option<&str>,
        client_message_id: Option<&str>,
    ) -> Reply {
        let frame = gnosari::encode_error(&ErrorEvent {
            agent_name: self.agent_name(),
            error,
            session_id,
            client_message_id,
        });
        Reply {
            frame,
            code: Some(code),
        }
    }
}

#[cfg(test)]
mod tests;

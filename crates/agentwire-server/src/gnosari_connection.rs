//! One task per Gnosari socket (`/ws/agent/{agent}`, `/ws/team/{team}`,
//! `/ws/team/{team}/agent/{agent}`). It reads message
//! frames, screens them, hands them to the same engine the Omnia dialect
//! uses, and writes each turn's events back, encoded once by
//! `agentwire_gnosari::TurnEncoder`.
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
use std::pin::Pin;
use std::sync::Arc;

use agentwire_core::assets::ASSET_METADATA_KEY;
use agentwire_core::media::media_session_id;
use agentwire_core::{
    Agent, ClientAnswer, ConnectionScope, ContentPart, ErrorCode, MediaContent, MediaError,
    MediaId, PartKind, SessionId, SessionLease, StorageRef, SubmitError, SubmitRequest,
    SummaryNotice, ToolSide, TurnEvent, TurnFailure,
};
use agentwire_gnosari::{self as gnosari, ErrorEvent, InboundMessage, RejectReason, TurnEncoder};
use tokio::sync::mpsc;
use tokio::time::Sleep;

use crate::AppState;
use crate::budget::{self, InboundPermit};
use crate::identity::Caller;
use crate::lifecycle::ConnectionSlot;
use crate::rate::TokenBucket;
use crate::socket::{
    self, CLOSE_GOING_AWAY, CLOSE_POLICY_VIOLATION, Exit, Keepalive, SendFailed, TURN_IN_PROGRESS,
    classify_read_error, credential_timer, until,
};
use crate::websocket::{Message, WebSocket};

/// Frames that may wait behind the running turn.
pub(crate) const MAX_QUEUED: usize = 8;

/// Sessions have no namespace in this dialect.
const NAMESPACE: &str = "default";

const CLIENT_TOOLS_UNAVAILABLE: &str = "client-side tools are not available on this endpoint";
const SESSION_NOT_FOUND: &str = "session not found";
const QUEUE_FULL: &str =
    "too many messages waiting for a reply; send this one again after the replies arrive";
const RATE_LIMITED: &str = "rate limit exceeded";
const BINARY_UNSUPPORTED: &str = "binary frames are not supported";
const CREDENTIAL_EXPIRED: &str = "credential expired";
const SHUTTING_DOWN: &str = "server is shutting down; the message was not processed";
const TURN_CUT_SHORT: &str = "server is shutting down; the reply was cut short";
const INTERNAL: &str = "internal server error";
const ATTACHMENT_NOT_FOUND: &str = "attachment not found";

/// What the upgrade learned from the request.
pub(crate) struct GnosariParams {
    /// What answers: an agent, or a team's orchestrator or member.
    pub(crate) agent: Arc<Agent>,
    /// The `agent_name` of the events (a turn's events follow its handoffs).
    pub(crate) agent_name: String,
    /// Who is calling; anonymous when the agent is public and no credential came.
    pub(crate) caller: Caller,
}

/// A frame waiting for its turn to be answered.
enum Pending {
    /// With its share of the inbound budget, held until its turn ends.
    Message(InboundMessage, InboundPermit),
    /// An answer decided at arrival (a frame error, a rejection).
    Reply(Reply),
}

/// An event to send; `code` is counted in the metrics when it is sent.
struct Reply {
    frame: String,
    code: Option<ErrorCode>,
}

struct RunningTurn {
    events: mpsc::Receiver<TurnEvent>,
    /// The message's share of the inbound budget, given back with the turn.
    _bytes: InboundPermit,
    encoder: TurnEncoder,
    /// When the completed turn scheduled the session's summary: announced
    /// by `session_summary_scheduled` right after `agent_completed`.
    summary: SummaryNotice,
}

struct Connection {
    state: Arc<AppState>,
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
    /// Frames per second.
    limiter: TokenBucket,
    /// When the caller's token runs out; `None` for credentials without one.
    credential_deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline passed: no new turn starts, and the socket closes with
    /// 1008 once the running turn and the queue are done.
    credential_expired: bool,
}

pub(crate) async fn run(mut socket: WebSocket, slot: ConnectionSlot, params: GnosariParams) {
    let state = slot.state().clone();
    socket::count_connection(&state);
    let limits = &state.settings.limits;
    let mut conn = Connection {
        limiter: TokenBucket::new(
            u64::from(limits.messages_per_second),
            u64::from(limits.message_burst),
        ),
        credential_deadline: credential_timer(&state, params.caller.identity.as_ref()),
        credential_expired: false,
        scope: ConnectionScope::new(),
        current: state.engine.mint_session_id(),
        lease: None,
        turn: None,
        queue: VecDeque::new(),
        params,
        state: state.clone(),
    };
    let exit = conn.serve(&mut socket).await;
    socket::close(&mut socket, exit).await;
    drop(slot);
}

impl Connection {
    async fn serve(&mut self, socket: &mut WebSocket) -> Exit {
        let lifecycle = &self.state.lifecycle;
        let (drain, force_close) = (lifecycle.drain.clone(), lifecycle.force_close.clone());
        let mut keepalive = Keepalive::new(&self.state.settings.limits);
        loop {
            if self.turn.is_none() {
                if drain.is_cancelled() {
                    if self.refuse_queued(socket).await.is_err() {
                        return Exit::Gone;
                    }
                    return Exit::Close(CLOSE_GOING_AWAY, "server shutdown");
                }
                if self.credential_expired && self.queue.is_empty() {
                    return Exit::Close(CLOSE_POLICY_VIOLATION, CREDENTIAL_EXPIRED);
                }
            }
            tokio::select! {
                () = force_close.cancelled() => {
                    if Box::pin(self.cut_short(socket)).await.is_err() {
                        return Exit::Gone;
                    }
                    return Exit::Close(CLOSE_GOING_AWAY, "server shutdown");
                }
                () = until(&mut self.credential_deadline), if !self.credential_expired => {
                    self.credential_expired = true;
                }
                // Handled at the top of the loop.
                () = drain.cancelled(), if self.turn.is_none() => {}
                // The handlers are boxed: inline, their futures would size
                // every idle connection's task for its busiest moment.
                event = next_event(&mut self.turn) => {
                    if Box::pin(self.on_turn_events(socket, event)).await.is_err() {
                        return Exit::Gone;
                    }
                }
                frame = socket.recv() => {
                    keepalive.heard();
                    if let Err(exit) = Box::pin(self.on_frame(socket, frame)).await {
                        return exit;
                    }
                }
                tick = keepalive.tick() => {
                    if let Err(exit) = Box::pin(Keepalive::act(tick, &self.state, socket)).await {
                        return exit;
                    }
                }
            }
            if socket::flush(socket).await.is_err() {
                return Exit::Gone;
            }
        }
    }

    fn agent_name(&self) -> &str {
        &self.params.agent_name
    }

    async fn on_frame(
        &mut self,
        socket: &mut WebSocket,
        frame: Option<Result<Message, tungstenite::Error>>,
    ) -> Result<(), Exit> {
        let message = match frame {
            None => return Err(Exit::Gone),
            Some(Ok(message)) => message,
            Some(Err(error)) => return Err(classify_read_error(error)),
        };
        let pending = match message {
            Message::Text(text) => {
                socket::count_received(&self.state);
                self.ingress(text.as_str())
            }
            Message::Binary(_) => {
                socket::count_received(&self.state);
                Pending::Reply(if self.limiter.try_take() {
                    self.error_reply(ErrorCode::InvalidMessage, BINARY_UNSUPPORTED, None, None)
                } else {
                    self.error_reply(ErrorCode::RateLimited, RATE_LIMITED, None, None)
                })
            }
            Message::Close(_) => return Err(Exit::Gone),
            // Pongs and pings only reset the keepalive, which the caller did;
            // tungstenite answers pings itself.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return Ok(()),
        };
        self.accept(socket, pending)
            .await
            .map_err(|SendFailed| Exit::Gone)
    }

    /// Everything decided about a frame when it arrives, in the behaviour
    /// notes' order (§5.13): rate, parse and schema, screening, attachments.
    fn ingress(&mut self, text: &str) -> Pending {
        if !self.limiter.try_take() {
            let reply = self.error_reply(ErrorCode::RateLimited, RATE_LIMITED, None, None);
            return Pending::Reply(reply);
        }
        let Some(bytes) = budget::take(&self.state, text.len()) else {
            return Pending::Reply(self.error_reply(
                ErrorCode::RateLimited,
                budget::BUSY,
                None,
                None,
            ));
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
        if let Some(screen) = &self.state.settings.screening
            && let Some(phrase) = screen.find(&message.message)
        {
            tracing::info!(agent = %self.agent_name(), phrase, "message rejected: prompt injection");
            let frame = gnosari::encode_message_rejected(
                RejectReason::PromptInjection,
                message.client_message_id.as_deref(),
                message.session_id.as_deref(),
                self.state.engine.clock().now(),
            );
            return Pending::Reply(Reply { frame, code: None });
        }
        if let Err(e) = message.check_attachments() {
            return Pending::Reply(self.error_reply(
                ErrorCode::InvalidMessage,
                &e.message,
                message.session_id.as_deref(),
                e.client_message_id.as_deref(),
            ));
        }
        Pending::Message(message, bytes)
    }

    /// Answers `pending` now when nothing runs, else queues it behind the
    /// running turn.
    async fn accept(&mut self, socket: &mut WebSocket, pending: Pending) -> Result<(), SendFailed> {
        if self.turn.is_none() && self.queue.is_empty() {
            return self.answer(socket, pending).await;
        }
        if self.queue.len() < MAX_QUEUED {
            self.queue.push_back(pending);
            return Ok(());
        }
        // Full: answered out of order, and a message is not processed.
        let reply = match pending {
            Pending::Reply(reply) => reply,
            Pending::Message(message, _) => self.error_reply(
                ErrorCode::RateLimited,
                QUEUE_FULL,
                message.session_id.as_deref(),
                message.client_message_id.as_deref(),
            ),
        };
        self.send_reply(socket, reply).await
    }

    async fn answer(&mut self, socket: &mut WebSocket, pending: Pending) -> Result<(), SendFailed> {
        match pending {
            Pending::Reply(reply) => self.send_reply(socket, reply).await,
            Pending::Message(message, bytes) => self.start_turn(socket, message, bytes).await,
        }
    }

    async fn send_reply(&self, socket: &mut WebSocket, reply: Reply) -> Result<(), SendFailed> {
        if let Some(code) = reply.code {
            self.state.metrics.count_error(code);
        }
        self.send(socket, reply.frame).await
    }

    /// Answers queued frames until one starts a turn.
    async fn advance(&mut self, socket: &mut WebSocket) -> Result<(), SendFailed> {
        while self.turn.is_none() && !self.state.lifecycle.drain.is_cancelled() {
            let Some(pending) = self.queue.pop_front() else {
                break;
            };
            self.answer(socket, pending).await?;
        }
        Ok(())
    }

    /// On shutdown: every queued frame still gets its answer, and a queued
    /// message is told it was not processed.
    async fn refuse_queued(&mut self, socket: &mut WebSocket) -> Result<(), SendFailed> {
        while let Some(pending) = self.queue.pop_front() {
            let reply = match pending {
                Pending::Message(message, _) => self.error_reply(
                    ErrorCode::Internal,
                    SHUTTING_DOWN,
                    message.session_id.as_deref(),
                    message.client_message_id.as_deref(),
                ),
                Pending::Reply(reply) => reply,
            };
            self.send_reply(socket, reply).await?;
        }
        Ok(())
    }

    /// The drain timed out: what the running turn has sent already goes
    /// out, a turn that did not end gets its `error`, and every queued frame
    /// is answered as on a drain (a message: not processed), before the close.
    async fn cut_short(&mut self, socket: &mut WebSocket) -> Result<(), SendFailed> {
        while let Some(event) = self
            .turn
            .as_mut()
            .and_then(|t| socket::ready_event(&mut t.events))
        {
            self.on_turn_event(socket, event).await?;
        }
        if let Some(mut turn) = self.turn.take() {
            let failure = TurnFailure::new(ErrorCode::Internal, TURN_CUT_SHORT);
            self.state.metrics.count_error(failure.code);
            for frame in turn.encoder.encode(&TurnEvent::Failed(failure)) {
                self.send(socket, frame).await?;
            }
        }
        self.refuse_queued(socket).await?;
        socket::flush(socket).await
    }

    async fn start_turn(
        &mut self,
        socket: &mut WebSocket,
        message: InboundMessage,
        bytes: InboundPermit,
    ) -> Result<(), SendFailed> {
        // Shape-checked at ingress; `None` here means no attachment.
        let asset = message.check_attachments().ok().flatten();
        let InboundMessage {
            message: text,
            session_id,
            client_message_id,
            mut metadata,
            attachments: _,
        } = message;
        // The marker key is the server's: a client cannot set it.
        metadata.remove(ASSET_METADATA_KEY);
        if self.credential_expired_now() {
            let reply = self.error_reply(
                ErrorCode::CredentialExpired,
                CREDENTIAL_EXPIRED,
                session_id.as_deref(),
                client_message_id.as_deref(),
            );
            return self.send_reply(socket, reply).await;
        }
        let mut parts = Vec::new();
        if let (Some(asset), Some(session)) = (asset, session_id.as_deref()) {
            match self.attachment(session, &asset).await {
                Ok(part) => {
                    metadata.insert(ASSET_METADATA_KEY.to_owned(), asset.to_uuid());
                    parts.push(part);
                }
                Err((code, error)) => {
                    let reply =
                        self.error_reply(code, error, Some(session), client_message_id.as_deref());
                    return self.send_reply(socket, reply).await;
                }
            }
        }
        let fresh;
        let current = match session_id {
            None => {
                fresh = self.state.engine.mint_session_id();
                &fresh
            }
            Some(_) => &self.current,
        };
        let agent = self.params.agent.clone();
        let request = SubmitRequest {
            agent: &agent,
            namespace: NAMESPACE,
            owner: self.params.caller.owner.as_deref(),
            current,
            minted: current,
            requested: session_id.as_deref(),
            content: Some(text),
            parts,
            metadata,
            scope: &self.scope,
        };
        let failure = match self.state.engine.submit(request).await {
            Ok(handle) => {
                self.state
                    .metrics
                    .turns_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let session = handle.session.id().clone();
                let encoder =
                    TurnEncoder::new(self.agent_name(), session.as_str(), client_message_id);
                let started = encoder.agent_started();
                self.current = session;
                self.lease = Some(handle.session);
                self.turn = Some(RunningTurn {
                    events: handle.events,
                    _bytes: bytes,
                    encoder,
                    summary: handle.summary,
                });
                return self.send(socket, started).await;
            }
            Err(SubmitError::Expired { requested }) => (
                ErrorCode::SessionExpired,
                SESSION_NOT_FOUND.to_owned(),
                Some(requested),
            ),
            Err(SubmitError::TurnInProgress { session }) => (
                ErrorCode::TurnInProgress,
                TURN_IN_PROGRESS.to_owned(),
                Some(session),
            ),
            Err(SubmitError::InvalidSessionId(e)) => {
                (ErrorCode::InvalidMessage, e.to_string(), None)
            }
            Err(SubmitError::Store(e)) => {
                tracing::error!(error = %e, "accepting a message failed");
                (ErrorCode::Internal, INTERNAL.to_owned(), None)
            }
        };
        let (code, error, session) = failure;
        let reply = self.error_reply(
            code,
            &error,
            session.as_ref().map(SessionId::as_str),
            client_message_id.as_deref(),
        );
        self.send_reply(socket, reply).await
    }

    /// `first` and the events the turn has already sent after it, up to
    /// [`socket::EVENT_BATCH`], queued for one flush.
    async fn on_turn_events(
        &mut self,
        socket: &mut WebSocket,
        first: Option<TurnEvent>,
    ) -> Result<(), SendFailed> {
        self.on_turn_event(socket, first).await?;
        for _ in 1..socket::EVENT_BATCH {
            let Some(event) = self
                .turn
                .as_mut()
                .and_then(|t| socket::ready_event(&mut t.events))
            else {
                break;
            };
            self.on_turn_event(socket, event).await?;
        }
        Ok(())
    }

    async fn on_turn_event(
        &mut self,
        socket: &mut WebSocket,
        event: Option<TurnEvent>,
    ) -> Result<(), SendFailed> {
        let Some(turn) = self.turn.as_mut() else {
            return Ok(());
        };
        let Some(event) = event else {
            // The turn task ended without a terminal event: it was aborted.
            let session = turn.encoder.session_id().to_owned();
            self.turn = None;
            let reply = self.error_reply(ErrorCode::Internal, INTERNAL, Some(&session), None);
            self.send_reply(socket, reply).await?;
            return self.advance(socket).await;
        };
        if let TurnEvent::ToolCall(call) = &event
            && call.side == ToolSide::Client
        {
            let denial = ClientAnswer::Nack(CLIENT_TOOLS_UNAVAILABLE.to_owned());
            self.scope.client_tools().answer(&call.id, denial);
        }
        if let TurnEvent::Failed(failure) = &event {
            self.state.metrics.count_error(failure.code);
        }
        let frames = turn.encoder.encode(&event);
        let terminal = event.is_terminal();
        // The engine sets the due time before it sends `Completed`.
        let summary_scheduled = match &event {
            TurnEvent::Completed(_) => turn
                .summary
                .scheduled_at()
                .map(|at| gnosari::encode_session_summary_scheduled(turn.encoder.session_id(), at)),
            _ => None,
        };
        if terminal {
            self.turn = None;
        }
        for frame in frames {
            self.send(socket, frame).await?;
        }
        if let Some(frame) = summary_scheduled {
            self.send(socket, frame).await?;
        }
        if terminal {
            self.advance(socket).await?;
        }
        Ok(())
    }

    /// The stored part for asset `id` on `session`: the asset must exist in
    /// this session's media and have been uploaded by this caller. Unknown,
    /// another session's and another owner's assets get the same answer, so
    /// ids cannot be probed. The part names the item by `storage_ref` only:
    /// each turn resolves it afresh (`agentwire_core::assets`).
    async fn attachment(
        &self,
        session: &str,
        id: &MediaId,
    ) -> Result<ContentPart, (ErrorCode, &'static str)> {
        const NOT_FOUND: (ErrorCode, &str) = (ErrorCode::InvalidMessage, ATTACHMENT_NOT_FOUND);
        let media = self.state.media.as_ref().ok_or(NOT_FOUND)?;
        let session = media_session_id(session).map_err(|_| NOT_FOUND)?;
        let storage_ref = StorageRef::new(session, id.clone());
        let info = match media.store.info(&storage_ref).await {
            Ok(info) => info,
            Err(MediaError::Unavailable(detail)) => {
                tracing::error!(error = %detail, "media storage failed");
                return Err((ErrorCode::Internal, INTERNAL));
            }
            Err(_) => return Err(NOT_FOUND),
        };
        if info.owner != self.params.caller.owner {
            return Err(NOT_FOUND);
        }
        let kind = if info.mime_type.starts_with("image/") {
            PartKind::Image
        } else {
            PartKind::File
        };
        Ok(ContentPart::media(
            kind,
            MediaContent {
                storage_ref: Some(storage_ref.to_string()),
                mime_type: info.mime_type,
                filename: Some(info.filename),
                size_bytes: Some(info.size_bytes),
                ..MediaContent::default()
            },
        ))
    }

    fn credential_expired_now(&self) -> bool {
        self.credential_expired || socket::passed(self.credential_deadline.as_ref())
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

    async fn send(&self, socket: &mut WebSocket, text: String) -> Result<(), SendFailed> {
        socket::queue_text(&self.state, socket, text).await
    }
}

/// Waits for the running turn's next event; never resolves when idle.
async fn next_event(turn: &mut Option<RunningTurn>) -> Option<TurnEvent> {
    match turn {
        Some(turn) => turn.events.recv().await,
        None => std::future::pending().await,
    }
}

//! One task per socket. It reads frames, applies the per-connection rules
//! (rate, payload size, keepalive), hands messages to the engine and writes
//! the running turn's events back, encoded in the Omnia dialect.
//!
//! The task owns the socket outright and multiplexes with `select!`, so a
//! connection costs one task and no extra queue: a turn's bounded event
//! channel is the outbound queue, and a slow client slows its own turn.

use std::pin::Pin;
use std::sync::Arc;

use agentwire_core::{
    ClientAnswer, ConnectionScope, ErrorCode, MediaChunk, SessionId, SessionLease, SubmitError,
    SubmitRequest, ToolSide, TurnEvent,
};
use agentwire_omnia::{self as omnia, ClientFrame, ClientMessage};
use tokio::sync::mpsc;
use tokio::time::Sleep;

use crate::budget::{self, InboundPermit};
use crate::identity::{Caller, pseudonym};
use crate::lifecycle::ConnectionSlot;
use crate::rate::TokenBucket;
use crate::socket::{
    self, CLOSE_GOING_AWAY, Exit, Keepalive, SendFailed, TURN_IN_PROGRESS, classify_read_error,
    credential_timer, next_event, until,
};
use crate::websocket::{Message, WebSocket};
use crate::{AgentEntry, AppState};

const CLOSE_CREDENTIAL_EXPIRED: u16 = 4401;

/// What the upgrade learned from the request.
pub(crate) struct ConnectionParams {
    pub(crate) agent: Arc<AgentEntry>,
    pub(crate) namespace: String,
    /// The client asked for binary OMNI frames (`binary=true`).
    pub(crate) binary: bool,
    pub(crate) memory_facet: Option<String>,
    /// Who is calling; anonymous when the agent is public and no credential came.
    pub(crate) caller: Caller,
}

struct Connection {
    state: Arc<AppState>,
    params: ConnectionParams,
    /// The id announced in `connected`.
    minted: SessionId,
    /// The session the connection is on: the minted one until a message
    /// resumes or opens another.
    current: SessionId,
    /// Keeps `current` live in the engine while the socket is open.
    lease: Option<SessionLease>,
    /// Events of the running turn; `None` when idle. One turn at a time per
    /// connection.
    turn: Option<mpsc::Receiver<TurnEvent>>,
    /// The running turn's message's share of the inbound budget, given
    /// back when the turn ends.
    turn_bytes: Option<InboundPermit>,
    /// The running turn is inside a delegation: the delegate's text is not
    /// part of the reply, and Omnia has no agent identities to show it by.
    in_delegation: bool,
    /// Per-connection state: pending client tool calls, handler caches.
    scope: Arc<ConnectionScope>,
    /// Text frames per second.
    limiter: TokenBucket,
    /// Binary media bytes per second.
    media_limiter: TokenBucket,
    /// When the caller's token runs out; `None` for credentials without one.
    credential_deadline: Option<Pin<Box<Sleep>>>,
    /// The deadline passed: no new work is accepted, and the socket closes
    /// with 4401 once no turn runs.
    credential_expired: bool,
}

pub(crate) async fn run(mut socket: WebSocket, slot: ConnectionSlot, params: ConnectionParams) {
    let state = slot.state().clone();
    socket::count_connection(&state);
    let minted = state.engine.mint_session_id();
    let limits = &state.settings.limits;
    let mut conn = Connection {
        limiter: TokenBucket::new(
            u64::from(limits.messages_per_second),
            u64::from(limits.message_burst),
        ),
        media_limiter: TokenBucket::new(limits.media_bytes_per_second, limits.media_burst_bytes),
        credential_deadline: credential_timer(&state, params.caller.identity.as_ref()),
        credential_expired: false,
        scope: ConnectionScope::new(),
        current: minted.clone(),
        minted,
        lease: None,
        turn: None,
        turn_bytes: None,
        in_delegation: false,
        params,
        state: state.clone(),
    };
    let exit = conn.serve(&mut socket).await;
    socket::close(&mut socket, exit).await;
    drop(slot);
}

impl Connection {
    async fn serve(&mut self, socket: &mut WebSocket) -> Exit {
        let connected = self.connected_frame();
        if self.send(socket, connected).await.is_err() || socket::flush(socket).await.is_err() {
            return Exit::Gone;
        }
        let lifecycle = &self.state.lifecycle;
        let (drain, force_close) = (lifecycle.drain.clone(), lifecycle.force_close.clone());
        let mut keepalive = Keepalive::new(&self.state.settings.limits);
        loop {
            if self.credential_expired && self.turn.is_none() {
                return Exit::Close(CLOSE_CREDENTIAL_EXPIRED, "credential expired");
            }
            tokio::select! {
                () = force_close.cancelled() => return Exit::Close(CLOSE_GOING_AWAY, "server shutdown"),
                () = until(&mut self.credential_deadline), if !self.credential_expired => {
                    self.credential_expired = true;
                }
                () = drain.cancelled(), if self.turn.is_none() => {
                    return Exit::Close(CLOSE_GOING_AWAY, "server shutdown");
                }
                // The handlers are boxed: inline, their futures would size
                // every idle connection's task for its busiest moment.
                event = next_event(&mut self.turn) => {
                    if Box::pin(self.on_turn_events(socket, event)).await.is_err() {
                        return Exit::Gone;
                    }
                }
                frame = socket.recv() => {
                    keepalive.heard();
                    match Box::pin(self.on_frame(socket, frame)).await {
                        Ok(()) => {}
                        Err(exit) => return exit,
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

    fn connected_frame(&self) -> String {
        let limits = &self.state.settings.limits;
        omnia::encode_connected(
            &omnia::Connected {
                session_id: self.minted.as_str(),
                capabilities: omnia::Capabilities {
                    binary_frames: self.params.binary,
                    max_payload_size: limits.max_payload_bytes as u64,
                    protocol_version: u32::from(omnia::PROTOCOL_VERSION),
                },
                resumed: false,
                memory_facet: self.params.memory_facet.as_deref(),
                ai_disclosure: self.params.agent.requires_ai_disclosure,
            },
            self.state.engine.clock().now(),
        )
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
        let gone = |_| Exit::Gone;
        match message {
            Message::Text(text) => {
                socket::count_received(&self.state);
                if !self.limiter.try_take() {
                    return self
                        .send_error(socket, None, ErrorCode::RateLimited, "rate limit exceeded")
                        .await
                        .map_err(gone);
                }
                let Some(bytes) = budget::take(&self.state, text.len()) else {
                    return self.send_busy(socket).await.map_err(gone);
                };
                let decoded = omnia::decode_client_text(text.as_str());
                // The decoded frame owns what it needs: the frame's own
                // bytes go back before the engine copies the message on.
                drop(text);
                match decoded {
                    Ok(frame) => self
                        .on_client_frame(socket, frame, bytes)
                        .await
                        .map_err(gone),
                    Err(e) => self
                        .send_error(socket, None, ErrorCode::InvalidMessage, &e.message)
                        .await
                        .map_err(gone),
                }
            }
            Message::Binary(bytes) => {
                socket::count_received(&self.state);
                if !self.media_limiter.try_take_n(bytes.len() as u64) {
                    return self
                        .send_error(
                            socket,
                            None,
                            ErrorCode::RateLimited,
                            "media rate limit exceeded",
                        )
                        .await
                        .map_err(gone);
                }
                let Some(_held) = budget::take(&self.state, bytes.len()) else {
                    return self.send_busy(socket).await.map_err(gone);
                };
                self.on_binary(socket, &bytes).await.map_err(gone)
            }
            Message::Close(_) => Err(Exit::Gone),
            // Pongs and pings only reset the keepalive, which the caller did;
            // tungstenite answers pings itself.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Ok(()),
        }
    }

    /// `bytes` holds the frame's share of the inbound budget: a message
    /// that starts a turn keeps it until the turn ends.
    async fn on_client_frame(
        &mut self,
        socket: &mut WebSocket,
        frame: ClientFrame,
        bytes: InboundPermit,
    ) -> Result<(), SendFailed> {
        let current = self.current.clone();
        match frame {
            ClientFrame::Message(_) | ClientFrame::UploadRequest { .. }
                if self.credential_expired_now() =>
            {
                self.send_error(
                    socket,
                    Some(&current),
                    ErrorCode::CredentialExpired,
                    "credential expired",
                )
                .await
            }
            ClientFrame::Message(message) => self.on_message(socket, message, bytes).await,
            ClientFrame::UploadRequest { request, .. } => {
                let frame =
                    crate::media_ws::answer_upload_request(&self.state, &current, request).await;
                self.send(socket, frame).await
            }
            ClientFrame::ToolResult {
                call_id,
                result,
                error,
                ..
            } => {
                let answer = match error {
                    Some(error) => Err(error),
                    None => Ok(result.unwrap_or(serde_json::Value::Null)),
                };
                if self
                    .scope
                    .client_tools()
                    .answer(&call_id, ClientAnswer::Result(answer))
                {
                    return Ok(());
                }
                self.send_error(
                    socket,
                    Some(&current),
                    ErrorCode::InvalidMessage,
                    "no pending tool call",
                )
                .await
            }
            // Unknown call ids are ignored, as for an ack that lost a race with a timeout.
            ClientFrame::ToolCallAck { call_id } => {
                self.scope
                    .client_tools()
                    .answer(&call_id, ClientAnswer::Ack);
                Ok(())
            }
            ClientFrame::ToolCallNack { call_id, reason } => {
                self.scope
                    .client_tools()
                    .answer(&call_id, ClientAnswer::Nack(reason));
                Ok(())
            }
            ClientFrame::CredentialRefresh { token } => {
                self.refresh_credential(&token).await;
                Ok(())
            }
            ClientFrame::DisclosureAck => {
                self.record_disclosure_ack().await;
                Ok(())
            }
            // No reply by contract. Without realtime audio a hangup has nothing to end.
            ClientFrame::Hangup => Ok(()),
        }
    }

    async fn on_message(
        &mut self,
        socket: &mut WebSocket,
        message: ClientMessage,
        bytes: InboundPermit,
    ) -> Result<(), SendFailed> {
        if self.turn.is_some() {
            let current = self.current.clone();
            return self
                .send_error(
                    socket,
                    Some(&current),
                    ErrorCode::TurnInProgress,
                    TURN_IN_PROGRESS,
                )
                .await;
        }
        let session = message
            .session_id
            .as_deref()
            .unwrap_or(self.current.as_str());
        if let Err((code, text)) =
            crate::media_ws::check_storage_refs(&self.state, session, &message.parts).await
        {
            return self.send_error(socket, None, code, text).await;
        }
        let ClientMessage {
            session_id,
            content,
            parts,
            metadata,
            declare: _,
        } = message;
        let agent = self.params.agent.agent.clone();
        let request = SubmitRequest {
            agent: &agent,
            namespace: &self.params.namespace,
            owner: self.params.caller.owner.as_deref(),
            current: &self.current,
            minted: &self.minted,
            requested: session_id.as_deref(),
            content,
            parts,
            metadata,
            scope: &self.scope,
        };
        match self.state.engine.submit(request).await {
            Ok(handle) => {
                self.state
                    .metrics
                    .turns_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.current = handle.session.id().clone();
                self.lease = Some(handle.session);
                self.turn = Some(handle.events);
                self.turn_bytes = Some(bytes);
                Ok(())
            }
            Err(SubmitError::Expired { requested }) => {
                self.send_error(
                    socket,
                    Some(&requested),
                    ErrorCode::SessionExpired,
                    SESSION_EXPIRED,
                )
                .await
            }
            Err(SubmitError::TurnInProgress { session }) => {
                self.send_error(
                    socket,
                    Some(&session),
                    ErrorCode::TurnInProgress,
                    TURN_IN_PROGRESS,
                )
                .await
            }
            Err(SubmitError::InvalidSessionId(e)) => {
                self.send_error(socket, None, ErrorCode::InvalidMessage, &e.to_string())
                    .await
            }
            Err(SubmitError::Store(e)) => {
                tracing::error!(error = %e, "accepting a message failed");
                let current = self.current.clone();
                self.send_error(
                    socket,
                    Some(&current),
                    ErrorCode::Internal,
                    "internal server error",
                )
                .await
            }
        }
    }

    /// Inbound OMNI frames carry realtime audio, which needs a duplex
    /// handler; none of the scripted handlers is one.
    async fn on_binary(&mut self, socket: &mut WebSocket, bytes: &[u8]) -> Result<(), SendFailed> {
        match omnia::decode_binary(bytes) {
            Err(e) => {
                self.send_error(socket, None, ErrorCode::InvalidMessage, &e.client_message())
                    .await
            }
            Ok(_) => {
                let current = self.current.clone();
                self.send_error(
                    socket,
                    Some(&current),
                    ErrorCode::MediaNotEnabled,
                    "audio not supported",
                )
                .await
            }
        }
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
            let Some(event) = self.turn.as_mut().and_then(socket::ready_event) else {
                break;
            };
            self.on_turn_event(socket, event).await?;
        }
        if self.turn.is_none() {
            self.turn_bytes = None;
        }
        Ok(())
    }

    async fn on_turn_event(
        &mut self,
        socket: &mut WebSocket,
        event: Option<TurnEvent>,
    ) -> Result<(), SendFailed> {
        let Some(event) = event else {
            // The turn task ended without a terminal event: it was aborted.
            self.turn = None;
            self.in_delegation = false;
            let current = self.current.clone();
            return self
                .send_error(
                    socket,
                    Some(&current),
                    ErrorCode::Internal,
                    "internal server error",
                )
                .await;
        };
        if event.is_terminal() {
            self.turn = None;
            self.in_delegation = false;
        }
        let session = self.current.as_str();
        let now = self.state.engine.clock().now();
        let shows_server_tools = self.params.agent.shows_server_tools;
        let frame = match &event {
            TurnEvent::AgentSwitched { delegated, .. } => {
                self.in_delegation = *delegated;
                return Ok(());
            }
            TurnEvent::TextDelta(_) if self.in_delegation => return Ok(()),
            TurnEvent::TextDelta(delta) => omnia::encode_chunk(session, delta, now),
            TurnEvent::ToolCall(call) if call.side == ToolSide::Client || shows_server_tools => {
                omnia::encode_tool_call(session, call, now)
            }
            // Client-side results reach the stream only when the client did not
            // answer in time: it is told the call is over.
            TurnEvent::ToolResult { id, outcome, side }
                if *side == ToolSide::Client || shows_server_tools =>
            {
                omnia::encode_tool_result(session, id, outcome, now)
            }
            TurnEvent::ToolCall(_) | TurnEvent::ToolResult { .. } => return Ok(()),
            TurnEvent::Media(chunk) if self.params.binary => {
                return self.send_binary_media(socket, chunk).await;
            }
            TurnEvent::Media(chunk) => omnia::encode_media_chunk(
                session,
                &chunk.media_id,
                chunk.sequence,
                chunk.is_last,
                &chunk.data,
                &chunk.mime_type,
                now,
            ),
            TurnEvent::Interrupt => omnia::encode_interrupt(session, now),
            TurnEvent::AudioFormat(format) => omnia::encode_session_config(session, format, now),
            TurnEvent::Completed(reply) => omnia::encode_done(session, reply, now),
            TurnEvent::Failed(failure) => {
                self.state.metrics.count_error(failure.code);
                omnia::encode_error(Some(session), failure.code, &failure.message, now)
            }
        };
        self.send(socket, frame).await
    }

    /// Media as OMNI binary frames, split in 64 KiB chunks above 1 MiB.
    async fn send_binary_media(
        &self,
        socket: &mut WebSocket,
        chunk: &MediaChunk,
    ) -> Result<(), SendFailed> {
        let frames = omnia::encode_media_frames(
            self.current.as_str(),
            &chunk.media_id,
            &chunk.mime_type,
            chunk.sequence,
            chunk.is_last,
            &chunk.data,
        );
        for frame in frames {
            socket::queue_raw(&self.state, socket, Message::Binary(frame.into())).await?;
        }
        Ok(())
    }

    fn credential_expired_now(&self) -> bool {
        self.credential_expired || socket::passed(self.credential_deadline.as_ref())
    }

    /// `credential_refresh`: a token for the same owner (subject and session
    /// claim) that expires later replaces the credential; any other is
    /// ignored, silently, as the contract says.
    async fn refresh_credential(&mut self, token: &str) {
        let (Some(authenticator), Some(current)) = (
            self.state.identity.authenticator.clone(),
            self.params.caller.identity.as_ref(),
        ) else {
            return;
        };
        let Ok(fresh) = authenticator.authenticate_refresh(token).await else {
            tracing::info!("credential_refresh ignored: token refused");
            return;
        };
        let same_owner = Some(pseudonym(&self.state.identity, &fresh)) == self.params.caller.owner;
        let later = match (fresh.expires_at, current.expires_at) {
            (Some(fresh), Some(current)) => fresh > current,
            _ => false,
        };
        if !(same_owner && later) {
            tracing::info!(same_owner, later, "credential_refresh ignored");
            return;
        }
        self.credential_deadline = credential_timer(&self.state, Some(&fresh));
        self.credential_expired = false;
        self.params.caller.identity = Some(fresh);
    }

    /// `disclosure_ack`: recorded on the session as the client's assertion.
    async fn record_disclosure_ack(&mut self) {
        let metadata = [("asserted_by".to_owned(), "client".to_owned())]
            .into_iter()
            .collect();
        let recorded = self
            .state
            .engine
            .record_event(
                &self.params.agent.agent,
                &self.params.namespace,
                self.params.caller.owner.as_deref(),
                &self.current,
                "ai.disclosure.displayed",
                metadata,
            )
            .await;
        if let Err(e) = recorded {
            tracing::warn!(error = %e, "recording disclosure_ack failed");
        }
    }

    async fn send_error(
        &mut self,
        socket: &mut WebSocket,
        session: Option<&SessionId>,
        code: ErrorCode,
        message: &str,
    ) -> Result<(), SendFailed> {
        self.state.metrics.count_error(code);
        let now = self.state.engine.clock().now();
        let frame = omnia::encode_error(session.map(SessionId::as_str), code, message, now);
        self.send(socket, frame).await
    }

    /// The answer to a frame the inbound budget refused: the connection
    /// stays open and the client may send it again.
    async fn send_busy(&mut self, socket: &mut WebSocket) -> Result<(), SendFailed> {
        self.send_error(socket, None, ErrorCode::RateLimited, budget::BUSY)
            .await
    }

    async fn send(&self, socket: &mut WebSocket, text: String) -> Result<(), SendFailed> {
        socket::queue_text(&self.state, socket, text).await
    }
}

const SESSION_EXPIRED: &str = "session context has expired; start a new session";

//! One task per socket. It reads frames, applies the per-connection rules
//! (rate, payload size, keepalive), hands messages to the engine and writes
//! the running turn's events back, encoded in the Omnia dialect.
//!
//! The task owns the socket outright and multiplexes with `select!`, so a
//! connection costs one task and no extra queue: a turn's bounded event
//! channel is the outbound queue, and a slow client slows its own turn.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{
    ClientAnswer, ConnectionScope, ErrorCode, Identity, IdentityOrigin, MediaChunk, SessionId,
    SessionLease, SubmitError, SubmitRequest, ToolSide, TurnEvent,
};
use agentwire_omnia::{self as omnia, ClientFrame, ClientMessage};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use crate::identity::{Caller, pseudonym};
use crate::lifecycle::ConnectionSlot;
use crate::rate::TokenBucket;
use crate::{AgentEntry, AppState};

/// A frame the client does not take within this long ends the connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

const CLOSE_GOING_AWAY: u16 = 1001;
const CLOSE_MESSAGE_TOO_BIG: u16 = 1009;
const CLOSE_CREDENTIAL_EXPIRED: u16 = 4401;

/// How long before its expiry a token stops being used, at most.
const CREDENTIAL_MARGIN: Duration = Duration::from_secs(30);

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

/// Why the loop ended; decides the close frame, if any.
enum Exit {
    /// The client closed or the socket failed: nothing more to send.
    Gone,
    Close(u16, &'static str),
}

pub(crate) async fn run(mut socket: WebSocket, slot: ConnectionSlot, params: ConnectionParams) {
    let state = slot.state().clone();
    state
        .metrics
        .connections_total
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let minted = state.engine.mint_session_id();
    let limits = &state.settings.limits;
    let mut conn = Connection {
        limiter: TokenBucket::new(
            u64::from(limits.messages_per_second),
            u64::from(limits.message_burst),
        ),
        media_limiter: TokenBucket::new(limits.media_bytes_per_second, limits.media_burst_bytes),
        credential_deadline: params
            .caller
            .identity
            .as_ref()
            .and_then(|identity| credential_deadline(&state, identity))
            .map(|at| Box::pin(tokio::time::sleep_until(at))),
        credential_expired: false,
        scope: ConnectionScope::new(),
        current: minted.clone(),
        minted,
        lease: None,
        turn: None,
        params,
        state: state.clone(),
    };
    let exit = conn.serve(&mut socket).await;
    if let Exit::Close(code, reason) = exit {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        let _ = tokio::time::timeout(WRITE_TIMEOUT, socket.send(Message::Close(Some(frame)))).await;
    }
    drop(slot);
}

impl Connection {
    async fn serve(&mut self, socket: &mut WebSocket) -> Exit {
        if self.send(socket, self.connected_frame()).await.is_err() {
            return Exit::Gone;
        }
        let limits = self.state.settings.limits.clone();
        let lifecycle = &self.state.lifecycle;
        let (drain, force_close) = (lifecycle.drain.clone(), lifecycle.force_close.clone());
        let mut ping =
            tokio::time::interval_at(Instant::now() + limits.ping_interval, limits.ping_interval);
        let keepalive: Sleep = tokio::time::sleep(limits.pong_timeout);
        tokio::pin!(keepalive);
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
                event = next_event(&mut self.turn) => {
                    if self.on_turn_event(socket, event).await.is_err() {
                        return Exit::Gone;
                    }
                }
                frame = socket.recv() => {
                    keepalive.as_mut().reset(Instant::now() + limits.pong_timeout);
                    match self.on_frame(socket, frame).await {
                        Ok(()) => {}
                        Err(exit) => return exit,
                    }
                }
                _ = ping.tick() => {
                    if self.send_raw(socket, Message::Ping(Bytes::new())).await.is_err() {
                        return Exit::Gone;
                    }
                }
                () = &mut keepalive => return Exit::Close(CLOSE_GOING_AWAY, "keepalive timeout"),
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
        frame: Option<Result<Message, axum::Error>>,
    ) -> Result<(), Exit> {
        let message = match frame {
            None => return Err(Exit::Gone),
            Some(Ok(message)) => message,
            Some(Err(error)) => return Err(classify_read_error(error)),
        };
        let gone = |_| Exit::Gone;
        match message {
            Message::Text(text) => {
                self.state
                    .metrics
                    .messages_received_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if !self.limiter.try_take() {
                    return self
                        .send_error(socket, None, ErrorCode::RateLimited, "rate limit exceeded")
                        .await
                        .map_err(gone);
                }
                match omnia::decode_client_text(text.as_str()) {
                    Ok(frame) => self.on_client_frame(socket, frame).await.map_err(gone),
                    Err(e) => self
                        .send_error(socket, None, ErrorCode::InvalidMessage, &e.message)
                        .await
                        .map_err(gone),
                }
            }
            Message::Binary(bytes) => {
                self.state
                    .metrics
                    .messages_received_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
                self.on_binary(socket, &bytes).await.map_err(gone)
            }
            Message::Close(_) => Err(Exit::Gone),
            // Pongs and pings only reset the keepalive, which the caller did;
            // tungstenite answers pings itself.
            Message::Ping(_) | Message::Pong(_) => Ok(()),
        }
    }

    async fn on_client_frame(
        &mut self,
        socket: &mut WebSocket,
        frame: ClientFrame,
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
            ClientFrame::Message(message) => self.on_message(socket, message).await,
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

    async fn on_turn_event(
        &mut self,
        socket: &mut WebSocket,
        event: Option<TurnEvent>,
    ) -> Result<(), SendFailed> {
        let Some(event) = event else {
            // The turn task ended without a terminal event: it was aborted.
            self.turn = None;
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
        }
        let session = self.current.as_str();
        let now = self.state.engine.clock().now();
        let shows_server_tools = self.params.agent.shows_server_tools;
        let frame = match &event {
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
            self.send_raw(socket, Message::Binary(frame.into())).await?;
        }
        Ok(())
    }

    fn credential_expired_now(&self) -> bool {
        self.credential_expired
            || self
                .credential_deadline
                .as_ref()
                .is_some_and(|sleep| sleep.deadline() <= Instant::now())
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
        let deadline = credential_deadline(&self.state, &fresh);
        self.credential_deadline = deadline.map(|at| Box::pin(tokio::time::sleep_until(at)));
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

    async fn send(&self, socket: &mut WebSocket, text: String) -> Result<(), SendFailed> {
        self.send_raw(socket, Message::Text(text.into())).await
    }

    async fn send_raw(&self, socket: &mut WebSocket, message: Message) -> Result<(), SendFailed> {
        self.state
            .metrics
            .messages_sent_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match tokio::time::timeout(WRITE_TIMEOUT, socket.send(message)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) | Err(_) => Err(SendFailed),
        }
    }
}

const TURN_IN_PROGRESS: &str =
    "the session's previous turn is still running; send the message again after the reply arrives";
const SESSION_EXPIRED: &str = "session context has expired; start a new session";

/// The socket could not take a frame; the connection is over.
struct SendFailed;

/// When a token-bearing credential must stop being used: its expiry less
/// min(30 s, half its remaining life), as a timer instant. `None` for
/// credentials without an expiry and for API keys and passwords.
fn credential_deadline(state: &AppState, identity: &Identity) -> Option<Instant> {
    if identity.origin != IdentityOrigin::Jwt {
        return None;
    }
    let expires_at = identity.expires_at?;
    let remaining_nanos = expires_at
        .unix_nanos()
        .saturating_sub(state.engine.clock().now().unix_nanos());
    let remaining = Duration::from_nanos(u64::try_from(remaining_nanos).unwrap_or(0));
    let margin = CREDENTIAL_MARGIN.min(remaining / 2);
    Some(Instant::now() + (remaining - margin))
}

/// Waits for `timer`; never resolves without one.
async fn until(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(sleep) => sleep.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Waits for the running turn's next event; never resolves when idle.
async fn next_event(turn: &mut Option<mpsc::Receiver<TurnEvent>>) -> Option<TurnEvent> {
    match turn {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// A frame over the payload limit closes with 1009; any other read error
/// means the socket is unusable.
fn classify_read_error(error: axum::Error) -> Exit {
    let inner = error.into_inner();
    match inner.downcast_ref::<tungstenite::Error>() {
        Some(tungstenite::Error::Capacity(_)) => Exit::Close(CLOSE_MESSAGE_TOO_BIG, ""),
        _ => Exit::Gone,
    }
}

//! The Omnia dialect of a connection (`/ws`), run by the connection driver
//! (`driver`): it decodes frames, applies the per-connection rates, hands
//! messages to the engine and encodes the running turn's events.

use std::sync::Arc;

use agentwire_core::{
    ClientAnswer, ClientToolBroker, ConnectionScope, Epoch, ErrorCode, LogEntry, LogReader,
    MediaChunk, Opening, SessionId, TurnEvent,
};
use agentwire_engine::{CancelOutcome, RejoinRequest, SessionLease, SubmitError};
#[cfg(test)]
mod tests;
mod voice;

use agentwire_omnia::{
    self as omnia, ClientFrame, ClientMessage, Encoded, EncoderOptions, TurnEncoder,
};
use tokio::sync::mpsc;
use voice::AttachedCall;

use super::media::Uploads;
use crate::AgentEntry;
use crate::budget::InboundPermit;
use crate::call::CallOutput;
use crate::connection::driver::{Draining, Work};
use crate::connection::{
    Admission, Busy, CredentialClock, Dialect, DialectWords, DrainNotice, Link, Refusal, RejoinAt,
    TurnIntent, driver,
};
use crate::identity::{Caller, pseudonym};
use crate::lifecycle::ConnectionSlot;
use crate::socket::{CLOSE_GOING_AWAY, Exit, SendFailed};
use crate::websocket::{Message, Transport, WebSocket};

const CLOSE_CREDENTIAL_EXPIRED: u16 = 4401;

/// Where a rejoined session's log stands, for `connected`.
struct Position {
    epoch: Epoch,
    head: u64,
    replayed: bool,
}

/// What the upgrade learned from the request.
pub(crate) struct ConnectionParams {
    pub(crate) agent: Arc<AgentEntry>,
    pub(crate) namespace: String,
    /// The client asked for binary OMNI frames (`binary=true`).
    pub(crate) binary: bool,
    pub(crate) memory_facet: Option<String>,
    /// Who is calling; anonymous when the agent is public and no credential came.
    pub(crate) caller: Caller,
    /// `stream=2`: logged frames carry their `seq`, each turn opens with
    /// `turn_started`, and `connected` says where the log stands.
    pub(crate) positions: bool,
    /// `stream=2&resume=S&after=N&epoch=E`: follow S again from after N.
    pub(crate) rejoin: Option<RejoinAt>,
    /// `resume=S`: the voice call parked on S, if it is the caller's.
    pub(crate) resume_call: Option<SessionId>,
    /// `resume=` named a session: `connected.resumed` says whether it was
    /// re-attached (absent when none was named).
    pub(crate) resume_asked: bool,
}

struct Omnia {
    params: ConnectionParams,
    /// The id announced in `connected`.
    minted: SessionId,
    /// The session the connection is on: the minted one until a message
    /// resumes or opens another.
    current: SessionId,
    /// Keeps `current` live in the engine while the socket is open.
    lease: Option<SessionLease>,
    /// The running turn's reader of the session's log; `None` when idle.
    /// One turn at a time per connection.
    turn: Option<LogReader>,
    /// The running turn's message's share of the inbound budget, given
    /// back when the turn ends.
    turn_bytes: Option<InboundPermit>,
    /// Entries up to this seq are a rejoin's warm-up: the encoder takes
    /// them in ([`TurnEncoder::observe`]) and they are not sent again.
    send_after: u64,
    encoder: TurnEncoder,
    /// Per-connection state: pending client tool calls, handler caches.
    scope: Arc<ConnectionScope>,
    /// Frame and media rates; the path every message takes to a turn.
    admission: Admission,
    /// The connection's voice call, while the caller sends it audio.
    call: Option<AttachedCall>,
    /// The output of the connection's voice call, while one is attached
    /// (the call may outlive [`Omnia::call`]: an IsLast call's last
    /// response still comes out).
    call_output: Option<mpsc::Receiver<CallOutput>>,
    /// Where the connection's upload requests are answered; started by
    /// the first.
    uploads: Option<Uploads>,
    /// The uploader's answers, in the order asked.
    upload_answers: Option<mpsc::Receiver<String>>,
    /// Where answers to the voice call's client tool calls go, while its
    /// output comes here (an IsLast call's last response may still ask).
    call_tools: Option<Arc<ClientToolBroker>>,
}

/// The connection's future, its parts built before it starts (see
/// [`driver::run`]).
pub(crate) fn run<T: Transport>(
    socket: WebSocket<T>,
    slot: ConnectionSlot,
    params: ConnectionParams,
) -> impl Future<Output = ()> + Send {
    let state = slot.state();
    let minted = state.engine().mint_session_id();
    let limits = &state.settings().limits;
    let credential = CredentialClock::new(state, params.caller.identity.as_ref());
    let omnia = Omnia {
        admission: Admission::new(limits),
        scope: ConnectionScope::new(),
        current: minted.clone(),
        minted,
        lease: None,
        turn: None,
        turn_bytes: None,
        send_after: 0,
        call: None,
        call_output: None,
        call_tools: None,
        uploads: None,
        upload_answers: None,
        encoder: TurnEncoder::new(EncoderOptions {
            positions: params.positions,
            shows_server_tools: params.agent.shows_server_tools,
            binary_media: params.binary,
        }),
        params,
    };
    driver::run(socket, slot, credential, omnia)
}

impl Dialect for Omnia {
    type Side = Side;

    fn turn(&mut self) -> Option<&mut LogReader> {
        self.turn.as_mut()
    }

    /// A connection with a call is not idle.
    fn is_busy(&mut self) -> bool {
        self.turn.is_some() || self.call_output.is_some()
    }

    async fn next_work(&mut self) -> Work<Side> {
        tokio::select! {
            entry = driver::next_entry(self.turn.as_mut()) => Work::Turn(entry),
            output = driver::next_from(&mut self.call_output) => Work::Side(Side::Call(output)),
            answer = driver::next_from(&mut self.upload_answers) => Work::Side(Side::Upload(answer)),
        }
    }

    async fn greet<T: Transport>(&mut self, link: &mut Link<T>) -> Result<(), Exit> {
        let call_resumed = self.resume_call(link);
        let rejoined = match self.params.rejoin.take() {
            Some(at) => self.rejoin(link, at).await?,
            None => None,
        };
        let connected = self.connected_frame(link, rejoined, call_resumed);
        link.send(connected).await.map_err(|SendFailed| Exit::Gone)
    }

    async fn on_frame<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        message: Message,
    ) -> Result<(), Exit> {
        let gone = |_| Exit::Gone;
        match message {
            Message::Text(text) => {
                let bytes = match self.admission.text(&link.state, text.len()) {
                    Ok(bytes) => bytes,
                    Err(refusal) => return send_refusal(link, None, &refusal).await.map_err(gone),
                };
                let decoded = omnia::decode_client_text(text.as_str());
                // The decoded frame owns what it needs: the frame's own
                // bytes go back before the engine copies the message on.
                drop(text);
                match decoded {
                    Ok(frame) => self.on_client_frame(link, frame, bytes).await.map_err(gone),
                    Err(e) => send_error(link, None, ErrorCode::InvalidMessage, &e.message)
                        .await
                        .map_err(gone),
                }
            }
            Message::Binary(bytes) => {
                let _held = match self.admission.media(&link.state, bytes.len()) {
                    Ok(held) => held,
                    Err(refusal) => return send_refusal(link, None, &refusal).await.map_err(gone),
                };
                self.on_binary(link, &bytes).await.map_err(gone)
            }
            // The driver hands on data frames only.
            Message::Close(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Ok(()),
        }
    }

    async fn on_turn_event<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        entry: LogEntry,
    ) -> Result<(), SendFailed> {
        if entry.event.is_terminal() {
            self.end_turn();
        }
        if entry.seq <= self.send_after {
            self.encoder.observe(&entry);
            return Ok(());
        }
        if let Some(code) = self.encoder.error_code(&entry.event) {
            link.state.metrics().count_error(code);
        }
        let epoch = match &*entry.event {
            TurnEvent::TurnStarted { .. } => self.turn.as_ref().map(|r| r.epoch().to_string()),
            _ => None,
        };
        let now = link.state.engine().clock().now();
        let session = self.current.as_str();
        match self
            .encoder
            .encode(session, &entry, epoch.as_deref().unwrap_or_default(), now)
        {
            Encoded::Nothing => Ok(()),
            Encoded::Text(frame) => link.send(frame).await,
            Encoded::BinaryMedia(chunk) => self.send_binary_media(link, chunk).await,
        }
    }

    async fn when_idle<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        draining: Draining,
    ) -> Result<Option<Exit>, SendFailed> {
        if link.credential.expired() {
            return Ok(Some(Exit::Close(
                CLOSE_CREDENTIAL_EXPIRED,
                "credential expired",
            )));
        }
        Ok((draining == Draining::Yes).then_some(Exit::Close(CLOSE_GOING_AWAY, "server shutdown")))
    }

    async fn on_drain<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        notice: DrainNotice,
    ) -> Result<(), SendFailed> {
        let Some(reader) = self.turn.as_ref().filter(|_| self.params.positions) else {
            return Ok(());
        };
        let epoch = reader.epoch().to_string();
        let frame = omnia::encode_going_away(
            &omnia::GoingAway {
                session_id: self.current.as_str(),
                time_left_ms: notice.time_left_ms,
                retry_after_ms: notice.retry_after_ms,
                epoch: &epoch,
                after: reader.cursor(),
            },
            link.state.engine().clock().now(),
        );
        link.send(frame).await
    }

    async fn on_force_close<T: Transport>(
        &mut self,
        _link: &mut Link<T>,
    ) -> Result<(), SendFailed> {
        Ok(())
    }

    /// Whatever it last read may not have reached the client (a `done` in
    /// a buffer that never left): its session stays for a rejoin a while.
    fn on_lost(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.keep_for_rejoin();
        }
    }

    async fn on_side<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        side: Side,
    ) -> Result<(), SendFailed> {
        match side {
            Side::Call(Some(output)) => self.send_call_output(link, output).await,
            // The call's task ended.
            Side::Call(None) => {
                self.call_output = None;
                self.call = None;
                self.call_tools = None;
                Ok(())
            }
            Side::Upload(Some(frame)) => link.send(frame).await,
            Side::Upload(None) => {
                self.upload_answers = None;
                Ok(())
            }
        }
    }
}

/// What the Omnia connection's own sources produce (`None`: the source
/// ended).
pub(crate) enum Side {
    /// The voice call's output.
    Call(Option<CallOutput>),
    /// An upload request's answer, in the order asked.
    Upload(Option<String>),
}

impl Omnia {
    /// A turn is over: its share of the inbound budget goes back. The
    /// reader stays while the log has more for it (a rejoin replaying
    /// several turns, or a turn another connection started meanwhile).
    fn end_turn(&mut self) {
        if !self.turn.as_ref().is_some_and(LogReader::is_live) {
            self.turn = None;
        }
        self.turn_bytes = None;
    }

    /// Delivers a client's answer to a tool call pending on the
    /// connection's session or on its voice call; `false` when there is no
    /// such call.
    fn answer_call(&self, call_id: &str, answer: ClientAnswer) -> bool {
        if let Some(broker) = &self.call_tools
            && broker.answer(call_id, answer.clone())
        {
            return true;
        }
        self.lease
            .as_ref()
            .is_some_and(|lease| lease.answer_client_call(call_id, answer))
    }

    /// Cancels the running turn of the connection's session; idempotent,
    /// and nothing to do when no turn runs. Its terminal says the rest.
    fn cancel<T: Transport>(&self, link: &Link<T>) {
        let outcome = match &self.lease {
            Some(lease) => lease.cancel_turn(self.params.caller.owner.as_deref(), None),
            None => CancelOutcome::NothingRunning,
        };
        link.state.metrics().count_cancel(outcome);
    }

    /// Attaches to the session a rejoin names, if the engine lets this
    /// caller (same owner, not expired; never anonymous), and starts its
    /// replay. `Ok(None)`: refused, and the connection goes on with a fresh
    /// session, as any connection; `Err`: the session could not be reached
    /// just now, and the client is told to try again rather than that it
    /// is gone.
    async fn rejoin<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        at: RejoinAt,
    ) -> Result<Option<Position>, Exit> {
        let request = RejoinRequest {
            agent: &self.params.agent.agent,
            namespace: &self.params.namespace,
            owner: self.params.caller.owner.as_deref(),
            anonymous: agentwire_engine::AnonymousRejoin::Refused,
            session: &at.session,
            position: at.position,
        };
        let rejoined = match link.state.engine().rejoin(request).await {
            Ok(rejoined) => rejoined,
            Err(e) => {
                crate::connection::rejoin_refused(&e)?;
                return Ok(None);
            }
        };
        link.state.metrics().count_replay(rejoined.replayed);
        self.current = rejoined.session.id().clone();
        self.lease = Some(rejoined.session);
        if rejoined.reader.is_live() {
            self.turn = Some(rejoined.reader);
            if let (true, Some((_, after))) = (rejoined.replayed, at.position) {
                self.send_after = after;
            }
        }
        Ok(Some(Position {
            epoch: rejoined.epoch,
            head: rejoined.head,
            replayed: rejoined.replayed,
        }))
    }

    fn connected_frame<T: Transport>(
        &self,
        link: &Link<T>,
        rejoined: Option<Position>,
        call_resumed: bool,
    ) -> String {
        let limits = &link.state.settings().limits;
        let epoch = rejoined.as_ref().map(|p| p.epoch.to_string());
        let event_log = match &rejoined {
            _ if !self.params.positions => None,
            Some(position) => Some(omnia::EventLog {
                epoch: epoch.as_deref(),
                head: position.head,
                replayed: Some(position.replayed),
            }),
            None => Some(omnia::EventLog {
                epoch: None,
                head: 0,
                replayed: None,
            }),
        };
        omnia::encode_connected(
            &omnia::Connected {
                session_id: self.current.as_str(),
                capabilities: omnia::Capabilities {
                    binary_frames: self.params.binary,
                    max_payload_size: limits.max_payload_bytes as u64,
                    protocol_version: u32::from(omnia::PROTOCOL_VERSION),
                },
                resumed: self
                    .params
                    .resume_asked
                    .then_some(rejoined.is_some() || call_resumed),
                memory_facet: self.params.memory_facet.as_deref(),
                ai_disclosure: self.params.agent.ai_disclosure(),
                event_log,
            },
            link.state.engine().clock().now(),
        )
    }

    /// `bytes` holds the frame's share of the inbound budget: a message
    /// that starts a turn keeps it until the turn ends.
    async fn on_client_frame<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        frame: ClientFrame,
        bytes: InboundPermit,
    ) -> Result<(), SendFailed> {
        let current = self.current.clone();
        match frame {
            ClientFrame::Message(message) => self.on_message(link, message, bytes).await,
            ClientFrame::UploadRequest { request, .. } => {
                if let Err(refusal) = Admission::credential(&link.credential) {
                    return send_refusal(link, Some(&current), &refusal).await;
                }
                let uploads = self.uploads.get_or_insert_with(|| {
                    let (uploads, answers) = Uploads::start(link.state.clone());
                    self.upload_answers = Some(answers);
                    uploads
                });
                if uploads.ask(current.clone(), request) {
                    return Ok(());
                }
                send_error(
                    link,
                    Some(&current),
                    ErrorCode::RateLimited,
                    super::media::UPLOADS_PENDING,
                )
                .await
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
                if self.answer_call(&call_id, ClientAnswer::Result(answer)) {
                    return Ok(());
                }
                send_error(
                    link,
                    Some(&current),
                    ErrorCode::InvalidMessage,
                    "no pending tool call",
                )
                .await
            }
            // Unknown call ids are ignored, as for an ack that lost a race with a timeout.
            ClientFrame::ToolCallAck { call_id } => {
                self.answer_call(&call_id, ClientAnswer::Ack);
                Ok(())
            }
            ClientFrame::ToolCallNack { call_id, reason } => {
                self.answer_call(&call_id, ClientAnswer::Nack(reason));
                Ok(())
            }
            ClientFrame::CredentialRefresh { token } => {
                self.refresh_credential(link, &token).await;
                Ok(())
            }
            ClientFrame::DisclosureAck => {
                self.record_disclosure_ack(link).await;
                Ok(())
            }
            // No reply by contract: the call ends now, and the close that
            // follows parks nothing.
            ClientFrame::Hangup => {
                self.hang_up();
                Ok(())
            }
            ClientFrame::Cancel if self.params.positions => {
                self.cancel(link);
                Ok(())
            }
            // Not advertised without positions: a type this connection does
            // not take, as before.
            ClientFrame::Cancel => {
                send_error(
                    link,
                    None,
                    ErrorCode::InvalidMessage,
                    &omnia::UNKNOWN_TYPE.message,
                )
                .await
            }
        }
    }

    async fn on_message<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        message: ClientMessage,
        bytes: InboundPermit,
    ) -> Result<(), SendFailed> {
        let ClientMessage {
            session_id,
            content,
            parts,
            metadata,
            declare,
        } = message;
        // Read only on the message that opens the session on this
        // connection: its first accepted one, or one naming another session.
        let opens = self.lease.is_none()
            || session_id
                .as_deref()
                .is_some_and(|id| id != self.current.as_str());
        let declaration: Option<serde_json::Value> = match opens {
            true => declare.and_then(|raw| serde_json::from_str(raw.get()).ok()),
            false => None,
        };
        let opening = match opens {
            true => Opening::Opens {
                declaration: declaration.as_ref(),
            },
            false => Opening::Continues,
        };
        let intent = TurnIntent {
            agent: &self.params.agent.agent,
            namespace: &self.params.namespace,
            caller: &self.params.caller,
            memory_facet: self.params.memory_facet.as_deref(),
            credential: &link.credential,
            // One turn at a time per connection: the next is refused.
            busy: match self.turn {
                Some(_) => Busy::TurnRunning,
                None => Busy::Idle,
            },
            current: &self.current,
            minted: &self.minted,
            requested: session_id.as_deref(),
            content,
            parts,
            attach: None,
            metadata,
            scope: &self.scope,
            opening,
        };
        match Admission::turn(&link.state, intent).await {
            Ok(handle) => {
                self.current = handle.session.id().clone();
                self.lease = Some(handle.session);
                self.turn = Some(handle.events);
                self.turn_bytes = Some(bytes);
                Ok(())
            }
            Err(refusal) => {
                // What concerns the connection's session is told about it.
                let session = match &refusal {
                    Refusal::CredentialExpired | Refusal::TurnInProgress => {
                        Some(self.current.clone())
                    }
                    // The session the message was to open, which did not.
                    Refusal::Submit(SubmitError::Init(_)) => match session_id.as_deref() {
                        Some(id) => SessionId::parse(id).ok(),
                        None => Some(self.current.clone()),
                    },
                    Refusal::Submit(_) if refusal.code() == ErrorCode::Internal => {
                        Some(self.current.clone())
                    }
                    _ => refusal.session().cloned(),
                };
                send_refusal(link, session.as_ref(), &refusal).await
            }
        }
    }

    /// Media as OMNI binary frames, split in 64 KiB chunks above 1 MiB.
    async fn send_binary_media<T: Transport>(
        &self,
        link: &mut Link<T>,
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
            link.send_message(Message::Binary(frame.into())).await?;
        }
        Ok(())
    }

    /// `credential_refresh`: a token for the same owner (subject and session
    /// claim) that expires later replaces the credential; any other is
    /// ignored, silently, as the contract says.
    async fn refresh_credential<T: Transport>(&mut self, link: &mut Link<T>, token: &str) {
        let (Some(authenticator), Some(current)) = (
            link.state.identity().authenticator.clone(),
            self.params.caller.identity.as_ref(),
        ) else {
            return;
        };
        let Ok(fresh) = authenticator.authenticate_refresh(token).await else {
            tracing::info!("credential_refresh ignored: token refused");
            return;
        };
        let same_owner = Some(pseudonym(link.state.identity(), &fresh)) == self.params.caller.owner;
        let later = match (fresh.expires_at, current.expires_at) {
            (Some(fresh), Some(current)) => fresh > current,
            _ => false,
        };
        if !(same_owner && later) {
            tracing::info!(same_owner, later, "credential_refresh ignored");
            return;
        }
        link.credential.renew(&link.state, &fresh);
        self.params.caller.identity = Some(fresh);
    }

    /// `disclosure_ack`: recorded on the session as the client's assertion.
    async fn record_disclosure_ack<T: Transport>(&mut self, link: &mut Link<T>) {
        let metadata = [("asserted_by".to_owned(), "client".to_owned())]
            .into_iter()
            .collect();
        let recorded = link
            .state
            .engine()
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
}

async fn send_error<T: Transport>(
    link: &mut Link<T>,
    session: Option<&SessionId>,
    code: ErrorCode,
    message: &str,
) -> Result<(), SendFailed> {
    link.state.metrics().count_error(code);
    let now = link.state.engine().clock().now();
    let frame = omnia::encode_error(session.map(SessionId::as_str), code, message, now);
    link.send(frame).await
}

/// An `error` for what admission refused, in this dialect's words; the
/// connection stays open.
async fn send_refusal<T: Transport>(
    link: &mut Link<T>,
    session: Option<&SessionId>,
    refusal: &Refusal,
) -> Result<(), SendFailed> {
    if let Some(init) = refusal.init() {
        link.state.metrics().count_error(init.code());
        let now = link.state.engine().clock().now();
        let frame = omnia::encode_init_refusal(session.map(SessionId::as_str), init, now);
        return link.send(frame).await;
    }
    send_error(link, session, refusal.code(), &refusal.text(&WORDS)).await
}

/// What this dialect says where the dialects differ.
const WORDS: DialectWords = DialectWords {
    session_expired: "session context has expired; start a new session",
    media_unknown: "unknown storage_ref",
    media_other_session: "storage_ref belongs to another session",
};

//! A tool call's turn read from its session's log: as an SSE stream of
//! progress notifications and the result, each event with its log
//! position as its id (SEP-1699), or as one JSON answer; and `GET /mcp`
//! with `Last-Event-ID`, which resumes a stream from the log, on any
//! replica.
//!
//! Progress: with a `progressToken`, each piece of streamed text goes out
//! as a `notifications/progress` (`message`: the text since the last
//! one), and when nothing streamed for the agent's `progress_interval`
//! one goes out with no message, so a client that resets its timeout on
//! progress never gives up on a long turn. Without a token, a comment
//! every 15 s keeps idle proxies from closing the stream. In the
//! stateless form, the client closing the stream cancels the turn; in the
//! handshake form it does not (the client resumes, or cancels).
//!
//! Client tools: when the client takes form elicitation, an agent's
//! client tool call goes out on the stream as an `elicitation/create`
//! request, and the user's answer (a POST of the response, handed over by
//! [`super::running`]) becomes the tool's result.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::log::{Lagged, LogEntry, TurnId};
use agentwire_core::{ClientAnswer, ErrorCode, LogReader, ToolCall, ToolSide, TurnEvent};
use agentwire_engine::{RejoinRequest, SessionLease};
use agentwire_mcp::protocol::Era;
use agentwire_mcp::rpc::{self, RpcError};
use agentwire_mcp::stream::{self as ids, StreamRef};
use agentwire_mcp::tools;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::access;
use super::call::ending_result;
use super::running::{Answer, Registration};
use crate::AppState;
use crate::facade::{self, Ending, Step, TurnHold};
use crate::upgrade::ClientAddress;

/// How long a client waits before it reconnects a stream that closed
/// without the result (the SSE `retry` field), in milliseconds.
const RETRY_MS: u64 = 1000;

/// How long a stream without progress goes quiet before a comment keeps
/// idle proxies from closing it.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);

/// The events a stream holds for a slow client before its turn's reading
/// waits: a few, as each is small and the log holds the rest.
const BUFFERED_EVENTS: usize = 16;

/// A call's turn, being read.
pub(super) struct Reading {
    pub(super) lease: SessionLease,
    pub(super) reader: LogReader,
    pub(super) stream: StreamRef,
    /// The caller's owner: whose turn a cancel may stop.
    pub(super) owner: Option<String>,
    /// Entries up to this seq the client had (a resumed stream).
    pub(super) skip_through: u64,
    pub(super) progress_interval: Duration,
    pub(super) registration: Registration,
    pub(super) elicits: Elicits,
    /// In the stateless form, the client closing the stream cancels the
    /// call (there is no `notifications/cancelled`).
    pub(super) era: Era,
    /// The turn this request started, held until it is read.
    pub(super) _hold: Option<TurnHold>,
}

/// Whether the client takes form elicitation on this stream: then an
/// agent's client tool is asked of its user instead of denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Elicits {
    Forms,
    No,
}

/// The answers to elicitations a stream holds before it reads them: each
/// is one the stream asked for, and it reads them as they come.
const BUFFERED_ANSWERS: usize = 16;

/// What one pass of a stream's loop does next.
enum Flow {
    Send(Option<String>),
    /// The stream's last event, if any: the turn has ended.
    Last(Option<String>),
}

/// A stream's loop's state.
struct Loop {
    turn: Option<TurnId>,
    cancelled: bool,
    progress: Progress,
    /// When the stream is due to say something with nothing streamed: a
    /// progress notification, or with none asked for, a comment.
    beat: Instant,
    every: Duration,
    answers: mpsc::Receiver<Answer>,
    answered: mpsc::Sender<Answer>,
}

impl Loop {
    fn new(reading: &Reading) -> Loop {
        let (answered, answers) = mpsc::channel(BUFFERED_ANSWERS);
        let every = match reading.stream.progress_token {
            Some(_) => reading.progress_interval,
            None => KEEP_ALIVE_EVERY,
        };
        Loop {
            turn: None,
            cancelled: false,
            progress: Progress::new(reading.stream.progress_token.clone()),
            beat: Instant::now() + every,
            every,
            answers,
            answered,
        }
    }
}

/// What reading one more entry gave.
enum Read {
    /// Text streamed, at this seq.
    Text(String, u64),
    /// A client tool call to ask the client's user about.
    Elicit(ToolCall, u64),
    Ended(Ending, u64),
    Nothing,
    /// The reader was overtaken: what it missed cannot be told.
    Lost,
}

impl Reading {
    /// The turn as an SSE stream, read by a task of its own that ends when
    /// the client goes away (its next send fails) or the turn has ended.
    pub(super) fn into_sse(self) -> Response {
        let (tx, rx) = mpsc::channel(BUFFERED_EVENTS);
        tokio::spawn(self.run(tx));
        let events = stream::unfold(rx, |mut rx| async move {
            let event: String = rx.recv().await?;
            Some((Ok::<_, Infallible>(event), rx))
        });
        sse_response(Body::from_stream(events))
    }

    /// Reads to the terminal with no progress: the JSON answer. A cancel
    /// asked meanwhile cancels the turn, which then ends `Cancelled`; in
    /// the stateless form, so does the client going away (the request's
    /// future dropped before the answer).
    pub(super) async fn read_to_end(mut self) -> Value {
        let ending = self.finish().await;
        self.era
            .result(ending_result(&self.stream.session, &ending))
    }

    /// Reads the turn to its end with nothing sent, cancelling it when a
    /// cancel is asked meanwhile; in the stateless form, also when this
    /// future is dropped before the end (the client of a JSON answer went
    /// away).
    async fn finish(&mut self) -> Ending {
        let mut dropped = CancelOnDrop {
            lease: &self.lease,
            owner: self.owner.as_deref(),
            armed: self.era == Era::Stateless,
        };
        let finishing = facade::finish(dropped.lease, &mut self.reader, |_| {});
        tokio::pin!(finishing);
        let ending = tokio::select! {
            ending = &mut finishing => ending,
            () = self.registration.cancel.cancelled() => {
                dropped.lease.cancel_turn(dropped.owner, None);
                finishing.await
            }
        };
        dropped.armed = false;
        ending
    }

    /// The client went away before the end of its stream. In the stateless
    /// form that cancels the turn. Otherwise the turn runs on (a dropped
    /// stream is not a cancel: the client may still cancel it), and its
    /// session, with its log, stays for `REJOIN_GRACE` after it ends, so
    /// the client can resume the stream and read the end.
    async fn went_away(mut self, turn: Option<TurnId>) {
        if self.era == Era::Stateless {
            self.cancel(turn);
            return;
        }
        self.finish().await;
        let Reading { lease, .. } = self;
        lease.keep_for_rejoin();
    }

    async fn run(mut self, tx: mpsc::Sender<String>) {
        let start = self.reader.cursor().max(self.skip_through);
        let primer = ids::primer(&self.event_id(start), RETRY_MS);
        if tx.send(primer).await.is_err() {
            return self.went_away(None).await;
        }
        let mut state = Loop::new(&self);
        loop {
            let flow = tokio::select! {
                () = self.registration.cancel.cancelled(), if !state.cancelled => {
                    state.cancelled = true;
                    self.cancel(state.turn);
                    Flow::Send(None)
                }
                () = tokio::time::sleep_until(state.beat) => {
                    let progress = state.progress.data(None);
                    let event = progress.map_or_else(|| ids::KEEP_ALIVE.to_owned(), |p| ids::event(None, &p));
                    Flow::Send(Some(event))
                }
                Some((call, result)) = state.answers.recv() => {
                    self.answered(&call, result.as_ref());
                    Flow::Send(None)
                }
                entry = self.reader.next() => {
                    let read = self.read(entry, &mut state.turn);
                    self.on_read(read, &mut state)
                }
                () = tx.closed(), if self.era == Era::Stateless => {
                    return self.went_away(state.turn).await;
                }
            };
            match flow {
                Flow::Send(None) => {}
                Flow::Send(Some(event)) => {
                    if tx.send(event).await.is_err() {
                        return self.went_away(state.turn).await;
                    }
                    state.beat = Instant::now() + state.every;
                }
                Flow::Last(event) => {
                    // The client missed the end: its session stays for
                    // a while, for it to resume the stream and read it.
                    if let Some(event) = event
                        && tx.send(event).await.is_err()
                        && self.era == Era::Handshake
                    {
                        self.lease.keep_for_rejoin();
                    }
                    return;
                }
            }
        }
    }

    /// What the stream sends for what was read.
    fn on_read(&mut self, read: Read, state: &mut Loop) -> Flow {
        match read {
            Read::Text(text, seq) => {
                let progress = state.progress.data(Some(&text));
                Flow::Send(progress.map(|p| ids::event(Some(&self.event_id(seq)), &p)))
            }
            Read::Elicit(call, seq) => Flow::Send(Some(self.elicit(&call, seq, &state.answered))),
            // The client asked for the cancel: it wants no answer.
            Read::Ended(Ending::Cancelled(_), _) if state.cancelled => Flow::Last(None),
            Read::Ended(ending, seq) => {
                let result = self
                    .era
                    .result(ending_result(&self.stream.session, &ending));
                let data = rpc::result(&self.stream.request_id, result);
                Flow::Last(Some(ids::event(Some(&self.event_id(seq)), &data)))
            }
            Read::Lost => {
                let result = self.era.result(lost(&self.stream.session));
                let data = rpc::result(&self.stream.request_id, result);
                Flow::Last(Some(ids::event(None, &data)))
            }
            Read::Nothing => Flow::Send(None),
        }
    }

    /// Reads one entry, past those the client had. A client tool call is
    /// asked of the client's user when the client takes elicitation, else
    /// denied (`facade::step`).
    fn read(&self, entry: Result<LogEntry, Lagged>, turn: &mut Option<TurnId>) -> Read {
        let Ok(entry) = entry else {
            return Read::Lost;
        };
        turn.get_or_insert(entry.turn);
        if entry.seq <= self.skip_through {
            return Read::Nothing;
        }
        if let TurnEvent::ToolCall(call) = entry.event.as_ref()
            && call.side == ToolSide::Client
            && self.elicits == Elicits::Forms
        {
            return Read::Elicit(call.clone(), entry.seq);
        }
        match facade::step(&self.lease, &entry.event) {
            Step::Text(text) => Read::Text(text.to_owned(), entry.seq),
            Step::Ended(ending) => Read::Ended(ending, entry.seq),
            Step::Other => Read::Nothing,
        }
    }

    /// Asks the client's user to run the client tool `call` with an
    /// `elicitation/create` request on the stream. The call is acknowledged
    /// now, so the agent's `client_tool_timeout` is the user's time.
    fn elicit(&mut self, call: &ToolCall, seq: u64, answered: &mpsc::Sender<Answer>) -> String {
        self.lease.answer_client_call(&call.id, ClientAnswer::Ack);
        let id = Value::from(format!("agentwire-tool-{}", call.id));
        self.registration
            .expect_answer(&id, &call.id, answered.clone());
        let consent = call.consent_message.as_deref();
        let params = tools::elicitation(&call.name, &call.arguments, consent);
        let data = rpc::request(&id, "elicitation/create", params);
        ids::event(Some(&self.event_id(seq)), &data)
    }

    /// The user's answer, to the agent: the result, or a refusal with why.
    fn answered(&self, call: &str, result: Option<&Value>) {
        let answer = match tools::elicited(result) {
            Ok(value) => ClientAnswer::Result(Ok(value)),
            Err(reason) => ClientAnswer::Nack(reason),
        };
        self.lease.answer_client_call(call, answer);
    }

    /// The engine's cancel of the call's turn (its provider stream, its
    /// tools), wherever it runs; only the turn this call started.
    fn cancel(&self, turn: Option<TurnId>) {
        self.lease.cancel_turn(self.owner.as_deref(), turn);
    }

    fn event_id(&self, seq: u64) -> String {
        ids::event_id(&self.stream, self.reader.epoch(), seq)
    }
}

/// Cancels the turn when dropped armed: a stateless JSON call whose
/// client went away.
struct CancelOnDrop<'a> {
    lease: &'a SessionLease,
    owner: Option<&'a str>,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.lease.cancel_turn(self.owner, None);
        }
    }
}

/// The progress notifications of a call that asked for them.
struct Progress {
    token: Option<Value>,
    sent: u64,
}

impl Progress {
    fn new(token: Option<Value>) -> Progress {
        Progress { token, sent: 0 }
    }

    /// The next notification, with `text` as its message; its `progress`
    /// counts the notifications, so it grows with each. `None` when the
    /// call asked for no progress.
    fn data(&mut self, text: Option<&str>) -> Option<String> {
        let token = self.token.as_ref()?;
        self.sent += 1;
        let params = tools::progress(token, self.sent as f64, text);
        Some(rpc::notification("notifications/progress", params))
    }
}

/// An SSE response with `body`.
fn sse_response(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The answer of a call whose turn the log no longer holds for it.
fn lost(session: &str) -> Value {
    tools::error_result(
        Some(session),
        ErrorCode::Internal.as_str(),
        "the answer is no longer held; ask again with this session_id",
        "",
    )
}

/// `GET /mcp`: with `Last-Event-ID`, the rest of the call's stream from
/// the session's log (the caller must own the session); without, 405.
pub(super) async fn resume(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    address: ClientAddress,
) -> Response {
    if let Err(refusal) = super::guard(&state, &headers) {
        return refusal.into_response();
    }
    let Some(last) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) else {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    };
    let Some((stream, epoch, seq)) = ids::parse_event_id(last) else {
        return (StatusCode::BAD_REQUEST, "unknown Last-Event-ID\n").into_response();
    };
    let not_found = || (StatusCode::NOT_FOUND, "not found\n").into_response();
    let Some(agent) = state
        .agent(&stream.agent)
        .filter(|a| a.facades.mcp.is_some())
        .cloned()
    else {
        return not_found();
    };
    let caller = match facade::caller(&state, &headers, &agent, address).await {
        Ok(caller) => caller,
        Err(refusal) => return access::refused(&state, refusal),
    };
    let rejoined = state
        .engine()
        .rejoin(RejoinRequest {
            agent: &agent.agent,
            namespace: "default",
            owner: caller.owner.as_deref(),
            // MCP resumes the caller's own stream only (an owner's).
            anonymous: agentwire_engine::AnonymousRejoin::Refused,
            session: &stream.session,
            position: Some((epoch, seq)),
        })
        .await;
    let Ok(rejoined) = rejoined else {
        return not_found();
    };
    if !rejoined.replayed {
        let error = RpcError::internal(
            "the stream can no longer be resumed; ask again with the session_id",
        );
        let data = rpc::error(&stream.request_id, &error);
        return sse_response(Body::from(ids::event(None, &data)));
    }
    let tool = agent.facades.mcp.as_ref().expect("filtered on MCP");
    let registration = state.mcp().running.register(&headers, &stream.request_id);
    Reading {
        lease: rejoined.session,
        reader: rejoined.reader,
        owner: caller.owner,
        skip_through: seq,
        progress_interval: tool.progress_interval,
        registration,
        elicits: match super::elicits(&headers) {
            true => Elicits::Forms,
            false => Elicits::No,
        },
        era: super::era(&headers),
        _hold: None,
        stream,
    }
    .into_sse()
}

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
//! progress never gives up on a long turn.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::LogReader;
use agentwire_core::log::{LogEntry, TurnId};
use agentwire_engine::{RejoinRequest, SessionLease};
use agentwire_mcp::rpc::{self, RpcError};
use agentwire_mcp::stream::{self as ids, StreamRef};
use agentwire_mcp::tools;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::access;
use super::call::ending_result;
use super::running::Registration;
use crate::AppState;
use crate::facade::{self, Ending, Step, TurnHold};
use crate::upgrade::ClientAddress;

/// How long a client waits before it reconnects a stream that closed
/// without the result (the SSE `retry` field).
const RETRY: Duration = Duration::from_secs(1);

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
    /// The turn this request started, held until it is read.
    pub(super) _hold: Option<TurnHold>,
}

/// What reading one more entry gave.
enum Read {
    /// Text streamed, at this seq.
    Text(String, u64),
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
            let event = rx.recv().await?;
            Some((Ok::<_, Infallible>(event), rx))
        });
        Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response()
    }

    /// Reads to the terminal with no progress: the JSON answer. A cancel
    /// asked meanwhile cancels the turn, which then ends `Cancelled`.
    pub(super) async fn read_to_end(mut self) -> Value {
        let finishing = facade::finish(&self.lease, &mut self.reader, |_| {});
        tokio::pin!(finishing);
        let ending = tokio::select! {
            ending = &mut finishing => ending,
            () = self.registration.cancel.cancelled() => {
                self.lease.cancel_turn(self.owner.as_deref(), None);
                finishing.await
            }
        };
        ending_result(&self.stream.session, &ending)
    }

    async fn run(mut self, tx: mpsc::Sender<sse::Event>) {
        let start = self.reader.cursor().max(self.skip_through);
        let primer = sse::Event::default()
            .id(self.event_id(start))
            .retry(RETRY)
            .data("");
        if tx.send(primer).await.is_err() {
            return;
        }
        let mut turn = None;
        let mut cancelled = false;
        let mut progress = Progress::new(self.stream.progress_token.clone());
        let mut beat = Instant::now() + self.progress_interval;
        loop {
            let event = tokio::select! {
                () = self.registration.cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    self.cancel(turn);
                    continue;
                }
                () = tokio::time::sleep_until(beat), if progress.wanted() => {
                    beat = Instant::now() + self.progress_interval;
                    progress.event(None)
                }
                entry = self.reader.next() => match self.read(entry, &mut turn) {
                    Read::Text(text, seq) => {
                        beat = Instant::now() + self.progress_interval;
                        progress.event(Some(&text)).map(|e| e.id(self.event_id(seq)))
                    }
                    // The client asked for the cancel: it wants no answer.
                    Read::Ended(Ending::Cancelled(_), _) if cancelled => return,
                    Read::Ended(ending, seq) => {
                        let result = ending_result(&self.stream.session, &ending);
                        let data = rpc::result(&self.stream.request_id, result);
                        let _ = tx.send(sse::Event::default().id(self.event_id(seq)).data(data)).await;
                        return;
                    }
                    Read::Lost => {
                        let data = rpc::result(&self.stream.request_id, lost(&self.stream.session));
                        let _ = tx.send(sse::Event::default().data(data)).await;
                        return;
                    }
                    Read::Nothing => None,
                },
            };
            if let Some(event) = event
                && tx.send(event).await.is_err()
            {
                return;
            }
        }
    }

    /// Reads one entry, past those the client had; a client tool call is
    /// denied (MCP has no way to run one here).
    fn read(
        &self,
        entry: Result<LogEntry, agentwire_core::log::Lagged>,
        turn: &mut Option<TurnId>,
    ) -> Read {
        let Ok(entry) = entry else {
            return Read::Lost;
        };
        turn.get_or_insert(entry.turn);
        let step = facade::step(&self.lease, &entry.event);
        if entry.seq <= self.skip_through {
            return Read::Nothing;
        }
        match step {
            Step::Text(text) => Read::Text(text.to_owned(), entry.seq),
            Step::Ended(ending) => Read::Ended(ending, entry.seq),
            Step::Other => Read::Nothing,
        }
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

/// The progress notifications of a call that asked for them.
struct Progress {
    token: Option<Value>,
    sent: u64,
}

impl Progress {
    fn new(token: Option<Value>) -> Progress {
        Progress { token, sent: 0 }
    }

    fn wanted(&self) -> bool {
        self.token.is_some()
    }

    /// The next notification, with `text` as its message; its `progress`
    /// counts the notifications, so it grows with each.
    fn event(&mut self, text: Option<&str>) -> Option<sse::Event> {
        let token = self.token.as_ref()?;
        self.sent += 1;
        let params = tools::progress(token, self.sent as f64, text);
        let data = rpc::notification("notifications/progress", params);
        Some(sse::Event::default().data(data))
    }
}

/// The answer of a call whose turn the log no longer holds for it.
fn lost(session: &str) -> Value {
    tools::error_result(
        Some(session),
        "INTERNAL_ERROR",
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
        let events = stream::iter([Ok::<_, Infallible>(sse::Event::default().data(data))]);
        return Sse::new(events).into_response();
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
        _hold: None,
        stream,
    }
    .into_sse()
}

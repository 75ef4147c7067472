//! A task's turn read from its session's log as task events: streamed as
//! server-sent events, or read to the point a blocking send answers.
//!
//! A2A has no acknowledgement of a client tool call: a call is
//! acknowledged as it is read here, so the client has the agent's
//! `client_tool_timeout` to answer it with its next message.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use agentwire_a2a::Version;
use agentwire_a2a::task::{Event, Task, Writer};
use agentwire_a2a::turn::{TaskStream, position};
use agentwire_core::{ClientAnswer, LogReader, ToolSide, TurnEvent};
use agentwire_engine::SessionLease;
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::Value;

use super::tasks::{TaskRef, timestamp};
use crate::AppState;
use crate::facade::TurnHold;

/// A task's events, read from its turn's log.
pub(super) struct TaskEvents {
    state: Arc<AppState>,
    lease: SessionLease,
    reader: LogReader,
    stream: TaskStream,
    /// Entries up to this seq the client had: read to rebuild the stream's
    /// state, not sent again.
    skip_through: u64,
    /// Events made and not yet taken, each with its SSE id.
    pending: VecDeque<(Option<String>, Event)>,
    ended: bool,
    /// Where reading stops.
    until: Until,
    /// The turn this request started, held until its events are read.
    _turn: Option<TurnHold>,
}

/// Where a task's events stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// At a terminal state or one that waits on the client: a stream's end.
    StreamEnd,
    /// At a terminal state only (a cancel waits for it).
    Terminal,
}

impl TaskEvents {
    pub(super) fn new(
        state: Arc<AppState>,
        lease: SessionLease,
        reader: LogReader,
        task: &TaskRef,
        turn: Option<TurnHold>,
    ) -> TaskEvents {
        let stream = TaskStream::new(task.id(), task.session.to_string(), reader.epoch());
        TaskEvents {
            state,
            lease,
            reader,
            stream,
            skip_through: 0,
            pending: VecDeque::new(),
            ended: false,
            until: Until::StreamEnd,
            _turn: turn,
        }
    }

    /// Entries up to `seq` are not sent: the client had them.
    pub(super) fn skipping_through(mut self, seq: u64) -> TaskEvents {
        self.skip_through = seq;
        self
    }

    /// Reads on past a state that waits on the client, to the terminal.
    pub(super) fn reading_to_terminal(mut self) -> TaskEvents {
        self.until = Until::Terminal;
        self
    }

    /// Reads the entries the client had (up to the seq given to
    /// [`TaskEvents::skipping_through`]) that the log holds now, into
    /// `task`: the task as the client last saw it.
    pub(super) fn warm_into(&mut self, task: &mut Task) {
        let now = timestamp(self.state.engine().clock().now());
        while self.reader.cursor() < self.skip_through {
            let Ok(Some(entry)) = self.reader.try_next() else {
                return;
            };
            let mut made = Vec::new();
            self.stream.push(&entry, &now, &mut made);
            for event in &made {
                task.apply(event);
            }
        }
    }

    /// Sends `event` first (the task as it stands).
    pub(super) fn starting_with(mut self, event: Event) -> TaskEvents {
        self.pending.push_back((None, event));
        self
    }

    /// The next event and its SSE id; `None` once an event that ends the
    /// stream has been taken, or the log no longer holds what comes next.
    pub(super) async fn next(&mut self) -> Option<(Option<String>, Event)> {
        loop {
            if let Some((id, event)) = self.pending.pop_front() {
                self.ended |= match self.until {
                    Until::StreamEnd => event.ends_stream(),
                    Until::Terminal => is_terminal(&event),
                };
                return Some((id, event));
            }
            if self.ended {
                return None;
            }
            let Ok(entry) = self.reader.next().await else {
                self.ended = true;
                return None;
            };
            if let TurnEvent::ToolCall(call) = entry.event.as_ref()
                && call.side == ToolSide::Client
            {
                self.lease.answer_client_call(&call.id, ClientAnswer::Ack);
            }
            let now = timestamp(self.state.engine().clock().now());
            let mut made = Vec::new();
            self.stream.push(&entry, &now, &mut made);
            if entry.seq <= self.skip_through {
                continue;
            }
            let id = position(self.reader.epoch(), entry.seq);
            self.pending
                .extend(made.into_iter().map(|event| (Some(id.clone()), event)));
        }
    }

    /// Reads on until an event ends the stream, applying each to `task`:
    /// the answer of a blocking send.
    pub(super) async fn read_into(mut self, task: &mut Task) {
        while let Some((_, event)) = self.next().await {
            task.apply(&event);
        }
    }

    /// The events as a `text/event-stream` of JSON-RPC results, each with
    /// its log position as the SSE id; a comment every 15 s keeps idle
    /// proxies from closing it.
    pub(super) fn into_sse(self, id: Value, version: Version) -> Response {
        let writer = Writer(version);
        let events = stream::unfold((self, id), move |(mut events, id)| async move {
            let (position, event) = events.next().await?;
            let data = writer.event_text(&id, &event);
            // The id first: a client that stops reading after an event's
            // data has its position already.
            let mut sse_event = sse::Event::default();
            if let Some(position) = position {
                sse_event = sse_event.id(position);
            }
            let sse_event = sse_event.data(data);
            Some((Ok::<_, Infallible>(sse_event), (events, id)))
        });
        Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response()
    }
}

fn is_terminal(event: &Event) -> bool {
    match event {
        Event::Task(task) => task.status.state.is_terminal(),
        Event::Status { status, .. } => status.state.is_terminal(),
        Event::Artifact { .. } => false,
    }
}

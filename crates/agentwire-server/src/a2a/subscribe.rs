//! `SubscribeToTask` (v0.3 `tasks/resubscribe`): the task as the client
//! last saw it, then every event after that, then the live ones.
//!
//! The client says what it saw with `Last-Event-ID` (the SSE id of the
//! last event it read, `<epoch>-<seq>`). Where the session's log still
//! holds the turn from there, on any replica, the events after it are
//! replayed exactly; otherwise the task as it stands now comes first,
//! then the live events. A task that has ended cannot be subscribed to.

use agentwire_a2a::message;
use agentwire_a2a::rpc::{ErrorKind, RpcError};
use agentwire_a2a::task::Event;
use agentwire_a2a::turn::parse_position;
use axum::response::Response;
use serde_json::Value;

use super::Call;
use super::events::TaskEvents;
use super::tasks::{self, Found, TaskRef, timestamp};

pub(super) async fn subscribe(call: Call, params: Value) -> Response {
    let (id, _) = match message::task_id(&params) {
        Ok(parsed) => parsed,
        Err(e) => return call.error(e),
    };
    let task_ref = match tasks::find(&call, &id).await {
        Ok(Found::Running(..)) => TaskRef::parse(&id).expect("a found task's id parses"),
        Ok(Found::Ended(_)) => return call.error(RpcError::new(ErrorKind::UnsupportedOperation)),
        Err(e) => return call.error(e),
    };
    match events(&call, &task_ref).await {
        Ok(events) => events.into_sse(call.id.clone(), call.version),
        Err(e) => call.error(e),
    }
}

/// The subscription's events, the task as the client saw it first.
async fn events(call: &Call, task: &TaskRef) -> Result<TaskEvents, RpcError> {
    let position = call.last_event_id.as_deref().and_then(parse_position);
    let rejoined = tasks::rejoin_at(call, &task.session, position).await?;
    let lease = rejoined.session;
    let (reader, seen) = match (rejoined.replayed, position) {
        (true, Some((_, seq))) => (rejoined.reader, seq),
        _ => match lease.running_turn_reader() {
            Some(reader) => (reader, rejoined.head),
            None => (rejoined.reader, rejoined.head),
        },
    };
    let now = timestamp(call.state.engine().clock().now());
    let mut snapshot = tasks::working(task, &now);
    let mut events =
        TaskEvents::new(call.state.clone(), lease, reader, task, None).skipping_through(seen);
    events.warm_into(&mut snapshot);
    Ok(events.starting_with(Event::Task(snapshot)))
}

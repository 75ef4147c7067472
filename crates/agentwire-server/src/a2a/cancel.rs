//! `CancelTask`: the engine's cancel of the task's turn (its provider
//! stream, tools, MCP calls and client tool calls), on whichever replica
//! runs it; answered with the task once it has ended. Idempotent: a
//! canceled task is answered as it is; a task that ended otherwise is not
//! cancelable.

use std::time::Duration;

use agentwire_a2a::message;
use agentwire_a2a::rpc::{ErrorKind, RpcError};
use agentwire_a2a::task::{TaskState, Writer};
use axum::response::Response;
use serde_json::Value;

use super::Call;
use super::events::TaskEvents;
use super::tasks::{self, Found, TaskRef};

/// How long a cancel waits for the turn to end before it answers with the
/// task as it stands (still working, its cancel on the way).
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub(super) async fn cancel(call: Call, params: Value) -> Response {
    let (id, _) = match message::task_id(&params) {
        Ok(parsed) => parsed,
        Err(e) => return call.error(e),
    };
    let (mut task, lease) = match tasks::find(&call, &id).await {
        Ok(Found::Running(task, lease)) => (task, lease),
        Ok(Found::Ended(task)) if task.status.state == TaskState::Canceled => {
            return call.result(Writer(call.version).task(&task));
        }
        Ok(Found::Ended(_)) => return call.error(RpcError::new(ErrorKind::TaskNotCancelable)),
        Err(e) => return call.error(e),
    };
    let task_ref = TaskRef::parse(&id).expect("a found task's id parses");
    let reader = lease.running_turn_reader();
    let head = lease.log_head();
    lease.cancel_turn(call.owner(), None);
    if let Some(reader) = reader {
        let mut events = TaskEvents::new(call.state.clone(), lease, reader, &task_ref, None)
            .reading_to_terminal()
            .skipping_through(head);
        events.warm_into(&mut task);
        let _ = tokio::time::timeout(CANCEL_WAIT, events.read_into(&mut task)).await;
    }
    call.result(Writer(call.version).task(&task))
}

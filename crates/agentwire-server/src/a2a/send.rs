//! `SendMessage` and `SendStreamingMessage`: a message opens a task (a
//! turn), or answers the client tool call a task waits on.
//!
//! A blocking send (the default) answers when the task ends or needs
//! input; `returnImmediately` (v0.3: `blocking: false`) answers with the
//! task as submitted while its turn runs on. A stream sends the task, then
//! its events, and ends where a blocking send would answer.

use agentwire_a2a::message::{self, SendParams};
use agentwire_a2a::rpc::{ErrorKind, RpcError};
use agentwire_a2a::task::{Event, Message, Part, Role, Task, TaskState, Writer};
use agentwire_core::ClientAnswer;
use axum::response::Response;
use serde_json::Value;

use super::Call;
use super::events::TaskEvents;
use super::tasks::{self, Found, TaskRef, timestamp};
use crate::connection::{DialectWords, Refusal};
use crate::facade::{self, RequestMessage, RequestTurn};

/// What a refusal says where the dialects differ.
const WORDS: DialectWords = DialectWords {
    session_expired: "contextId names no session of yours that can continue",
    media_unknown: "a file part names media that is not yours",
    media_other_session: "a file part names media of another session",
};

/// `SendMessage`.
pub(super) async fn send(call: Call, params: Value) -> Response {
    let params = match message::send_params(&params, call.version) {
        Ok(params) => params,
        Err(e) => return call.error(e),
    };
    let (events, mut task) = match begin(&call, &params).await {
        Ok(started) => started,
        Err(e) => return call.error(e),
    };
    if params.return_immediately {
        let mut untouched = task.clone();
        tokio::spawn(async move { events.read_into(&mut untouched).await });
    } else {
        events.read_into(&mut task).await;
        if let Some(last) = &task.status.message {
            task.history.push(last.clone());
        }
    }
    if let Some(n) = params.history_length {
        let keep = (n as usize).min(task.history.len());
        task.history.drain(..task.history.len() - keep);
    }
    call.result(Writer(call.version).send_result(&task))
}

/// `SendStreamingMessage`.
pub(super) async fn stream(call: Call, params: Value) -> Response {
    let params = match message::send_params(&params, call.version) {
        Ok(params) => params,
        Err(e) => return call.error(e),
    };
    match begin(&call, &params).await {
        Ok((events, task)) => events
            .starting_with(Event::Task(task))
            .into_sse(call.id.clone(), call.version),
        Err(e) => call.error(e),
    }
}

/// The message's task and its events: a new task, or the one whose client
/// tool call the message answers.
async fn begin(call: &Call, params: &SendParams) -> Result<(TaskEvents, Task), RpcError> {
    match &params.message.task_id {
        Some(_) => answer_task(call, params).await,
        None => start(call, params).await,
    }
}

/// Starts the message's turn: its events, and the task as submitted.
async fn start(call: &Call, params: &SendParams) -> Result<(TaskEvents, Task), RpcError> {
    let message = &params.message;
    let started = facade::start(
        &call.state,
        RequestMessage {
            agent: &call.agent,
            caller: &call.caller,
            session: message.context_id.as_deref(),
            text: None,
            parts: message.content_parts(),
            metadata: message.metadata.clone(),
            body_bytes: call.body_bytes,
        },
    )
    .await
    .map_err(|refusal| refused(&refusal))?;
    let RequestTurn { handle, hold } = started;
    let task = TaskRef {
        session: handle.session.id().clone(),
        seq: handle.question_seq,
    };
    let now = timestamp(call.state.engine().clock().now());
    let mut submitted = tasks::working(&task, &now);
    submitted.status.state = TaskState::Submitted;
    submitted.history.push(Message {
        message_id: message.message_id.clone(),
        context_id: task.session.to_string(),
        task_id: task.id(),
        role: Role::User,
        parts: message
            .parts
            .iter()
            .filter_map(|p| match p {
                message::InboundPart::Text(text) => Some(Part::Text(text.clone())),
                message::InboundPart::Data(data) => Some(Part::Data(data.clone())),
                message::InboundPart::File { .. } => None,
            })
            .collect(),
        metadata: None,
    });
    let events = TaskEvents::new(
        call.state.clone(),
        handle.session,
        handle.events,
        &task,
        Some(hold),
    );
    Ok((events, submitted))
}

/// A refusal of the admission path as a JSON-RPC error: our error code
/// and fixed text (never the client's bytes).
fn refused(refusal: &Refusal) -> RpcError {
    let text = refusal.shared_text().unwrap_or(match refusal {
        Refusal::Media(crate::connection::admission::MediaRefusal::OtherSession) => {
            WORDS.media_other_session
        }
        Refusal::Media(_) => WORDS.media_unknown,
        _ => WORDS.session_expired,
    });
    RpcError::server(refusal.code().as_str(), text)
}

/// A message to a task that waits on a client tool call: its answer. The
/// call's result is the message's `{"tool_result": {"call_id"?, "result"
/// | "error"}}` data part, else its text; a task that waits on nothing is
/// refused (`UnsupportedOperationError`).
async fn answer_task(call: &Call, params: &SendParams) -> Result<(TaskEvents, Task), RpcError> {
    let message = &params.message;
    let id = message.task_id.as_deref().unwrap_or_default();
    let (mut task, lease) = match tasks::find(call, id).await? {
        Found::Running(task, lease) => (task, lease),
        Found::Ended(_) => return Err(RpcError::new(ErrorKind::UnsupportedOperation)),
    };
    if message
        .context_id
        .as_deref()
        .is_some_and(|c| c != task.context_id)
    {
        return Err(RpcError::invalid_params("contextId is not the task's"));
    }
    let Some(pending) = pending_call(&task) else {
        return Err(RpcError::new(ErrorKind::UnsupportedOperation));
    };
    let (call_id, answer) = tool_answer(message, &pending);
    let task_ref = TaskRef::parse(id).expect("a found task's id parses");
    let head = lease.log_head();
    let reader = lease
        .running_turn_reader()
        .ok_or(RpcError::new(ErrorKind::Internal))?;
    if !lease.answer_client_call(&call_id, answer) {
        return Err(RpcError::invalid_params(
            "tool_result.call_id names no pending call",
        ));
    }
    let mut events =
        TaskEvents::new(call.state.clone(), lease, reader, &task_ref, None).skipping_through(head);
    events.warm_into(&mut task);
    task.status.state = TaskState::Working;
    task.status.message = None;
    Ok((events, task))
}

/// The call id the task's input-required status names.
fn pending_call(task: &Task) -> Option<String> {
    if task.status.state != TaskState::InputRequired {
        return None;
    }
    let message = task.status.message.as_ref()?;
    message.parts.iter().find_map(|p| match p {
        Part::Data(data) => data["tool_call"]["call_id"].as_str().map(str::to_owned),
        _ => None,
    })
}

fn tool_answer(message: &message::InboundMessage, pending: &str) -> (String, ClientAnswer) {
    let result = message.data().find_map(|d| d.get("tool_result"));
    let Some(result) = result else {
        let text = message
            .parts
            .iter()
            .filter_map(|p| match p {
                message::InboundPart::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        return (
            pending.to_owned(),
            ClientAnswer::Result(Ok(Value::String(text))),
        );
    };
    let call_id = result["call_id"].as_str().unwrap_or(pending).to_owned();
    let answer = match (result.get("error"), result.get("result")) {
        (Some(error), _) => {
            let reason = error
                .as_str()
                .map_or_else(|| error.to_string(), str::to_owned);
            ClientAnswer::Result(Err(reason))
        }
        (None, Some(value)) => ClientAnswer::Result(Ok(value.clone())),
        (None, None) => ClientAnswer::Result(Ok(Value::Null)),
    };
    (call_id, answer)
}

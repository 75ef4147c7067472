//! A2A on its JSON-RPC binding: each agent with an `a2a` block at
//! `POST /a2a/{agent}`, its card at `/a2a/{agent}/.well-known/agent-card.json`
//! (and at `/.well-known/agent-card.json` when it is the only one), the
//! list at `GET /a2a`.
//!
//! A task is a turn: its id names the session (`contextId`) and the `seq`
//! of the message the turn answers (`<session>~<seq>`), so any replica
//! finds it: in the session's log while it runs, in the store once it has
//! ended. Every request goes through the one admission path
//! ([`crate::facade`]); tasks of another caller, or of an anonymous one,
//! are not found.
//!
//! One file per method: `send.rs` (`SendMessage`,
//! `SendStreamingMessage`), `tasks.rs` (finding a task, `GetTask`,
//! `ListTasks`), `cancel.rs`, `subscribe.rs`; `events.rs` reads a turn's
//! log as task events (the SSE stream and the blocking answer); `card.rs`
//! the cards.

use std::sync::Arc;

use agentwire_a2a::Version;
use agentwire_a2a::rpc::{self, ErrorKind, Method, RpcError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use crate::identity::Caller;
use crate::upgrade::ClientAddress;
use crate::{AgentEntry, AppState, facade};

mod cancel;
mod card;
mod events;
mod send;
mod subscribe;
mod tasks;

/// The largest request body: a message with inline files.
const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/.well-known/agent-card.json", get(card::root_card))
        .route("/a2a", get(card::list))
        .route("/a2a/{agent}/.well-known/agent-card.json", get(card::card))
        .route(
            "/a2a/{agent}/.well-known/agent-card-v0.3.json",
            get(card::card_v0_3),
        )
        .route(
            "/a2a/{agent}",
            post(rpc).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
        // Clients that join "/" to the card's URL (httpx with a base URL)
        // post here.
        .route(
            "/a2a/{agent}/",
            post(rpc).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
}

/// The agent `name` if A2A serves it.
fn a2a_agent<'a>(state: &'a AppState, name: &str) -> Option<&'a Arc<AgentEntry>> {
    state.agent(name).filter(|a| a.facades.a2a.is_some())
}

/// One JSON-RPC call: who makes it, in which version, and its id.
pub(crate) struct Call {
    state: Arc<AppState>,
    agent: Arc<AgentEntry>,
    caller: Caller,
    version: Version,
    id: Value,
    /// The request body's size, held from the inbound budget by a turn.
    body_bytes: usize,
    /// `Last-Event-ID`, for a subscription.
    last_event_id: Option<String>,
}

impl Call {
    /// A JSON-RPC result.
    fn result(&self, value: Value) -> Response {
        json_response(rpc::result(&self.id, value))
    }

    fn error(&self, error: RpcError) -> Response {
        json_response(rpc::error(&self.id, &error))
    }

    /// The caller's owner: only an identified caller's tasks can be found.
    fn owner(&self) -> Option<&str> {
        self.caller.owner.as_deref()
    }
}

fn json_response(body: String) -> Response {
    crate::routes::api::json_text(StatusCode::OK, body)
}

async fn rpc(
    State(state): State<Arc<AppState>>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    address: ClientAddress,
    body: Bytes,
) -> Response {
    let Some(entry) = a2a_agent(&state, &agent).cloned() else {
        return (StatusCode::NOT_FOUND, "agent not found").into_response();
    };
    let version_header = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    let version = match Version::from_header(version_header) {
        Ok(version) => version,
        Err(_) => return refuse(&body, ErrorKind::VersionNotSupported),
    };
    if !facade::is_json(&headers) {
        return refuse(&body, ErrorKind::ContentTypeNotSupported);
    }
    let caller = match facade::caller(&state, &headers, &entry, address).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal.into_response(),
    };
    let request = match rpc::decode(&body, version) {
        Ok(request) => request,
        Err((id, error)) => return json_response(rpc::error(&id, &error)),
    };
    let call = Call {
        state,
        agent: entry,
        caller,
        version,
        id: request.id,
        body_bytes: body.len(),
        last_event_id: headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    dispatch(call, request.method, request.params).await
}

async fn dispatch(call: Call, method: Method, params: Value) -> Response {
    match method {
        Method::SendMessage => send::send(call, params).await,
        Method::SendStreamingMessage => send::stream(call, params).await,
        Method::GetTask => tasks::get(call, params).await,
        Method::ListTasks => tasks::list(call, params).await,
        Method::CancelTask => cancel::cancel(call, params).await,
        Method::SubscribeToTask => subscribe::subscribe(call, params).await,
        Method::CreatePushConfig
        | Method::GetPushConfig
        | Method::ListPushConfigs
        | Method::DeletePushConfig => {
            call.error(RpcError::new(ErrorKind::PushNotificationNotSupported))
        }
        Method::GetExtendedAgentCard => {
            call.error(RpcError::new(ErrorKind::ExtendedAgentCardNotConfigured))
        }
    }
}

/// An error before the request is admitted, answered with the request's
/// id when it can be read.
fn refuse(body: &[u8], kind: ErrorKind) -> Response {
    #[derive(serde::Deserialize)]
    struct Id {
        id: Option<Value>,
    }
    let id = serde_json::from_slice::<Id>(body)
        .ok()
        .and_then(|b| b.id)
        .unwrap_or(Value::Null);
    json_response(rpc::error(&id, &RpcError::new(kind)))
}

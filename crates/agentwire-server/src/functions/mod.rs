//! REST functions (Omnia's "function mode"): each agent with a `function`
//! block at `POST /functions/{agent}`, and the OpenAPI document of the
//! HTTP APIs at `GET /openapi.json` (`openapi.rs`).
//!
//! A call is one turn in a session of its own: the request body (any JSON
//! value, at most 1 MiB) is checked against the function's input schema
//! and becomes the message (a JSON string as its plain text, anything else
//! as compact JSON text); the agent's answer, checked against the output
//! schema when there is one, is the call's `output`. The caller is
//! identified as on `/ws` and the turn goes through the one admission path
//! ([`crate::facade`]), so a call spends from the caller's turns per minute
//! like a WebSocket message. The session's id is the call's
//! `invocation_id`: its owner reads the transcript at
//! `/api/v1/sessions/{id}`.
//!
//! Checks run cheapest first, and a body is read only for a caller who
//! may call: the content type (415), the function (404), the drain (503),
//! the caller (401/403/429), the body (413, 400 `read_body_failed`), the
//! input (400 `input_invalid`), admission (429, 503). Every error is
//! `{"error": code, "detail": text}` (`error.rs`); `output.rs` makes the
//! answer an output.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use serde_json::Value;

use crate::facade::{self, RequestMessage, RequestTurn};
use crate::routes::api::json;
use crate::upgrade::ClientAddress;
use crate::{AgentEntry, AppState, FunctionSpec};

mod error;
mod openapi;
mod output;

use error::FunctionError;

/// The largest request body, as Omnia's.
pub(crate) const MAX_BODY_BYTES: usize = 1024 * 1024;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    let nameless = || post(missing_name).fallback(|| async { FunctionError::method_not_allowed() });
    Router::new()
        .route("/functions", nameless())
        .route("/functions/", nameless())
        .route(
            "/functions/{name}",
            post(call)
                .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
                .fallback(|| async { FunctionError::method_not_allowed() }),
        )
        .route(
            "/openapi.json",
            get(openapi::serve).fallback(|| async { openapi::method_not_allowed() }),
        )
}

async fn missing_name() -> FunctionError {
    FunctionError::missing_function_name()
}

/// What a successful call answers.
#[derive(Serialize)]
struct Success<'a> {
    output: Value,
    invocation_id: &'a str,
    duration_ms: u64,
}

async fn call(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    address: ClientAddress,
    request: Request,
) -> Response {
    let started = Instant::now();
    match invoke(&state, &name, address, request).await {
        Ok((output, invocation_id)) => {
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let body = Success {
                output,
                invocation_id: &invocation_id,
                duration_ms,
            };
            json(StatusCode::OK, &body)
        }
        Err(error) => {
            // A server-side failure comes after the function was found, so
            // the name is an agent's, not whatever a client put in the path.
            match error.status().is_server_error() {
                true => tracing::warn!(agent = %name, error = error.code(), "function call failed"),
                false => tracing::debug!(error = error.code(), "function call refused"),
            }
            error.into_response()
        }
    }
}

/// The call's output and invocation id.
async fn invoke(
    state: &Arc<AppState>,
    name: &str,
    address: ClientAddress,
    request: Request,
) -> Result<(Value, String), FunctionError> {
    if !facade::is_json(request.headers()) {
        return Err(FunctionError::unsupported_media_type());
    }
    let (agent, spec) = function(state, name).ok_or_else(FunctionError::not_found)?;
    // As an upgrade is refused: a turn started now would only be cut short.
    if state.lifecycle().is_draining() {
        return Err(FunctionError::shutting_down());
    }
    let caller = facade::caller(state, request.headers(), agent, address)
        .await
        .map_err(FunctionError::refused)?;
    let body = Bytes::from_request(request, state)
        .await
        .map_err(|rejection| FunctionError::unread_body(rejection.status()))?;
    let input: Value = serde_json::from_slice(&body).map_err(|_| FunctionError::body_not_json())?;
    if let Some(schema) = &spec.input {
        schema
            .validator
            .validate(&input)
            .map_err(FunctionError::input_invalid)?;
    }
    let RequestTurn { mut handle, hold } = facade::start(
        state,
        RequestMessage {
            agent,
            caller: &caller,
            session: None,
            text: Some(message_text(input)),
            parts: Vec::new(),
            metadata: Default::default(),
            body_bytes: body.len(),
        },
    )
    .await
    .map_err(|refusal| FunctionError::admission(&refusal))?;
    let ending = facade::finish(&handle.session, &mut handle.events, |_| {}).await;
    drop(hold);
    let output = output::of(ending, spec.output.as_ref())?;
    Ok((output, handle.session.id().as_str().to_owned()))
}

/// The agent `name` if it is a function, and its schemas.
fn function<'a>(state: &'a AppState, name: &str) -> Option<(&'a AgentEntry, &'a FunctionSpec)> {
    let agent = state.agent(name)?;
    Some((agent, agent.facades.function.as_ref()?))
}

/// The message the agent answers: a JSON string as its text (what a
/// person would have typed), any other value as compact JSON.
fn message_text(input: Value) -> String {
    match input {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_string_input_is_its_text_and_anything_else_compact_json() {
        assert_eq!(message_text(json!("what is 2+2?")), "what is 2+2?");
        assert_eq!(message_text(json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
        assert_eq!(message_text(json!(42)), "42");
        assert_eq!(message_text(json!(null)), "null");
    }
}

//! `tools/call`: `ask_<agent>` starts a turn through the one admission
//! path and answers with its reply, as an SSE stream (progress, then the
//! result) when the client takes one, else as JSON once the turn ends.

use agentwire_core::{ErrorCode, Metadata};
use agentwire_mcp::rpc::RpcError;
use agentwire_mcp::stream::StreamRef;
use agentwire_mcp::tools::{self, CallParams};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::Request;
use super::access::{self, Anonymous, Visible};
use super::stream::{Elicits, Reading};
use crate::connection::{DialectWords, Refusal};
use crate::facade::{self, Ending, RequestMessage, RequestTurn};
use crate::upgrade;

/// What a refusal says where the dialects differ.
const WORDS: DialectWords = DialectWords {
    session_expired: "session_id names no session of yours that can continue; omit it to start a new one",
    media_unknown: "the message names media that is not yours",
    media_other_session: "the message names media of another session",
};

/// Arguments a tool cannot take: the code a malformed WebSocket message
/// gets.
const INVALID: ErrorCode = ErrorCode::InvalidMessage;

/// A cancelled turn's result: not an error code of the engine's (a cancel
/// is asked for, not a failure), but the call still has no full answer.
const CANCELLED: &str = "CANCELLED";

/// The `_meta` key whose object (of strings) becomes the turn's metadata,
/// as a WebSocket message's `metadata` does (the test handler's
/// `mock_scenario`, for one).
const METADATA_KEY: &str = "io.agentwire/metadata";

pub(super) async fn call(request: Request, visible: Visible, params: Value) -> Response {
    let call = match tools::call_params(&params) {
        Ok(call) => call,
        Err(message) => return request.error(&RpcError::invalid_params(message)),
    };
    let found = visible
        .agents
        .iter()
        .find(|(agent, _)| tools::tool_name(&agent.agent.name) == call.tool);
    let Some((agent, caller)) = found else {
        return unknown_tool(&request, &visible, &call);
    };
    let arguments = match tools::ask_arguments(&call.arguments) {
        Ok(arguments) => arguments,
        Err(message) => {
            return request.result(tools::error_result(None, INVALID.as_str(), &message, ""));
        }
    };
    let metadata = match metadata(&params) {
        Some(metadata) => metadata,
        None => {
            let message = format!("_meta.{METADATA_KEY} must be an object of strings");
            return request.result(tools::error_result(None, INVALID.as_str(), &message, ""));
        }
    };
    let started = facade::start(
        &request.state,
        RequestMessage {
            agent,
            caller,
            session: arguments.session_id.as_deref(),
            text: Some(arguments.message),
            parts: Vec::new(),
            metadata,
            body_bytes: request.body_bytes,
        },
    )
    .await;
    let RequestTurn { handle, hold } = match started {
        Ok(started) => started,
        Err(refusal) => return request.result(refused(&refusal)),
    };
    let tool = agent
        .facades
        .mcp
        .as_ref()
        .expect("visible agents are on MCP");
    let reading = Reading {
        stream: StreamRef {
            agent: agent.agent.name.clone(),
            session: handle.session.id().to_string(),
            request_id: request.id.clone(),
            progress_token: call.progress_token,
        },
        lease: handle.session,
        reader: handle.events,
        owner: caller.owner.clone(),
        skip_through: 0,
        progress_interval: tool.progress_interval,
        registration: request
            .state
            .mcp()
            .running
            .register(&request.headers, &request.id),
        elicits: match super::elicits(&request.headers) && request.accepts_sse() {
            true => Elicits::Forms,
            false => Elicits::No,
        },
        era: request.era,
        _hold: Some(hold),
    };
    if request.accepts_sse() {
        reading.into_sse()
    } else {
        let result = reading.read_to_end().await;
        request.result(result)
    }
}

/// A tool the caller does not see: 401 when it is a private agent's and
/// the request carried no credential (sign in first), else unknown.
fn unknown_tool(request: &Request, visible: &Visible, call: &CallParams) -> Response {
    let exists = request
        .state
        .agents()
        .any(|(name, a)| a.facades.mcp.is_some() && tools::tool_name(name) == call.tool);
    if exists && visible.anonymous == Anonymous::Yes {
        let refusal = upgrade::Refusal::new(StatusCode::UNAUTHORIZED, "unauthorized");
        return access::refused(&request.state, refusal);
    }
    request.error(&RpcError::invalid_params("unknown tool"))
}

/// The turn's metadata from `_meta`; `None` when it is not an object of
/// strings.
fn metadata(params: &Value) -> Option<Metadata> {
    let Some(value) = params.get("_meta").and_then(|m| m.get(METADATA_KEY)) else {
        return Some(Metadata::new());
    };
    value
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// A refusal of the admission path as a tool error: our error code and
/// fixed text (never the client's bytes).
fn refused(refusal: &Refusal) -> Value {
    let text = refusal.shared_text().unwrap_or(match refusal {
        Refusal::Media(crate::connection::admission::MediaRefusal::OtherSession) => {
            WORDS.media_other_session
        }
        Refusal::Media(_) => WORDS.media_unknown,
        _ => WORDS.session_expired,
    });
    tools::error_result(None, refusal.code().as_str(), text, "")
}

/// How a turn ended, as the call's result.
pub(super) fn ending_result(session: &str, ending: &Ending) -> Value {
    match ending {
        Ending::Completed(reply) => tools::reply_result(session, &reply.text),
        Ending::Failed(failure) => {
            tools::error_result(Some(session), failure.code.as_str(), &failure.message, "")
        }
        Ending::Cancelled(reply) => tools::error_result(
            Some(session),
            CANCELLED,
            "the turn was cancelled",
            &reply.text,
        ),
    }
}

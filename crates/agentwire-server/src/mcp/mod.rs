//! MCP on Streamable HTTP at `/mcp`: every agent with an `mcp` block that
//! the caller may use is the tool `ask_<agent>`, and a call is a turn.
//!
//! Written by hand on the pure `agentwire-mcp` crate rather than with
//! `rmcp`'s server: a call's SSE stream is read from the session's turn
//! log, its event ids are log positions, and a client that lost it
//! resumes with `Last-Event-ID` on any replica (`rmcp` replays only what
//! its own session kept in memory, on the replica that kept it); and the
//! 401 with `WWW-Authenticate` comes before any JSON-RPC.
//!
//! `POST /mcp` takes one JSON-RPC message: `initialize` hands out an
//! `Mcp-Session-Id`, under which nothing is kept (a request without one is
//! served the same); a request in the stateless 2026-07-28 form
//! (`MCP-Protocol-Version`) stands alone, after `server/discover`. `GET /mcp` with `Last-Event-ID`
//! resumes a call's stream; without one it is 405 (there is nothing a
//! server sends unasked). Every request goes through the one admission
//! path ([`crate::facade`]).
//!
//! `call.rs` runs a tool call (`stream.rs` reads its turn as SSE, and asks
//! the client to run an agent's client tools through elicitation),
//! `access.rs` says who calls and which tools they see, `running.rs` keeps
//! the calls in flight for `notifications/cancelled`.

use std::sync::Arc;

use agentwire_mcp::protocol::{self, Era, ServerInfo};
use agentwire_mcp::rpc::{self, Incoming, RpcError};
use agentwire_mcp::tools;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::upgrade::ClientAddress;
use crate::{AppState, upgrade};

mod access;
mod call;
mod running;
mod stream;

pub(crate) use access::McpState;

/// The largest request body: a message, as on the WebSocket's default.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The session header the handshake hands out.
const SESSION_HEADER: &str = "mcp-session-id";

/// Ends the session id of a client that takes form elicitation: what the
/// server needs to remember of a session, kept in its id, so no replica
/// has to keep anything.
const ELICITS: &str = ".elicits";

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/mcp",
            get(stream::resume)
                .post(post)
                .delete(not_allowed)
                .layer(DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get(access::resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(access::resource_metadata),
        )
}

/// One POSTed request, as the methods see it.
pub(crate) struct Request {
    state: Arc<AppState>,
    headers: HeaderMap,
    era: Era,
    id: Value,
    body_bytes: usize,
}

impl Request {
    fn result(&self, value: Value) -> Response {
        json_response(rpc::result(&self.id, self.era.result(value)))
    }

    fn error(&self, error: &RpcError) -> Response {
        json_response(rpc::error(&self.id, error))
    }

    /// Whether the client takes an SSE answer (clients must take both;
    /// one that says it cannot gets JSON).
    fn accepts_sse(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"))
    }
}

/// The protocol's form the request is in.
fn era(headers: &HeaderMap) -> Era {
    Era::of(
        headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok()),
    )
}

/// Whether the client said in its handshake that it takes form
/// elicitation.
fn elicits(headers: &HeaderMap) -> bool {
    mcp_session(headers).ends_with(ELICITS)
}

/// The client's `Mcp-Session-Id`, or nothing.
fn mcp_session(headers: &HeaderMap) -> &str {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn post(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    address: ClientAddress,
    body: Bytes,
) -> Response {
    if let Err(refusal) = guard(&state, &headers) {
        return refusal.into_response();
    }
    if !is_json(&headers) {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json only\n",
        )
            .into_response();
    }
    let message = match rpc::decode(&body) {
        Ok(message) => message,
        Err((id, error)) => {
            let mut response = json_response(rpc::error(&id, &error));
            *response.status_mut() = StatusCode::BAD_REQUEST;
            return response;
        }
    };
    let visible = match access::visible(&state, &headers, address).await {
        Ok(visible) => visible,
        Err(refusal) => return access::refused(&state, refusal),
    };
    match message {
        Incoming::Request { id, method, params } => {
            let request = Request {
                era: era(&headers),
                state,
                headers,
                id,
                body_bytes: body.len(),
            };
            dispatch(request, visible, &method, params).await
        }
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled" {
                running::cancel(&state, &headers, &params);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Response { id, result } => {
            running::answer(&state, &headers, &id, result);
            StatusCode::ACCEPTED.into_response()
        }
    }
}

async fn dispatch(
    request: Request,
    visible: access::Visible,
    method: &str,
    params: Value,
) -> Response {
    match method {
        "initialize" => initialize(&request, &params),
        "server/discover" => request.result(protocol::discover_result(&SERVER_INFO)),
        "ping" | "logging/setLevel" => request.result(json!({})),
        "tools/list" => {
            let tools: Vec<Value> = visible
                .agents
                .iter()
                .map(|(agent, _)| {
                    let tool = agent
                        .facades
                        .mcp
                        .as_ref()
                        .expect("visible agents are on MCP");
                    tools::descriptor(&agent.agent.name, &tool.description)
                })
                .collect();
            request.result(request.era.list(json!({"tools": tools})))
        }
        "tools/call" => call::call(request, visible, params).await,
        // Agents are tools only; a client that asks for resources or
        // prompts anyway (as inspectors do) is told there are none.
        "resources/list" => request.result(request.era.list(json!({"resources": []}))),
        "resources/templates/list" => {
            request.result(request.era.list(json!({"resourceTemplates": []})))
        }
        "prompts/list" => request.result(request.era.list(json!({"prompts": []}))),
        _ => request.error(&RpcError::method_not_found()),
    }
}

/// What the server says of itself in the handshake and in discovery.
const SERVER_INFO: ServerInfo<'static> = ServerInfo {
    name: "agentwire",
    version: env!("CARGO_PKG_VERSION"),
    instructions: "Each tool asks one agent. Pass the session_id of an answer to continue \
                   that conversation.",
};

/// The handshake: the version, what the server offers, and a session id
/// (random; the server keeps nothing under it).
fn initialize(request: &Request, params: &Value) -> Response {
    let mut response = request.result(protocol::initialize_result(params, &SERVER_INFO));
    let mut session = request.state.engine().mint_session_id().to_string();
    if tools::client::elicits_forms(params) {
        session.push_str(ELICITS);
    }
    if let Ok(value) = HeaderValue::from_str(&session) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// What every `/mcp` request is checked for before anything else: DNS
/// rebinding (a foreign `Origin`, or on a server only loopback reaches, a
/// `Host` that is not loopback: 403) and a protocol version we speak
/// (400).
fn guard(state: &AppState, headers: &HeaderMap) -> Result<(), (StatusCode, &'static str)> {
    let forbidden = || (StatusCode::FORBIDDEN, "forbidden\n");
    if !upgrade::origin_allowed(&state.settings().allowed_origins, headers) {
        return Err(forbidden());
    }
    if is_loopback_url(state.public_base_url()) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(is_loopback_authority) {
            return Err(forbidden());
        }
    }
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok());
    if !protocol::header_supported(version) {
        return Err((
            StatusCode::BAD_REQUEST,
            "unsupported MCP-Protocol-Version\n",
        ));
    }
    Ok(())
}

/// Whether `url`'s host is loopback: a server reached only from this
/// machine, which a web page must not reach under another name.
fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    is_loopback_authority(rest.split('/').next().unwrap_or(rest))
}

/// `host[:port]` names loopback: `localhost`, `127.x.y.z` or `[::1]`.
fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn json_response(body: String) -> Response {
    crate::routes::api::json_text(StatusCode::OK, body)
}

async fn not_allowed() -> Response {
    StatusCode::METHOD_NOT_ALLOWED.into_response()
}

/// `application/json`, with any parameters (`; charset=utf-8`).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_told_from_a_foreign_name() {
        for loopback in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:9",
            "127.1.2.3",
        ] {
            assert!(is_loopback_authority(loopback), "{loopback}");
        }
        for foreign in [
            "evil.example.com",
            "evil.example.com:8080",
            "10.0.0.1:80",
            "[::2]",
        ] {
            assert!(!is_loopback_authority(foreign), "{foreign}");
        }
        assert!(is_loopback_url("http://127.0.0.1:4000"));
        assert!(!is_loopback_url("https://agents.example.com/base"));
    }
}

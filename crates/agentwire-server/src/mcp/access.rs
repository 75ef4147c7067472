//! Who calls `/mcp`, and which tools they see: the same bearer
//! credentials as `/ws`, checked against each agent on MCP; the OAuth
//! protected-resource metadata (RFC 9728) when JWTs are the credential.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::running::Running;
use crate::identity::{self, Caller};
use crate::upgrade::{ClientAddress, Refusal};
use crate::{AgentEntry, AppState, facade};

/// What the MCP door keeps beside the agents.
#[derive(Default)]
pub(crate) struct McpState {
    /// The JWT issuer, named as the authorization server of `/mcp`.
    pub(crate) authorization_server: Option<String>,
    pub(crate) running: Running,
}

/// The agents on MCP that a request's caller may use, each with the
/// caller as that agent admitted it.
pub(crate) struct Visible {
    pub(crate) agents: Vec<(Arc<AgentEntry>, Caller)>,
    /// Whether the request carried a credential: without one, a private
    /// agent's tool answers 401 (sign in), not "unknown tool".
    pub(crate) anonymous: Anonymous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anonymous {
    Yes,
    No,
}

/// The agents `headers`' credential may use, in name order. A credential
/// refused by one agent is refused for the request (401, counted once);
/// one an agent does not admit (403) only hides that agent. No credential
/// and no agent usable without one is 401: the client is to sign in.
pub(crate) async fn visible(
    state: &AppState,
    headers: &HeaderMap,
    address: ClientAddress,
) -> Result<Visible, Refusal> {
    let anonymous = match identity::bearer(headers) {
        Some(_) => Anonymous::No,
        None => Anonymous::Yes,
    };
    let mut on_mcp: Vec<&Arc<AgentEntry>> = state
        .agents()
        .map(|(_, agent)| agent)
        .filter(|agent| agent.facades.mcp.is_some())
        .collect();
    on_mcp.sort_by(|a, b| a.agent.name.cmp(&b.agent.name));
    let mut agents = Vec::new();
    for agent in on_mcp {
        match facade::caller(state, headers, agent, address).await {
            Ok(caller) => agents.push((agent.clone(), caller)),
            Err(refusal) if refusal.status == StatusCode::FORBIDDEN => {}
            Err(refusal)
                if refusal.status == StatusCode::UNAUTHORIZED && anonymous == Anonymous::Yes => {}
            Err(refusal) => return Err(refusal),
        }
    }
    if anonymous == Anonymous::Yes && agents.is_empty() {
        return Err(Refusal::new(StatusCode::UNAUTHORIZED, "unauthorized"));
    }
    Ok(Visible { agents, anonymous })
}

/// A refusal as `/mcp` answers it: a 401 says where to sign in.
pub(crate) fn refused(state: &AppState, refusal: Refusal) -> Response {
    let status = refusal.status;
    let mut response = refusal.into_response();
    if status == StatusCode::UNAUTHORIZED {
        let challenge = match &state.mcp().authorization_server {
            Some(_) => format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                state.public_base_url()
            ),
            None => "Bearer".to_owned(),
        };
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`: `/mcp` as an OAuth
/// protected resource whose tokens the JWT issuer grants; 404 when the
/// credentials are not JWTs.
pub(crate) async fn resource_metadata(State(state): State<Arc<AppState>>) -> Response {
    let Some(issuer) = &state.mcp().authorization_server else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let document = json!({
        "resource": format!("{}/mcp", state.public_base_url()),
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "agentwire",
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
        .into_response()
}

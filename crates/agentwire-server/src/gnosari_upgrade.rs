//! The Gnosari upgrade, `GET /ws/agent/{agent}`: every refusal happens here,
//! before a socket exists, with the same short plain-text bodies as `/ws`.
//!
//! Order: shut down or at the connection limit (503), draining (503), unknown
//! agent (404), credentials (401 missing or refused, 403 not admitted),
//! origin (403).

use std::sync::Arc;

use agentwire_core::Credentials;
use axum::extract::rejection::PathRejection;
use axum::extract::ws::{WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::gnosari_connection::{self, GnosariParams};
use crate::identity;
use crate::query::QueryParams;
use crate::upgrade::{Refusal, check_capacity, open_socket, origin_allowed};
use crate::{AgentEntry, AppState};

/// The API key header; header names are matched case-insensitively, so the
/// engine's `X-Auth-Token` spelling works too.
const API_KEY_HEADER: &str = "x-auth-token";
const PASSWORD_HEADER: &str = "x-access-password";

pub(crate) async fn ws_upgrade(
    State(state): State<Arc<AppState>>,
    agent: Result<Path<String>, PathRejection>,
    RawQuery(raw_query): RawQuery,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    // A path segment that does not decode names no agent.
    let agent = agent.map(|Path(agent)| agent).unwrap_or_default();
    match admit(&state, &agent, raw_query.as_deref(), &headers).await {
        Ok(params) => open_socket(&state, upgrade, move |socket, slot| {
            gnosari_connection::run(socket, slot, params)
        }),
        Err(refusal) => refusal.into_response(),
    }
}

async fn admit(
    state: &AppState,
    agent_name: &str,
    raw_query: Option<&str>,
    headers: &HeaderMap,
) -> Result<GnosariParams, Refusal> {
    check_capacity(state)?;
    if state.lifecycle.is_draining() {
        return Err(Refusal(StatusCode::SERVICE_UNAVAILABLE, "server draining"));
    }
    let agent: Arc<AgentEntry> = state
        .agents
        .get(agent_name)
        .cloned()
        .ok_or(Refusal(StatusCode::NOT_FOUND, "agent not found"))?;
    let query = QueryParams::parse(raw_query);
    let credentials = credentials(headers, &query);
    let caller = identity::identify(state, &credentials, &agent).await?;
    if !origin_allowed(&state.settings.allowed_origins, headers) {
        return Err(Refusal(StatusCode::FORBIDDEN, "Forbidden"));
    }
    Ok(GnosariParams { agent, caller })
}

/// The contract's three credential forms; a header wins over its query
/// parameter (behaviour notes §5.3). Empty values are no credential.
fn credentials<'a>(headers: &'a HeaderMap, query: &'a QueryParams) -> Credentials<'a> {
    let param = |name: &str| query.first(name).filter(|v| !v.is_empty());
    Credentials {
        bearer: identity::bearer(headers).or_else(|| param("token")),
        api_key: header(headers, API_KEY_HEADER).or_else(|| param("api_key")),
        password: header(headers, PASSWORD_HEADER).or_else(|| param("password")),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)?
        .to_str()
        .ok()
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, value.parse().unwrap());
        }
        h
    }

    #[test]
    fn query_forms() {
        let h = HeaderMap::new();
        let q = QueryParams::parse(Some("token=t1&api_key=k1&password=p%20w"));
        let c = credentials(&h, &q);
        assert_eq!(
            (c.bearer, c.api_key, c.password),
            (Some("t1"), Some("k1"), Some("p w"))
        );
    }

    #[test]
    fn header_forms_win_over_the_query() {
        let h = headers(&[
            ("authorization", "Bearer t2"),
            ("X-Auth-Token", "k2"),
            ("x-access-password", "p2"),
        ]);
        let q = QueryParams::parse(Some("token=t1&api_key=k1&password=p1"));
        let c = credentials(&h, &q);
        assert_eq!(
            (c.bearer, c.api_key, c.password),
            (Some("t2"), Some("k2"), Some("p2"))
        );
    }

    #[test]
    fn empty_values_are_no_credential() {
        let h = headers(&[("x-auth-token", "")]);
        let q = QueryParams::parse(Some("token=&password="));
        let c = credentials(&h, &q);
        assert!(c.is_empty());
    }
}

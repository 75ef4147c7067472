//! The `/ws` upgrade (Omnia): the checks in the Omnia reference's order,
//! each refusal a short plain-text body before a socket exists.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use agentwire_core::Credentials;

use super::connection::{self, ConnectionParams};
use crate::call::{hop, relay};
use crate::connection::RejoinAt;
use crate::identity;
use crate::query::QueryParams;
use crate::trace;
use crate::upgrade::{ClientAddress, Refusal, check_capacity, open_socket, origin_allowed};
use crate::websocket::{WebSocketUpgrade, WebSocketUpgradeRejection};
use crate::{AgentEntry, AppState};

pub(crate) async fn ws_upgrade(
    State(state): State<Arc<AppState>>,
    RawQuery(raw_query): RawQuery,
    headers: HeaderMap,
    address: ClientAddress,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let span = trace::upgrade_span("omnia", "/ws", &headers);
    let query = raw_query.as_deref().unwrap_or_default();
    let admitted = admit(&state, raw_query.as_deref(), &headers, address)
        .instrument(span.clone())
        .await;
    let admitted = match admitted {
        Ok(admitted) => admitted,
        Err(refusal) => return recorded(&span, refusal.into_response()),
    };
    // A resume of a call another replica holds: relayed there.
    let hop = hop::towards_holder(
        &state,
        admitted.resume_call.as_ref(),
        admitted.caller.owner.as_deref(),
        query,
        &headers,
        address,
    )
    .instrument(span.clone())
    .await;
    let response = match hop {
        Some(hop) => open_socket(&state, upgrade, address, &span, move |socket, slot| {
            relay::run(socket, slot, hop)
        }),
        None => open_socket(&state, upgrade, address, &span, move |socket, slot| {
            connection::run(socket, slot, admitted)
        }),
    };
    recorded(&span, response)
}

/// A hop from another replica (`call::hop`) for the call parked here: the
/// client's request as that replica received it, admitted again as if the
/// client had come here, and upgraded only while the call it resumes is
/// parked here for the same owner. Anything else is 404, as a path not
/// served; a hop never hops on.
pub(crate) async fn hop_upgrade(
    State(state): State<Arc<AppState>>,
    RawQuery(raw_query): RawQuery,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let span = trace::upgrade_span("omnia", hop::HOP_PATH, &headers);
    let query = raw_query.as_deref().unwrap_or_default();
    let Some(address) = hop::verify(&state, query, &headers) else {
        return recorded(&span, StatusCode::NOT_FOUND.into_response());
    };
    let admitted = admit(&state, raw_query.as_deref(), &headers, address)
        .instrument(span.clone())
        .await;
    let response = match admitted {
        Ok(admitted) if parked_here(&state, &admitted) => {
            open_socket(&state, upgrade, address, &span, move |socket, slot| {
                connection::run(socket, slot, admitted)
            })
        }
        Ok(_) => StatusCode::NOT_FOUND.into_response(),
        Err(refusal) => refusal.into_response(),
    };
    recorded(&span, response)
}

/// Whether the call the connection resumes is parked here for its caller.
fn parked_here(state: &AppState, admitted: &ConnectionParams) -> bool {
    match (&admitted.resume_call, admitted.caller.owner.as_deref()) {
        (Some(session), Some(owner)) => state.calls().is_parked(session, owner),
        _ => false,
    }
}

fn recorded(span: &tracing::Span, response: Response) -> Response {
    span.record("http.response.status_code", response.status().as_u16());
    response
}

/// The checks in the Omnia reference's order (§2.2), then ours.
async fn admit(
    state: &AppState,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    address: ClientAddress,
) -> Result<ConnectionParams, Refusal> {
    check_capacity(state)?;
    let lifecycle = &state.lifecycle();
    let query = QueryParams::parse(raw_query);
    let agent_name = query.first("agent").filter(|a| !a.is_empty());
    let Some(agent_name) = agent_name else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "agent parameter is required",
        ));
    };
    let resume = query.first("resume").filter(|r| !r.is_empty());
    if lifecycle.is_draining() && resume.is_none() {
        return Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server draining",
        ));
    }
    let agent: Arc<AgentEntry> = state
        .agent(agent_name)
        .cloned()
        .ok_or(Refusal::new(StatusCode::NOT_FOUND, "agent not found"))?;
    let credentials = Credentials {
        bearer: identity::bearer(headers),
        ..Credentials::default()
    };
    let caller = identity::identify(state, &credentials, &agent, address).await?;
    if !origin_allowed(&state.settings().allowed_origins, headers) {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "Forbidden"));
    }
    let memory_facet = memory_facet(&query, agent.memory_facet.as_deref())?;
    let positions = query.wants_positions();
    let rejoin = resume.filter(|_| positions).map(|session| RejoinAt {
        session: session.to_owned(),
        position: query.log_position(),
    });
    Ok(ConnectionParams {
        positions,
        rejoin,
        resume_call: resume.and_then(|s| agentwire_core::SessionId::parse(s).ok()),
        resume_asked: resume.is_some(),
        agent,
        namespace: query
            .first("namespace")
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
            .to_owned(),
        binary: query.first("binary") == Some("true"),
        memory_facet,
        caller,
    })
}

/// `memory_facet`: optional, at most once, `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`.
/// An agent scoped to a facet uses it when none is named and refuses another.
fn memory_facet(query: &QueryParams, agents: Option<&str>) -> Result<Option<String>, Refusal> {
    let invalid = || Refusal::new(StatusCode::BAD_REQUEST, "invalid memory_facet");
    match query.count("memory_facet") {
        0 => return Ok(agents.map(str::to_owned)),
        1 => {}
        _ => return Err(invalid()),
    }
    let facet = query.first("memory_facet").unwrap_or_default();
    let bytes = facet.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'));
    if !valid {
        return Err(invalid());
    }
    match agents {
        Some(own) if own != facet => Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "memory_facet not allowed",
        )),
        _ => Ok(Some(facet.to_owned())),
    }
}

//! The agent cards, and the list of agents A2A serves.

use std::sync::Arc;

use agentwire_a2a::card::{AgentCard, Bearer, Skill};
use agentwire_core::AccessLevel;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{a2a_agent, json_response};
use crate::{AgentEntry, AppState};

/// Which shape of card to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    V1_0,
    V0_3,
}

/// v0.3's shape when the request asks for it (`A2A-Version: 0.3`); else
/// v1.0's. A missing header means v1.0 here, unlike on the JSON-RPC
/// endpoint: the card is how a client finds out which versions there are.
fn shape(headers: &HeaderMap) -> Shape {
    let asked = headers.get("a2a-version").and_then(|v| v.to_str().ok());
    match asked.map(str::trim) {
        Some(v) if v == "0.3" || v.starts_with("0.3.") => Shape::V0_3,
        _ => Shape::V1_0,
    }
}

/// `GET /a2a/{agent}/.well-known/agent-card.json`.
pub(super) async fn card(
    State(state): State<Arc<AppState>>,
    Path(agent): Path<String>,
    headers: HeaderMap,
) -> Response {
    match a2a_agent(&state, &agent) {
        Some(entry) => card_response(&state, entry, shape(&headers)),
        None => (StatusCode::NOT_FOUND, "agent not found").into_response(),
    }
}

/// `GET /a2a/{agent}/.well-known/agent-card-v0.3.json`: the card in v0.3's
/// shape, for clients of that generation alone.
pub(super) async fn card_v0_3(
    State(state): State<Arc<AppState>>,
    Path(agent): Path<String>,
) -> Response {
    match a2a_agent(&state, &agent) {
        Some(entry) => card_response(&state, entry, Shape::V0_3),
        None => (StatusCode::NOT_FOUND, "agent not found").into_response(),
    }
}

/// `GET /.well-known/agent-card.json`: the card of the one agent A2A
/// serves; with several, 404 naming the list (`/a2a`).
pub(super) async fn root_card(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let mut served = state.agents().filter(|(_, a)| a.facades.a2a.is_some());
    match (served.next(), served.next()) {
        (Some((_, entry)), None) => card_response(&state, entry, shape(&headers)),
        _ => (
            StatusCode::NOT_FOUND,
            "no single A2A agent: GET /a2a lists each agent's card",
        )
            .into_response(),
    }
}

/// `GET /a2a`: `{"agents": [{"name", "url", "card_url", "card_url_v0_3"}]}`,
/// by name.
pub(super) async fn list(State(state): State<Arc<AppState>>) -> Response {
    let base = state.public_base_url();
    let mut agents: Vec<_> = state
        .agents()
        .filter(|(_, a)| a.facades.a2a.is_some())
        .map(|(name, _)| name.as_str())
        .collect();
    agents.sort_unstable();
    let agents: Vec<_> = agents
        .into_iter()
        .map(|name| {
            json!({
                "name": name,
                "url": format!("{base}/a2a/{name}"),
                "card_url": format!("{base}/a2a/{name}/.well-known/agent-card.json"),
                "card_url_v0_3": format!("{base}/a2a/{name}/.well-known/agent-card-v0.3.json"),
            })
        })
        .collect();
    json_response(json!({ "agents": agents }).to_string())
}

fn card_response(state: &AppState, entry: &AgentEntry, shape: Shape) -> Response {
    let Some(a2a) = &entry.facades.a2a else {
        return (StatusCode::NOT_FOUND, "agent not found").into_response();
    };
    let url = format!("{}/a2a/{}", state.public_base_url(), entry.agent.name);
    let bearer = match (state.identity().authenticator.is_some(), entry.access_level) {
        (false, _) => Bearer::None,
        (true, AccessLevel::Public) => Bearer::Accepted,
        (true, AccessLevel::Private) => Bearer::Required,
    };
    let card = AgentCard {
        name: &entry.agent.name,
        description: &a2a.description,
        version: &a2a.version,
        url: &url,
        skills: a2a
            .skills
            .iter()
            .map(|s| Skill {
                id: &s.id,
                name: &s.name,
                description: &s.description,
                tags: &s.tags,
                examples: &s.examples,
            })
            .collect(),
        push_notifications: false,
        bearer,
    };
    let json = match shape {
        Shape::V1_0 => card.to_json(),
        Shape::V0_3 => card.to_json_v0_3(),
    };
    json_response(json.to_string())
}

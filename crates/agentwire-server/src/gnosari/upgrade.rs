//! The Gnosari upgrades, `GET /ws/agent/{agent}`, `GET /ws/team/{team}` and
//! `GET /ws/team/{team}/agent/{agent}`: every refusal happens here, before a
//! socket exists, with the same short plain-text bodies as `/ws`.
//!
//! Order: shut down or at the connection limit (503), draining (503), unknown
//! agent, team or member (404), credentials (401 missing or refused, 403 not
//! admitted), origin (403). A member is named by its id, then its name.

use std::sync::Arc;

use agentwire_core::{AccessLevel, Credentials};
use axum::extract::rejection::PathRejection;
use axum::extract::{MatchedPath, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::connection::{self, GnosariParams};
use crate::connection::RejoinAt;
use crate::identity::{self, Gate};
use crate::query::QueryParams;
use crate::trace;
use crate::upgrade::{ClientAddress, Refusal, check_capacity, open_socket, origin_allowed};
use crate::websocket::{WebSocketUpgrade, WebSocketUpgradeRejection};
use crate::{AgentEntry, AppState, TeamEntry, TeamMember};

/// The API key header; header names are matched case-insensitively, so the
/// engine's `X-Auth-Token` spelling works too.
const API_KEY_HEADER: &str = "x-auth-token";
const PASSWORD_HEADER: &str = "x-access-password";

/// The Gnosari routes; one handler, [`ws_upgrade`], serves all three.
pub(crate) const AGENT_ROUTE: &str = "/ws/agent/{agent}";
/// The team's orchestrator answers.
pub(crate) const TEAM_ROUTE: &str = "/ws/team/{team}";
/// One member of the team answers.
pub(crate) const MEMBER_ROUTE: &str = "/ws/team/{team}/agent/{agent}";

/// The names a Gnosari route's path carries.
#[derive(Default, serde::Deserialize)]
pub(crate) struct PathNames {
    #[serde(default)]
    team: String,
    #[serde(default)]
    agent: String,
}

/// The upgrade of every Gnosari route ([`AGENT_ROUTE`], [`TEAM_ROUTE`],
/// [`MEMBER_ROUTE`]): the route it matched says what the path names.
pub(crate) async fn ws_upgrade(
    State(state): State<Arc<AppState>>,
    route: MatchedPath,
    names: Result<Path<PathNames>, PathRejection>,
    RawQuery(raw_query): RawQuery,
    headers: HeaderMap,
    address: ClientAddress,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    // A path segment that does not decode names nothing: 404.
    let names = names.map(|Path(names)| names).unwrap_or_default();
    let target = match route.as_str() {
        TEAM_ROUTE => Target::Team(&names.team),
        MEMBER_ROUTE => Target::Member {
            team: &names.team,
            agent: &names.agent,
        },
        _ => Target::Agent(&names.agent),
    };
    upgrade_to(
        &state,
        target,
        raw_query.as_deref(),
        &headers,
        address,
        upgrade,
    )
    .await
}

/// What a Gnosari path names.
#[derive(Clone, Copy)]
enum Target<'a> {
    Agent(&'a str),
    Team(&'a str),
    Member { team: &'a str, agent: &'a str },
}

impl Target<'_> {
    /// The route that names it, for the upgrade's span.
    fn route(self) -> &'static str {
        match self {
            Target::Agent(_) => AGENT_ROUTE,
            Target::Team(_) => TEAM_ROUTE,
            Target::Member { .. } => MEMBER_ROUTE,
        }
    }
}

async fn upgrade_to(
    state: &Arc<AppState>,
    target: Target<'_>,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    address: ClientAddress,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let span = trace::upgrade_span("gnosari", target.route(), headers);
    let admitted = admit(state, target, raw_query, headers, address)
        .instrument(span.clone())
        .await;
    let response = match admitted {
        Ok(params) => open_socket(state, upgrade, address, &span, move |socket, slot| {
            connection::run(socket, slot, params)
        }),
        Err(refusal) => refusal.into_response(),
    };
    span.record("http.response.status_code", response.status().as_u16());
    response
}

async fn admit(
    state: &AppState,
    target: Target<'_>,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    address: ClientAddress,
) -> Result<GnosariParams, Refusal> {
    check_capacity(state)?;
    if state.lifecycle().is_draining() {
        return Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server draining",
        ));
    }
    let agent_not_found = Refusal::new(StatusCode::NOT_FOUND, "agent not found");
    let team_entry: Arc<TeamEntry>;
    let agent_entry: Arc<AgentEntry>;
    let (agent, agent_name, gate) = match target {
        Target::Agent(name) => {
            agent_entry = state.agent(name).cloned().ok_or(agent_not_found)?;
            let agent = agent_entry.agent.clone();
            (agent.clone(), agent.name.clone(), Gate::agent(&agent_entry))
        }
        Target::Team(team) | Target::Member { team, .. } => {
            team_entry = state
                .team(team)
                .cloned()
                .ok_or(Refusal::new(StatusCode::NOT_FOUND, "team not found"))?;
            let member = match target {
                Target::Member { agent, .. } => team_entry.member(agent).ok_or(agent_not_found)?,
                _ => &team_entry.orchestrator,
            };
            let gate = team_gate(&team_entry, member);
            (member.agent.clone(), member.name.clone(), gate)
        }
    };
    let query = QueryParams::parse(raw_query);
    let credentials = credentials(headers, &query);
    let caller = identity::identify_at(state, &credentials, &gate, address).await?;
    if !origin_allowed(&state.settings().allowed_origins, headers) {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "Forbidden"));
    }
    let positions = query.wants_positions();
    let rejoin = query
        .first("session_id")
        .filter(|s| positions && !s.is_empty())
        .map(|session| RejoinAt {
            session: session.to_owned(),
            position: query.log_position(),
        });
    Ok(GnosariParams {
        agent,
        agent_name,
        caller,
        positions,
        rejoin,
    })
}

/// A team endpoint admits as the team does (its name in allow-lists, its
/// password), and is private when the team or the answering member is
/// (behaviour notes §5.4: a stricter agent setting also applies).
fn team_gate<'a>(team: &'a TeamEntry, member: &TeamMember) -> Gate<'a> {
    let private =
        team.access_level == AccessLevel::Private || member.access_level == AccessLevel::Private;
    Gate {
        name: &team.name,
        access_level: if private {
            AccessLevel::Private
        } else {
            AccessLevel::Public
        },
        password_argon2: team.password_argon2.as_deref(),
    }
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

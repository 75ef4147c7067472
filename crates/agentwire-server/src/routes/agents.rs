//! `GET /api/v1/agents`: the agents `/ws` serves, with what a client needs
//! to pick one and connect, and nothing secret (no password, key, facet,
//! provider or instructions):
//!
//! `{"agents": [{"name": "demo", "access_level": "public",
//! "credential_required": false, "ai_disclosure": null, "voice": false,
//! "memory": null, "a2a_card": null, "mcp_tool": null, "function": null,
//! "pack": null}], "media": true}`
//!
//! sorted by name. `credential_required` is whether `/ws` refuses a caller
//! without a credential (a private agent); `media` whether uploads
//! (`upload_request`, `/media/*`) are enabled; `voice` whether the agent
//! takes voice calls (`agents[].voice`); `memory` the caller tier its memory
//! tools write to (`"caller_agent"` or `"caller"`, `agents[].memory.tier`),
//! `null` when it has none; `a2a_card` the path of its A2A card, `mcp_tool`
//! its tool's name on `/mcp`, `function` its REST function's path, each
//! `null` when that front door does not serve it; `pack` a pack agent's pack
//! and its latest compile (`{"id", "version", "prompt", "compile":
//! "at_startup"|"per_session", "compiles", "error", "warnings"}`; `id`,
//! `version` and `prompt` from the latest compile that succeeded, `error`
//! `null` when the latest one did), `null` for other agents. Answers carry
//! `Cache-Control: no-store`; other methods are 405.

use std::sync::Arc;

use agentwire_core::AccessLevel;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use crate::{AppState, PackReport};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route(
        "/api/v1/agents",
        get(list).fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                [
                    (header::ALLOW, "GET"),
                    (header::CONTENT_TYPE, "application/json"),
                ],
                r#"{"error":"method not allowed"}"#,
            )
        }),
    )
}

#[derive(Serialize)]
struct Listing<'a> {
    agents: Vec<AgentInfo<'a>>,
    media: bool,
}

#[derive(Serialize)]
struct AgentInfo<'a> {
    name: &'a str,
    access_level: &'static str,
    credential_required: bool,
    ai_disclosure: Option<bool>,
    voice: bool,
    memory: Option<&'static str>,
    /// The agent's A2A card, when A2A serves it.
    a2a_card: Option<String>,
    /// The agent's tool on `/mcp`, when MCP offers it.
    mcp_tool: Option<String>,
    /// The agent's REST function, when it is one.
    function: Option<String>,
    /// A pack agent's pack and its latest compile.
    pack: Option<PackInfo>,
}

#[derive(Serialize)]
struct PackInfo {
    id: Option<String>,
    version: Option<String>,
    prompt: Option<String>,
    compile: &'static str,
    compiles: u64,
    error: Option<String>,
    warnings: Vec<String>,
}

impl From<PackReport> for PackInfo {
    fn from(report: PackReport) -> PackInfo {
        PackInfo {
            id: report.id,
            version: report.version,
            prompt: report.prompt,
            compile: report.compile,
            compiles: report.compiles,
            error: report.error,
            warnings: report.warnings,
        }
    }
}

async fn list(State(state): State<Arc<AppState>>) -> Response {
    let mut agents: Vec<AgentInfo<'_>> = state
        .agents()
        .map(|(_, entry)| AgentInfo {
            name: &entry.agent.name,
            access_level: match entry.access_level {
                AccessLevel::Public => "public",
                AccessLevel::Private => "private",
            },
            credential_required: entry.access_level == AccessLevel::Private,
            ai_disclosure: entry.ai_disclosure(),
            voice: entry.voice.is_some(),
            memory: entry.memory_tier.map(|tier| tier.as_str()),
            a2a_card: entry
                .facades
                .a2a
                .as_ref()
                .map(|_| format!("/a2a/{}/.well-known/agent-card.json", entry.agent.name)),
            mcp_tool: entry
                .facades
                .mcp
                .as_ref()
                .map(|_| format!("ask_{}", entry.agent.name)),
            function: entry
                .facades
                .function
                .as_ref()
                .map(|_| format!("/functions/{}", entry.agent.name)),
            pack: entry.pack.as_ref().map(|p| PackInfo::from(p.report())),
        })
        .collect();
    agents.sort_by(|a, b| a.name.cmp(b.name));
    let body = serde_json::to_string(&Listing {
        agents,
        media: state.media().is_some(),
    })
    .expect("the listing serializes");
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

//! The memories API: what the agents remember about the caller, for the
//! caller to read, take away and delete (a data subject's rights).
//!
//! - `GET /api/v1/memories[?agent=A][&memory_facet=F][&limit=N][&offset=M]`:
//!   the caller's live memories, every agent and facet (or one), newest
//!   first: `{"memories": [...], "next_offset": M|null}`. `limit` defaults
//!   to 20; values above 100 are taken as 100. `memory_facet=` (empty) is
//!   the memories without a facet.
//! - `GET /api/v1/memories/{id}`: one memory.
//! - `DELETE /api/v1/memories/{id}`: deletes it for good (forgotten or not,
//!   with the versions it replaced) → 204.
//! - `DELETE /api/v1/memories`: deletes every memory the caller owns, in
//!   one transaction, recorded in the store's audit table (who, how many,
//!   when) → `{"deleted": N}`.
//! - `GET /api/v1/memories/export`: every live memory, one JSON object a
//!   line (`application/x-ndjson`).
//! - `POST /api/v1/memories/import`: such lines back, each remembered in the
//!   caller's memory (new ids; a line about the same subject as a memory
//!   replaces it) → `{"imported": N}`; a bad line refuses the whole body
//!   (400 `invalid line N: ...`, never quoting it), nothing stored.
//!
//! A memory is `{id, tier, agent?, memory_facet?, type, content, metadata,
//! confidence, category?, about_kind?, about_key?, purpose?, title?,
//! summary?, session_id?, created_at, updated_at, expires_at?}` (RFC 3339
//! times). Credentials and errors as the sessions API's (`api.rs`): an
//! anonymous caller owns no memory (lists nothing; importing is 403
//! `memory needs an identified caller`); another owner's memory is 404
//! `memory not found`, as a missing one is. The agents' own memories are
//! not the callers'.

use std::sync::Arc;

use agentwire_core::memory::MAX_READ;
use agentwire_core::{
    About, AgentMemory, Fact, Memory, MemoryError, MemoryScope, MemoryTier, NewMemory, Owned,
    Timestamp, TurnCaller,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::AppState;
use crate::query::QueryParams;
use crate::routes::api::{ApiError, Caller, INTERNAL, json, method_not_allowed};

/// Memories per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest import body.
pub const MAX_IMPORT_BYTES: usize = 16 * 1024 * 1024;
/// The longest fact a line may hold, as the tools' (bytes).
const MAX_CONTENT_BYTES: usize = 32 * 1024;

const NOT_FOUND: ApiError = ApiError::new(StatusCode::NOT_FOUND, "memory not found");
const NO_MEMORY: ApiError = ApiError::new(StatusCode::NOT_FOUND, "memory is not enabled");
const ANONYMOUS: ApiError =
    ApiError::new(StatusCode::FORBIDDEN, "memory needs an identified caller");
const INVALID_LIMIT: ApiError = ApiError::new(StatusCode::BAD_REQUEST, "invalid limit");
const INVALID_OFFSET: ApiError = ApiError::new(StatusCode::BAD_REQUEST, "invalid offset");

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/api/v1/memories",
            get(list)
                .delete(delete_all)
                .fallback(|| async { method_not_allowed("GET, DELETE") }),
        )
        .route(
            "/api/v1/memories/export",
            get(export).fallback(|| async { method_not_allowed("GET") }),
        )
        .route(
            "/api/v1/memories/import",
            post(import)
                .layer(DefaultBodyLimit::max(MAX_IMPORT_BYTES))
                .fallback(|| async { method_not_allowed("POST") }),
        )
        .route(
            "/api/v1/memories/{id}",
            get(show)
                .delete(delete_one)
                .fallback(|| async { method_not_allowed("GET, DELETE") }),
        )
}

fn store_failed(e: MemoryError) -> ApiError {
    tracing::error!(error = %e, "memory store failed");
    INTERNAL
}

fn memories(state: &AppState) -> Result<&Arc<dyn AgentMemory>, ApiError> {
    state.memories().ok_or(NO_MEMORY)
}

/// A memory as this API shows it.
#[derive(Serialize, Deserialize)]
struct MemoryJson {
    #[serde(default, skip_deserializing)]
    id: String,
    tier: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    agent: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    memory_facet: String,
    #[serde(rename = "type", default = "general")]
    kind: String,
    content: String,
    #[serde(default)]
    metadata: Map<String, Value>,
    #[serde(default = "default_confidence")]
    confidence: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    about_kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    about_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(default, skip_deserializing)]
    created_at: String,
    #[serde(default, skip_deserializing)]
    updated_at: String,
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
}

fn general() -> String {
    "general".to_owned()
}

fn default_confidence() -> f64 {
    0.8
}

fn rfc3339(at: Timestamp) -> String {
    at.to_utc().to_string()
}

impl MemoryJson {
    fn of(memory: Memory) -> MemoryJson {
        let Memory {
            id,
            scope,
            fact,
            session_id,
            created_at,
            updated_at,
            expires_at,
        } = memory;
        let (about_kind, about_key) = fact.about.map(|a| (a.kind, a.key)).unzip();
        MemoryJson {
            id,
            tier: scope.tier().as_str().to_owned(),
            agent: scope.agent().to_owned(),
            memory_facet: scope.facet().to_owned(),
            kind: fact.kind,
            content: fact.content,
            metadata: fact.metadata,
            confidence: fact.confidence,
            category: fact.category,
            about_kind,
            about_key,
            purpose: fact.purpose,
            title: fact.title,
            summary: fact.summary,
            session_id: session_id.map(|id| id.as_str().to_owned()),
            created_at: rfc3339(created_at),
            updated_at: rfc3339(updated_at),
            expires_at: expires_at.map(rfc3339),
        }
    }

    /// The line as a memory of `owner`'s, or what is wrong with it (never
    /// quoting it).
    fn into_new(self, owner: &str, id: String, now: Timestamp) -> Result<NewMemory, String> {
        let tier = match MemoryTier::parse(&self.tier) {
            Some(tier @ (MemoryTier::CallerWithAgent | MemoryTier::Caller)) => tier,
            _ => return Err("tier must be caller_agent or caller".to_owned()),
        };
        if tier == MemoryTier::CallerWithAgent && self.agent.is_empty() {
            return Err("a caller_agent memory needs its agent".to_owned());
        }
        if self.content.trim().is_empty() || self.content.len() > MAX_CONTENT_BYTES {
            return Err(format!("content must be 1 to {MAX_CONTENT_BYTES} bytes"));
        }
        if !(0.0..=1.0).contains(&self.confidence) {
            return Err("confidence must be a number from 0 to 1".to_owned());
        }
        let about = match (self.about_kind, self.about_key) {
            (Some(kind), Some(key)) => Some(About { kind, key }),
            (None, None) => None,
            _ => return Err("about_kind and about_key go together".to_owned()),
        };
        let caller = TurnCaller {
            owner: Some(owner.to_owned()),
            memory_facet: (!self.memory_facet.is_empty()).then_some(self.memory_facet),
        };
        let scope = MemoryScope::new(tier, &caller, &self.agent).map_err(|e| e.to_string())?;
        let fact = Fact {
            kind: self.kind,
            content: self.content,
            metadata: self.metadata,
            confidence: self.confidence,
            category: self.category,
            about,
            purpose: self.purpose,
            title: self.title,
            summary: self.summary,
        };
        Ok(NewMemory {
            id,
            scope,
            fact,
            session_id: None,
            now,
            expires_at: None,
            // Vectors are not exported: an imported memory is found by its
            // words until it is written again.
            vector: None,
        })
    }
}

/// `?name=` as a count of at most `max`; absent: `default`.
fn count(query: &QueryParams, name: &str, default: usize, max: usize) -> Option<usize> {
    match query.first(name) {
        None => Some(default),
        Some(text) => text.parse::<usize>().ok().map(|n| n.min(max)),
    }
}

async fn list(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
    RawQuery(raw_query): RawQuery,
) -> Result<Response, ApiError> {
    let store = memories(&state)?;
    let query = QueryParams::parse(raw_query.as_deref());
    let limit = count(&query, "limit", DEFAULT_LIMIT, MAX_READ)
        .filter(|n| *n > 0)
        .ok_or(INVALID_LIMIT)?;
    // The stores' OFFSET is a signed 64-bit number: past it, nothing is left.
    let offset = count(&query, "offset", 0, i64::MAX as usize).ok_or(INVALID_OFFSET)?;
    let owner = owner.unwrap_or_default();
    let page = Owned {
        owner: &owner,
        agent: query.first("agent"),
        facet: query.first("memory_facet"),
        id: None,
        limit,
        offset,
        now: state.engine().clock().now(),
    };
    let found = store.owned(&page).await.map_err(store_failed)?;
    let next_offset = (found.len() == limit).then(|| offset.saturating_add(limit));
    #[derive(Serialize)]
    struct Page {
        memories: Vec<MemoryJson>,
        next_offset: Option<usize>,
    }
    let memories = found.into_iter().map(MemoryJson::of).collect();
    Ok(json(
        StatusCode::OK,
        &Page {
            memories,
            next_offset,
        },
    ))
}

/// The caller's live memory `id`.
async fn find(state: &AppState, owner: Option<String>, id: &str) -> Result<Memory, ApiError> {
    let store = memories(state)?;
    let owner = owner.ok_or(NOT_FOUND)?;
    let page = Owned {
        owner: &owner,
        agent: None,
        facet: None,
        id: Some(id),
        limit: 1,
        offset: 0,
        now: state.engine().clock().now(),
    };
    let found = store.owned(&page).await.map_err(store_failed)?;
    found.into_iter().next().ok_or(NOT_FOUND)
}

async fn show(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let memory = find(&state, owner, &id).await?;
    Ok(json(StatusCode::OK, &MemoryJson::of(memory)))
}

async fn delete_one(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let store = memories(&state)?;
    let owner = owner.ok_or(NOT_FOUND)?;
    match store
        .delete_owned(&owner, &id)
        .await
        .map_err(store_failed)?
    {
        true => Ok(StatusCode::NO_CONTENT.into_response()),
        false => Err(NOT_FOUND),
    }
}

async fn delete_all(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
) -> Result<Response, ApiError> {
    let store = memories(&state)?;
    let deleted = match owner {
        Some(owner) => {
            let now = state.engine().clock().now();
            let deleted = store.delete_all_owned(&owner, now).await;
            deleted.map_err(store_failed)?
        }
        None => 0,
    };
    tracing::info!(deleted, "an owner deleted all their memories");
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({"deleted": deleted}),
    ))
}

async fn export(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
) -> Result<Response, ApiError> {
    let store = memories(&state)?;
    let owner = owner.unwrap_or_default();
    let now = state.engine().clock().now();
    let mut lines = String::new();
    let mut offset = 0;
    loop {
        let page = Owned {
            owner: &owner,
            agent: None,
            facet: None,
            id: None,
            limit: MAX_READ,
            offset,
            now,
        };
        let found = store.owned(&page).await.map_err(store_failed)?;
        let last = found.len() < MAX_READ;
        for memory in found {
            let line = serde_json::to_string(&MemoryJson::of(memory)).expect("memories serialize");
            lines.push_str(&line);
            lines.push('\n');
        }
        if last {
            break;
        }
        offset += MAX_READ;
    }
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    Ok((StatusCode::OK, headers, lines).into_response())
}

/// A refused line: 400 `invalid line N: <why>`.
fn invalid_line(number: usize, why: &str) -> Response {
    let body = serde_json::json!({"error": format!("invalid line {number}: {why}")});
    json(StatusCode::BAD_REQUEST, &body)
}

async fn import(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    let store = memories(&state)?;
    let owner = owner.ok_or(ANONYMOUS)?;
    let Ok(text) = std::str::from_utf8(&body) else {
        return Ok(invalid_line(1, "not UTF-8"));
    };
    let now = state.engine().clock().now();
    let mut parsed = Vec::new();
    for (index, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let number = index + 1;
        let Ok(line) = serde_json::from_str::<MemoryJson>(line) else {
            return Ok(invalid_line(number, "not a memory object"));
        };
        match line.into_new(&owner, state.engine().new_call_id(), now) {
            Ok(memory) => parsed.push(memory),
            Err(why) => return Ok(invalid_line(number, &why)),
        }
    }
    let imported = parsed.len();
    for memory in parsed {
        store.remember(memory).await.map_err(store_failed)?;
    }
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({"imported": imported}),
    ))
}

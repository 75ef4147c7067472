//! The sessions API: a caller's sessions of both dialects, as JSON.
//!
//! - `GET /api/v1/sessions[?limit=N][&cursor=C]`: the caller's sessions,
//!   most recently active first: `{"sessions": [...], "next_cursor": C|null}`.
//!   `limit` defaults to 20; values above 100 are taken as 100. The cursor is
//!   opaque: pass the previous page's `next_cursor` back; `null` means there
//!   is no further page.
//! - `GET /api/v1/sessions/{id}`: one session, `{id, agent, created_at,
//!   last_active_at, summary?: {text, created_at}}`.
//! - `GET /api/v1/sessions/{id}/messages[?limit=N][&after=SEQ]`:
//!   `{"messages": [{seq, role, content, created_at, metadata?}],
//!   "next_after": SEQ|null}`: user and assistant messages (interim text
//!   too, with `metadata.step: "interim"`) and tool steps (`role: "tool"`,
//!   `content` the step as an object: `{"call": {id, name, arguments,
//!   side}}` or `{"result": {id, status, value}}`), by `seq`. Events (such
//!   as a disclosure acknowledgement) and failure notices are left out, so
//!   `seq` can skip; media parts and attachments (and the key stores keep
//!   an attachment under, `gnosari_asset_id`) are never shown. A message
//!   spoken in a voice call has `metadata.via: "voice"`, a reply cut short
//!   `metadata.cancelled: "true"` (a cancelled turn) or
//!   `metadata.interrupted: "true"` (a barge-in). A page is the `limit` stored
//!   messages (default 100; values above 500 are taken as 500) after the
//!   `seq` `after` (from the first when absent), so it is read from the
//!   store alone, never the whole session, and may show fewer than `limit`
//!   when some of them are not shown. `next_after` is the `seq` to pass as
//!   `after` for the next page, `null` on the last; a client that has seen
//!   up to some `seq` can also ask for what came after it.
//! - `DELETE /api/v1/sessions/{id}`: deletes the session, its messages and
//!   its summary → 204; 409 while a turn runs on it.
//!
//! **Who sees what.** The credential is `Authorization: Bearer` (a JWT or an
//! API key), `X-AUTH-TOKEN` or `?api_key=` (an API key), identified like the
//! sockets' credentials and turned into the same owner pseudonym. A session
//! is visible only to its owner: another owner's session answers 404, as a
//! missing one does. Without a credential: 401 when unauthenticated callers
//! are not allowed; otherwise the caller is anonymous, lists nothing, and
//! reaches an anonymous session only by its id (the id is what resumes it
//! over a socket too). A refused credential is always 401.
//!
//! Every answer is JSON with `Cache-Control: no-store`; a failure is
//! `{"error": "..."}`: 400 `invalid limit` / `invalid cursor` / `invalid
//! after`, 401
//! `unauthorized`, 404 `session not found`, 405 `method not allowed` (with
//! `Allow`), 409 `a turn is running on this session`, 500 `internal server
//! error`.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentwire_core::{
    MessageBody, ReplyEnd, SessionCursor, SessionId, SessionOverview, SessionRecord,
    SessionSummary, StoreError, StoredMessage, Timestamp, ToolOutcome, ToolSide, Via,
};
use agentwire_engine::DeleteError;
use axum::Router;
use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use serde_json::Value;

use crate::AppState;
use crate::query::QueryParams;
use crate::routes::api::{ApiError, Caller, INTERNAL, json, method_not_allowed};

/// Sessions per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest page; a larger `limit` is taken as this.
pub const MAX_LIMIT: usize = 100;

/// Stored messages per page of a session's messages when `limit` is not
/// given.
pub const DEFAULT_MESSAGES_LIMIT: usize = 100;
/// The largest page of a session's messages; a larger `limit` is taken as
/// this.
pub const MAX_MESSAGES_LIMIT: usize = 500;

/// Metadata keys never shown: the one stores keep an attachment under
/// (admission drops a client's; an old row's odd value stays hidden).
const HIDDEN_METADATA: &[&str] = &["gnosari_asset_id"];

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/api/v1/sessions",
            get(list).fallback(|| async { method_not_allowed("GET") }),
        )
        .route(
            "/api/v1/sessions/{id}",
            get(show)
                .delete(delete)
                .fallback(|| async { method_not_allowed("GET, DELETE") }),
        )
        .route(
            "/api/v1/sessions/{id}/messages",
            get(messages).fallback(|| async { method_not_allowed("GET") }),
        )
}

const NOT_FOUND: ApiError = ApiError::new(StatusCode::NOT_FOUND, "session not found");
const INVALID_LIMIT: ApiError = ApiError::new(StatusCode::BAD_REQUEST, "invalid limit");
const INVALID_CURSOR: ApiError = ApiError::new(StatusCode::BAD_REQUEST, "invalid cursor");
const INVALID_AFTER: ApiError = ApiError::new(StatusCode::BAD_REQUEST, "invalid after");
fn store_failed(e: StoreError) -> ApiError {
    tracing::error!(error = %e, "session store failed");
    INTERNAL
}

/// The session of the path's `{id}`, if the caller owns it; anything else
/// (no such session, another owner's, an id that cannot be one) is 404.
struct Owned(SessionRecord);

impl FromRequestParts<Arc<AppState>> for Owned {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Owned, ApiError> {
        let Caller(owner) = Caller::from_request_parts(parts, state).await?;
        let Ok(Path(id)) = Path::<String>::from_request_parts(parts, state).await else {
            return Err(NOT_FOUND);
        };
        let Ok(id) = SessionId::parse(&id) else {
            return Err(NOT_FOUND);
        };
        match state.engine().store().load_session(&id).await {
            Ok(Some(record)) if record.owner == owner => Ok(Owned(record)),
            Ok(_) => Err(NOT_FOUND),
            Err(e) => Err(store_failed(e)),
        }
    }
}

async fn list(
    State(state): State<Arc<AppState>>,
    Caller(owner): Caller,
    RawQuery(raw_query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryParams::parse(raw_query.as_deref());
    let limit = page_limit(&query, DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = match query.first("cursor").filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => Some(decode_cursor(text).ok_or(INVALID_CURSOR)?),
    };
    // An anonymous caller owns no listing: anonymous sessions are reached by id.
    let Some(owner) = owner else {
        return Ok(json(StatusCode::OK, &page_body(&[], None)));
    };
    let mut page = state
        .engine()
        .store()
        .list_sessions(&owner, after.as_ref(), limit + 1)
        .await
        .map_err(store_failed)?;
    let next = if page.len() > limit {
        page.truncate(limit);
        page.last()
            .map(|s| encode_cursor(&SessionCursor::after(&s.record)))
    } else {
        None
    };
    Ok(json(StatusCode::OK, &page_body(&page, next)))
}

async fn show(
    State(state): State<Arc<AppState>>,
    Owned(record): Owned,
) -> Result<Response, ApiError> {
    let summary = state
        .engine()
        .store()
        .load_summary(&record.id)
        .await
        .map_err(store_failed)?;
    Ok(json(
        StatusCode::OK,
        &SessionOut::new(&record, summary.as_ref()),
    ))
}

/// `limit`: a positive integer, `default` when absent, taken as `max` above
/// it.
fn page_limit(query: &QueryParams, default: usize, max: usize) -> Result<usize, ApiError> {
    match query.first("limit") {
        None => Ok(default),
        Some(text) => Ok(text
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or(INVALID_LIMIT)?
            .min(max)),
    }
}

async fn messages(
    State(state): State<Arc<AppState>>,
    Owned(record): Owned,
    RawQuery(raw_query): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryParams::parse(raw_query.as_deref());
    let limit = page_limit(&query, DEFAULT_MESSAGES_LIMIT, MAX_MESSAGES_LIMIT)?;
    let after = match query.first("after").filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| INVALID_AFTER)?),
    };
    // One more than the page: whether another page follows.
    let mut stored = state
        .engine()
        .store()
        .load_messages_after(&record.id, after, limit + 1)
        .await
        .map_err(store_failed)?;
    let next_after = if stored.len() > limit {
        stored.truncate(limit);
        stored.last().map(|m| m.seq)
    } else {
        None
    };
    let messages: Vec<MessageOut<'_>> = stored.iter().filter_map(MessageOut::new).collect();
    Ok(json(
        StatusCode::OK,
        &MessagesOut {
            messages,
            next_after,
        },
    ))
}

async fn delete(
    State(state): State<Arc<AppState>>,
    Owned(record): Owned,
) -> Result<Response, ApiError> {
    match state.engine().delete_session(&record).await {
        // Deleted meanwhile by another request: gone all the same.
        Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(DeleteError::TurnInProgress) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "a turn is running on this session",
        )),
        Err(DeleteError::Store(e)) => Err(store_failed(e)),
    }
}

// ---------------------------------------------------------------------------
// Cursors: `<last_active_at nanos>:<session id>`, hex-encoded so clients treat
// them as opaque.

fn encode_cursor(cursor: &SessionCursor) -> String {
    format!("{}:{}", cursor.last_active_at.0, cursor.id)
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_cursor(text: &str) -> Option<SessionCursor> {
    if !text.len().is_multiple_of(2) || text.len() > 2 * 160 {
        return None;
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let decoded = String::from_utf8(bytes).ok()?;
    let (nanos, id) = decoded.split_once(':')?;
    Some(SessionCursor {
        last_active_at: Timestamp(nanos.parse().ok()?),
        id: SessionId::parse(id).ok()?,
    })
}

// ---------------------------------------------------------------------------
// Bodies.

/// RFC 3339 in UTC with milliseconds: `2026-09-14T10:30:00.250Z`.
fn rfc3339(at: Timestamp) -> String {
    let t = at.to_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.nanosecond / 1_000_000
    )
}

#[derive(Serialize)]
struct PageOut<'a> {
    sessions: Vec<SessionOut<'a>>,
    next_cursor: Option<String>,
}

fn page_body(page: &[SessionOverview], next_cursor: Option<String>) -> PageOut<'_> {
    PageOut {
        sessions: page
            .iter()
            .map(|s| SessionOut::new(&s.record, s.summary.as_ref()))
            .collect(),
        next_cursor,
    }
}

#[derive(Serialize)]
struct SessionOut<'a> {
    id: &'a str,
    agent: &'a str,
    created_at: String,
    last_active_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<SummaryOut<'a>>,
}

impl<'a> SessionOut<'a> {
    fn new(record: &'a SessionRecord, summary: Option<&'a SessionSummary>) -> SessionOut<'a> {
        SessionOut {
            id: record.id.as_str(),
            agent: &record.agent,
            created_at: rfc3339(record.created_at),
            last_active_at: rfc3339(record.last_active_at),
            summary: summary.map(|s| SummaryOut {
                text: &s.text,
                created_at: rfc3339(s.created_at),
            }),
        }
    }
}

#[derive(Serialize)]
struct SummaryOut<'a> {
    text: &'a str,
    created_at: String,
}

#[derive(Serialize)]
struct MessagesOut<'a> {
    messages: Vec<MessageOut<'a>>,
    next_after: Option<u64>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    seq: u64,
    role: &'static str,
    content: Content<'a>,
    created_at: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<&'a str, &'a str>,
}

/// Text for messages; the step, as JSON, for tool steps.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Step(Step<'a>),
}

/// A tool step as the API shows it: `{"call": {id, name, arguments, side}}`
/// or `{"result": {id, status, value}}`.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum Step<'a> {
    Call {
        id: &'a str,
        name: &'a str,
        arguments: &'a Value,
        side: &'static str,
    },
    Result {
        id: &'a str,
        status: &'static str,
        value: StepValue<'a>,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum StepValue<'a> {
    Json(&'a Value),
    Text(&'a str),
}

impl<'a> MessageOut<'a> {
    /// The message as the API shows it; `None` for events and failures.
    fn new(message: &'a StoredMessage) -> Option<MessageOut<'a>> {
        let mut metadata: BTreeMap<&'a str, &'a str> = message
            .metadata
            .iter()
            .filter(|(k, _)| !HIDDEN_METADATA.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if message.via == Via::Voice {
            metadata.insert("via", "voice");
        }
        let content = match &message.body {
            MessageBody::User { text, .. } => Content::Text(text),
            MessageBody::Reply { text, end, .. } => {
                match end {
                    ReplyEnd::Complete => {}
                    ReplyEnd::Cancelled => _ = metadata.insert("cancelled", "true"),
                    ReplyEnd::Interrupted => _ = metadata.insert("interrupted", "true"),
                }
                Content::Text(text)
            }
            MessageBody::Interim { text } => {
                metadata.insert("step", "interim");
                Content::Text(text)
            }
            MessageBody::ToolCall {
                id,
                name,
                arguments,
                side,
            } => Content::Step(Step::Call {
                id,
                name,
                arguments,
                side: match side {
                    ToolSide::Server => "server",
                    ToolSide::Client => "client",
                },
            }),
            MessageBody::ToolResult { id, outcome } => {
                let (status, value) = match outcome {
                    ToolOutcome::Ok(value) => ("ok", StepValue::Json(value)),
                    ToolOutcome::Error(e) => ("error", StepValue::Text(e)),
                    ToolOutcome::Denied(r) => ("denied", StepValue::Text(r)),
                };
                Content::Step(Step::Result { id, status, value })
            }
            MessageBody::Failure { .. } | MessageBody::Event { .. } => return None,
        };
        Some(MessageOut {
            seq: message.seq,
            role: message.role().as_str(),
            content,
            created_at: rfc3339(message.created_at),
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use agentwire_core::Metadata;

    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let cursor = SessionCursor {
            last_active_at: Timestamp(1_789_381_800_250_000_000),
            id: SessionId::parse("sess-1:a.b_c").unwrap(),
        };
        let text = encode_cursor(&cursor);
        assert!(text.bytes().all(|b| b.is_ascii_hexdigit()), "{text}");
        assert_eq!(decode_cursor(&text), Some(cursor));
        for bad in [
            "",
            "zz",
            "abc",
            &encode_cursor_text("12"),
            &encode_cursor_text("x:s1"),
            &encode_cursor_text("1:bad id"),
            &"00".repeat(200),
        ] {
            assert_eq!(decode_cursor(bad), None, "{bad:?}");
        }
    }

    fn encode_cursor_text(text: &str) -> String {
        text.bytes().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn timestamps_are_rfc3339_with_milliseconds() {
        assert_eq!(
            rfc3339(Timestamp(1_789_381_800_250_999_999)),
            "2026-09-14T10:30:00.250Z"
        );
        assert_eq!(rfc3339(Timestamp(0)), "1970-01-01T00:00:00.000Z");
    }

    fn stored(body: MessageBody) -> StoredMessage {
        StoredMessage {
            session_id: SessionId::parse("s").unwrap(),
            seq: 3,
            body,
            via: Via::Text,
            metadata: Metadata::new(),
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn messages_show_text_and_tool_steps_but_no_events_failures_or_markers() {
        let mut user = stored(MessageBody::User {
            text: "hello".into(),
            parts: Vec::new(),
            attachment: Some(agentwire_core::MediaId::parse(&"b3".repeat(16)).unwrap()),
        });
        user.metadata.insert("lang".into(), "en".into());
        user.metadata
            .insert("gnosari_asset_id".into(), "b3f1c2a4".into());
        let shown = serde_json::to_value(MessageOut::new(&user).unwrap()).unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"seq": 3, "role": "user", "content": "hello",
                "created_at": "1970-01-01T00:00:00.000Z", "metadata": {"lang": "en"}})
        );
        let call = stored(MessageBody::ToolCall {
            id: "c".into(),
            name: "weather".into(),
            arguments: serde_json::json!({"city": "Oslo"}),
            side: ToolSide::Client,
        });
        let shown = serde_json::to_value(MessageOut::new(&call).unwrap()).unwrap();
        assert_eq!(
            shown["content"],
            serde_json::json!({"call": {"id": "c", "name": "weather",
                "arguments": {"city": "Oslo"}, "side": "client"}})
        );
        assert_eq!(shown["role"], "tool");
        assert!(shown.get("metadata").is_none());
        let denied = stored(MessageBody::ToolResult {
            id: "c".into(),
            outcome: ToolOutcome::Denied("no".into()),
        });
        let shown = serde_json::to_value(MessageOut::new(&denied).unwrap()).unwrap();
        assert_eq!(
            shown["content"],
            serde_json::json!({"result": {"id": "c", "status": "denied", "value": "no"}})
        );
        let interim = stored(MessageBody::Interim {
            text: "checking".into(),
        });
        let shown = serde_json::to_value(MessageOut::new(&interim).unwrap()).unwrap();
        assert_eq!(shown["role"], "assistant");
        assert_eq!(shown["metadata"], serde_json::json!({"step": "interim"}));
        let event = stored(MessageBody::Event {
            name: "ai.disclosure.displayed".into(),
        });
        assert!(MessageOut::new(&event).is_none());
        let failure = stored(MessageBody::Failure {
            code: agentwire_core::ErrorCode::Internal,
            message: "failed".into(),
        });
        assert!(MessageOut::new(&failure).is_none());
    }

    #[test]
    fn how_a_message_came_and_a_reply_ended_show_as_metadata() {
        let reply = |end| MessageBody::Reply {
            text: "answer".into(),
            parts: Vec::new(),
            end,
        };
        let metadata_of = |body, via| {
            let message = StoredMessage {
                via,
                ..stored(body)
            };
            serde_json::to_value(MessageOut::new(&message).unwrap()).unwrap()["metadata"].clone()
        };
        use serde_json::json;
        assert_eq!(
            metadata_of(reply(ReplyEnd::Complete), Via::Text),
            Value::Null
        );
        assert_eq!(
            metadata_of(reply(ReplyEnd::Cancelled), Via::Text),
            json!({"cancelled": "true"})
        );
        assert_eq!(
            metadata_of(reply(ReplyEnd::Interrupted), Via::Voice),
            json!({"interrupted": "true", "via": "voice"})
        );
        let spoken = MessageBody::User {
            text: "hi".into(),
            parts: Vec::new(),
            attachment: None,
        };
        assert_eq!(metadata_of(spoken, Via::Voice), json!({"via": "voice"}));
        let call = MessageBody::ToolCall {
            id: "c".into(),
            name: "weather".into(),
            arguments: json!({}),
            side: ToolSide::Server,
        };
        assert_eq!(metadata_of(call, Via::Voice), json!({"via": "voice"}));
    }
}

//! `POST /assets`, Gnosari's upload (behaviour notes §2.5, §5.15): a
//! multipart body with one `file` part and a `session_id` field. The file is
//! stored through the same [`agentwire_core::MediaStore`] as the media
//! routes, at once ([`agentwire_core::MediaStore::put`], so every backend
//! takes it, S3 included), bound to the session (its storage reference
//! names it) and to the caller (the owner pseudonym kept with the item). The answer is
//! `{asset_id, session_id, filename, mime_type, size_bytes}`; `asset_id` is
//! the media id in UUID form, so no other mapping is kept.
//!
//! Credentials are the Gnosari forms (`Authorization: Bearer`,
//! `X-AUTH-TOKEN`, `?api_key=`); without one the caller is anonymous, which
//! `allow_unauthenticated: false` answers with 401. A session that exists and
//! belongs to someone else is 404; one not recorded yet is open, so a first
//! message can carry an attachment. Failures are plain text, as on the media
//! routes: 400 `invalid request body`, 404 `media storage is not enabled`,
//! 413 `file too large`, 415 `unsupported media type`.

use std::sync::Arc;

use agentwire_core::media::media_session_id;
use agentwire_core::{Credentials, MediaBytes, SessionId, UploadSpec};
use axum::Router;
use axum::extract::multipart::{Field, Multipart, MultipartRejection};
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use futures_util::StreamExt;

use crate::query::QueryParams;
use crate::routes::media::{
    INVALID_BODY, UNSUPPORTED_TYPE, check_session_owner, either, json, method_not_allowed, refusal,
    service,
};
use crate::upgrade::{ClientAddress, Refusal};
use crate::{AppState, identity};

/// The types an asset may have (§5.15): images and PDF.
const ALLOWED_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/gif",
    "application/pdf",
];

/// The `session_id` field is a short string.
const MAX_FIELD_BYTES: u64 = 1024;

const TOO_LARGE: Refusal = Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "file too large");

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route(
        "/assets",
        post(upload)
            .fallback(|| async { method_not_allowed("POST") })
            // The file part is capped while it is read (`max_bytes`).
            .layer(DefaultBodyLimit::disable()),
    )
}

async fn upload(
    State(state): State<Arc<AppState>>,
    address: ClientAddress,
    headers: HeaderMap,
    RawQuery(raw_query): RawQuery,
    body: Result<Multipart, MultipartRejection>,
) -> Response {
    either(upload_inner(&state, &headers, address, raw_query.as_deref(), body).await)
}

/// The file part as read.
pub(crate) struct File {
    pub(crate) filename: String,
    pub(crate) mime_type: String,
    pub(crate) bytes: Vec<u8>,
}

async fn upload_inner(
    state: &AppState,
    headers: &HeaderMap,
    address: ClientAddress,
    raw_query: Option<&str>,
    body: Result<Multipart, MultipartRejection>,
) -> Result<Response, Refusal> {
    let media = service(state)?;
    let query = QueryParams::parse(raw_query);
    let api_key = headers
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .or_else(|| query.first("api_key").filter(|v| !v.is_empty()));
    let credentials = Credentials {
        bearer: identity::bearer(headers),
        api_key,
        password: None,
    };
    let owner = identity::identify_owner(state, &credentials, address).await?;
    let (file, session) = read_form(body, media.max_bytes).await?;
    check_session_owner(state, &session, owner.as_deref()).await?;
    let size_bytes = file.bytes.len() as u64;
    let spec = UploadSpec {
        session: session.clone(),
        filename: file.filename,
        mime_type: file.mime_type,
        size_bytes,
        owner,
    };
    let body = futures_util::stream::iter([Ok(MediaBytes::new(file.bytes))]).boxed();
    let info = media.store.put(&spec, body).await.map_err(refusal)?;
    let answer = serde_json::json!({
        "asset_id": info.storage_ref.media.to_uuid(),
        "session_id": session.as_str(),
        "filename": info.filename,
        "mime_type": info.mime_type,
        "size_bytes": info.size_bytes,
    });
    Ok(json(StatusCode::OK, answer.to_string()))
}

/// The form: its one `file` part (of an allowed type, at most `max_bytes`,
/// not empty) and its `session_id` field; other fields are skipped.
pub(crate) async fn read_form(
    body: Result<Multipart, MultipartRejection>,
    max_bytes: u64,
) -> Result<(File, SessionId), Refusal> {
    let mut multipart = body.map_err(|_| INVALID_BODY)?;
    let (mut file, mut session) = (None, None);
    while let Some(field) = multipart.next_field().await.map_err(|_| INVALID_BODY)? {
        match field.name() {
            Some("file") if file.is_none() => {
                let filename = field.file_name().unwrap_or("upload").to_owned();
                let mime_type = field
                    .content_type()
                    .map(|t| t.split(';').next().unwrap_or_default().trim())
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                if !ALLOWED_TYPES.contains(&mime_type.as_str()) {
                    return Err(UNSUPPORTED_TYPE);
                }
                let bytes = read_capped(field, max_bytes).await?.ok_or(TOO_LARGE)?;
                file = Some(File {
                    filename,
                    mime_type,
                    bytes,
                });
            }
            Some("session_id") if session.is_none() => {
                let bytes = read_capped(field, MAX_FIELD_BYTES)
                    .await?
                    .ok_or(INVALID_BODY)?;
                let text = String::from_utf8(bytes).map_err(|_| INVALID_BODY)?;
                session = Some(media_session_id(text.trim()).map_err(|_| INVALID_BODY)?);
            }
            Some("file" | "session_id") => return Err(INVALID_BODY),
            // Other fields are ignored, drained by the next `next_field`.
            _ => {}
        }
    }
    let (Some(file), Some(session)) = (file, session) else {
        return Err(INVALID_BODY);
    };
    if file.bytes.is_empty() {
        return Err(INVALID_BODY);
    }
    Ok((file, session))
}

/// A field's bytes; `None` past `cap`.
async fn read_capped(mut field: Field<'_>, cap: u64) -> Result<Option<Vec<u8>>, Refusal> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(|_| INVALID_BODY)? {
        if (bytes.len() + chunk.len()) as u64 > cap {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}

//! The HTTP media routes beside `/ws` (reference §5):
//!
//! - `POST /media/request-upload`: JSON `{session_id, filename, mime_type,
//!   size_bytes}` → 200 upload credentials (the `upload_ready` object).
//! - `PUT /media/upload/{upload_id}`: the bytes, streamed to the store → 204.
//!   Only the local backend takes uploads here; others answer 404.
//! - `POST /media/confirm-upload/{upload_id}`: after a direct (presigned)
//!   upload → 200 media info. The local backend answers 404.
//! - `GET /media/info/{session_id}/{media_id}` → 200 media info.
//! - `GET /media/download/{session_id}/{media_id}` → the bytes (local) or a
//!   307 to a presigned URL.
//!
//! Failures are plain text with a newline, like the upgrade's refusals: 400
//! `invalid request body` / `invalid storage reference` / `invalid path` /
//! `upload failed`, 404 `not found`, 405 `method not allowed`, 410 `media
//! expired`, 413 `file too large`, 415 `unsupported media type`. With media
//! storage off every route answers 404 `media storage is not enabled`; with
//! `allow_unauthenticated: false` every route answers 401, as the upgrade does;
//! 429 `too many failed authentication attempts` (with `Retry-After`) while
//! the client's address has spent its failed credentials.

use std::sync::Arc;

use agentwire_core::media::sanitized_filename;
use agentwire_core::{
    Credentials, Download, MediaBytes, MediaError, MediaId, MediaInfo, SessionId, StorageRef,
    UploadSpec,
};
use agentwire_omnia as omnia;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post, put};
use futures_util::StreamExt;

use crate::identity;
use crate::upgrade::{ClientAddress, Refusal};
use crate::{AppState, MediaService};

/// The JSON body of `request-upload` is small; anything bigger is refused
/// before it is parsed.
const REQUEST_BODY_LIMIT: usize = 64 * 1024;

/// The media routes, for [`crate::router`] to merge.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/media/request-upload",
            post(request_upload)
                .fallback(|| async { method_not_allowed("POST") })
                .layer(DefaultBodyLimit::max(REQUEST_BODY_LIMIT)),
        )
        .route(
            "/media/upload/{upload_id}",
            put(upload).fallback(|| async { method_not_allowed("PUT") }),
        )
        .route(
            "/media/confirm-upload/{upload_id}",
            post(confirm_upload).fallback(|| async { method_not_allowed("POST") }),
        )
        .route(
            "/media/info/{*path}",
            get(info).fallback(|| async { method_not_allowed("GET") }),
        )
        .route(
            "/media/download/{*path}",
            get(download).fallback(|| async { method_not_allowed("GET") }),
        )
}

pub(crate) const NOT_ENABLED: Refusal =
    Refusal::new(StatusCode::NOT_FOUND, "media storage is not enabled");
pub(crate) const INVALID_BODY: Refusal =
    Refusal::new(StatusCode::BAD_REQUEST, "invalid request body");
const INVALID_REF: Refusal = Refusal::new(StatusCode::BAD_REQUEST, "invalid storage reference");
const INVALID_PATH: Refusal = Refusal::new(StatusCode::BAD_REQUEST, "invalid path");
pub(crate) const UNSUPPORTED_TYPE: Refusal =
    Refusal::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported media type");

/// The media service, if it is on.
pub(crate) fn service(state: &AppState) -> Result<&MediaService, Refusal> {
    state.media().ok_or(NOT_ENABLED)
}

/// Admits the caller to `session`'s media: its credential (if any) must be
/// valid, and the session must be the caller's own. Another owner's session
/// answers 404, as a missing one does, so ids cannot be probed. A session not
/// recorded yet (media uploaded before the first message) is open to its
/// first user.
async fn authorize(
    state: &AppState,
    headers: &HeaderMap,
    address: ClientAddress,
    session: &SessionId,
) -> Result<(), Refusal> {
    let credentials = Credentials {
        bearer: identity::bearer(headers),
        ..Credentials::default()
    };
    let owner = identity::identify_owner(state, &credentials, address).await?;
    check_session_owner(state, session, owner.as_deref()).await
}

/// Another owner's session is 404, as a missing one would be, so ids cannot
/// be probed; a session not recorded yet is open.
pub(crate) async fn check_session_owner(
    state: &AppState,
    session: &SessionId,
    owner: Option<&str>,
) -> Result<(), Refusal> {
    match state.engine().store().load_session(session).await {
        Ok(Some(record)) if record.owner.as_deref() != owner => {
            Err(Refusal::new(StatusCode::NOT_FOUND, "not found"))
        }
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::error!(error = %e, "session store failed");
            Err(Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error",
            ))
        }
    }
}

/// The client-facing answer for a store failure.
pub(crate) fn refusal(error: MediaError) -> Refusal {
    match error {
        MediaError::NotFound => Refusal::new(StatusCode::NOT_FOUND, "not found"),
        MediaError::Expired => Refusal::new(StatusCode::GONE, "media expired"),
        MediaError::InvalidRef => INVALID_REF,
        MediaError::UploadFailed => Refusal::new(StatusCode::BAD_REQUEST, "upload failed"),
        MediaError::TooLarge => Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "file too large"),
        MediaError::UnsupportedMediaType => UNSUPPORTED_TYPE,
        MediaError::Unavailable(detail) => {
            tracing::error!(error = %detail, "media storage failed");
            Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, "internal server error")
        }
    }
}

pub(crate) fn json(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn either(result: Result<Response, Refusal>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

/// 405 with the one method the route takes.
pub(crate) fn method_not_allowed(allow: &'static str) -> Response {
    (
        [(header::ALLOW, allow)],
        Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    )
        .into_response()
}

/// The body of `POST /media/request-upload`. Missing fields read as empty
/// so each can be reported by name below.
#[derive(serde::Deserialize)]
struct RequestUpload {
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    filename: String,
    #[serde(default)]
    mime_type: String,
    #[serde(default)]
    size_bytes: i64,
}

async fn request_upload(
    State(state): State<Arc<AppState>>,
    address: ClientAddress,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    either(request_upload_inner(&state, &headers, address, body).await)
}

async fn request_upload_inner(
    state: &AppState,
    headers: &HeaderMap,
    address: ClientAddress,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Refusal> {
    let media = service(state)?;
    let body = body.map_err(|_| INVALID_BODY)?;
    let request: RequestUpload = serde_json::from_slice(&body).map_err(|_| INVALID_BODY)?;
    let session =
        agentwire_core::media::media_session_id(&request.session_id).map_err(|_| INVALID_REF)?;
    authorize(state, headers, address, &session).await?;
    if request.mime_type.is_empty() {
        return Err(UNSUPPORTED_TYPE);
    }
    let size_bytes = u64::try_from(request.size_bytes).unwrap_or(0);
    if request.filename.is_empty() || size_bytes == 0 {
        return Err(INVALID_BODY);
    }
    let spec = UploadSpec {
        session,
        filename: request.filename,
        mime_type: request.mime_type,
        size_bytes,
        owner: None,
    };
    let ticket = media.store.prepare_upload(&spec).await.map_err(refusal)?;
    let (url, storage_ref) = (media.upload_url(&ticket), ticket.storage_ref.to_string());
    let body =
        omnia::encode_upload_credentials(&crate::omnia::media::ready(&ticket, &url, &storage_ref));
    Ok(json(StatusCode::OK, body))
}

fn upload_id(path: Result<Path<String>, PathRejection>) -> Result<MediaId, Refusal> {
    let Path(id) = path.map_err(|_| INVALID_REF)?;
    MediaId::parse(&id).map_err(|_| INVALID_REF)
}

async fn upload(
    State(state): State<Arc<AppState>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    either(upload_inner(&state, path, &headers, body).await)
}

async fn upload_inner(
    state: &AppState,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Refusal> {
    let media = service(state)?;
    let id = upload_id(path)?;
    let content_length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = body
        .into_data_stream()
        .map(|chunk| chunk.map(MediaBytes::new).map_err(std::io::Error::other))
        .boxed();
    media
        .store
        .write_upload(&id, content_length, body)
        .await
        .map_err(refusal)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn confirm_upload(
    State(state): State<Arc<AppState>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    either(confirm_upload_inner(&state, path).await)
}

async fn confirm_upload_inner(
    state: &AppState,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Refusal> {
    let media = service(state)?;
    let id = upload_id(path)?;
    let info = media.store.confirm_upload(&id).await.map_err(refusal)?;
    Ok(json(StatusCode::OK, omnia::encode_media_info(&info)))
}

/// `{session_id}/{media_id}`: exactly two segments, both valid ids.
fn storage_ref(path: Result<Path<String>, PathRejection>) -> Result<StorageRef, Refusal> {
    let Path(path) = path.map_err(|_| INVALID_PATH)?;
    let mut segments = path.split('/');
    let (Some(session), Some(media), None) = (segments.next(), segments.next(), segments.next())
    else {
        return Err(INVALID_PATH);
    };
    StorageRef::from_parts(session, media).map_err(|_| INVALID_REF)
}

async fn info(
    State(state): State<Arc<AppState>>,
    address: ClientAddress,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    either(info_inner(&state, &headers, address, path).await)
}

async fn info_inner(
    state: &AppState,
    headers: &HeaderMap,
    address: ClientAddress,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Refusal> {
    let media = service(state)?;
    let storage_ref = storage_ref(path)?;
    authorize(state, headers, address, &storage_ref.session).await?;
    let info = media.store.info(&storage_ref).await.map_err(refusal)?;
    Ok(json(StatusCode::OK, omnia::encode_media_info(&info)))
}

async fn download(
    State(state): State<Arc<AppState>>,
    address: ClientAddress,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    either(download_inner(&state, &headers, address, path).await)
}

async fn download_inner(
    state: &AppState,
    headers: &HeaderMap,
    address: ClientAddress,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Refusal> {
    let media = service(state)?;
    let storage_ref = storage_ref(path)?;
    authorize(state, headers, address, &storage_ref.session).await?;
    match media.store.download(&storage_ref).await.map_err(refusal)? {
        Download::Redirect { url, .. } => Ok(Redirect::temporary(&url).into_response()),
        Download::Body { info, body } => {
            let body = Body::from_stream(body.map(|chunk| chunk.map(Bytes::from_owner)));
            let mut response = Response::new(body);
            *response.headers_mut() = download_headers(&info);
            Ok(response)
        }
    }
}

/// The file's type, an inline disposition with its sanitised name, its
/// length, and headers that keep a browser from running uploaded content on
/// this origin (no sniffing, a sandboxing CSP).
fn download_headers(info: &MediaInfo) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let content_type = HeaderValue::from_str(&info.mime_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_TYPE, content_type);
    let disposition = format!(
        "inline; filename=\"{}\"",
        sanitized_filename(&info.filename)
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(info.size_bytes));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    headers
}

//! What the JSON APIs (`/api/v1/sessions*`, `/api/v1/memories*`) share:
//! the caller a request speaks for, identified like the sockets' callers,
//! and errors answered as `{"error": "..."}` with `Cache-Control:
//! no-store`.

use std::sync::Arc;

use agentwire_core::Credentials;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::AppState;
use crate::identity;
use crate::query::QueryParams;
use crate::upgrade::{ClientAddress, Refusal};

/// The API key header, matched case-insensitively like every header name.
const API_KEY_HEADER: &str = "x-auth-token";

/// A failure, answered as `{"error": "..."}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: &'static str,
    /// `Retry-After` in seconds: a throttled credential's 429.
    retry_after_secs: Option<u64>,
}

impl ApiError {
    pub(crate) const fn new(status: StatusCode, message: &'static str) -> ApiError {
        ApiError {
            status,
            message,
            retry_after_secs: None,
        }
    }
}

pub(crate) const INTERNAL: ApiError =
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal server error");

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> ApiError {
        ApiError {
            status: refusal.status,
            message: refusal.message,
            retry_after_secs: refusal.retry_after_secs(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        #[derive(Serialize)]
        struct Body<'a> {
            error: &'a str,
        }
        let mut response = json(
            self.status,
            &Body {
                error: self.message,
            },
        );
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

pub(crate) fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let body = serde_json::to_string(body).expect("API bodies serialize");
    json_text(status, body)
}

/// A JSON body already written: `application/json`, `no-store`.
pub(crate) fn json_text(status: StatusCode, body: String) -> Response {
    (
        status,
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

pub(crate) fn method_not_allowed(allow: &'static str) -> Response {
    (
        [(header::ALLOW, allow)],
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    )
        .into_response()
}

/// The owner the request speaks for; `None` is anonymous.
pub(crate) struct Caller(pub(crate) Option<String>);

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Caller, ApiError> {
        let address = ClientAddress::from_request_parts(parts, state)
            .await
            .unwrap_or_else(|never| match never {});
        let query = QueryParams::parse(parts.uri.query());
        let api_key_header = parts
            .headers
            .get(API_KEY_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty());
        let credentials = Credentials {
            bearer: identity::bearer(&parts.headers),
            api_key: api_key_header.or_else(|| query.first("api_key").filter(|v| !v.is_empty())),
            password: None,
        };
        Ok(Caller(
            identity::identify_owner(state, &credentials, address).await?,
        ))
    }
}

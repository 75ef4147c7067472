//! A function call's errors, as Omnia's function mode answers them:
//! `{"error": code, "detail": text, "raw_output"?: text}` with
//! `Cache-Control: no-store`. A detail is ours (a fixed text, a refusal's
//! text, a schema's rule and the place it breaks, a failure's code and
//! client-safe message): never a value the caller sent, a credential or a
//! provider's body.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::connection::Refusal;
use crate::connection::admission::{INTERNAL, TURN_RATE_LIMITED};
use crate::routes::api::json;
use crate::{budget, upgrade};

/// How long a caller refused for the server's inbound budget waits: the
/// budget frees as running turns end, within moments.
const BUSY_RETRY_AFTER_SECS: u64 = 1;

#[derive(Debug)]
pub(crate) struct FunctionError {
    status: StatusCode,
    code: &'static str,
    detail: String,
    /// The agent's answer, when it is not the output the schema asks for.
    raw_output: Option<String>,
    retry_after_secs: Option<u64>,
}

impl FunctionError {
    fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> FunctionError {
        FunctionError {
            status,
            code,
            detail: detail.into(),
            raw_output: None,
            retry_after_secs: None,
        }
    }

    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    pub(crate) fn method_not_allowed() -> Response {
        let error = FunctionError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "a function is called with POST",
        );
        ([(header::ALLOW, "POST")], error).into_response()
    }

    pub(crate) fn missing_function_name() -> FunctionError {
        FunctionError::new(
            StatusCode::BAD_REQUEST,
            "missing_function_name",
            "the path names no function: POST /functions/{name}",
        )
    }

    pub(crate) fn unsupported_media_type() -> FunctionError {
        FunctionError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be application/json",
        )
    }

    pub(crate) fn not_found() -> FunctionError {
        FunctionError::new(
            StatusCode::NOT_FOUND,
            "function_not_found",
            "no function by that name",
        )
    }

    /// The body could not be read: past the size limit (413), or the
    /// stream failed.
    pub(crate) fn unread_body(status: StatusCode) -> FunctionError {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => FunctionError::new(
                status,
                "payload_too_large",
                format!("the body is larger than {} bytes", super::MAX_BODY_BYTES),
            ),
            _ => FunctionError::new(
                StatusCode::BAD_REQUEST,
                "read_body_failed",
                "the body could not be read",
            ),
        }
    }

    pub(crate) fn body_not_json() -> FunctionError {
        FunctionError::new(
            StatusCode::BAD_REQUEST,
            "read_body_failed",
            "the body is not valid JSON",
        )
    }

    /// `why`: the validator's words, which name places and rules, not values.
    pub(crate) fn input_invalid(why: String) -> FunctionError {
        FunctionError::new(
            StatusCode::BAD_REQUEST,
            "input_invalid",
            format!("the input {why}"),
        )
    }

    pub(crate) fn runtime_error(detail: String) -> FunctionError {
        FunctionError::new(StatusCode::BAD_GATEWAY, "runtime_error", detail)
    }

    /// The agent answered, but not with the output the schema asks for.
    pub(crate) fn output_invalid(detail: String, raw_output: String) -> FunctionError {
        FunctionError {
            raw_output: Some(raw_output),
            ..FunctionError::new(StatusCode::BAD_GATEWAY, "output_invalid", detail)
        }
    }

    /// The caller's credential was refused: its status (401, 403, 429 with
    /// `Retry-After`) and fixed text, in this API's shape.
    pub(crate) fn refused(refusal: upgrade::Refusal) -> FunctionError {
        let code = match refusal.status {
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::TOO_MANY_REQUESTS => "rate_limited",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "internal_error",
        };
        FunctionError {
            retry_after_secs: refusal.retry_after_secs(),
            ..FunctionError::new(refusal.status, code, refusal.message)
        }
    }

    /// The admission path's refusal. A call opens a fresh session with no
    /// media, so only the rate, the budget, the credential's deadline and
    /// a failing store can refuse it.
    pub(crate) fn admission(refusal: &Refusal) -> FunctionError {
        match refusal {
            Refusal::TurnRate { retry_after_secs } => FunctionError {
                retry_after_secs: Some(*retry_after_secs),
                ..FunctionError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    TURN_RATE_LIMITED,
                )
            },
            Refusal::Busy => FunctionError {
                retry_after_secs: Some(BUSY_RETRY_AFTER_SECS),
                ..FunctionError::new(StatusCode::SERVICE_UNAVAILABLE, "server_busy", budget::BUSY)
            },
            Refusal::CredentialExpired => FunctionError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "credential expired",
            ),
            other => {
                tracing::error!(code = other.code().as_str(), "a function call was refused");
                FunctionError::internal()
            }
        }
    }

    /// The server is draining: the caller should go to another replica.
    pub(crate) fn shutting_down() -> FunctionError {
        FunctionError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "server is shutting down",
        )
    }

    pub(crate) fn internal() -> FunctionError {
        FunctionError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            INTERNAL,
        )
    }
}

impl IntoResponse for FunctionError {
    fn into_response(self) -> Response {
        #[derive(Serialize)]
        struct Body<'a> {
            error: &'a str,
            detail: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            raw_output: Option<&'a str>,
        }
        let body = Body {
            error: self.code,
            detail: &self.detail,
            raw_output: self.raw_output.as_deref(),
        };
        let mut response = json(self.status, &body);
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

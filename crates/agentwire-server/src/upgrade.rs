//! What every dialect's upgrade shares: the capacity checks, the origin
//! check, the plain-text [`Refusal`], and opening a counted socket with the
//! payload limit and buffer sizes. Each dialect's own checks are in its
//! `upgrade` module; every refusal happens before a socket exists.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;
use tungstenite::protocol::WebSocketConfig;

use crate::AppState;
use crate::abuse::{self, Limit};
use crate::connection::echo;
use crate::lifecycle::{self, ConnectionSlot};
use crate::socket;
use crate::trace;
use crate::websocket::{WebSocket, WebSocketUpgrade, WebSocketUpgradeRejection};

/// Completes an admitted upgrade: takes a connection slot (503 when the
/// limit was reached meanwhile; 429 when the client's address has its
/// `max_connections_per_address` open), applies the payload limit and the
/// buffer sizes, and runs `serve` on the socket (or the echo of
/// `server.websocket.echo_frames`).
pub(crate) fn open_socket<F, Fut>(
    state: &Arc<AppState>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    address: ClientAddress,
    upgrade_span: &tracing::Span,
    serve: F,
) -> Response
where
    F: FnOnce(WebSocket, ConnectionSlot) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Ok(upgrade) = upgrade else {
        return Refusal::new(StatusCode::BAD_REQUEST, "Bad Request").into_response();
    };
    let hold = match state.abuse().open_connection(address.0) {
        Ok(hold) => hold,
        Err(refused) => {
            state.metrics().count_abuse_refusal(refused.limit);
            return Refusal::throttled(refused).into_response();
        }
    };
    let Some(slot) = lifecycle::try_open(state, hold) else {
        return Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "connection limit reached")
            .into_response();
    };
    let max_payload = state.settings().limits.max_payload_bytes;
    let config = WebSocketConfig::default()
        .read_buffer_size(socket::READ_BUFFER_BYTES)
        .max_message_size(Some(max_payload))
        .max_frame_size(Some(max_payload));
    let span = trace::connection_span(upgrade_span);
    let websocket = state.settings().websocket;
    if websocket.echo_frames {
        return upgrade.on_upgrade(config, &websocket.compression, move |socket| {
            echo::run(socket, slot).instrument(span)
        });
    }
    upgrade.on_upgrade(config, &websocket.compression, move |socket| {
        serve(socket, slot).instrument(span)
    })
}

/// The first checks of every upgrade: a server that has shut down, or one
/// at its connection limit, refuses with 503.
pub(crate) fn check_capacity(state: &AppState) -> Result<(), Refusal> {
    let lifecycle = &state.lifecycle();
    if lifecycle.is_shut_down() {
        return Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server is shutting down",
        ));
    }
    if lifecycle.open_connections() >= state.settings().limits.max_connections {
        return Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "connection limit reached",
        ));
    }
    Ok(())
}

/// Why a request was refused: a status and a short plain-text reason. The
/// upgrade and the media routes answer with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) message: &'static str,
    /// `Retry-After` in seconds, for a 429 (RFC 9110 §10.2.3).
    retry_after_secs: Option<u64>,
}

impl Refusal {
    pub(crate) const fn new(status: StatusCode, message: &'static str) -> Refusal {
        Refusal {
            status,
            message,
            retry_after_secs: None,
        }
    }

    /// `Retry-After` in seconds, when the refusal says when to come back.
    pub(crate) fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
    }

    /// 429: one of the abuse limits ([`crate::abuse`]) refused the caller.
    pub(crate) fn throttled(refused: abuse::Refused) -> Refusal {
        let message = match refused.limit {
            Limit::AuthPerAddress | Limit::AuthPerAgent => {
                "too many failed authentication attempts"
            }
            Limit::ConnectionsPerAddress => "too many connections from this address",
            Limit::TurnsPerCaller => "too many turns",
        };
        Refusal {
            status: StatusCode::TOO_MANY_REQUESTS,
            message,
            retry_after_secs: Some(refused.retry_after_secs),
        }
    }
}

impl IntoResponse for Refusal {
    /// The body as Go's `http.Error` writes it: plain text and a newline.
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}\n", self.message),
        )
            .into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A missing `Origin` is allowed (non-browser clients send none). With an
/// allow-list the origin must be on it; without one it must be same-origin.
pub(crate) fn origin_allowed(allowed: &[String], headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if !allowed.is_empty() {
        return allowed.iter().any(|a| a.eq_ignore_ascii_case(origin));
    }
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    host.is_some_and(|host| host.eq_ignore_ascii_case(origin_host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        h
    }

    #[test]
    fn same_origin_when_no_allow_list() {
        assert!(origin_allowed(&[], &headers(None, "a.test:8080")));
        assert!(origin_allowed(
            &[],
            &headers(Some("http://a.test:8080"), "a.test:8080")
        ));
        assert!(!origin_allowed(
            &[],
            &headers(Some("http://evil.test"), "a.test:8080")
        ));
    }

    #[test]
    fn allow_list_is_exact_and_case_insensitive() {
        let allowed = vec!["https://App.example.com".to_owned()];
        assert!(origin_allowed(
            &allowed,
            &headers(Some("https://app.example.com"), "x")
        ));
        assert!(!origin_allowed(
            &allowed,
            &headers(Some("https://app.example.com:444"), "x")
        ));
    }
}

/// The client's address as its TCP connection has it: the peer, which is
/// the load balancer's address behind one (the per-address limits then
/// apply to the balancer; see docs/security.md). `None` when the router
/// runs without connect info (in-process tests): no per-address limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAddress(pub(crate) Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<ClientAddress, Infallible> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        Ok(ClientAddress(peer.map(|ConnectInfo(addr)| addr.ip())))
    }
}

//! `GET /api/asyncapi/omnia.yaml` and `GET /api/asyncapi/gnosari.yaml`: the
//! AsyncAPI 3.0 documents of the two WebSocket dialects, as committed in
//! `api/websocket/` and compiled into the binary, so a client can generate
//! its types from the server it talks to. The end-to-end suite checks every
//! frame it sends and receives against the same files.
//!
//! Anyone may read them, as anyone may read `/openapi.json`: they describe
//! the protocol, not this server's agents or config.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::AppState;
use crate::routes::api::method_not_allowed;

const OMNIA: &str = include_str!("../../../../api/websocket/omnia.asyncapi.yaml");
const GNOSARI: &str = include_str!("../../../../api/websocket/gnosari.asyncapi.yaml");

/// The media type of YAML (RFC 9512).
const YAML: &str = "application/yaml";

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/asyncapi/omnia.yaml", document(OMNIA))
        .route("/api/asyncapi/gnosari.yaml", document(GNOSARI))
}

/// A route answering GET with `text`, and 405 to anything else.
fn document(text: &'static str) -> axum::routing::MethodRouter<Arc<AppState>> {
    get(move || async move { ([(header::CONTENT_TYPE, YAML)], text).into_response() })
        .fallback(|| async { method_not_allowed("GET") })
}

//! Operational routes: liveness, readiness and metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::metrics::Gauges;

pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// 503 while draining, or while the session store or the shared live
/// state does not answer.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.lifecycle().is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    let (store, live) = tokio::join!(
        state.engine().store().ping(),
        state.engine().ping_live_state()
    );
    if let Err(e) = store {
        tracing::warn!(error = %e, "readiness check: session store down");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "session store unavailable\n",
        )
            .into_response();
    }
    if let Err(e) = live {
        tracing::warn!(error = %e, "readiness check: live state down");
        return (StatusCode::SERVICE_UNAVAILABLE, "live state unavailable\n").into_response();
    }
    "ok\n".into_response()
}

pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let gauges = Gauges {
        connections_active: state.lifecycle().open_connections() as u64,
        sessions_live: state.engine().live_sessions() as u64,
        draining: state.lifecycle().is_draining(),
        inbound_bytes_in_flight: state.inbound().in_flight() as u64,
        calls_active: state.calls().active() as u64,
        calls_parked: state.calls().parked() as u64,
    };
    let mut body = state.metrics().render(&gauges);
    crate::metrics::render_live(&mut body, state.engine().live_counters());
    if let Some(memory) = state.memory_metrics() {
        memory.render(&mut body);
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

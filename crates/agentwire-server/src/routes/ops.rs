//! Operational routes: liveness, readiness and metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::metrics::Gauges;

pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// How long `/readyz` waits for the session store and the shared live state
/// each. A dependency cut off by the network drops packets rather than
/// refusing them, and a pooled database connection then waits for TCP to
/// give up (minutes): a check that has not answered by now fails, so a
/// balancer stops sending to a replica that cannot do its job. Under a
/// balancer's usual probe timeout of a few seconds; above Redis's default
/// command timeout, so that one's own error shows first.
const READINESS_TIMEOUT: Duration = Duration::from_millis(2500);

/// 503 while draining, or while the session store or the shared live
/// state does not answer (within [`READINESS_TIMEOUT`]).
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.lifecycle().is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    let (store, live) = tokio::join!(
        tokio::time::timeout(READINESS_TIMEOUT, state.engine().store().ping()),
        tokio::time::timeout(READINESS_TIMEOUT, state.engine().ping_live_state())
    );
    match store {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness check: session store down");
            return unavailable("session store unavailable\n");
        }
        Err(_) => {
            tracing::warn!(timeout = ?READINESS_TIMEOUT, "readiness check: session store not answering");
            return unavailable("session store unavailable\n");
        }
    }
    match live {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness check: live state down");
            return unavailable("live state unavailable\n");
        }
        Err(_) => {
            tracing::warn!(timeout = ?READINESS_TIMEOUT, "readiness check: live state not answering");
            return unavailable("live state unavailable\n");
        }
    }
    "ok\n".into_response()
}

fn unavailable(body: &'static str) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let gauges = Gauges {
        connections_active: state.lifecycle().open_connections() as u64,
        sessions_live: state.engine().live_sessions() as u64,
        draining: state.lifecycle().is_draining(),
        inbound_bytes_in_flight: state.inbound().in_flight() as u64,
        calls_active: state.calls().active() as u64,
        calls_parked: state.calls().parked() as u64,
        windows_released: state.engine().windows_released(),
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

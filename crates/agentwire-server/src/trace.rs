//! The server's trace spans (conventions: `agentwire_core::trace`): one for
//! the upgrade request, whose parent is the caller's W3C `traceparent`, and
//! one for the socket's life under it, which the turns it starts are
//! children of.

use axum::http::HeaderMap;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `ws.upgrade` span of one upgrade request on `route`.
pub(crate) fn upgrade_span(
    dialect: &'static str,
    route: &'static str,
    headers: &HeaderMap,
) -> Span {
    let span = tracing::debug_span!(
        target: agentwire_core::trace::TARGET,
        "ws.upgrade",
        agentwire.dialect = dialect,
        http.route = route,
        http.response.status_code = tracing::field::Empty,
    );
    // With traces off the span is disabled: the header is not even read.
    if !span.is_disabled()
        && let Some(parent) = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_traceparent)
    {
        let parent = opentelemetry::Context::new().with_remote_span_context(parent);
        // Fails only when no OpenTelemetry layer is installed.
        let _ = span.set_parent(parent);
    }
    span
}

/// The `ws.connection` span: the socket's life, under its upgrade.
pub(crate) fn connection_span(upgrade: &Span) -> Span {
    tracing::debug_span!(target: agentwire_core::trace::TARGET, parent: upgrade, "ws.connection")
}

/// A W3C Trace Context `traceparent` (version 00, or a later version read
/// as 00 as the spec asks): `00-<32 hex trace id>-<16 hex parent id>-<2 hex
/// flags>`. All-zero ids are invalid.
fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut fields = value.trim().split('-');
    let version = fields.next()?;
    let trace_id = fields.next()?;
    let span_id = fields.next()?;
    let flags = fields.next()?;
    let lower_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !lower_hex(version, 2) || version == "ff" || (version == "00" && fields.next().is_some()) {
        return None;
    }
    if !lower_hex(trace_id, 32) || !lower_hex(span_id, 16) || !lower_hex(flags, 2) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
        true,
        TraceState::default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_traceparent;

    #[test]
    fn traceparent_is_read_to_the_letter_of_the_spec() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(good).expect("valid");
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled() && context.is_remote());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
        // A later version may carry more fields; the first four are read.
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
                .is_some()
        );
    }
}

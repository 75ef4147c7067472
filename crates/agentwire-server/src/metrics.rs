//! Counters exported at `/metrics` in the Prometheus text format.
//!
//! Plain atomics with a fixed label set: the hot path pays one relaxed add,
//! and no metric is ever labelled by session or user.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_core::realtime::CallFailure;
use agentwire_core::{CancelOutcome, ErrorCode};

use crate::abuse::Limit;

/// The `code` labels of `agentwire_call_failures_total`: the provider's
/// failures by kind ([`CallFailure::ALL`]), then the server's one.
const CALL_FAILURE_CODES: [&str; CallFailure::ALL.len() + 1] = [
    CallFailure::ALL[0].as_str(),
    CallFailure::ALL[1].as_str(),
    CallFailure::ALL[2].as_str(),
    CallFailure::ALL[3].as_str(),
    CallFailure::ALL[4].as_str(),
    CallFailure::ALL[5].as_str(),
    "input_overflow",
];

#[derive(Default)]
pub struct Metrics {
    pub connections_total: AtomicU64,
    pub turns_total: AtomicU64,
    pub messages_received_total: AtomicU64,
    pub messages_sent_total: AtomicU64,
    /// Client frames refused because the inbound byte budget was spent.
    pub inbound_refused_total: AtomicU64,
    /// Connections closed with 4008 because they fell too far behind their
    /// session's log.
    pub slow_consumer_closes_total: AtomicU64,
    /// Connections following a running turn in their session's log now (a
    /// gauge the connections move themselves).
    pub log_readers: AtomicU64,
    /// Credentials that did not validate (refused or a wrong password).
    pub auth_failures_total: AtomicU64,
    /// Requests and turns refused by an abuse limit, by [`Limit::ALL`].
    abuse_refusals_total: [AtomicU64; 4],
    /// Text deltas read merged into another by readers far behind.
    pub coalesced_deltas_total: AtomicU64,
    /// Rejoins whose missed events followed (`served`) or could not
    /// (`refused`: another epoch, or the log no longer reaches back).
    pub replays_served_total: AtomicU64,
    pub replays_refused_total: AtomicU64,
    /// Cancels, by what they found: a turn, nothing running, another's.
    pub cancels_total: [AtomicU64; 3],
    /// Voice calls opened.
    pub calls_opened: AtomicU64,
    /// Voice calls that failed (at open or later), by [`CALL_FAILURE_CODES`].
    call_failures: [AtomicU64; CALL_FAILURE_CODES.len()],
    /// Bytes of caller audio handed to providers.
    pub call_audio_in_bytes: AtomicU64,
    /// Bytes of provider audio queued for callers.
    pub call_audio_out_bytes: AtomicU64,
    /// Provider audio frames dropped: the queue to the socket was full, or
    /// the frame waited past `call::LATE_AUDIO`.
    pub call_audio_dropped: AtomicU64,
    /// Responses the caller spoke over.
    pub call_barge_ins: AtomicU64,
    /// Error frames sent, indexed like `ErrorCode::KNOWN`; the last slot
    /// counts handler-defined codes.
    errors_total: [AtomicU64; ErrorCode::KNOWN.len() + 1],
}

impl Metrics {
    pub fn count_cancel(&self, outcome: CancelOutcome) {
        let slot = match outcome {
            CancelOutcome::Cancelled(_) => 0,
            CancelOutcome::NothingRunning => 1,
            CancelOutcome::NotYours => 2,
        };
        self.cancels_total[slot].fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_replay(&self, replayed: bool) {
        let counter = match replayed {
            true => &self.replays_served_total,
            false => &self.replays_refused_total,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_error(&self, code: ErrorCode) {
        let slot = ErrorCode::KNOWN
            .iter()
            .position(|known| *known == code)
            .unwrap_or(ErrorCode::KNOWN.len());
        self.errors_total[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call its provider failed, by the failure's kind.
    pub fn count_call_failure(&self, failure: CallFailure) {
        let index = CallFailure::ALL.iter().position(|f| *f == failure);
        self.call_failures[index.unwrap_or(0)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call ended because its provider fell behind the caller.
    pub fn count_call_input_overflow(&self) {
        self.call_failures[CallFailure::ALL.len()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refusal by `limit`.
    pub fn count_abuse_refusal(&self, limit: Limit) {
        let index = Limit::ALL.iter().position(|l| *l == limit).unwrap_or(0);
        self.abuse_refusals_total[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Renders every metric; `gauges` are sampled by the caller.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(2048);
        gauge(
            &mut out,
            "agentwire_connections_active",
            "Open WebSocket connections.",
            gauges.connections_active,
        );
        gauge(
            &mut out,
            "agentwire_sessions_live",
            "Sessions held in memory.",
            gauges.sessions_live,
        );
        gauge(
            &mut out,
            "agentwire_draining",
            "1 while the server drains.",
            u64::from(gauges.draining),
        );
        counter(
            &mut out,
            "agentwire_connections_total",
            "WebSocket connections accepted.",
            &self.connections_total,
        );
        counter(
            &mut out,
            "agentwire_turns_total",
            "Turns started.",
            &self.turns_total,
        );
        counter(
            &mut out,
            "agentwire_messages_received_total",
            "Frames received from clients.",
            &self.messages_received_total,
        );
        counter(
            &mut out,
            "agentwire_messages_sent_total",
            "Frames sent to clients.",
            &self.messages_sent_total,
        );
        gauge(
            &mut out,
            "agentwire_inbound_bytes_in_flight",
            "Bytes of client frames read and not yet released (server.limits.inbound_bytes_in_flight).",
            gauges.inbound_bytes_in_flight,
        );
        counter(
            &mut out,
            "agentwire_inbound_refused_total",
            "Client frames refused because the inbound byte budget was spent.",
            &self.inbound_refused_total,
        );
        let readers = self.log_readers.load(Ordering::Relaxed);
        gauge(
            &mut out,
            "agentwire_log_readers",
            "Connections following a running turn in their session's log.",
            readers,
        );
        counter(
            &mut out,
            "agentwire_slow_consumer_closes_total",
            "Connections closed with 4008 because they fell too far behind their session's log.",
            &self.slow_consumer_closes_total,
        );
        counter(
            &mut out,
            "agentwire_coalesced_deltas_total",
            "Text deltas merged into one frame for readers far behind the log.",
            &self.coalesced_deltas_total,
        );
        let _ = writeln!(
            out,
            "# HELP agentwire_replays_total Rejoins, by whether what the client missed followed.\n# TYPE agentwire_replays_total counter"
        );
        for (outcome, value) in [
            ("served", &self.replays_served_total),
            ("refused", &self.replays_refused_total),
        ] {
            let _ = writeln!(
                out,
                "agentwire_replays_total{{outcome=\"{outcome}\"}} {}",
                value.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP agentwire_cancels_total Cancels, by what they found.\n# TYPE agentwire_cancels_total counter"
        );
        let outcomes = ["cancelled", "nothing_running", "not_yours"];
        for (outcome, value) in outcomes.iter().zip(&self.cancels_total) {
            let _ = writeln!(
                out,
                "agentwire_cancels_total{{outcome=\"{outcome}\"}} {}",
                value.load(Ordering::Relaxed)
            );
        }
        counter(
            &mut out,
            "agentwire_auth_failures_total",
            "Credentials that did not validate (refused, or a wrong password).",
            &self.auth_failures_total,
        );
        let _ = writeln!(
            out,
            "# HELP agentwire_abuse_refusals_total Requests and turns refused by an abuse limit, by limit."
        );
        let _ = writeln!(out, "# TYPE agentwire_abuse_refusals_total counter");
        for (limit, value) in Limit::ALL.iter().zip(&self.abuse_refusals_total) {
            let _ = writeln!(
                out,
                "agentwire_abuse_refusals_total{{limit=\"{}\"}} {}",
                limit.as_str(),
                value.load(Ordering::Relaxed)
            );
        }
        gauge(
            &mut out,
            "agentwire_calls_active",
            "Voice calls open now (server.limits.max_calls).",
            gauges.calls_active,
        );
        gauge(
            &mut out,
            "agentwire_calls_parked",
            "Voice calls parked for a resume= (server.limits.call_park_window).",
            gauges.calls_parked,
        );
        let _ = writeln!(
            out,
            "# HELP agentwire_call_failures_total Voice calls that failed, at open or later, by code."
        );
        let _ = writeln!(out, "# TYPE agentwire_call_failures_total counter");
        for (code, value) in CALL_FAILURE_CODES.iter().zip(&self.call_failures) {
            let _ = writeln!(
                out,
                "agentwire_call_failures_total{{code=\"{code}\"}} {}",
                value.load(Ordering::Relaxed)
            );
        }
        for (name, help, value) in [
            (
                "agentwire_calls_total",
                "Voice calls opened.",
                &self.calls_opened,
            ),
            (
                "agentwire_call_audio_in_bytes_total",
                "Bytes of caller audio handed to voice providers.",
                &self.call_audio_in_bytes,
            ),
            (
                "agentwire_call_audio_out_bytes_total",
                "Bytes of voice provider audio queued for callers.",
                &self.call_audio_out_bytes,
            ),
            (
                "agentwire_call_audio_dropped_total",
                "Voice provider audio frames dropped as late (a full queue, or older than 300 ms).",
                &self.call_audio_dropped,
            ),
            (
                "agentwire_call_barge_ins_total",
                "Spoken responses the caller interrupted.",
                &self.call_barge_ins,
            ),
        ] {
            counter(&mut out, name, help, value);
        }
        let _ = writeln!(
            out,
            "# HELP agentwire_errors_total Error frames sent to clients, by code."
        );
        let _ = writeln!(out, "# TYPE agentwire_errors_total counter");
        let codes = ErrorCode::KNOWN.iter().map(|c| c.as_str()).chain(["OTHER"]);
        for (code, value) in codes.zip(&self.errors_total) {
            let _ = writeln!(
                out,
                "agentwire_errors_total{{code=\"{code}\"}} {}",
                value.load(Ordering::Relaxed)
            );
        }
        out
    }
}

/// The engine's live-state counters (`agentwire_live_*`): leases, shared
/// log batches, mirrored entries, controls between replicas, Redis errors.
pub fn render_live(out: &mut String, counters: &agentwire_core::live::LiveCounters) {
    for (name, help, value) in counters.all() {
        let _ = writeln!(
            out,
            "# HELP agentwire_live_{name} {help}\n# TYPE agentwire_live_{name} counter\nagentwire_live_{name} {value}"
        );
    }
}

/// Values sampled at render time rather than counted.
pub struct Gauges {
    pub connections_active: u64,
    pub sessions_live: u64,
    pub draining: bool,
    pub inbound_bytes_in_flight: u64,
    pub calls_active: u64,
    pub calls_parked: u64,
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

fn counter(out: &mut String, name: &str, help: &str, value: &AtomicU64) {
    let value = value.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
    );
}

//! Counters exported at `/metrics` in the Prometheus text format.
//!
//! Plain atomics with a fixed label set: the hot path pays one relaxed add,
//! and no metric is ever labelled by session or user.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use agentwire_core::ErrorCode;
use agentwire_core::realtime::CallFailure;
use agentwire_engine::CancelOutcome;

use crate::abuse::Limit;

/// What a resume of a call another replica holds came to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallHop {
    /// Relayed to the holder, which resumed the call.
    Relayed,
    /// Not relayed (the holder gone or not answering, no call parked
    /// there): served here as a fresh session.
    Failed,
}

/// [`CallHop`]'s labels, in its order.
const CALL_HOP_OUTCOMES: [&str; 2] = ["relayed", "failed"];

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
    /// Resumes of a call another replica holds, by [`CALL_HOP_OUTCOMES`].
    call_hops: [AtomicU64; CALL_HOP_OUTCOMES.len()],
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

    /// Counts a resume of a call another replica holds: relayed there, or
    /// not (the holder gone, or no call parked there), and served here.
    pub(crate) fn count_call_hop(&self, outcome: CallHop) {
        self.call_hops[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The resumes counted with `outcome`.
    #[cfg(test)]
    pub(crate) fn call_hops(&self, outcome: CallHop) -> u64 {
        self.call_hops[outcome as usize].load(Ordering::Relaxed)
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

    /// Renders every metric of [`METRICS`], in its order; `gauges` are
    /// sampled by the caller.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(2048);
        for metric in &METRICS {
            metric.render(self, gauges, &mut out);
        }
        out
    }

    /// The values of a family labelled by `names`, one per counter.
    fn labelled(
        names: impl IntoIterator<Item = &'static str>,
        counters: &[AtomicU64],
    ) -> Vec<(&'static str, u64)> {
        names
            .into_iter()
            .zip(counters)
            .map(|(name, counter)| (name, counter.load(Ordering::Relaxed)))
            .collect()
    }
}

/// A metric's Prometheus type.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// Where a metric's value is read at render time.
enum Read {
    /// One of [`Metrics`]' atomics.
    Atomic(fn(&Metrics) -> &AtomicU64),
    /// Sampled by the caller.
    Sampled(fn(&Gauges) -> u64),
    /// A family, a sample per value of `label`.
    Labelled {
        label: &'static str,
        values: fn(&Metrics) -> Vec<(&'static str, u64)>,
    },
}

/// One metric: its name, its help line, its type and where its value is.
struct Metric {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    read: Read,
}

impl Metric {
    const fn counter(name: &'static str, help: &'static str, read: Read) -> Metric {
        Metric {
            name,
            help,
            kind: Kind::Counter,
            read,
        }
    }

    const fn gauge(name: &'static str, help: &'static str, read: Read) -> Metric {
        Metric {
            name,
            help,
            kind: Kind::Gauge,
            read,
        }
    }

    /// `# HELP`, `# TYPE` and its samples.
    fn render(&self, metrics: &Metrics, gauges: &Gauges, out: &mut String) {
        let Metric {
            name, help, kind, ..
        } = self;
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        match &self.read {
            Read::Atomic(read) => {
                let _ = writeln!(out, "{name} {}", read(metrics).load(Ordering::Relaxed));
            }
            Read::Sampled(read) => {
                let _ = writeln!(out, "{name} {}", read(gauges));
            }
            Read::Labelled { label, values } => {
                for (value, sample) in values(metrics) {
                    let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {sample}");
                }
            }
        }
    }
}

/// Every metric `/metrics` shows, in the order it shows them.
static METRICS: [Metric; 27] = [
    Metric::gauge(
        "agentwire_connections_active",
        "Open WebSocket connections.",
        Read::Sampled(|g| g.connections_active),
    ),
    Metric::gauge(
        "agentwire_sessions_live",
        "Sessions held in memory.",
        Read::Sampled(|g| g.sessions_live),
    ),
    Metric::counter(
        "agentwire_session_windows_released_total",
        "Idle live sessions whose window left memory, to be read again at their next turn (server.limits.idle_window_ttl).",
        Read::Sampled(|g| g.windows_released),
    ),
    Metric::gauge(
        "agentwire_draining",
        "1 while the server drains.",
        Read::Sampled(|g| u64::from(g.draining)),
    ),
    Metric::counter(
        "agentwire_connections_total",
        "WebSocket connections accepted.",
        Read::Atomic(|m| &m.connections_total),
    ),
    Metric::counter(
        "agentwire_turns_total",
        "Turns started.",
        Read::Atomic(|m| &m.turns_total),
    ),
    Metric::counter(
        "agentwire_messages_received_total",
        "Frames received from clients.",
        Read::Atomic(|m| &m.messages_received_total),
    ),
    Metric::counter(
        "agentwire_messages_sent_total",
        "Frames sent to clients.",
        Read::Atomic(|m| &m.messages_sent_total),
    ),
    Metric::gauge(
        "agentwire_inbound_bytes_in_flight",
        "Bytes of client frames read and not yet released (server.limits.inbound_bytes_in_flight).",
        Read::Sampled(|g| g.inbound_bytes_in_flight),
    ),
    Metric::counter(
        "agentwire_inbound_refused_total",
        "Client frames refused because the inbound byte budget was spent.",
        Read::Atomic(|m| &m.inbound_refused_total),
    ),
    Metric::gauge(
        "agentwire_log_readers",
        "Connections following a running turn in their session's log.",
        Read::Atomic(|m| &m.log_readers),
    ),
    Metric::counter(
        "agentwire_slow_consumer_closes_total",
        "Connections closed with 4008 because they fell too far behind their session's log.",
        Read::Atomic(|m| &m.slow_consumer_closes_total),
    ),
    Metric::counter(
        "agentwire_coalesced_deltas_total",
        "Text deltas merged into one frame for readers far behind the log.",
        Read::Atomic(|m| &m.coalesced_deltas_total),
    ),
    Metric::counter(
        "agentwire_replays_total",
        "Rejoins, by whether what the client missed followed.",
        Read::Labelled {
            label: "outcome",
            values: |m| {
                let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
                vec![
                    ("served", load(&m.replays_served_total)),
                    ("refused", load(&m.replays_refused_total)),
                ]
            },
        },
    ),
    Metric::counter(
        "agentwire_cancels_total",
        "Cancels, by what they found.",
        Read::Labelled {
            label: "outcome",
            values: |m| {
                let outcomes = ["cancelled", "nothing_running", "not_yours"];
                Metrics::labelled(outcomes, &m.cancels_total)
            },
        },
    ),
    Metric::counter(
        "agentwire_auth_failures_total",
        "Credentials that did not validate (refused, or a wrong password).",
        Read::Atomic(|m| &m.auth_failures_total),
    ),
    Metric::counter(
        "agentwire_abuse_refusals_total",
        "Requests and turns refused by an abuse limit, by limit.",
        Read::Labelled {
            label: "limit",
            values: |m| {
                let limits = Limit::ALL.iter().map(|limit| limit.as_str());
                Metrics::labelled(limits, &m.abuse_refusals_total)
            },
        },
    ),
    Metric::gauge(
        "agentwire_calls_active",
        "Voice calls open now (server.limits.max_calls).",
        Read::Sampled(|g| g.calls_active),
    ),
    Metric::gauge(
        "agentwire_calls_parked",
        "Voice calls parked for a resume= (server.limits.call_park_window).",
        Read::Sampled(|g| g.calls_parked),
    ),
    Metric::counter(
        "agentwire_call_failures_total",
        "Voice calls that failed, at open or later, by code.",
        Read::Labelled {
            label: "code",
            values: |m| Metrics::labelled(CALL_FAILURE_CODES, &m.call_failures),
        },
    ),
    Metric::counter(
        "agentwire_calls_total",
        "Voice calls opened.",
        Read::Atomic(|m| &m.calls_opened),
    ),
    Metric::counter(
        "agentwire_call_audio_in_bytes_total",
        "Bytes of caller audio handed to voice providers.",
        Read::Atomic(|m| &m.call_audio_in_bytes),
    ),
    Metric::counter(
        "agentwire_call_audio_out_bytes_total",
        "Bytes of voice provider audio queued for callers.",
        Read::Atomic(|m| &m.call_audio_out_bytes),
    ),
    Metric::counter(
        "agentwire_call_audio_dropped_total",
        "Voice provider audio frames dropped as late (a full queue, or older than 300 ms).",
        Read::Atomic(|m| &m.call_audio_dropped),
    ),
    Metric::counter(
        "agentwire_call_barge_ins_total",
        "Spoken responses the caller interrupted.",
        Read::Atomic(|m| &m.call_barge_ins),
    ),
    Metric::counter(
        "agentwire_call_hops_total",
        "Resumes of a voice call another replica holds, by outcome.",
        Read::Labelled {
            label: "outcome",
            values: |m| Metrics::labelled(CALL_HOP_OUTCOMES, &m.call_hops),
        },
    ),
    Metric::counter(
        "agentwire_errors_total",
        "Error frames sent to clients, by code.",
        Read::Labelled {
            label: "code",
            values: |m| {
                let codes = ErrorCode::KNOWN.iter().map(|c| c.as_str()).chain(["OTHER"]);
                Metrics::labelled(codes, &m.errors_total)
            },
        },
    ),
];

/// The engine's live-state counters (`agentwire_live_*`): leases, shared
/// log batches, mirrored entries, controls between replicas, Redis errors.
pub fn render_live(out: &mut String, counters: &agentwire_engine::LiveCounters) {
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
    /// Idle sessions' windows let go so far: a counter, read from the engine.
    pub windows_released: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each metric once, in the table's order: its help and type lines,
    /// then its samples, each read from its own counter or gauge.
    #[test]
    fn every_metric_renders_its_help_type_and_samples() {
        let metrics = Metrics::default();
        metrics.turns_total.store(7, Ordering::Relaxed);
        metrics.log_readers.store(2, Ordering::Relaxed);
        metrics.count_cancel(CancelOutcome::NotYours);
        metrics.count_error(ErrorCode::KNOWN[0]);
        let gauges = Gauges {
            connections_active: 3,
            sessions_live: 0,
            draining: true,
            inbound_bytes_in_flight: 0,
            calls_active: 0,
            calls_parked: 5,
            windows_released: 4,
        };
        let out = metrics.render(&gauges);
        let types: Vec<&str> = out
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .collect();
        let names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        let typed: Vec<&str> = types.iter().filter_map(|t| t.split(' ').next()).collect();
        assert_eq!(typed, names);
        for expected in [
            "# HELP agentwire_turns_total Turns started.\n# TYPE agentwire_turns_total counter\nagentwire_turns_total 7\n",
            "# TYPE agentwire_log_readers gauge\nagentwire_log_readers 2\n",
            "agentwire_connections_active 3\n",
            "agentwire_draining 1\n",
            "agentwire_calls_parked 5\n",
            "agentwire_session_windows_released_total 4\n",
            "agentwire_cancels_total{outcome=\"cancelled\"} 0\nagentwire_cancels_total{outcome=\"nothing_running\"} 0\nagentwire_cancels_total{outcome=\"not_yours\"} 1\n",
            "agentwire_call_failures_total{code=\"input_overflow\"} 0\n",
            "agentwire_errors_total{code=\"OTHER\"} 0\n",
        ] {
            assert!(out.contains(expected), "{expected:?} missing from\n{out}");
        }
        let first_error = format!(
            "agentwire_errors_total{{code=\"{}\"}} 1\n",
            ErrorCode::KNOWN[0].as_str()
        );
        assert!(out.contains(&first_error), "{out}");
    }
}

//! What the connections of one process counted, in a form that child
//! processes print as a JSON line and the parent merges.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies are recorded in microseconds, 1 µs to 10 minutes, 3 significant
/// digits.
const HIGHEST_US: u64 = 600_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("valid histogram bounds")
}

pub fn record(histogram: &mut Histogram<u64>, elapsed: Duration) {
    let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    histogram.saturating_record(us.clamp(1, HIGHEST_US));
}

/// The counters of one process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Sockets opened and greeted with `connected` (burst: every reopen too).
    pub connects: u64,
    /// Sockets open at the end of the run phase.
    pub held: u64,
    /// Connections that ran turns (stream, soak; `--active` of them).
    #[serde(default)]
    pub streamed: u64,
    /// Turns that ended in `done` (burst: reconnects).
    pub turns: u64,
    pub chunks: u64,
    /// Turns whose chunks did not add up to their `done`, or to the script.
    pub lost_or_reordered: u64,
    /// Server error codes, or ours: `TIMEOUT`, `CLOSED`, `HTTP_503`,
    /// `LOST_OR_REORDERED`...
    pub errors: BTreeMap<String, u64>,
}

/// Counters and latency histograms.
#[derive(Debug, Clone)]
pub struct Stats {
    pub counts: Counts,
    /// TCP connect + upgrade + the `connected` frame.
    pub connect: Histogram<u64>,
    /// Message sent → first `chunk`.
    pub first_chunk: Histogram<u64>,
    /// Message sent → `done`.
    pub turn: Histogram<u64>,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            counts: Counts::default(),
            connect: histogram(),
            first_chunk: histogram(),
            turn: histogram(),
        }
    }
}

impl Stats {
    pub fn error(&mut self, code: &str) {
        *self.counts.errors.entry(code.to_owned()).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Stats) {
        let (a, b) = (&mut self.counts, &other.counts);
        a.connects += b.connects;
        a.held += b.held;
        a.streamed += b.streamed;
        a.turns += b.turns;
        a.chunks += b.chunks;
        a.lost_or_reordered += b.lost_or_reordered;
        for (code, n) in &b.errors {
            *a.errors.entry(code.clone()).or_default() += n;
        }
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.connect.add(&other.connect);
        let _ = self.first_chunk.add(&other.first_chunk);
        let _ = self.turn.add(&other.turn);
    }

    pub fn to_wire(&self) -> WireStats {
        WireStats {
            counts: self.counts.clone(),
            connect: buckets(&self.connect),
            first_chunk: buckets(&self.first_chunk),
            turn: buckets(&self.turn),
        }
    }

    pub fn from_wire(wire: &WireStats) -> Stats {
        let mut stats = Stats {
            counts: wire.counts.clone(),
            ..Stats::default()
        };
        for (histogram, buckets) in [
            (&mut stats.connect, &wire.connect),
            (&mut stats.first_chunk, &wire.first_chunk),
            (&mut stats.turn, &wire.turn),
        ] {
            for &(value, count) in buckets {
                let _ = histogram.record_n(value.clamp(1, HIGHEST_US), count);
            }
        }
        stats
    }
}

/// [`Stats`] as a child process prints it: histograms as (value, count)
/// pairs of their non-empty buckets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireStats {
    pub counts: Counts,
    pub connect: Vec<(u64, u64)>,
    pub first_chunk: Vec<(u64, u64)>,
    pub turn: Vec<(u64, u64)>,
}

fn buckets(histogram: &Histogram<u64>) -> Vec<(u64, u64)> {
    histogram
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// p50 / p99 / p99.9 / max of a histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    pub fn of(histogram: &Histogram<u64>) -> Option<Percentiles> {
        (!histogram.is_empty()).then(|| Percentiles {
            p50_us: histogram.value_at_quantile(0.5),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_through_the_wire_keeps_counts_and_percentiles() {
        let mut a = Stats::default();
        for ms in 1..=100 {
            record(&mut a.turn, Duration::from_millis(ms));
        }
        a.counts.turns = 100;
        a.error("TIMEOUT");
        let mut b = Stats::default();
        record(&mut b.turn, Duration::from_secs(5));
        b.counts.turns = 1;
        b.error("TIMEOUT");
        b.error("CLOSED");

        let wire = serde_json::to_string(&b.to_wire()).unwrap();
        let b = Stats::from_wire(&serde_json::from_str(&wire).unwrap());
        a.merge(&b);

        assert_eq!(a.counts.turns, 101);
        assert_eq!(a.counts.errors["TIMEOUT"], 2);
        assert_eq!(a.counts.errors["CLOSED"], 1);
        assert_eq!(a.turn.len(), 101);
        let p = Percentiles::of(&a.turn).unwrap();
        assert!((49_000..=52_000).contains(&p.p50_us), "{p:?}");
        assert!(p.max_us >= 4_990_000, "{p:?}");
    }
}

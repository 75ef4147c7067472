//! What a run measured, as a table and as one JSON line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::options::{RunOptions, Scenario};
use crate::probe::Sample;
use crate::soak::SoakUsage;
use crate::stats::{Percentiles, Stats};

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub label: String,
    pub scenario: Scenario,
    pub target: String,
    pub connections: usize,
    /// 0: the test agent's `stream` script (3 chunks); else chunks per turn.
    pub chunks_per_turn: u32,
    /// Load-generator processes the connections were spread over.
    pub processes: usize,
    /// Sockets open at the end of the run phase.
    pub held: u64,
    /// Connections that ran turns (`--active` of them, else every one).
    pub streamed: u64,
    /// Sockets opened in the connect phase, and how fast.
    pub connects: u64,
    pub connect_secs: f64,
    pub connect_rate: f64,
    pub run_secs: f64,
    /// Turns that ended in `done` (burst: sockets reopened).
    pub turns: u64,
    pub turns_per_sec: f64,
    pub chunks: u64,
    pub chunks_per_sec: f64,
    pub connect_latency: Option<Percentiles>,
    pub first_chunk: Option<Percentiles>,
    pub turn_latency: Option<Percentiles>,
    pub errors: BTreeMap<String, u64>,
    pub error_total: u64,
    pub lost_or_reordered: u64,
    pub server: Option<ServerUsage>,
    /// Soak: the RSS samples and the memory figures.
    pub soak: Option<SoakUsage>,
}

/// The server's memory and CPU time, from /proc.
#[derive(Debug, Clone, Serialize)]
pub struct ServerUsage {
    pub pid: u32,
    /// Before the first connect.
    pub rss_before_kib: u64,
    /// At the end of the run phase, every socket still open.
    pub rss_after_kib: u64,
    /// RSS growth over the sockets held.
    pub rss_per_connection_bytes: Option<f64>,
    /// CPU time (user + system) in the connect phase and in the run phase.
    pub cpu_connect_us: u64,
    pub cpu_run_us: u64,
    /// Run-phase CPU time over the run phase: cores busy.
    pub cpu_cores: f64,
    pub cpu_us_per_turn: Option<f64>,
    pub cpu_us_per_chunk: Option<f64>,
    /// RSS growth over the sockets held, after `--idle-after` with every
    /// socket open and silent.
    pub rss_per_connection_idle_bytes: Option<f64>,
}

/// The server samples taken around the phases.
#[derive(Debug, Clone, Copy)]
pub struct Samples {
    pub pid: u32,
    pub before: Sample,
    pub connected: Sample,
    pub ran: Sample,
    /// After `--idle-after`, when given.
    pub idled: Option<Sample>,
}

impl Report {
    pub fn new(
        options: &RunOptions,
        processes: usize,
        stats: &Stats,
        connect_time: Duration,
        run_time: Duration,
        samples: Option<Samples>,
    ) -> Report {
        let c = &stats.counts;
        let connect_secs = connect_time.as_secs_f64();
        let run_secs = run_time.as_secs_f64();
        // Burst reopens count as connects too; the connect phase had the rest.
        let connects = match options.scenario {
            Scenario::Burst => c.connects - c.turns,
            _ => c.connects,
        };
        let per = |n: u64, d: u64| (d > 0).then(|| n as f64 / d as f64);
        let server = samples.map(|s| {
            let cpu_run_us = s.ran.cpu_us.saturating_sub(s.connected.cpu_us);
            ServerUsage {
                pid: s.pid,
                rss_before_kib: s.before.rss_kib,
                rss_after_kib: s.ran.rss_kib,
                rss_per_connection_bytes: per(
                    s.ran.rss_kib.saturating_sub(s.before.rss_kib) * 1024,
                    c.held,
                ),
                cpu_connect_us: s.connected.cpu_us.saturating_sub(s.before.cpu_us),
                cpu_run_us,
                cpu_cores: cpu_run_us as f64 / 1e6 / run_secs.max(1e-9),
                cpu_us_per_turn: per(cpu_run_us, c.turns),
                cpu_us_per_chunk: per(cpu_run_us, c.chunks),
                rss_per_connection_idle_bytes: s.idled.and_then(|idled| {
                    per(
                        idled.rss_kib.saturating_sub(s.before.rss_kib) * 1024,
                        c.held,
                    )
                }),
            }
        });
        Report {
            label: options.label.clone(),
            scenario: options.scenario,
            target: options.target.to_string(),
            connections: options.connections,
            chunks_per_turn: options.chunks,
            processes,
            held: c.held,
            streamed: c.streamed,
            connects,
            connect_secs,
            connect_rate: connects as f64 / connect_secs.max(1e-9),
            run_secs,
            turns: c.turns,
            turns_per_sec: c.turns as f64 / run_secs.max(1e-9),
            chunks: c.chunks,
            chunks_per_sec: c.chunks as f64 / run_secs.max(1e-9),
            connect_latency: Percentiles::of(&stats.connect),
            first_chunk: Percentiles::of(&stats.first_chunk),
            turn_latency: Percentiles::of(&stats.turn),
            error_total: c.errors.values().sum(),
            errors: c.errors.clone(),
            lost_or_reordered: c.lost_or_reordered,
            server,
            soak: None,
        }
    }

    pub fn json_line(&self) -> String {
        serde_json::to_string(self).expect("a report serializes")
    }

    /// `metric  value` rows.
    pub fn table(&self) -> String {
        let mut rows = vec![[
            format!("{} against {}", self.scenario.name(), self.label),
            self.target.clone(),
        ]];
        for metric in metrics(self.scenario) {
            rows.push([metric.name.to_owned(), format_value((metric.value)(self))]);
        }
        if let Some(idle) = server(self, |s| s.rss_per_connection_idle_bytes) {
            rows.push([
                "server RSS per connection after --idle-after (KiB)".to_owned(),
                format_value(Some(idle / 1024.0)),
            ]);
        }
        rows.push(["errors by code".to_owned(), format_errors(&self.errors)]);
        render(&rows)
    }
}

/// The stream scenario's row of what one streaming connection costs.
pub const ACTIVE_SESSION_RSS: &str = "server RSS per active session (KiB)";

/// One number of a report, named for tables and medians.
pub struct Metric {
    pub name: &'static str,
    pub value: fn(&Report) -> Option<f64>,
}

/// The metrics that mean something for `scenario`: the connections, the
/// scenario's own, then the server's usage and the errors.
pub fn metrics(scenario: Scenario) -> Vec<Metric> {
    let mut list = vec![
        m("connections held", |r| Some(r.held as f64)),
        m("connect rate (/s)", |r| Some(r.connect_rate)),
    ];
    match scenario {
        Scenario::Idle => list.extend(idle_metrics()),
        Scenario::Soak => list.extend(soak_metrics()),
        Scenario::Stream => list.extend(stream_metrics()),
        Scenario::Burst => list.extend(burst_metrics()),
    }
    list.extend(usage_and_error_metrics());
    list
}

/// Idle: how fast connections open, and what one costs the server.
fn idle_metrics() -> [Metric; 3] {
    [
        m("connect p50 (ms)", |r| ms(r.connect_latency, |p| p.p50_us)),
        m("connect p99 (ms)", |r| ms(r.connect_latency, |p| p.p99_us)),
        m("server RSS per connection (KiB)", |r| {
            server(r, |s| s.rss_per_connection_bytes).map(|b| b / 1024.0)
        }),
    ]
}

/// Soak: the load it ran, and the server's memory through and after it.
fn soak_metrics() -> [Metric; 10] {
    [
        m("turns/s", |r| Some(r.turns_per_sec)),
        m("chunks/s", |r| Some(r.chunks_per_sec)),
        m("turn p99 (ms)", |r| ms(r.turn_latency, |p| p.p99_us)),
        m("server CPU per turn (µs)", |r| {
            server(r, |s| s.cpu_us_per_turn)
        }),
        m("server RSS warm idle (MiB)", |r| {
            soak(r, |s| s.rss_idle_kib as f64 / 1024.0)
        }),
        m("server RSS at warm-up end (MiB)", |r| {
            soak(r, |s| s.rss_warm_kib as f64 / 1024.0)
        }),
        m("server RSS at load end (MiB)", |r| {
            soak(r, |s| s.rss_end_kib as f64 / 1024.0)
        }),
        m("RSS growth after warm-up (%)", |r| {
            soak(r, |s| s.growth_after_warmup_pct)
        }),
        m("server RSS after the load (MiB)", |r| {
            soak(r, |s| s.rss_after_close_kib as f64 / 1024.0)
        }),
        m("RSS after the load vs warm idle (%)", |r| {
            soak(r, |s| s.after_close_vs_idle_pct)
        }),
    ]
}

/// Stream: throughput, first-chunk and turn latency, CPU per turn and chunk,
/// and what a streaming connection costs the server (its session's window,
/// log and buffers besides the socket's own).
fn stream_metrics() -> [Metric; 11] {
    [
        m("turns/s", |r| Some(r.turns_per_sec)),
        m("chunks/s", |r| Some(r.chunks_per_sec)),
        m("first chunk p50 (ms)", |r| ms(r.first_chunk, |p| p.p50_us)),
        m("first chunk p99 (ms)", |r| ms(r.first_chunk, |p| p.p99_us)),
        m("first chunk p99.9 (ms)", |r| {
            ms(r.first_chunk, |p| p.p999_us)
        }),
        m("turn p50 (ms)", |r| ms(r.turn_latency, |p| p.p50_us)),
        m("turn p99 (ms)", |r| ms(r.turn_latency, |p| p.p99_us)),
        m("turn p99.9 (ms)", |r| ms(r.turn_latency, |p| p.p999_us)),
        m("server CPU per turn (µs)", |r| {
            server(r, |s| s.cpu_us_per_turn)
        }),
        m("server CPU per chunk (µs)", |r| {
            server(r, |s| s.cpu_us_per_chunk)
        }),
        m(ACTIVE_SESSION_RSS, |r| {
            // Only when every connection streamed: with `--active`, idle
            // sockets share the growth.
            let per_connection = server(r, |s| s.rss_per_connection_bytes)?;
            (r.streamed == r.held).then_some(per_connection / 1024.0)
        }),
    ]
}

/// Burst: reopens, their latency, and CPU per reopen.
fn burst_metrics() -> [Metric; 5] {
    [
        m("reopens/s", |r| Some(r.turns_per_sec)),
        m("connect p50 (ms)", |r| ms(r.connect_latency, |p| p.p50_us)),
        m("connect p99 (ms)", |r| ms(r.connect_latency, |p| p.p99_us)),
        m("connect p99.9 (ms)", |r| {
            ms(r.connect_latency, |p| p.p999_us)
        }),
        m("server CPU per reopen (µs)", |r| {
            server(r, |s| s.cpu_us_per_turn)
        }),
    ]
}

/// Every scenario: the server's memory and CPU, the errors, lost turns.
fn usage_and_error_metrics() -> [Metric; 5] {
    [
        m("server RSS before (MiB)", |r| {
            server(r, |s| Some(s.rss_before_kib as f64 / 1024.0))
        }),
        m("server RSS after (MiB)", |r| {
            server(r, |s| Some(s.rss_after_kib as f64 / 1024.0))
        }),
        m("server CPU (cores busy)", |r| {
            server(r, |s| Some(s.cpu_cores))
        }),
        m("errors", |r| Some(r.error_total as f64)),
        m("lost or reordered turns", |r| {
            Some(r.lost_or_reordered as f64)
        }),
    ]
}

fn m(name: &'static str, value: fn(&Report) -> Option<f64>) -> Metric {
    Metric { name, value }
}

/// A latency in milliseconds, `pick`ed from microsecond percentiles.
fn ms(p: Option<Percentiles>, pick: fn(&Percentiles) -> u64) -> Option<f64> {
    p.as_ref().map(|p| pick(p) as f64 / 1000.0)
}

fn server<T: Into<f64>>(r: &Report, pick: fn(&ServerUsage) -> Option<T>) -> Option<f64> {
    r.server.as_ref().and_then(pick).map(Into::into)
}

fn soak(r: &Report, pick: fn(&SoakUsage) -> f64) -> Option<f64> {
    r.soak.as_ref().map(pick)
}

pub fn format_value(value: Option<f64>) -> String {
    match value {
        None => "-".to_owned(),
        Some(v) if v.abs() >= 100.0 || v == v.trunc() => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

pub fn format_errors(errors: &BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return "none".to_owned();
    }
    let mut out = String::new();
    for (code, n) in errors {
        let _ = write!(out, "{}{code}={n}", if out.is_empty() { "" } else { ", " });
    }
    out
}

/// Rows as aligned plain-text columns, the first row as the heading.
pub fn render<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        for (j, (w, cell)) in widths.iter().zip(row).enumerate() {
            let pad = w - cell.chars().count();
            if j == 0 {
                let _ = write!(out, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{cell}", " ".repeat(pad));
            }
        }
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (N - 1)));
            out.push('\n');
        }
    }
    out
}

/// Rows as a Markdown table, the first row as the heading.
pub fn render_markdown<const N: usize>(rows: &[[String; N]]) -> String {
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        out.push_str("| ");
        out.push_str(&row.join(" | "));
        out.push_str(" |\n");
        if i == 0 {
            out.push('|');
            out.push_str(&"---|".repeat(N));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_values_and_tables() {
        assert_eq!(format_value(None), "-");
        assert_eq!(format_value(Some(12345.6)), "12346");
        assert_eq!(format_value(Some(3.0)), "3");
        assert_eq!(format_value(Some(12.34)), "12.3");
        assert_eq!(format_value(Some(0.123)), "0.12");
        let rows = [
            ["a".to_owned(), "b".to_owned()],
            ["long".to_owned(), "1".to_owned()],
        ];
        assert_eq!(render(&rows), "a     b\n-------\nlong  1\n");
        assert_eq!(
            render_markdown(&rows),
            "| a | b |\n|---|---|\n| long | 1 |\n"
        );
    }
}

//! `compare`: agentwire and the bare baseline under the same load, each as a
//! fresh child process per run, alternating which goes first, and the
//! medians of the runs side by side with their ratio.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::options::{
    CHUNK_AGENT, CHUNK_CHARS, RunOptions, SCRIPT_AGENT, Scenario, check_loopback, chunk_reply,
};
use crate::report::{
    ACTIVE_SESSION_RSS, Report, format_errors, format_value, metrics, render, render_markdown,
};
use crate::soak;

/// How long a server may take to say where it listens.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Rows of the soak's RSS table in the Markdown.
const SOAK_TABLE_ROWS: usize = 13;

/// Where agentwire keeps sessions during a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Storage {
    Sqlite,
    Memory,
}

#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The load; `target`, `server_pid` and `label` are set per server.
    pub run: RunOptions,
    pub runs: usize,
    pub storage: Storage,
    pub agentwire_bin: PathBuf,
}

/// The agentwire configuration for a benchmark: the test agent, a `bench`
/// agent whose mock model streams `chunks` 20-character chunks, room for
/// `connections` sockets, and rate limits out of the way.
pub fn agentwire_config(connections: usize, chunks: u32, sessions: &str) -> String {
    format!(
        r#"server:
  listen: 127.0.0.1:0
  limits:
    max_connections: {max_connections}
    messages_per_second: 1000000
    message_burst: 1000000
storage:
  sessions: "{sessions}"
providers:
  - name: bench
    type: mock
    default_response: "{reply}"
agents:
  - name: {SCRIPT_AGENT}
    handler: test
  - name: {CHUNK_AGENT}
    handler: runtime
    provider: bench
"#,
        max_connections = connections + 1000,
        reply = chunk_reply(chunks.max(1)),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Agentwire,
    Baseline,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Agentwire => "agentwire",
            Kind::Baseline => "baseline",
        }
    }
}

/// A server child process, killed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    async fn start(kind: Kind, options: &CompareOptions) -> anyhow::Result<Server> {
        let chunks = options.run.chunks.max(1);
        let (mut command, dir) = match kind {
            Kind::Agentwire => {
                let dir = tempfile::tempdir()?;
                let sessions = match options.storage {
                    Storage::Sqlite => {
                        format!("sqlite://{}", dir.path().join("bench.db").display())
                    }
                    Storage::Memory => "memory".to_owned(),
                };
                let config = dir.path().join("agentwire.yaml");
                let yaml = agentwire_config(options.run.connections, chunks, &sessions);
                std::fs::write(&config, yaml)?;
                let mut command = Command::new(&options.agentwire_bin);
                command
                    .arg("serve")
                    .arg("--config")
                    .arg(&config)
                    .args(["--listen", "127.0.0.1:0"])
                    .env("NO_COLOR", "1")
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                (command, Some(dir))
            }
            Kind::Baseline => {
                let mut command = Command::new(std::env::current_exe()?);
                command
                    .arg("baseline-server")
                    .args(["--listen", "127.0.0.1:0"])
                    .args(["--chunks", &chunks.to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit());
                (command, None)
            }
        };
        let mut child = command
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", kind.name()))?;
        let addr = match kind {
            Kind::Agentwire => {
                let stderr = child.stderr.take().context("agentwire stderr")?;
                find_address(stderr, "agentwire listening", START_TIMEOUT).await
            }
            Kind::Baseline => {
                let stdout = child.stdout.take().context("baseline stdout")?;
                find_address(stdout, "baseline listening", START_TIMEOUT).await
            }
        }
        .with_context(|| format!("{} did not start", kind.name()))?;
        check_loopback(addr)?;
        Ok(Server {
            child,
            addr,
            _dir: dir,
        })
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Starts `command` (agentwire, or a wrapper such as valgrind whose last
/// argument is agentwire) serving `config` on a loopback port; returns the
/// child, killed on drop, and the address it listens on, once it says so
/// within `within`.
pub(crate) async fn spawn_agentwire(
    mut command: Command,
    config: &Path,
    within: Duration,
) -> anyhow::Result<(Child, SocketAddr)> {
    let mut child = command
        .args(["serve", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start agentwire")?;
    let stderr = child.stderr.take().context("agentwire stderr")?;
    let addr = find_address(stderr, "agentwire listening", within).await?;
    check_loopback(addr)?;
    Ok((child, addr))
}

/// Reads lines until one holding `marker`, returns its `address=`, and
/// drains the rest of the stream in the background so the server never
/// blocks on a full pipe.
pub(crate) async fn find_address(
    stream: impl AsyncRead + Unpin + Send + 'static,
    marker: &str,
    within: Duration,
) -> anyhow::Result<SocketAddr> {
    let mut lines = BufReader::new(stream).lines();
    let found = tokio::time::timeout(within, async {
        while let Some(line) = lines.next_line().await? {
            let line = strip_ansi(&line);
            if line.contains(marker) {
                return parse_address(&line).context("no address= on the listening line");
            }
        }
        bail!("exited before listening")
    })
    .await
    .context("no listening line in time")??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(found)
}

fn parse_address(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("address=")? + "address=".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Drops `ESC [ ... letter` sequences (tracing colours its fields).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every run of both servers.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub scenario: Scenario,
    pub connections: usize,
    pub chunks_per_turn: u32,
    pub storage: &'static str,
    pub agentwire: Vec<Report>,
    pub baseline: Vec<Report>,
}

pub async fn compare(options: &CompareOptions) -> anyhow::Result<Comparison> {
    options.run.validate()?;
    anyhow::ensure!((1..=15).contains(&options.runs), "--runs must be 1..=15");
    anyhow::ensure!(
        options.agentwire_bin.exists(),
        "no agentwire binary at {} (build it: cargo build --release -p agentwire)",
        options.agentwire_bin.display()
    );
    let mut comparison = Comparison {
        scenario: options.run.scenario,
        connections: options.run.connections,
        chunks_per_turn: options.run.chunks,
        storage: match options.storage {
            Storage::Sqlite => "sqlite",
            Storage::Memory => "memory",
        },
        agentwire: Vec::new(),
        baseline: Vec::new(),
    };
    for run in 0..options.runs {
        let order = if run % 2 == 0 {
            [Kind::Agentwire, Kind::Baseline]
        } else {
            [Kind::Baseline, Kind::Agentwire]
        };
        for kind in order {
            let server = Server::start(kind, options).await?;
            let mut load = options.run.clone();
            load.target = server.addr;
            load.server_pid = server.child.id();
            load.label = kind.name().to_owned();
            let report = crate::run(&load).await;
            server.stop().await;
            let report = report?;
            eprintln!(
                "run {}/{} {}: {:.0} turns/s, {:.0} chunks/s, {} held, errors: {}",
                run + 1,
                options.runs,
                kind.name(),
                report.turns_per_sec,
                report.chunks_per_sec,
                report.held,
                format_errors(&report.errors),
            );
            match kind {
                Kind::Agentwire => comparison.agentwire.push(report),
                Kind::Baseline => comparison.baseline.push(report),
            }
        }
    }
    Ok(comparison)
}

/// The median of the values present, if any.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// One metric's medians and their ratio.
#[derive(Debug, Clone, Serialize)]
pub struct MedianRow {
    pub metric: &'static str,
    pub agentwire: Option<f64>,
    pub baseline: Option<f64>,
    pub ratio: Option<f64>,
}

impl Comparison {
    pub fn medians(&self) -> Vec<MedianRow> {
        metrics(self.scenario)
            .into_iter()
            .map(|m| {
                let of = |reports: &[Report]| median(reports.iter().filter_map(m.value).collect());
                let (a, b) = (of(&self.agentwire), of(&self.baseline));
                let ratio = match (a, b) {
                    (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                    _ => None,
                };
                MedianRow {
                    metric: m.name,
                    agentwire: a,
                    baseline: b,
                    ratio,
                }
            })
            .collect()
    }

    fn rows(&self) -> Vec<[String; 4]> {
        let mut rows = vec![[
            format!("medians of {} runs", self.agentwire.len()),
            "agentwire".to_owned(),
            "baseline".to_owned(),
            "agentwire / baseline".to_owned(),
        ]];
        for row in self.medians() {
            rows.push([
                row.metric.to_owned(),
                format_value(row.agentwire),
                format_value(row.baseline),
                row.ratio.map_or("-".to_owned(), |r| format!("{r:.2}")),
            ]);
        }
        let errors = |reports: &[Report]| {
            let all: Vec<String> = reports.iter().map(|r| format_errors(&r.errors)).collect();
            all.join(" / ")
        };
        rows.push([
            "errors by code, per run".to_owned(),
            errors(&self.agentwire),
            errors(&self.baseline),
            String::new(),
        ]);
        rows
    }

    pub fn title(&self) -> String {
        let turns = match (self.scenario, self.chunks_per_turn) {
            (Scenario::Stream, 0) => ", test-agent `stream` script (3 chunks)".to_owned(),
            (Scenario::Stream | Scenario::Soak, k) if k > 0 => {
                format!(", {k}-chunk turns ({CHUNK_CHARS} chars/chunk)")
            }
            (Scenario::Soak, _) => ", test-agent `stream` script (3 chunks)".to_owned(),
            _ => String::new(),
        };
        format!(
            "{}: {} connections{turns}, agentwire sessions in {}",
            self.scenario.name(),
            self.connections,
            self.storage
        )
    }

    pub fn table(&self) -> String {
        format!("{}\n{}", self.title(), render(&self.rows()))
    }

    /// The table as Markdown, and the targets of issue #7 this run checks.
    pub fn markdown(&self) -> String {
        let mut out = format!("### {}\n\n{}", self.title(), render_markdown(&self.rows()));
        let sizing = self.sizing();
        if !sizing.is_empty() {
            out.push_str("\nFor sizing (agentwire medians):\n\n");
            for line in sizing {
                out.push_str(&format!("- {line}\n"));
            }
        }
        if self.scenario == Scenario::Soak {
            out.push_str(&self.soak_samples_markdown());
        }
        let targets = self.targets();
        if !targets.is_empty() {
            out.push_str("\nTargets:\n\n");
            for (what, met) in targets {
                out.push_str(&format!(
                    "- {what}: **{}**\n",
                    if met { "met" } else { "missed" }
                ));
            }
        }
        out
    }

    /// What agentwire's medians mean for sizing a deployment.
    pub fn sizing(&self) -> Vec<String> {
        let medians = self.medians();
        let get = |name: &str| {
            medians
                .iter()
                .find(|r| r.metric == name)
                .and_then(|r| r.agentwire)
        };
        let mut lines = Vec::new();
        match self.scenario {
            Scenario::Idle => {
                if let (Some(kib), Some(base)) = (
                    get("server RSS per connection (KiB)"),
                    get("server RSS before (MiB)"),
                ) {
                    lines.push(format!(
                        "an idle connection costs {kib:.1} KiB of RSS: 100,000 idle connections \
                         need about {:.0} MiB on top of the {base:.0} MiB the process starts with \
                         (and a file-descriptor limit above 100,000)",
                        kib * 100_000.0 / 1024.0
                    ));
                }
            }
            Scenario::Stream => {
                if let (Some(turn), Some(chunk)) = (
                    get("server CPU per turn (µs)"),
                    get("server CPU per chunk (µs)"),
                ) {
                    lines.push(format!(
                        "one core serves about {:.0} turns/s of this shape ({:.0} chunks/s) \
                         at {turn:.0} µs of CPU per turn",
                        1e6 / turn,
                        1e6 / chunk
                    ));
                }
                if let Some(kib) = get(ACTIVE_SESSION_RSS) {
                    lines.push(format!(
                        "a connection streaming turns of this shape costs {kib:.1} KiB of RSS \
                         (its socket, its session's window and log, its turn in flight): \
                         1,000 of them about {:.0} MiB",
                        kib * 1000.0 / 1024.0
                    ));
                }
                if let (Some(p99), Some(tps)) = (get("turn p99 (ms)"), get("turns/s")) {
                    lines.push(format!(
                        "at {tps:.0} turns/s over {} connections, 99 % of turns ended within \
                         {p99:.0} ms (client and server sharing the machine)",
                        self.connections
                    ));
                }
            }
            Scenario::Soak => {
                if let Some(soak) = self.agentwire.first().and_then(|r| r.soak.as_ref()) {
                    lines.push(format!(
                        "warm idle is the RSS with all {} connections open before the first \
                         turn; growth is measured from the first sample after the {:.0} s \
                         warm-up to the end of the load; \"after the load\" is sampled {:.0} s \
                         after every socket closed",
                        self.connections, soak.warmup_secs, soak.settle_secs
                    ));
                }
            }
            Scenario::Burst => {
                if let Some(reopen) = get("server CPU per reopen (µs)") {
                    lines.push(format!(
                        "one core accepts about {:.0} new connections/s at {reopen:.0} µs \
                         of CPU each",
                        1e6 / reopen
                    ));
                }
            }
        }
        lines
    }

    /// (target, met) for the figures this comparison has.
    pub fn targets(&self) -> Vec<(String, bool)> {
        let medians = self.medians();
        let get = |name: &str| medians.iter().find(|r| r.metric == name);
        let mut targets = Vec::new();
        let clean = self
            .agentwire
            .iter()
            .chain(&self.baseline)
            .all(|r| r.error_total == 0 && r.lost_or_reordered == 0);
        if let Some(v) = get("server RSS per connection (KiB)").and_then(|r| r.agentwire) {
            targets.push((
                format!("agentwire RSS per idle connection {v:.2} KiB ≤ 10 KiB"),
                v <= 10.0,
            ));
        }
        if self.scenario == Scenario::Stream {
            if let Some(r) = get("chunks/s").and_then(|r| r.ratio) {
                targets.push((format!("chunks/s {r:.2} × baseline ≥ 0.8"), r >= 0.8));
            }
            if let Some(r) = get("first chunk p99 (ms)").and_then(|r| r.ratio) {
                targets.push((format!("first-chunk p99 {r:.2} × baseline ≤ 2"), r <= 2.0));
            }
            if self.chunks_per_turn == 20
                && let Some(v) = get("server CPU per turn (µs)").and_then(|r| r.agentwire)
            {
                targets.push((
                    format!("agentwire CPU per 20-chunk turn {v:.0} µs ≤ 100 µs"),
                    v <= 100.0,
                ));
            }
            if self.chunks_per_turn == 20
                && let Some(v) = get(ACTIVE_SESSION_RSS).and_then(|r| r.agentwire)
            {
                targets.push((
                    format!("agentwire RSS per active session {v:.1} KiB ≤ 32 KiB"),
                    v <= 32.0,
                ));
            }
        }
        if self.scenario == Scenario::Soak {
            let pct = |name: &str| get(name).and_then(|r| r.agentwire);
            if let Some(v) = pct("RSS growth after warm-up (%)") {
                targets.push((
                    format!(
                        "agentwire RSS growth after warm-up {v:.1} % < {:.0} %",
                        soak::GROWTH_TARGET_PCT
                    ),
                    v < soak::GROWTH_TARGET_PCT,
                ));
            }
            if let (Some(v), Some(after), Some(idle)) = (
                pct("RSS after the load vs warm idle (%)"),
                pct("server RSS after the load (MiB)"),
                pct("server RSS warm idle (MiB)"),
            ) {
                targets.push((
                    format!(
                        "agentwire RSS after the load {after:.1} MiB within {:.0} % of the warm \
                         idle {idle:.1} MiB ({v:+.1} %)",
                        soak::AFTER_LOAD_TARGET_PCT
                    ),
                    v <= soak::AFTER_LOAD_TARGET_PCT,
                ));
            }
        }
        targets.push((
            "zero errors and zero lost or reordered chunks, every run".to_owned(),
            clean,
        ));
        targets
    }

    /// The first run's RSS samples of both servers, side by side, thinned
    /// to a screenful (the JSON line has every sample).
    fn soak_samples_markdown(&self) -> String {
        let samples = |reports: &[Report]| {
            reports
                .first()
                .and_then(|r| r.soak.as_ref())
                .map(|s| s.samples.clone())
                .unwrap_or_default()
        };
        let (ours, theirs) = (samples(&self.agentwire), samples(&self.baseline));
        if ours.is_empty() {
            return String::new();
        }
        let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
        let mut rows = vec![[
            "t (s)".to_owned(),
            "agentwire RSS (MiB)".to_owned(),
            "baseline RSS (MiB)".to_owned(),
        ]];
        let interval = ours.get(1).map_or(1.0, |s| s.t_secs.max(1e-9));
        for sample in soak::thin(&ours, SOAK_TABLE_ROWS) {
            // The baseline was sampled on the same interval: match by index.
            let index = (sample.t_secs / interval).round() as usize;
            let baseline = theirs.get(index).map_or("-".to_owned(), |s| mib(s.rss_kib));
            rows.push([
                format!("{:.0}", sample.t_secs),
                mib(sample.rss_kib),
                baseline,
            ]);
        }
        format!("\nRSS through the first run:\n\n{}", render_markdown(&rows))
    }

    pub fn json_line(&self) -> String {
        #[derive(Serialize)]
        struct Line<'a> {
            #[serde(flatten)]
            comparison: &'a Comparison,
            medians: Vec<MedianRow>,
        }
        serde_json::to_string(&Line {
            comparison: self,
            medians: self.medians(),
        })
        .expect("a comparison serializes")
    }
}

/// The default agentwire binary: `agentwire` beside this one (both are in
/// `target/release` after `cargo build --release`).
pub fn default_agentwire_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("agentwire")))
        .unwrap_or_else(|| Path::new("target/release/agentwire").to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_address_in_a_coloured_log_line() {
        let line = "\u{1b}[2m2026-01-01T00:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m \u{1b}[2magentwire\u{1b}[0m\u{1b}[2m:\u{1b}[0m agentwire listening \u{1b}[3maddress\u{1b}[0m\u{1b}[2m=\u{1b}[0m127.0.0.1:4242 \u{1b}[3magents\u{1b}[0m\u{1b}[2m=\u{1b}[0m[\"a\"]";
        let plain = strip_ansi(line);
        assert!(plain.contains("agentwire listening"));
        assert_eq!(
            parse_address(&plain),
            Some("127.0.0.1:4242".parse().unwrap())
        );
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}

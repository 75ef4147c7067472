//! `instructions`: the instructions agentwire executes per streamed turn,
//! counted by callgrind (valgrind's instruction counter). Unlike CPU time
//! the count does not move with the machine's load or its system-call cost,
//! so a committed budget can hold it (`bench/instructions.sh`, `.ci/run`).
//!
//! One server runs under callgrind and is driven over its real socket by
//! this process, one connection at a time. After a warm-up, each round is a
//! window of N turns and a window of 2N turns, each window a fresh
//! connection (a new session); callgrind's counters are dumped at the end of
//! each window (`callgrind_control --dump`, which also zeroes them). The two
//! windows differ by N turns alone (the connection, the session and the
//! close cancel out), so a turn costs `(2N window − N window) / N`: the
//! (N+1)th to 2Nth turns of a session, whose cost grows with its history
//! until the context window is full, so N is part of what a count means.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use tokio::process::{Child, Command};

use crate::compare::{agentwire_config, median, spawn_agentwire};
use crate::options::{MAX_DURATION, RunOptions, Scenario};

/// Startup under callgrind is slow (a debug build, migrations).
const COUNTED_START_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a window waits after its connection closed before the dump, so
/// the server has finished closing it (under callgrind a close takes
/// milliseconds; the wait costs no instructions: the server is idle).
const CLOSE_SETTLE: Duration = Duration::from_secs(1);

/// Where the measured server keeps its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setup {
    /// The embedded default: SQLite, this process alone.
    Sqlite,
    /// One replica: sessions in PostgreSQL, live state in Redis.
    Replica { postgres: String, redis: String },
}

impl Setup {
    pub fn name(&self) -> &'static str {
        match self {
            Setup::Sqlite => "sqlite",
            Setup::Replica { .. } => "replica",
        }
    }

    fn config(&self, dir: &Path, chunks: u32) -> String {
        match self {
            Setup::Sqlite => {
                let sessions = format!("sqlite://{}", dir.join("instructions.db").display());
                agentwire_config(1, chunks, &sessions)
            }
            Setup::Replica { postgres, redis } => {
                // A prefix of its own: nothing another run left in Redis is
                // read.
                let prefix = format!("instructions-{}:", uuid::Uuid::new_v4().simple());
                format!(
                    "{}live: \"{redis}\"\nredis:\n  key_prefix: \"{prefix}\"\n",
                    agentwire_config(1, chunks, postgres)
                )
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct InstructionOptions {
    pub agentwire_bin: PathBuf,
    pub setup: Setup,
    /// N: turns of the shorter window (the longer has 2N).
    pub turns: u64,
    /// Rounds of the two windows; the figure is their median.
    pub rounds: usize,
    /// Turns before the first window (caches, pools, the prepared queries).
    pub warmup: u64,
    pub chunks: u32,
    /// Keep callgrind's dumps (`callgrind.out.N`, one per window) and the
    /// server's config here, for `callgrind_annotate`; `None`: a temporary
    /// directory.
    pub keep: Option<PathBuf>,
}

/// What one measurement found.
#[derive(Debug, Clone, Serialize)]
pub struct Count {
    pub setup: &'static str,
    pub turns: u64,
    pub chunks: u32,
    /// Instructions per turn, one per round.
    pub per_turn: Vec<u64>,
    /// The median of `per_turn`.
    pub median: u64,
    /// (max − min) / median of `per_turn`.
    pub spread: f64,
}

impl Count {
    pub fn summary(&self) -> String {
        let rounds: Vec<String> = self.per_turn.iter().map(|n| group(*n)).collect();
        format!(
            "{}: {} instructions per {}-chunk turn (median of {} rounds of {} and {} turns: {}; spread {:.2}%)",
            self.setup,
            group(self.median),
            self.chunks,
            self.per_turn.len(),
            self.turns,
            2 * self.turns,
            rounds.join(", "),
            self.spread * 100.0,
        )
    }
}

/// `1234567` as `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Starts agentwire under callgrind and measures.
pub async fn measure(options: &InstructionOptions) -> anyhow::Result<Count> {
    anyhow::ensure!(options.turns >= 1, "--turns must be at least 1");
    anyhow::ensure!(
        (1..=15).contains(&options.rounds),
        "--rounds must be 1..=15"
    );
    anyhow::ensure!(
        options.agentwire_bin.exists(),
        "no agentwire binary at {}",
        options.agentwire_bin.display()
    );
    let temporary = tempfile::tempdir()?;
    let dir = match &options.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.as_path()
        }
        None => temporary.path(),
    };
    let mut server = CountedServer::start(options, dir).await?;
    let result = windows(options, &mut server).await;
    server.stop().await;
    let windows = result?;
    Ok(count(options, &windows))
}

/// The instructions of each window: `[N, 2N]` per round.
async fn windows(
    options: &InstructionOptions,
    server: &mut CountedServer,
) -> anyhow::Result<Vec<[u64; 2]>> {
    server.window(options, options.warmup.max(1)).await?;
    let mut windows = Vec::with_capacity(options.rounds);
    for round in 1..=options.rounds {
        let short = server.window(options, options.turns).await?;
        let long = server.window(options, 2 * options.turns).await?;
        eprintln!(
            "{} round {round}/{}: {} instructions for {} turns, {} for {}",
            options.setup.name(),
            options.rounds,
            group(short),
            options.turns,
            group(long),
            2 * options.turns,
        );
        windows.push([short, long]);
    }
    Ok(windows)
}

fn count(options: &InstructionOptions, windows: &[[u64; 2]]) -> Count {
    let per_turn: Vec<u64> = windows
        .iter()
        .map(|[short, long]| long.saturating_sub(*short) / options.turns)
        .collect();
    let as_f64 = |v: &[u64]| v.iter().map(|n| *n as f64).collect::<Vec<_>>();
    let middle = median(as_f64(&per_turn)).unwrap_or(0.0);
    let (min, max) = (
        per_turn.iter().min().copied().unwrap_or(0),
        per_turn.iter().max().copied().unwrap_or(0),
    );
    Count {
        setup: options.setup.name(),
        turns: options.turns,
        chunks: options.chunks,
        spread: if middle > 0.0 {
            (max - min) as f64 / middle
        } else {
            0.0
        },
        median: middle.round() as u64,
        per_turn,
    }
}

/// agentwire under callgrind, killed on drop.
struct CountedServer {
    child: Child,
    pid: u32,
    addr: std::net::SocketAddr,
    /// callgrind's output file; the dumps are `<out>.1`, `<out>.2`, …
    out: PathBuf,
    dumps: usize,
}

impl CountedServer {
    async fn start(options: &InstructionOptions, dir: &Path) -> anyhow::Result<CountedServer> {
        let config = dir.join("agentwire.yaml");
        std::fs::write(&config, options.setup.config(dir, options.chunks))?;
        let out = dir.join("callgrind.out");
        let mut valgrind = Command::new("valgrind");
        valgrind
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(format!("--log-file={}", dir.join("valgrind.log").display()))
            .arg(&options.agentwire_bin);
        let (child, addr) = spawn_agentwire(valgrind, &config, COUNTED_START_TIMEOUT)
            .await
            .context("agentwire did not start under callgrind (is valgrind installed?)")?;
        let pid = child.id().context("valgrind exited at once")?;
        Ok(CountedServer {
            child,
            pid,
            addr,
            out,
            dumps: 0,
        })
    }

    /// One connection's `turns` turns; the instructions the server executed
    /// since the last dump.
    async fn window(&mut self, options: &InstructionOptions, turns: u64) -> anyhow::Result<u64> {
        let mut load = RunOptions::new(self.addr, Scenario::Stream);
        load.connections = 1;
        load.chunks = options.chunks;
        load.max_turns = turns;
        load.duration = MAX_DURATION;
        let report = crate::run(&load).await?;
        anyhow::ensure!(
            report.turns == turns && report.error_total == 0 && report.lost_or_reordered == 0,
            "a window of {turns} turns ran {} with {} errors and {} lost or reordered",
            report.turns,
            report.error_total,
            report.lost_or_reordered
        );
        tokio::time::sleep(CLOSE_SETTLE).await;
        self.dump().await
    }

    async fn dump(&mut self) -> anyhow::Result<u64> {
        let output = Command::new("callgrind_control")
            .arg("--dump")
            .arg(self.pid.to_string())
            .output()
            .await
            .context("cannot run callgrind_control")?;
        anyhow::ensure!(
            output.status.success(),
            "callgrind_control --dump failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        self.dumps += 1;
        let file = PathBuf::from(format!("{}.{}", self.out.display(), self.dumps));
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("no callgrind dump at {}", file.display()))?;
        total_instructions(&text).with_context(|| format!("no totals in {}", file.display()))
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// The `totals:` (or, failing it, `summary:`) line of a callgrind dump: its
/// first event is `Ir`, the instructions executed.
pub fn total_instructions(dump: &str) -> anyhow::Result<u64> {
    let line = dump
        .lines()
        .rev()
        .find(|l| l.starts_with("totals:"))
        .or_else(|| dump.lines().find(|l| l.starts_with("summary:")));
    let Some(line) = line else {
        bail!("no totals: line")
    };
    let first = line
        .split_once(':')
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split_whitespace().next())
        .context("an empty totals: line")?;
    first.parse().context("a totals: line that is not a count")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_instructions_of_a_dump() {
        let dump = "version: 1\nevents: Ir\nsummary: 900\nfn=main\n3 900\ntotals: 1234\n";
        assert_eq!(total_instructions(dump).unwrap(), 1234);
        assert_eq!(total_instructions("events: Ir\nsummary: 77\n").unwrap(), 77);
        assert!(total_instructions("events: Ir\n").is_err());
    }

    #[test]
    fn a_turn_is_the_difference_of_the_two_windows() {
        let options = InstructionOptions {
            agentwire_bin: PathBuf::new(),
            setup: Setup::Sqlite,
            turns: 10,
            rounds: 3,
            warmup: 1,
            chunks: 20,
            keep: None,
        };
        // 5,000 for the connection, 1,000 (then 1,010 and 990) per turn.
        let count = count(
            &options,
            &[[15_000, 25_000], [15_000, 25_100], [15_000, 24_900]],
        );
        assert_eq!(count.per_turn, vec![1_000, 1_010, 990]);
        assert_eq!(count.median, 1_000);
        assert!((count.spread - 0.02).abs() < 1e-9);
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(group(999), "999");
    }
}

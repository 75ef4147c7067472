//! `agentwire-loadgen run | compare | baseline-server`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use agentwire_loadgen::compare::{self, CompareOptions, Storage};
use agentwire_loadgen::instructions::{self, InstructionOptions, Setup};
use agentwire_loadgen::options::{Active, check_loopback, parse_duration};
use agentwire_loadgen::{RunOptions, Scenario, baseline};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};

/// The allocator agentwire ships with, so the baseline server (which runs in
/// this binary) differs from agentwire by the engine alone.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "agentwire-loadgen",
    about = "Load generator for agentwire on loopback, and a bare baseline server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario against a server already listening on loopback.
    Run {
        #[arg(long)]
        target: SocketAddr,
        /// The server's pid: report its RSS and CPU time from /proc.
        #[arg(long)]
        server_pid: Option<u32>,
        /// A name for the server in the report.
        #[arg(long, default_value = "server")]
        label: String,
        #[command(flatten)]
        load: Load,
    },
    /// Start agentwire and the baseline as child processes and run the same
    /// load against each, alternating; print medians and ratios.
    Compare {
        #[command(flatten)]
        load: Load,
        /// Runs per server.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Where agentwire keeps sessions.
        #[arg(long, value_enum, default_value = "sqlite")]
        storage: Storage,
        /// The agentwire binary (default: `agentwire` beside this one).
        #[arg(long)]
        agentwire_bin: Option<PathBuf>,
        /// Also write the table as Markdown to this file.
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
    /// Start agentwire and hold concurrent voice calls (mock echo provider,
    /// 20 ms frames both ways in real time): CPU per call-second, RSS per
    /// call, whether the audio kept time. One row per `--calls` count.
    Calls {
        /// Concurrent calls, one run each: `50,200`.
        #[arg(long, value_delimiter = ',', default_value = "50")]
        calls: Vec<usize>,
        #[arg(long, default_value = "20s", value_parser = parse_duration)]
        duration: Duration,
        #[arg(long)]
        agentwire_bin: Option<PathBuf>,
        /// Also write the table as Markdown to this file.
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
    /// Start agentwire with A2A and MCP on and measure a streamed turn's
    /// server CPU over the WebSocket, A2A and MCP (server-sent events) in
    /// one sitting; then, with `--streams`, how many A2A streams it holds
    /// at once.
    Facades {
        /// Streaming clients per front door.
        #[arg(long, default_value_t = 100)]
        connections: usize,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        /// Chunks per turn (the `bench` agent's mock model).
        #[arg(long, default_value_t = 20)]
        chunks: u32,
        /// A2A streams to hold open at once; 0 skips it.
        #[arg(long, default_value_t = 0)]
        streams: usize,
        #[arg(long)]
        agentwire_bin: Option<PathBuf>,
        /// Also write the table as Markdown to this file.
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
    /// Start agentwire under callgrind and count the instructions it
    /// executes per streamed turn over one connection: windows of N and 2N
    /// turns, their difference (bench/instructions.sh). Prints a summary,
    /// then the count as one JSON line.
    Instructions(InstructionArgs),
    /// Check a count against the committed budget: exit 1 when it is more
    /// than 3% over, saying how to raise the budget.
    BudgetCheck {
        /// The budget file (bench/instruction-budget.toml).
        #[arg(long)]
        budget: PathBuf,
        /// `profile.setup`, e.g. `debug.sqlite`.
        #[arg(long)]
        key: String,
        /// Instructions per turn, as `instructions` measured them.
        #[arg(long)]
        measured: u64,
    },
    /// Serve the bare baseline on a loopback address and print it.
    BaselineServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Chunks of the `bench` agent's reply.
        #[arg(long, default_value_t = 20)]
        chunks: u32,
    },
    /// One child process's share of a run (started by `run` itself).
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        target: SocketAddr,
        #[arg(long)]
        process: usize,
        #[arg(long)]
        first_index: usize,
        /// The whole run's connections, which `--active` counts from.
        #[arg(long)]
        active_of: Option<usize>,
        #[command(flatten)]
        load: Load,
    },
}

#[derive(Args)]
struct InstructionArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    setup: SetupArg,
    /// With `--setup replica`: the PostgreSQL URL of the sessions.
    #[arg(long, env = "AGENTWIRE_TEST_POSTGRES")]
    postgres: Option<String>,
    /// With `--setup replica`: the Redis URL of the live state.
    #[arg(long, env = "AGENTWIRE_TEST_REDIS")]
    redis: Option<String>,
    /// N: turns of the shorter window.
    #[arg(long, default_value_t = 20)]
    turns: u64,
    /// Rounds of both windows; the count is their median.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Turns before the first window.
    #[arg(long, default_value_t = 10)]
    warmup: u64,
    /// Chunks per turn (the `bench` agent's mock model).
    #[arg(long, default_value_t = 20)]
    chunks: u32,
    #[arg(long)]
    agentwire_bin: Option<PathBuf>,
    /// Keep callgrind's dumps (one per window) in this directory.
    #[arg(long)]
    keep: Option<PathBuf>,
}

impl InstructionArgs {
    fn options(self) -> anyhow::Result<InstructionOptions> {
        let setup = match (self.setup, self.postgres, self.redis) {
            (SetupArg::Sqlite, _, _) => Setup::Sqlite,
            (SetupArg::Replica, Some(postgres), Some(redis)) => Setup::Replica { postgres, redis },
            (SetupArg::Replica, _, _) => {
                anyhow::bail!("--setup replica needs --postgres and --redis")
            }
        };
        Ok(InstructionOptions {
            agentwire_bin: self
                .agentwire_bin
                .unwrap_or_else(compare::default_agentwire_bin),
            setup,
            turns: self.turns,
            rounds: self.rounds,
            warmup: self.warmup,
            chunks: self.chunks,
            keep: self.keep,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SetupArg {
    /// The embedded default (SQLite).
    Sqlite,
    /// One replica on PostgreSQL and Redis.
    Replica,
}

#[derive(Args)]
struct Load {
    #[arg(long, value_enum, default_value = "stream")]
    scenario: Scenario,
    /// Connections held at once.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Length of the run phase (after every connection is open): 500ms, 10s, 1m.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// The most turns (stream) or reopens (burst) over all connections.
    #[arg(long, default_value_t = 10_000_000)]
    max_turns: u64,
    /// 0: the test agent's `stream` script (3 chunks); K: a K-chunk reply
    /// from the `bench` agent (a mock model on agentwire).
    #[arg(long, default_value_t = 0)]
    chunks: u32,
    /// Connects in flight at once.
    #[arg(long, default_value_t = 64)]
    connect_concurrency: usize,
    /// Soak: how often the server's RSS is sampled during the run phase.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    sample_interval: Duration,
    /// Soak: growth is measured from the end of this part of the run phase
    /// (default: a tenth of --duration).
    #[arg(long, value_parser = parse_duration)]
    warmup: Option<Duration>,
    /// Soak: how long after every socket has closed the last RSS sample waits.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    settle: Duration,
    /// Stream and soak: only this many of the connections run turns (spread
    /// evenly); the others hold their sockets silent, as in `idle`.
    #[arg(long)]
    active: Option<usize>,
    /// Spread the connections over at least this many load-generator
    /// processes (more when one process's file limit needs it).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// Stream: after the run phase, hold every socket open and silent this
    /// long, then sample the server's RSS again (with --server-pid): what
    /// sessions with a conversation behind them cost once idle.
    #[arg(long, value_parser = parse_duration)]
    idle_after: Option<Duration>,
}

impl Load {
    fn options(&self, target: SocketAddr, label: &str) -> RunOptions {
        RunOptions {
            target,
            scenario: self.scenario,
            connections: self.connections,
            duration: self.duration,
            max_turns: self.max_turns,
            chunks: self.chunks,
            connect_concurrency: self.connect_concurrency,
            server_pid: None,
            label: label.to_owned(),
            sample_interval: self.sample_interval,
            warmup: self.warmup,
            settle: self.settle,
            active: self.active.map(|count| Active {
                count,
                of: self.connections,
            }),
            processes: self.processes,
            idle_after: self.idle_after,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    agentwire_loadgen::raise_fd_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Exit 0 on a clean run, 1 on errors or lost chunks, 2 when it could not run.
async fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run {
            target,
            server_pid,
            label,
            load,
        } => {
            let mut options = load.options(target, &label);
            options.server_pid = server_pid;
            let report = agentwire_loadgen::run(&options).await?;
            print!("{}", report.table());
            println!("{}", report.json_line());
            Ok(clean(
                report.error_total == 0 && report.lost_or_reordered == 0,
            ))
        }
        Command::Compare {
            load,
            runs,
            storage,
            agentwire_bin,
            markdown,
        } => compare_servers(&load, runs, storage, agentwire_bin, markdown).await,
        Command::Calls {
            calls,
            duration,
            agentwire_bin,
            markdown,
        } => hold_calls(calls, duration, agentwire_bin, markdown).await,
        Command::Facades {
            connections,
            duration,
            chunks,
            streams,
            agentwire_bin,
            markdown,
        } => {
            let options = agentwire_loadgen::facades::FacadeOptions {
                agentwire_bin: agentwire_bin.unwrap_or_else(compare::default_agentwire_bin),
                connections,
                duration,
                chunks,
                streams,
                markdown,
            };
            agentwire_loadgen::facades::run(options).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Instructions(args) => count_instructions(&args.options()?).await,
        Command::BudgetCheck {
            budget,
            key,
            measured,
        } => check_budget(&budget, &key, measured),
        Command::BaselineServer { listen, chunks } => {
            check_loopback(listen)?;
            let listener = tokio::net::TcpListener::bind(listen).await?;
            println!("baseline listening address={}", listener.local_addr()?);
            baseline::serve(listener, chunks, shutdown_signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker {
            target,
            process,
            first_index,
            active_of,
            load,
        } => {
            let mut options = load.options(target, "worker");
            if let (Some(active), Some(of)) = (options.active.as_mut(), active_of) {
                active.of = of;
            }
            agentwire_loadgen::child_worker(&options, process, first_index).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `compare`: agentwire and the baseline under the same load, `runs` times
/// each; clean when no run had errors or lost chunks.
async fn compare_servers(
    load: &Load,
    runs: usize,
    storage: Storage,
    agentwire_bin: Option<PathBuf>,
    markdown: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let options = CompareOptions {
        run: load.options(SocketAddr::from(([127, 0, 0, 1], 0)), "compare"),
        runs,
        storage,
        agentwire_bin: agentwire_bin.unwrap_or_else(compare::default_agentwire_bin),
    };
    let comparison = compare::compare(&options).await?;
    print!("{}", comparison.table());
    println!("{}", comparison.json_line());
    if let Some(path) = markdown {
        std::fs::write(&path, comparison.markdown())?;
    }
    let clean_runs = comparison
        .agentwire
        .iter()
        .chain(&comparison.baseline)
        .all(|r| r.error_total == 0 && r.lost_or_reordered == 0);
    Ok(clean(clean_runs))
}

/// `calls`: one run per count of concurrent calls, a row each; clean when
/// no call had errors or late frames dropped.
async fn hold_calls(
    counts: Vec<usize>,
    duration: Duration,
    agentwire_bin: Option<PathBuf>,
    markdown: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let agentwire_bin = agentwire_bin.unwrap_or_else(compare::default_agentwire_bin);
    let mut table = format!("{}\n", agentwire_loadgen::calls::CallsReport::header());
    let mut clean_runs = true;
    for calls in counts {
        let options = agentwire_loadgen::calls::CallsOptions {
            calls,
            duration,
            agentwire_bin: agentwire_bin.clone(),
        };
        let report = agentwire_loadgen::calls::run(&options).await?;
        clean_runs &= report.errors == 0 && report.late_dropped == 0;
        table.push_str(&report.row());
        table.push('\n');
        println!("{}", report.row());
    }
    if let Some(path) = markdown {
        std::fs::write(&path, &table)?;
    }
    Ok(clean(clean_runs))
}

/// `instructions`: the count's summary, then its JSON line.
async fn count_instructions(options: &InstructionOptions) -> anyhow::Result<ExitCode> {
    let count = instructions::measure(options).await?;
    println!("{}", count.summary());
    println!("{}", serde_json::to_string(&count)?);
    Ok(ExitCode::SUCCESS)
}

/// `budget-check`: exit 1, saying how to raise the budget, when `measured`
/// is more than 3% over the budget `key` of the file `budget`.
fn check_budget(budget: &Path, key: &str, measured: u64) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(budget)
        .with_context(|| format!("cannot read {}", budget.display()))?;
    let allowed = agentwire_loadgen::budget::lookup(&text, key)?;
    match agentwire_loadgen::budget::check(key, measured, allowed) {
        Ok(verdict) => {
            println!("{verdict}");
            Ok(ExitCode::SUCCESS)
        }
        Err(verdict) => {
            eprintln!("{verdict}");
            Ok(ExitCode::from(1))
        }
    }
}

fn clean(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

async fn shutdown_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

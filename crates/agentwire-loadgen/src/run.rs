//! One run: raise the file limit, spread the connections over as many
//! processes as the limit needs (at least `--processes`), step them through
//! the phases together, and sample the server between phases.
//!
//! A child process is this binary's hidden `worker` subcommand. It talks to
//! the parent in lines: it prints `connected`, waits for `run` on stdin,
//! prints `ran`, waits for `close`, then prints its counts as one JSON line.
//! A child whose stdin closes stops at once.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

use crate::client::Worker;
use crate::options::{RunOptions, Scenario};
use crate::probe;
use crate::report::{Report, Samples};
use crate::soak::{RssSample, Sampler, SoakUsage};
use crate::stats::{Stats, WireStats};

/// File descriptors each process keeps for itself (stdio, the runtime, the
/// children's pipes).
const FD_RESERVE: u64 = 64;
/// How long a child may take to answer a step, beyond the run's duration.
const CHILD_SLACK: Duration = Duration::from_secs(300);

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit.
pub fn raise_fd_limit() -> u64 {
    rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024)
}

/// Runs `options` and reports. Connections beyond what one process may hold,
/// or all of them when `--processes` asks for more than one, run in child
/// processes.
pub async fn run(options: &RunOptions) -> anyhow::Result<Report> {
    options.validate()?;
    anyhow::ensure!(
        options.scenario != Scenario::Soak || options.server_pid.is_some(),
        "--scenario soak samples the server's RSS: it needs --server-pid (or `compare`)"
    );
    let per_process = raise_fd_limit().saturating_sub(FD_RESERVE).max(1);
    let processes = options
        .connections
        .div_ceil(per_process as usize)
        .max(options.processes)
        .min(options.connections);
    let sample = |pid| probe::sample(pid).with_context(|| format!("--server-pid {pid}"));
    let before = options.server_pid.map(sample).transpose()?;

    let started = Instant::now();
    let mut workers = if processes == 1 {
        Workers::Local(Worker::connect(options, 0, 0).await)
    } else {
        Workers::Children(spawn_children(options, processes).await?)
    };
    let connect_time = started.elapsed();
    let connected = options.server_pid.map(sample).transpose()?;

    let started = Instant::now();
    let soak_pid = options
        .server_pid
        .filter(|_| options.scenario == Scenario::Soak);
    let rss_samples = match soak_pid {
        None => {
            workers.run(options).await?;
            None
        }
        Some(pid) => Some(run_sampling(&mut workers, options, pid).await?),
    };
    let run_time = started.elapsed();
    let ran = options.server_pid.map(sample).transpose()?;
    let idled = match (options.server_pid, options.idle_after) {
        (Some(pid), Some(wait)) => {
            tokio::time::sleep(wait).await;
            Some(sample(pid)?)
        }
        _ => None,
    };

    let stats = workers.close(options).await?;
    let samples = match (options.server_pid, before, connected, ran) {
        (Some(pid), Some(before), Some(connected), Some(ran)) => Some(Samples {
            pid,
            before,
            connected,
            ran,
            idled,
        }),
        _ => None,
    };
    let soak = match (soak_pid, rss_samples, connected) {
        (Some(pid), Some(rss_samples), Some(connected)) => {
            tokio::time::sleep(options.settle).await;
            let after_close = sample(pid)?;
            SoakUsage::new(
                connected.rss_kib,
                rss_samples,
                options.sample_interval,
                options.warmup(),
                after_close.rss_kib,
                options.settle,
            )
        }
        _ => None,
    };
    let mut report = Report::new(options, processes, &stats, connect_time, run_time, samples);
    report.soak = soak;
    Ok(report)
}

/// The run phase with the server's RSS sampled every `--sample-interval`.
async fn run_sampling(
    workers: &mut Workers,
    options: &RunOptions,
    pid: u32,
) -> anyhow::Result<Vec<RssSample>> {
    let mut sampler = Sampler::start(pid).with_context(|| format!("--server-pid {pid}"))?;
    tokio::select! {
        ran = workers.run(options) => ran?,
        failed = sampler.every(options.sample_interval) => {
            failed.with_context(|| format!("--server-pid {pid}"))?;
        }
    }
    Ok(sampler.finish()?)
}

enum Workers {
    Local(Worker),
    Children(Vec<ChildWorker>),
}

struct ChildWorker {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl ChildWorker {
    async fn expect(&mut self, want: &str, within: Duration) -> anyhow::Result<String> {
        let line = tokio::time::timeout(within, self.stdout.next_line())
            .await
            .with_context(|| format!("a worker process did not say {want:?} in time"))??
            .with_context(|| format!("a worker process exited before saying {want:?}"))?;
        if !want.is_empty() && line != want {
            bail!("a worker process said {line:?}, not {want:?}");
        }
        Ok(line)
    }

    async fn say(&mut self, word: &str) -> anyhow::Result<()> {
        self.stdin.write_all(format!("{word}\n").as_bytes()).await?;
        Ok(self.stdin.flush().await?)
    }
}

impl Workers {
    async fn run(&mut self, options: &RunOptions) -> anyhow::Result<()> {
        match self {
            Workers::Local(worker) => worker.run().await,
            Workers::Children(children) => {
                for child in children.iter_mut() {
                    child.say("run").await?;
                }
                for child in children.iter_mut() {
                    child.expect("ran", options.duration + CHILD_SLACK).await?;
                }
            }
        }
        Ok(())
    }

    async fn close(self, options: &RunOptions) -> anyhow::Result<Stats> {
        match self {
            Workers::Local(worker) => Ok(worker.close().await),
            Workers::Children(mut children) => {
                for child in children.iter_mut() {
                    child.say("close").await?;
                }
                let mut stats = Stats::default();
                for child in children.iter_mut() {
                    let line = child.expect("", options.duration + CHILD_SLACK).await?;
                    let wire: WireStats = serde_json::from_str(&line)
                        .context("a worker process printed a bad JSON line")?;
                    stats.merge(&Stats::from_wire(&wire));
                }
                Ok(stats)
            }
        }
    }
}

/// Starts `processes` children of this binary with a share of the
/// connections each; returns once all have connected.
async fn spawn_children(
    options: &RunOptions,
    processes: usize,
) -> anyhow::Result<Vec<ChildWorker>> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let worker_scenario = match options.scenario {
        Scenario::Soak => Scenario::Stream,
        other => other,
    };
    let mut children = Vec::with_capacity(processes);
    let mut first_index = 0;
    for process in 0..processes {
        let share = |total: usize| total / processes + usize::from(process < total % processes);
        let connections = share(options.connections);
        let max_turns = options.max_turns / processes as u64
            + u64::from((process as u64) < options.max_turns % processes as u64);
        let mut child = Command::new(&exe)
            .arg("worker")
            .args(["--target", &options.target.to_string()])
            // A soak's connections do what a stream's do; the sampling is ours.
            .args(["--scenario", worker_scenario.name()])
            .args(["--connections", &connections.to_string()])
            .args(["--duration", &format!("{}ms", options.duration.as_millis())])
            .args(["--max-turns", &max_turns.max(1).to_string()])
            .args(["--chunks", &options.chunks.to_string()])
            .args([
                "--connect-concurrency",
                &share(options.connect_concurrency).max(1).to_string(),
            ])
            .args(["--process", &process.to_string()])
            .args(["--first-index", &first_index.to_string()])
            .args(options.active.iter().flat_map(|active| {
                [
                    "--active".to_owned(),
                    active.count.to_string(),
                    "--active-of".to_owned(),
                    active.of.to_string(),
                ]
            }))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start a worker process")?;
        first_index += connections;
        let stdin = child.stdin.take().context("worker stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("worker stdout")?).lines();
        children.push(ChildWorker {
            _child: child,
            stdin,
            stdout,
        });
    }
    for child in &mut children {
        child.expect("connected", CHILD_SLACK).await?;
    }
    Ok(children)
}

/// The `worker` subcommand: one child's share of a run.
pub async fn child_worker(
    options: &RunOptions,
    process: usize,
    first_index: usize,
) -> anyhow::Result<()> {
    options.validate()?;
    raise_fd_limit();
    let mut commands = BufReader::new(tokio::io::stdin()).lines();
    let mut worker = Worker::connect(options, process, first_index).await;
    println!("connected");
    if commands.next_line().await?.as_deref() == Some("run") {
        worker.run().await;
        println!("ran");
        // Any line, or the end of stdin, closes.
        let _ = commands.next_line().await;
    }
    let stats = worker.close().await;
    println!("{}", serde_json::to_string(&stats.to_wire())?);
    Ok(())
}

//! The CI smoke benchmark: a few seconds of load against agentwire (in this
//! process, on a real SQLite file) and the bare baseline (in this process
//! too), through the loadgen's library API. It fails on errors and on lost
//! or reordered chunks, never on timing.

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_loadgen::compare::agentwire_config;
use agentwire_loadgen::{Report, RunOptions, Scenario, baseline};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const CONNECTIONS: usize = 50;
const CHUNKS: u32 = 20;

struct Servers {
    agentwire: SocketAddr,
    baseline: SocketAddr,
    _stop: (oneshot::Sender<()>, oneshot::Sender<()>),
    _dir: tempfile::TempDir,
}

async fn start_servers() -> Servers {
    let dir = tempfile::tempdir().unwrap();
    let sessions = format!("sqlite://{}", dir.path().join("smoke.db").display());
    let yaml = agentwire_config(CONNECTIONS, CHUNKS, &sessions);
    let config = agentwire::config::parse(&yaml, |_| None).unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agentwire = listener.local_addr().unwrap();
    let (stop_agentwire, stopped) = oneshot::channel::<()>();
    tokio::spawn(agentwire::run(listener, config, async {
        let _ = stopped.await;
    }));

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let baseline = listener.local_addr().unwrap();
    let (stop_baseline, stopped) = oneshot::channel::<()>();
    tokio::spawn(baseline::serve(listener, CHUNKS, async {
        let _ = stopped.await;
    }));

    Servers {
        agentwire,
        baseline,
        _stop: (stop_agentwire, stop_baseline),
        _dir: dir,
    }
}

async fn load(target: SocketAddr, scenario: Scenario, chunks: u32, secs: u64) -> Report {
    let mut options = RunOptions::new(target, scenario);
    options.connections = CONNECTIONS;
    options.duration = Duration::from_secs(secs);
    options.max_turns = 200_000;
    options.chunks = chunks;
    options.server_pid = Some(std::process::id());
    let report = agentwire_loadgen::run(&options).await.unwrap();
    println!("{}", report.json_line());
    report
}

fn assert_clean(report: &Report) {
    let what = format!("{} {:?}", report.label, report.scenario);
    assert!(
        report.errors.is_empty(),
        "{what}: errors {:?}",
        report.errors
    );
    assert_eq!(report.lost_or_reordered, 0, "{what}");
    assert_eq!(report.held, CONNECTIONS as u64, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_loses_nothing_against_agentwire_and_the_baseline() {
    let servers = start_servers().await;
    for target in [servers.agentwire, servers.baseline] {
        for (chunks, per_turn) in [(0, 3), (CHUNKS, u64::from(CHUNKS))] {
            let report = load(target, Scenario::Stream, chunks, 2).await;
            assert_clean(&report);
            assert!(report.turns > 0, "no turn completed: {report:?}");
            assert_eq!(report.chunks, report.turns * per_turn);
            let first_chunk = report.first_chunk.unwrap();
            assert!(first_chunk.p50_us <= first_chunk.p99_us);
            let server = report.server.as_ref().unwrap();
            assert!(server.rss_after_kib > 0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_burst_run_clean_against_agentwire() {
    let servers = start_servers().await;
    let idle = load(servers.agentwire, Scenario::Idle, 0, 1).await;
    assert_clean(&idle);
    assert_eq!(idle.turns, 0);
    let burst = load(servers.agentwire, Scenario::Burst, 0, 1).await;
    assert_clean(&burst);
    assert!(burst.turns > 0, "no socket reopened: {burst:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_samples_rss_through_the_run_and_after_the_close() {
    let servers = start_servers().await;
    let mut options = RunOptions::new(servers.agentwire, Scenario::Soak);
    options.connections = 10;
    options.duration = Duration::from_secs(3);
    options.max_turns = 200_000;
    options.chunks = CHUNKS;
    options.sample_interval = Duration::from_millis(500);
    options.warmup = Some(Duration::from_secs(1));
    options.settle = Duration::from_millis(500);
    options.server_pid = Some(std::process::id());
    let report = agentwire_loadgen::run(&options).await.unwrap();
    println!("{}", report.json_line());
    assert!(report.errors.is_empty(), "errors {:?}", report.errors);
    assert_eq!(report.lost_or_reordered, 0);
    assert!(report.turns > 0, "no turn completed: {report:?}");
    assert_eq!(report.chunks, report.turns * u64::from(CHUNKS));
    let soak = report.soak.as_ref().expect("a soak reports its RSS");
    // One at 0 s, one every 500 ms for 3 s, one at the end.
    assert!(soak.samples.len() >= 6, "{:?}", soak.samples);
    assert!(soak.samples.windows(2).all(|w| w[0].t_secs <= w[1].t_secs));
    assert!(soak.samples.iter().all(|s| s.rss_kib > 0));
    assert_eq!(soak.rss_end_kib, soak.samples.last().unwrap().rss_kib);
    assert!(soak.rss_idle_kib > 0 && soak.rss_warm_kib > 0 && soak.rss_after_close_kib > 0);
    assert_eq!(soak.warmup_secs, 1.0);

    // Without a pid there is nothing to sample: refused before connecting.
    options.server_pid = None;
    let error = agentwire_loadgen::run(&options).await.unwrap_err();
    assert!(error.to_string().contains("--server-pid"), "{error}");
}

#[tokio::test]
async fn refuses_a_target_off_loopback() {
    let options = RunOptions::new("192.168.1.1:80".parse().unwrap(), Scenario::Stream);
    let error = agentwire_loadgen::run(&options).await.unwrap_err();
    assert!(error.to_string().contains("loopback"), "{error}");
}

/// `--processes` spreads a run over child processes of the built binary,
/// whose counts the parent adds up; `--active` has only some connections
/// stream while the rest stay open and silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_connections_stream_from_several_processes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(baseline::serve(listener, CHUNKS, async {
        let _ = stopped.await;
    }));
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire-loadgen"))
        .args([
            "run",
            "--target",
            &target.to_string(),
            "--scenario",
            "stream",
        ])
        .args(["--connections", "30", "--active", "4", "--processes", "3"])
        .args(["--duration", "1s", "--chunks", "20"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["processes"], 3, "{report}");
    assert_eq!(report["held"], 30, "{report}");
    assert_eq!(report["streamed"], 4, "{report}");
    assert_eq!(report["error_total"], 0, "{report}");
    let turns = report["turns"].as_u64().unwrap();
    assert!(turns > 0, "{report}");
    assert_eq!(
        report["chunks"].as_u64().unwrap(),
        turns * u64::from(CHUNKS)
    );
}

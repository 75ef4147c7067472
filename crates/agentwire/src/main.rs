//! `agentwire serve [--config FILE] [--listen ADDR]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentwire::config::{self, Config};
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;
use tracing_appender::non_blocking::WorkerGuard;

/// jemalloc, built with background threads and a 1 s dirty-page decay
/// (`JEMALLOC_SYS_WITH_MALLOC_CONF` in `.cargo/config.toml`): a thread of
/// its own returns freed pages to the system about a second after they are
/// freed, whether or not the process goes on allocating, so RSS falls back
/// after a load or a burst of large messages. mimalloc (used before) cost
/// a few percent less CPU per turn but purges only from inside later
/// allocator calls of the thread that owns the pages, so a server that
/// went quiet kept its peak; calling its collector needs `unsafe` FFI (see
/// ARCHITECTURE.md, the binary). It is the process's `malloc` too, so
/// SQLite's memory follows the same rules (and glibc's allocator, which
/// kept what SQLite freed, is out of the picture). Operators can change the
/// options at start with `MALLOC_CONF`.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "agentwire",
    // The version, the git commit and the cargo features (build.rs).
    version = env!("AGENTWIRE_LONG_VERSION"),
    about = "Hosts AI agents and streams them to clients over WebSocket"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the agents of a config file, or the built-in demo config.
    Serve {
        /// YAML config file. Without it the built-in demo config is served.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Listen address; overrides `server.listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Parse and validate a config file, then exit.
    CheckConfig {
        #[arg(long)]
        config: PathBuf,
        /// Print the effective configuration (after `${VAR}` substitution,
        /// with every default filled in) as YAML, secrets as "<redacted>".
        #[arg(long)]
        print: bool,
    },
    /// Talk to an agent from the terminal (any server speaking the Omnia
    /// dialect). Exit status with `--once`: 0 when the turn ended with
    /// `done`, 1 when it ended with an error or was cancelled; 69 when the
    /// server cannot be reached.
    Chat {
        /// The server: ws://HOST:PORT (wss://, http(s):// and a path prefix work too).
        #[arg(long, default_value = "ws://127.0.0.1:8080")]
        url: String,
        #[arg(long, default_value = "demo")]
        agent: String,
        /// A credential (API key or JWT), sent as `Authorization: Bearer`.
        #[arg(long, env = "AGENTWIRE_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Resume this session from the first message.
        #[arg(long)]
        session: Option<String>,
        /// The connection's memory facet (`memory_facet` on the upgrade):
        /// the agent remembers and recalls within it, and `/memories`
        /// lists it alone.
        #[arg(long)]
        memory_facet: Option<String>,
        /// Send this one message, print the reply, and exit.
        #[arg(long)]
        once: Option<String>,
    },
    /// Apply the session database's missing schema migrations, then exit:
    /// the deploy step for `storage.postgres.migrate_on_start: false`.
    /// SQLite migrates whenever it opens; this only opens it.
    Migrate {
        #[arg(long)]
        config: PathBuf,
    },
    /// PromptPacks: check one as an agent would load it.
    Pack {
        #[command(subcommand)]
        command: PackCommand,
    },
    /// Print the SHA-256 hex digest of an API key read from standard input,
    /// for `auth.api_keys[].sha256`.
    HashKey,
    /// Print an Argon2id PHC hash of a password read from standard input,
    /// for `agents[].password_argon2`.
    HashPassword,
}

#[derive(Subcommand)]
enum PackCommand {
    /// Compile a PromptPack (its JSON, or the same document in YAML) and
    /// print each problem as `FILE:LINE:COLUMN: error: PATH: MESSAGE`, each
    /// warning as `FILE: warning: …`, then a summary. Exit status: 0 when it
    /// compiles (warnings allowed), 1 when it does not, 2 for a usage error.
    Compile {
        /// The pack file (`.json`, `.yaml`, `.yml`).
        path: PathBuf,
        /// Write the compiled pack here, as canonical JSON.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// BSD `EX_USAGE`: the exit status for a bad configuration.
const EXIT_CONFIG: u8 = 64;

fn main() -> ExitCode {
    install_tls_provider();
    let cli = Cli::parse();
    // `serve` starts its logs once its config has said whether traces are
    // exported too.
    let _logs = match cli.command {
        Command::Serve { .. } => None,
        _ => Some(init_tracing(None)),
    };
    match cli.command {
        Command::Chat {
            url,
            agent,
            token,
            session,
            memory_facet,
            once,
        } => chat(
            agentwire_chat::ChatOptions {
                url,
                agent,
                token,
                session,
                memory_facet,
            },
            once,
        ),
        Command::Migrate { config } => match config::load(&config) {
            Ok(config) => migrate(&config),
            Err(e) => config_error(&e),
        },
        Command::Pack {
            command: PackCommand::Compile { path, output },
        } => pack_compile(&path, output.as_deref()),
        Command::HashKey => print_from_stdin(|key| Ok(agentwire_auth::sha256_hex(key))),
        Command::HashPassword => print_from_stdin(agentwire_auth::hash_password),
        Command::CheckConfig {
            config,
            print: true,
        } => match config::load_effective_yaml(&config) {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => config_error(&e),
        },
        Command::CheckConfig {
            config,
            print: false,
        } => match config::load(&config) {
            Ok(_) => {
                println!("{}: ok", config.display());
                ExitCode::SUCCESS
            }
            Err(e) => config_error(&e),
        },
        Command::Serve { config, listen } => {
            let loaded = match &config {
                Some(path) => config::load(path),
                None => config::parse(config::DEMO_CONFIG, |name| std::env::var(name).ok()),
            };
            let mut config = match loaded {
                Ok(config) => config,
                Err(e) => return config_error(&e),
            };
            if let Some(listen) = listen {
                config.listen = listen;
            }
            serve(config)
        }
    }
}

fn serve(config: Config) -> ExitCode {
    let runtime = match start_runtime(tokio::runtime::Builder::new_multi_thread()) {
        Ok(runtime) => runtime,
        Err(exit) => return exit,
    };
    // The trace pipeline's batch task runs on the runtime.
    let traces = match &config.traces {
        Some(traces) => {
            let _entered = runtime.enter();
            match agentwire::telemetry::Traces::start(traces) {
                Ok(traces) => Some(traces),
                Err(e) => {
                    eprintln!("config error: {e:#}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            }
        }
        None => None,
    };
    let _logs = init_tracing(traces.as_ref());
    let result = runtime.block_on(async move {
        let listen = config.listen;
        let agents: Vec<String> = config.agents.iter().map(|a| a.name.clone()).collect();
        // Before the port: a database or adapter that cannot open is the
        // operator's to fix, like a bad config.
        let app = agentwire::app::build(config)
            .await
            .map_err(StartupError::Build)?;
        let listener = TcpListener::bind(listen).await.map_err(|e| {
            StartupError::Run(anyhow::anyhow!("server.listen: cannot bind {listen}: {e}"))
        })?;
        let address = listener
            .local_addr()
            .map_err(|e| StartupError::Run(e.into()))?;
        tracing::info!(%address, ?agents, "agentwire listening");
        agentwire::serve(app, listener, shutdown_signal())
            .await
            .map_err(StartupError::Run)
    });
    if let Some(traces) = traces {
        traces.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(StartupError::Build(e)) => {
            eprintln!("config error: {e:#}");
            ExitCode::from(EXIT_CONFIG)
        }
        Err(StartupError::Run(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The runtime `builder` describes, with IO and time; a failure is told
/// and becomes the exit status.
fn start_runtime(
    mut builder: tokio::runtime::Builder,
) -> Result<tokio::runtime::Runtime, ExitCode> {
    builder.enable_all().build().map_err(|e| {
        eprintln!("error: cannot start the async runtime: {e}");
        ExitCode::FAILURE
    })
}

fn migrate(config: &Config) -> ExitCode {
    let runtime = match start_runtime(tokio::runtime::Builder::new_current_thread()) {
        Ok(runtime) => runtime,
        Err(exit) => return exit,
    };
    match runtime.block_on(agentwire::app::migrate(&config.sessions)) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("config error: {e:#}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// BSD `EX_UNAVAILABLE`: `chat` cannot reach the server.
const EXIT_UNAVAILABLE: u8 = 69;

fn chat(options: agentwire_chat::ChatOptions, once: Option<String>) -> ExitCode {
    use std::io::IsTerminal;
    let runtime = match start_runtime(tokio::runtime::Builder::new_current_thread()) {
        Ok(runtime) => runtime,
        Err(exit) => return exit,
    };
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    let output = tokio::io::stdout();
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let outcome = runtime.block_on(async move {
        match once {
            Some(text) => agentwire_chat::once(options, &text, input, output).await,
            None if interactive => agentwire_chat::run_interactive(options, input, output).await,
            None => agentwire_chat::run(options, input, output).await,
        }
    });
    // Standard input's reader may be parked in a read that never returns.
    runtime.shutdown_background();
    match outcome {
        agentwire_chat::Outcome::Finished => ExitCode::SUCCESS,
        agentwire_chat::Outcome::TurnFailed => ExitCode::FAILURE,
        agentwire_chat::Outcome::Unreachable(why) => {
            eprintln!("error: {why}");
            ExitCode::from(EXIT_UNAVAILABLE)
        }
    }
}

/// Why `serve` stopped with an error: the application could not be built
/// from its config (exit 64, nothing bound), or serving failed.
enum StartupError {
    Build(anyhow::Error),
    Run(anyhow::Error),
}

/// Reads one secret from standard input (a trailing newline is not part of
/// it) and prints what `transform` makes of it. Reading from stdin keeps the
/// secret out of the shell history and the process list.
fn print_from_stdin(transform: impl Fn(&str) -> Result<String, String>) -> ExitCode {
    let mut secret = String::new();
    if let Err(e) = std::io::stdin().read_line(&mut secret) {
        eprintln!("error: cannot read standard input: {e}");
        return ExitCode::FAILURE;
    }
    let secret = secret.strip_suffix('\n').unwrap_or(&secret);
    let secret = secret.strip_suffix('\r').unwrap_or(secret);
    if secret.is_empty() {
        eprintln!("error: nothing on standard input");
        return ExitCode::FAILURE;
    }
    match transform(secret) {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn pack_compile(path: &std::path::Path, output: Option<&std::path::Path>) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match agentwire::pack_command::run(path, output, &mut stdout) {
        Ok(agentwire::pack_command::Outcome::Compiled) => ExitCode::SUCCESS,
        Ok(agentwire::pack_command::Outcome::Failed) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: cannot write the report: {e}");
            ExitCode::FAILURE
        }
    }
}

fn config_error(e: &config::ConfigError) -> ExitCode {
    eprintln!("config error: {e}");
    ExitCode::from(EXIT_CONFIG)
}

/// The HTTP clients (model providers, tools, JWKS, S3) use rustls without a
/// bundled crypto provider, and reqwest panics building a client without
/// one: the process picks ring here, once, before any config is loaded
/// (loading builds the providers). Libraries never install one.
fn install_tls_provider() {
    // Err only when a provider is already installed, which nothing before
    // `main` can have done.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Log lines queued for the logging thread at most: about a second of a
/// busy node's lines (one per turn). The library's default, 128,000, let a
/// reader of standard error that fell behind (a pipe, a log shipper) hold
/// tens of MiB of lines in the process; past this bound the logging
/// thread waits for the writer instead.
const LOG_QUEUE_LINES: usize = 8_192;

/// Logs to standard error, filtered by `RUST_LOG` (`info` by default), and
/// with `traces` the trace spans to their exporter, filtered on their own.
/// `AGENTWIRE_LOG_FORMAT=json` writes one JSON object per line (`timestamp`,
/// `level`, `fields`, `target`, `span`, `spans`) instead of text; colours
/// only when standard error is a terminal and `NO_COLOR` is unset.
///
/// Lines go to a thread of their own, which writes whatever has queued up
/// in one system call: a line per finished turn would otherwise cost each
/// turn a blocking write on a runtime worker. The queue is bounded
/// ([`LOG_QUEUE_LINES`]), and a full one makes the logging thread wait
/// rather than drop lines. The returned guard writes out what is queued
/// when it is dropped: hold it until the process ends.
fn init_tracing(traces: Option<&agentwire::telemetry::Traces>) -> WorkerGuard {
    use std::io::IsTerminal as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let format = std::env::var("AGENTWIRE_LOG_FORMAT").unwrap_or_default();
    let (stderr, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(false)
        .thread_name("agentwire-logs")
        .finish(std::io::BufWriter::new(std::io::stderr()));
    let logs: Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync> =
        if format.trim().eq_ignore_ascii_case("json") {
            Box::new(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(true)
                    .with_writer(stderr),
            )
        } else {
            let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            Box::new(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(stderr),
            )
        };
    tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(traces.map(|traces| traces.layer()))
        .init();
    guard
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(e) => {
                    tracing::error!(error = %e, "cannot listen for SIGTERM; Ctrl-C only");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutdown signal received");
}

#[cfg(all(test, target_os = "linux", feature = "jemalloc"))]
mod tests {
    use std::time::{Duration, Instant};

    /// Resident set size of this process, from `/proc/self/statm` (pages).
    fn rss_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
        let pages: usize = statm
            .split_whitespace()
            .nth(1)
            .and_then(|field| field.parse().ok())
            .expect("statm has a resident field");
        pages * 4096
    }

    /// The allocator the binary ships with gives freed memory back to the
    /// system on its own, within seconds, while the process does nothing
    /// (the soak's "RSS after the load" in BENCHMARKS.md depends on it).
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "a plain test thread waits for the allocator's own thread"
    )]
    fn freed_memory_returns_to_the_system_while_idle() {
        const MIB: usize = 1 << 20;
        let before = rss_bytes();
        // Small blocks (a session's messages) and large ones (a big frame).
        let small: Vec<Vec<u8>> = (0..64 * 1024).map(|i| vec![i as u8; 512]).collect();
        let large: Vec<Vec<u8>> = (0..32).map(|i| vec![i as u8; MIB]).collect();
        let peak = rss_bytes();
        assert!(
            peak >= before + 48 * MIB,
            "the test's allocations did not raise RSS: {before} -> {peak}"
        );
        drop(small);
        drop(large);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let now = rss_bytes();
            if now <= before + 8 * MIB {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "RSS still {} MiB above its start 5 s after freeing {} MiB",
                (now - before) / MIB,
                (peak - before) / MIB
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

//! `facades`: what a streamed turn costs the server over each front door,
//! in one sitting on one server process, and how many A2A streams it
//! holds at once.
//!
//! The WebSocket's figures come from the `stream` scenario (`run::run`);
//! A2A's and MCP's from clients of this module that send
//! `SendStreamingMessage` (or `tools/call` with a progress token) on
//! keep-alive HTTP/1.1 connections and read each reply's server-sent
//! events to the end. Server CPU is read from /proc around
//! each phase, so the ratios are of one process under the same load.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::client::source_address;
use crate::compare::{START_TIMEOUT, agentwire_config, spawn_agentwire};
use crate::options::{CHUNK_AGENT, RunOptions, Scenario};
use crate::probe;
use crate::report::render_markdown;
use crate::run as load;

/// The agent whose `hold` script keeps a stream open (the test handler).
const HOLD_AGENT: &str = "hold";
/// How long a capacity run waits for every stream's first event.
const OPEN_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct FacadeOptions {
    pub agentwire_bin: PathBuf,
    /// Streaming clients per door.
    pub connections: usize,
    pub duration: Duration,
    pub chunks: u32,
    /// A2A streams to hold at once; 0 skips the capacity run.
    pub streams: usize,
    pub markdown: Option<PathBuf>,
}

/// One door's figures.
struct DoorFigures {
    door: &'static str,
    turns: u64,
    cpu_us: u64,
    secs: f64,
}

impl DoorFigures {
    fn cpu_per_turn(&self) -> Option<f64> {
        (self.turns > 0).then(|| self.cpu_us as f64 / self.turns as f64)
    }
}

pub async fn run(options: FacadeOptions) -> anyhow::Result<()> {
    let (mut child, addr, _dir) = start(&options).await?;
    let pid = child.id().context("agentwire pid")?;
    let websocket = websocket(&options, addr, pid).await?;
    let a2a = door_turns(&options, addr, pid, Door::A2a).await?;
    let mcp = door_turns(&options, addr, pid, Door::Mcp).await?;
    let capacity = match options.streams {
        0 => None,
        n => Some(hold_streams(addr, pid, n).await?),
    };
    let _ = child.start_kill();
    let _ = child.wait().await;
    let text = report(&options, &[websocket, a2a, mcp], capacity.as_ref());
    println!("{text}");
    if let Some(path) = &options.markdown {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// agentwire with the benchmark agents, A2A on, and the `hold` agent.
async fn start(options: &FacadeOptions) -> anyhow::Result<(Child, SocketAddr, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let sessions = format!("sqlite://{}", dir.path().join("bench.db").display());
    let connections = options.connections.max(options.streams);
    let yaml = format!(
        "{}  - name: {HOLD_AGENT}\n    handler: test\nfacades:\n  a2a: true\n  mcp: true\n",
        agentwire_config(connections, options.chunks.max(1), &sessions)
    );
    let config = dir.path().join("agentwire.yaml");
    std::fs::write(&config, yaml)?;
    let (child, addr) =
        spawn_agentwire(Command::new(&options.agentwire_bin), &config, START_TIMEOUT).await?;
    Ok((child, addr, dir))
}

async fn websocket(
    options: &FacadeOptions,
    addr: SocketAddr,
    pid: u32,
) -> anyhow::Result<DoorFigures> {
    let mut run_options = RunOptions::new(addr, Scenario::Stream);
    run_options.connections = options.connections;
    run_options.duration = options.duration;
    run_options.chunks = options.chunks;
    run_options.server_pid = Some(pid);
    let report = load::run(&run_options).await?;
    let server = report.server.context("the stream run sampled no server")?;
    Ok(DoorFigures {
        door: "WebSocket (Omnia)",
        turns: report.turns,
        cpu_us: server.cpu_run_us,
        secs: report.run_secs,
    })
}

/// A request door under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    /// `SendStreamingMessage`, read as server-sent events.
    A2a,
    /// `tools/call` with a progress token, read as server-sent events.
    Mcp,
}

/// `connections` clients sending streamed turns back to back for the
/// duration, each on its own keep-alive connection and session.
async fn door_turns(
    options: &FacadeOptions,
    addr: SocketAddr,
    pid: u32,
    door: Door,
) -> anyhow::Result<DoorFigures> {
    let turns = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::with_capacity(options.connections);
    for index in 0..options.connections {
        let source = source_address(addr, index);
        clients.push(DoorClient::connect(addr, source).await?);
    }
    let before = probe::sample(pid)?;
    let started = Instant::now();
    let deadline = started + options.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for mut client in clients {
        let turns = turns.clone();
        tasks.spawn(async move {
            while Instant::now() < deadline {
                match door {
                    Door::A2a => client.streamed_turn(CHUNK_AGENT).await?,
                    Door::Mcp => client.mcp_turn(CHUNK_AGENT).await?,
                }
                turns.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let secs = started.elapsed().as_secs_f64();
    let after = probe::sample(pid)?;
    Ok(DoorFigures {
        door: match door {
            Door::A2a => "A2A (JSON-RPC, SSE)",
            Door::Mcp => "MCP (tools/call, SSE with progress)",
        },
        turns: turns.load(Ordering::Relaxed),
        cpu_us: after.cpu_us.saturating_sub(before.cpu_us),
        secs,
    })
}

/// What holding `streams` A2A streams at once cost.
struct Capacity {
    streams: usize,
    held: usize,
    rss_before_kib: u64,
    rss_held_kib: u64,
    open_secs: f64,
}

/// Opens `streams` streams on `hold` turns (each streams one chunk, then
/// waits) and counts those whose first chunk arrived.
async fn hold_streams(addr: SocketAddr, pid: u32, streams: usize) -> anyhow::Result<Capacity> {
    load::raise_fd_limit();
    let rss_before_kib = probe::sample(pid)?.rss_kib;
    let started = Instant::now();
    let mut opening = tokio::task::JoinSet::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(256));
    for index in 0..streams {
        let gate = gate.clone();
        opening.spawn(async move {
            let _permit = gate.acquire_owned().await?;
            let mut client = DoorClient::connect(addr, source_address(addr, index)).await?;
            client.open_stream(HOLD_AGENT).await?;
            anyhow::Ok(client)
        });
    }
    let mut held = Vec::with_capacity(streams);
    let collect = async {
        while let Some(done) = opening.join_next().await {
            if let Ok(Ok(client)) = done {
                held.push(client);
            }
        }
    };
    let _ = tokio::time::timeout(OPEN_TIMEOUT, collect).await;
    let open_secs = started.elapsed().as_secs_f64();
    let rss_held_kib = probe::sample(pid)?.rss_kib;
    Ok(Capacity {
        streams,
        held: held.len(),
        rss_before_kib,
        rss_held_kib,
        open_secs,
    })
}

/// One keep-alive HTTP/1.1 connection to a request door (A2A or MCP).
struct DoorClient {
    stream: TcpStream,
    addr: SocketAddr,
    buffer: Vec<u8>,
    next_id: u64,
    /// The session the first turn opened: later turns continue it, as a
    /// WebSocket client's turns share its connection's session.
    context_id: Option<String>,
}

impl DoorClient {
    async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> anyhow::Result<DoorClient> {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        if let Some(source) = source {
            socket.bind(SocketAddr::new(source, 0))?;
        }
        let stream = socket.connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(DoorClient {
            stream,
            addr,
            buffer: Vec::with_capacity(16 * 1024),
            next_id: 0,
            context_id: None,
        })
    }

    /// Sends `SendStreamingMessage` to `agent` and reads the response
    /// head.
    async fn send_streaming(&mut self, agent: &str, scenario: Option<&str>) -> anyhow::Result<()> {
        self.next_id += 1;
        let mut metadata = match scenario {
            Some(s) => format!(r#","metadata":{{"mock_scenario":"{s}"}}"#),
            None => String::new(),
        };
        if let Some(context) = &self.context_id {
            metadata.push_str(&format!(r#","contextId":"{context}""#));
        }
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"SendStreamingMessage","params":{{"message":{{"messageId":"m{}","role":"ROLE_USER","parts":[{{"text":"go"}}]{metadata}}}}}}}"#,
            self.next_id, self.next_id
        );
        let request = format!(
            "POST /a2a/{agent} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream.write_all(request.as_bytes()).await?;
        let head = self.read_until(b"\r\n\r\n").await?;
        if !head.starts_with(b"HTTP/1.1 200") {
            bail!(
                "A2A answered {}",
                String::from_utf8_lossy(&head[..head.len().min(40)])
            );
        }
        Ok(())
    }

    /// One streamed turn, read to its last chunk (the body's end).
    async fn streamed_turn(&mut self, agent: &str) -> anyhow::Result<()> {
        self.send_streaming(agent, None).await?;
        loop {
            let chunk = self.next_chunk().await?;
            if chunk.is_empty() {
                return Ok(());
            }
            if contains(&chunk, b"TASK_STATE_FAILED") {
                bail!("a turn failed");
            }
            if self.context_id.is_none() {
                self.context_id = context_of(&chunk);
            }
        }
    }

    /// One `tools/call` of `ask_<agent>` with a progress token, its
    /// server-sent events read to the body's end; later calls continue the
    /// session the first one opened.
    async fn mcp_turn(&mut self, agent: &str) -> anyhow::Result<()> {
        self.next_id += 1;
        let session = match &self.context_id {
            Some(s) => format!(r#","session_id":"{s}""#),
            None => String::new(),
        };
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ask_{agent}","arguments":{{"message":"go"{session}}},"_meta":{{"progressToken":{id}}}}}}}"#,
            id = self.next_id
        );
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream.write_all(request.as_bytes()).await?;
        let head = self.read_until(b"\r\n\r\n").await?;
        if !head.starts_with(b"HTTP/1.1 200") {
            bail!(
                "MCP answered {}",
                String::from_utf8_lossy(&head[..head.len().min(40)])
            );
        }
        loop {
            let chunk = self.next_chunk().await?;
            if chunk.is_empty() {
                return Ok(());
            }
            if contains(&chunk, br#""isError":true"#) {
                bail!("a call failed");
            }
            if self.context_id.is_none() {
                self.context_id = quoted_after(&chunk, br#""session_id":""#);
            }
        }
    }

    /// Starts a `hold` turn and waits for its first chunk.
    async fn open_stream(&mut self, agent: &str) -> anyhow::Result<()> {
        self.send_streaming(agent, Some("hold")).await?;
        loop {
            let chunk = self.next_chunk().await?;
            if contains(&chunk, b"artifactUpdate") {
                return Ok(());
            }
            if chunk.is_empty() {
                bail!("the stream ended before its first chunk");
            }
        }
    }

    /// The next piece of a chunked body; empty at its end.
    async fn next_chunk(&mut self) -> anyhow::Result<Vec<u8>> {
        let size = self.read_until(b"\r\n").await?;
        let size = usize::from_str_radix(std::str::from_utf8(&size[..size.len() - 2])?, 16)?;
        let mut chunk = self.read_exact(size + 2).await?;
        chunk.truncate(size);
        Ok(chunk)
    }

    /// Bytes up to and including `marker`.
    async fn read_until(&mut self, marker: &[u8]) -> anyhow::Result<Vec<u8>> {
        loop {
            if let Some(at) = find(&self.buffer, marker) {
                return Ok(self.buffer.drain(..at + marker.len()).collect());
            }
            self.fill().await?;
        }
    }

    async fn read_exact(&mut self, n: usize) -> anyhow::Result<Vec<u8>> {
        while self.buffer.len() < n {
            self.fill().await?;
        }
        Ok(self.buffer.drain(..n).collect())
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        self.buffer.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The `contextId` an event names.
fn context_of(event: &[u8]) -> Option<String> {
    quoted_after(event, br#""contextId":""#)
}

/// The JSON string that follows `key` (which ends with its opening quote).
fn quoted_after(event: &[u8], key: &[u8]) -> Option<String> {
    let start = find(event, key)? + key.len();
    let end = start + event[start..].iter().position(|b| *b == b'"')?;
    Some(String::from_utf8_lossy(&event[start..end]).into_owned())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

fn report(options: &FacadeOptions, doors: &[DoorFigures], capacity: Option<&Capacity>) -> String {
    let base = doors[0].cpu_per_turn();
    let mut rows = vec![[
        "door".to_owned(),
        "turns".to_owned(),
        "turns/s".to_owned(),
        "server CPU µs per turn".to_owned(),
        "vs WebSocket".to_owned(),
    ]];
    for door in doors {
        let per_turn = door.cpu_per_turn();
        rows.push([
            door.door.to_owned(),
            door.turns.to_string(),
            format!("{:.0}", door.turns as f64 / door.secs.max(f64::EPSILON)),
            per_turn.map_or("-".to_owned(), |v| format!("{v:.0}")),
            match (per_turn, base) {
                (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
                _ => "-".to_owned(),
            },
        ]);
    }
    let mut text = format!(
        "{} streaming clients per door, {}-chunk turns, {:?} each, one agentwire process (SQLite).\n\n{}",
        options.connections,
        options.chunks,
        options.duration,
        render_markdown(&rows)
    );
    if let Some(c) = capacity {
        let per_stream =
            (c.rss_held_kib.saturating_sub(c.rss_before_kib) * 1024) as f64 / c.held.max(1) as f64;
        text.push_str(&format!(
            "\nConcurrent A2A streams: {} of {} held open (each a turn that streamed its first chunk and waits), opened in {:.1} s; server RSS {} MiB before, {} MiB holding them: {:.1} KiB per stream.\n",
            c.held,
            c.streams,
            c.open_secs,
            c.rss_before_kib / 1024,
            c.rss_held_kib / 1024,
            per_stream / 1024.0
        ));
    }
    text
}

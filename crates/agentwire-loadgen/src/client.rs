//! The connections of one process, one task each, stepped through three
//! phases by the caller: [`Worker::connect`] opens them all, [`Worker::run`]
//! runs the scenario until its deadline or turn budget, [`Worker::close`]
//! closes them and returns what was counted. Between phases every socket
//! keeps being read, so the server's pings are answered.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};

use crate::options::{RunOptions, Scenario, chunk_reply};
use crate::stats::{Stats, record};

type Ws = WebSocketStream<TcpStream>;

/// The longest wait for any one frame, and for a connect.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Sockets per source address, below the 28,232 ports of Linux's default
/// ephemeral range; past it the next address of 127.0.0.0/8 is used.
pub const PER_SOURCE_ADDRESS: usize = 20_000;
/// Reopened sockets (burst) per source address. A socket the client closes
/// may hold its port in TIME_WAIT for a minute, so churn moves on to a fresh
/// address often, in a block of 127.0.0.0/8 of its own per process.
const REOPENS_PER_SOURCE_ADDRESS: u64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connect,
    Run { deadline: Instant },
    Close,
}

impl Phase {
    fn rank(self) -> u8 {
        match self {
            Phase::Connect => 0,
            Phase::Run { .. } => 1,
            Phase::Close => 2,
        }
    }
}

/// The connections of one process.
pub struct Worker {
    shared: Arc<Shared>,
    phase: watch::Sender<Phase>,
    tasks: JoinSet<()>,
}

impl Worker {
    /// Opens `options.connections` sockets; returns once each has opened or
    /// failed. `first_index` numbers them across processes, which spreads
    /// their source addresses.
    /// `process` numbers the processes of a run (0 for a single one).
    pub async fn connect(options: &RunOptions, process: usize, first_index: usize) -> Worker {
        let (phase, _) = watch::channel(Phase::Connect);
        let shared = Arc::new(Shared::new(options, process));
        let mut tasks = JoinSet::new();
        for index in first_index..first_index + options.connections {
            tasks.spawn(connection(shared.clone(), index, phase.subscribe()));
        }
        shared.connected.wait_for(options.connections).await;
        Worker {
            shared,
            phase,
            tasks,
        }
    }

    /// Runs the scenario for `options.duration` (or until the turn budget is
    /// spent); returns once every connection has stopped.
    pub async fn run(&mut self) {
        let deadline = Instant::now() + self.shared.options.duration;
        self.phase.send_replace(Phase::Run { deadline });
        self.shared
            .ran
            .wait_for(self.shared.options.connections)
            .await;
    }

    /// Closes every socket and returns the counts.
    pub async fn close(mut self) -> Stats {
        self.phase.send_replace(Phase::Close);
        while self.tasks.join_next().await.is_some() {}
        std::mem::take(&mut *self.shared.stats.lock())
    }
}

/// A count that tasks raise and the worker waits on.
#[derive(Default)]
struct Gate {
    count: AtomicUsize,
    notify: Notify,
}

impl Gate {
    fn arrive(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_one();
    }

    async fn wait_for(&self, n: usize) {
        while self.count.load(Ordering::SeqCst) < n {
            self.notify.notified().await;
        }
    }
}

struct Shared {
    options: RunOptions,
    url: String,
    /// The message every turn sends.
    request: String,
    /// What every turn must stream: its chunks, concatenated, and how many.
    expected_text: String,
    expected_chunks: u64,
    stats: Mutex<Stats>,
    turns_started: AtomicU64,
    process: usize,
    reopens: AtomicU64,
    connect_slots: Semaphore,
    connected: Gate,
    ran: Gate,
}

impl Shared {
    fn new(options: &RunOptions, process: usize) -> Shared {
        let (request, expected_text, expected_chunks) = if options.chunks == 0 {
            let request =
                r#"{"type":"message","content":"bench","metadata":{"mock_scenario":"stream"}}"#;
            (request.to_owned(), "Hello world".to_owned(), 3)
        } else {
            let request = r#"{"type":"message","content":"bench"}"#;
            let chunks = u64::from(options.chunks);
            (request.to_owned(), chunk_reply(options.chunks), chunks)
        };
        Shared {
            url: format!("ws://{}/ws?agent={}", options.target, options.agent()),
            options: options.clone(),
            request,
            expected_text,
            expected_chunks,
            stats: Mutex::new(Stats::default()),
            turns_started: AtomicU64::new(0),
            process,
            reopens: AtomicU64::new(0),
            connect_slots: Semaphore::new(options.connect_concurrency),
            connected: Gate::default(),
            ran: Gate::default(),
        }
    }

    fn error(&self, code: &str) {
        self.stats.lock().error(code);
    }

    /// Takes one turn from the run's budget.
    fn take_turn(&self) -> bool {
        self.turns_started.fetch_add(1, Ordering::Relaxed) < self.options.max_turns
    }

    /// Opens a socket from `source` and reads its `connected` frame.
    async fn open(&self, source: Option<IpAddr>) -> Option<Ws> {
        let _slot = self.connect_slots.acquire().await.ok()?;
        let started = Instant::now();
        let opened = timeout(FRAME_TIMEOUT, open(&self.url, self.options.target, source)).await;
        match opened {
            Ok(Ok(ws)) => {
                let mut stats = self.stats.lock();
                stats.counts.connects += 1;
                record(&mut stats.connect, started.elapsed());
                Some(ws)
            }
            Ok(Err(code)) => {
                self.error(&code);
                None
            }
            Err(_) => {
                self.error("CONNECT_TIMEOUT");
                None
            }
        }
    }
}

/// The source address of socket `index`: 127.0.0.1 for the first
/// [`PER_SOURCE_ADDRESS`], then 127.0.0.2, and so on. `None` (the kernel
/// picks) for an IPv6 target.
pub fn source_address(target: SocketAddr, index: usize) -> Option<IpAddr> {
    if !target.is_ipv4() {
        return None;
    }
    let offset = u32::try_from(index / PER_SOURCE_ADDRESS).ok()?;
    let base = u32::from(Ipv4Addr::new(127, 0, 0, 1));
    Some(IpAddr::V4(Ipv4Addr::from(base.checked_add(offset)?)))
}

/// The source address of the `reopen`th reopened socket of `process`:
/// 127.<1 + process>.0.1 for the first [`REOPENS_PER_SOURCE_ADDRESS`], then
/// 127.<1 + process>.0.2, and so on.
fn reopen_source_address(target: SocketAddr, process: usize, reopen: u64) -> Option<IpAddr> {
    if !target.is_ipv4() {
        return None;
    }
    let block = u8::try_from(1 + process % 254).ok()?;
    let host = u32::try_from(1 + reopen / REOPENS_PER_SOURCE_ADDRESS).ok()? % 0x1_0000;
    let [_, _, b, c] = host.to_be_bytes();
    Some(IpAddr::V4(Ipv4Addr::new(127, block, b, c)))
}

async fn open(url: &str, target: SocketAddr, source: Option<IpAddr>) -> Result<Ws, String> {
    let socket = match target {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|e| io_code(&e))?;
    if let Some(ip) = source {
        socket
            .bind(SocketAddr::new(ip, 0))
            .map_err(|e| io_code(&e))?;
    }
    let stream = socket.connect(target).await.map_err(|e| io_code(&e))?;
    stream.set_nodelay(true).map_err(|e| io_code(&e))?;
    // Small buffers: the generator holds as many sockets as the server.
    let config = WebSocketConfig::default()
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0);
    let (mut ws, _) = tokio_tungstenite::client_async_with_config(url, stream, Some(config))
        .await
        .map_err(|e| ws_code(&e))?;
    let first = next_text(&mut ws).await?;
    match serde_json::from_str::<Frame>(&first) {
        Ok(frame) if frame.kind == "connected" => Ok(ws),
        _ => Err("NO_CONNECTED_FRAME".to_owned()),
    }
}

/// One connection through the three phases.
async fn connection(shared: Arc<Shared>, index: usize, mut phase: watch::Receiver<Phase>) {
    let mut ws = shared
        .open(source_address(shared.options.target, index))
        .await;
    shared.connected.arrive();
    let deadline = match keep_reading_until(&shared, &mut ws, reached(&mut phase, 1)).await {
        Phase::Run { deadline } => deadline,
        _ => Instant::now(),
    };
    match shared.options.scenario {
        Scenario::Stream | Scenario::Soak if shared.options.runs_turns(index) => {
            shared.stats.lock().counts.streamed += 1;
            if let Some(socket) = ws.as_mut()
                && let Err(code) = stream(&shared, socket, deadline).await
            {
                shared.error(&code);
                ws = None;
            }
        }
        // Idle, and the connections `--active` leaves out.
        Scenario::Idle | Scenario::Stream | Scenario::Soak => {
            keep_reading_until(&shared, &mut ws, tokio::time::sleep_until(deadline)).await;
        }
        Scenario::Burst => {
            while Instant::now() < deadline && shared.take_turn() {
                if let Some(old) = ws.take() {
                    close(old).await;
                }
                let reopen = shared.reopens.fetch_add(1, Ordering::Relaxed);
                let source = reopen_source_address(shared.options.target, shared.process, reopen);
                ws = shared.open(source).await;
                if ws.is_none() {
                    break;
                }
                shared.stats.lock().counts.turns += 1;
            }
        }
    }
    if ws.is_some() {
        shared.stats.lock().counts.held += 1;
    }
    shared.ran.arrive();
    keep_reading_until(&shared, &mut ws, reached(&mut phase, 2)).await;
    if let Some(ws) = ws {
        close(ws).await;
    }
}

/// Resolves with the phase once it reaches `rank` (or when the worker is gone).
async fn reached(phase: &mut watch::Receiver<Phase>, rank: u8) -> Phase {
    match phase.wait_for(|p| p.rank() >= rank).await {
        Ok(p) => *p,
        Err(_) => Phase::Close,
    }
}

/// Reads (and drops) frames until `until` resolves, so pings are answered;
/// a socket that ends meanwhile is counted and dropped.
async fn keep_reading_until<T>(
    shared: &Shared,
    ws: &mut Option<Ws>,
    until: impl Future<Output = T>,
) -> T {
    let mut until = std::pin::pin!(until);
    loop {
        let Some(socket) = ws.as_mut() else {
            return until.await;
        };
        let lost = tokio::select! {
            out = &mut until => return out,
            frame = socket.next() => match frame {
                Some(Ok(_)) => None,
                Some(Err(e)) => Some(ws_code(&e)),
                None => Some("CLOSED".to_owned()),
            },
        };
        if let Some(code) = lost {
            shared.error(&code);
            *ws = None;
        }
    }
}

/// Turns back to back. An error frame ends its turn; an error of the socket
/// ends the connection.
async fn stream(shared: &Shared, ws: &mut Ws, deadline: Instant) -> Result<(), String> {
    while Instant::now() < deadline && shared.take_turn() {
        turn(shared, ws).await?;
    }
    Ok(())
}

#[derive(Deserialize)]
struct Frame {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: String,
}

async fn turn(shared: &Shared, ws: &mut Ws) -> Result<(), String> {
    let started = Instant::now();
    ws.send(Message::text(shared.request.as_str()))
        .await
        .map_err(|e| ws_code(&e))?;
    let mut text = String::with_capacity(shared.expected_text.len());
    let mut chunks = 0;
    let mut first_chunk = None;
    let done = loop {
        let frame = next_text(ws).await?;
        let frame: Frame = serde_json::from_str(&frame).map_err(|_| "BAD_FRAME".to_owned())?;
        match frame.kind.as_str() {
            "chunk" => {
                first_chunk.get_or_insert_with(|| started.elapsed());
                text.push_str(&frame.content);
                chunks += 1;
            }
            "done" => break frame.content,
            "error" => {
                let code = frame.error.map_or_else(|| "ERROR".to_owned(), |e| e.code);
                shared.error(&code);
                return Ok(());
            }
            _ => {}
        }
    };
    let elapsed = started.elapsed();
    let intact = text == done && done == shared.expected_text && chunks == shared.expected_chunks;
    let mut stats = shared.stats.lock();
    stats.counts.turns += 1;
    stats.counts.chunks += chunks;
    record(&mut stats.turn, elapsed);
    if let Some(first) = first_chunk {
        record(&mut stats.first_chunk, first);
    }
    if !intact {
        stats.counts.lost_or_reordered += 1;
        stats.error("LOST_OR_REORDERED");
    }
    Ok(())
}

/// The next text frame; pings and pongs are skipped (and answered).
async fn next_text(ws: &mut Ws) -> Result<Utf8Bytes, String> {
    loop {
        match timeout(FRAME_TIMEOUT, ws.next()).await {
            Err(_) => return Err("TIMEOUT".to_owned()),
            Ok(None) | Ok(Some(Ok(Message::Close(_)))) => return Err("CLOSED".to_owned()),
            Ok(Some(Err(e))) => return Err(ws_code(&e)),
            Ok(Some(Ok(Message::Text(text)))) => return Ok(text),
            Ok(Some(Ok(_))) => {}
        }
    }
}

async fn close(mut ws: Ws) {
    let _ = timeout(CLOSE_TIMEOUT, async {
        let _ = ws.close(None).await;
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
}

fn ws_code(e: &WsError) -> String {
    match e {
        WsError::Http(response) => format!("HTTP_{}", response.status().as_u16()),
        WsError::Io(e) => io_code(e),
        WsError::ConnectionClosed | WsError::AlreadyClosed => "CLOSED".to_owned(),
        WsError::Protocol(_) => "PROTOCOL".to_owned(),
        WsError::Capacity(_) => "CAPACITY".to_owned(),
        _ => "WEBSOCKET".to_owned(),
    }
}

fn io_code(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    const EMFILE: i32 = 24;
    let code = match e.kind() {
        ErrorKind::ConnectionRefused => "CONNECTION_REFUSED",
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            "CONNECTION_RESET"
        }
        ErrorKind::AddrInUse | ErrorKind::AddrNotAvailable => "NO_SOURCE_PORT",
        ErrorKind::TimedOut => "TIMEOUT",
        _ if e.raw_os_error() == Some(EMFILE) => "TOO_MANY_OPEN_FILES",
        _ => "IO",
    };
    code.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_source_addresses_over_loopback() {
        let target: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let ip = |i| source_address(target, i).unwrap().to_string();
        assert_eq!(ip(0), "127.0.0.1");
        assert_eq!(ip(PER_SOURCE_ADDRESS - 1), "127.0.0.1");
        assert_eq!(ip(PER_SOURCE_ADDRESS), "127.0.0.2");
        assert_eq!(ip(300 * PER_SOURCE_ADDRESS), "127.0.1.45");
        assert_eq!(source_address("[::1]:9".parse().unwrap(), 0), None);
        let reopen = |p, k| reopen_source_address(target, p, k).unwrap().to_string();
        assert_eq!(reopen(0, 0), "127.1.0.1");
        assert_eq!(reopen(2, REOPENS_PER_SOURCE_ADDRESS * 300), "127.3.1.45");
    }
}

//! The voice-call benchmark: N concurrent calls on agentwire's scripted mock
//! voice provider (echo), each streaming 20 ms PCM frames both ways in real
//! time, and what the server spends on them: CPU per call-second and RSS
//! per call, with whether the audio kept time (no late frames dropped, the
//! echo's bytes all back).
//!
//! Each caller repeats an 800 ms burst of "speech" (a loud square wave the
//! mock's energy detector hears) and 1.2 s of silence (the mock's 300 ms
//! hang-over, then the 800 ms echo, heard to its end), so every 2 s the mock
//! transcribes an utterance, stores an exchange and echoes 800 ms of audio
//! back: 50 frames a second in, 20 out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::{SinkExt, StreamExt};
use tokio::process::Command;
use tokio_tungstenite::tungstenite::Message;

use crate::compare::{START_TIMEOUT, spawn_agentwire};
use crate::probe;

/// 20 ms of 16 kHz mono PCM16.
const FRAME_BYTES: usize = 640;
const FRAME: Duration = Duration::from_millis(20);
/// Frames of speech, then of silence, per cycle.
const SPEECH_FRAMES: u32 = 40;
const SILENCE_FRAMES: u32 = 60;

/// One benchmark run's settings.
pub struct CallsOptions {
    pub calls: usize,
    pub duration: Duration,
    pub agentwire_bin: std::path::PathBuf,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct CallsReport {
    pub calls: usize,
    pub seconds: f64,
    /// Server CPU over the run, as a share of one core.
    pub cpu_cores: f64,
    pub cpu_us_per_call_second: f64,
    pub rss_idle_kib: u64,
    pub rss_loaded_kib: u64,
    pub audio_in_bytes: u64,
    pub audio_out_bytes: u64,
    /// Echoed bytes expected for the utterances the run completed.
    pub utterances: u64,
    pub late_dropped: u64,
    pub errors: u64,
}

impl CallsReport {
    pub fn rss_per_call_kib(&self) -> f64 {
        self.rss_loaded_kib.saturating_sub(self.rss_idle_kib) as f64 / self.calls as f64
    }

    /// Calls one core holds at this cost (the same audio, 100% of a core).
    pub fn calls_per_core(&self) -> f64 {
        1_000_000.0 / self.cpu_us_per_call_second
    }

    pub fn header() -> &'static str {
        "| calls | seconds | server CPU (cores) | CPU per call-second | RSS per call | audio in / out per call-second | utterances echoed | late frames dropped | errors | calls per core at this cost |\n|---|---|---|---|---|---|---|---|---|---|"
    }

    pub fn row(&self) -> String {
        let call_seconds = self.calls as f64 * self.seconds;
        format!(
            "| {} | {:.1} | {:.3} | {:.0} µs | {:.1} KiB | {:.0} B / {:.0} B | {} | {} | {} | {:.0} |",
            self.calls,
            self.seconds,
            self.cpu_cores,
            self.cpu_us_per_call_second,
            self.rss_per_call_kib(),
            self.audio_in_bytes as f64 / call_seconds,
            self.audio_out_bytes as f64 / call_seconds,
            self.utterances,
            self.late_dropped,
            self.errors,
            self.calls_per_core(),
        )
    }
}

fn config(calls: usize, db: &std::path::Path) -> String {
    format!(
        r#"server:
  listen: 127.0.0.1:0
  limits:
    max_connections: {connections}
    max_calls: {calls}
storage:
  sessions: "sqlite://{db}"
voice_providers:
  - {{name: bench-voice, type: mock, output: echo, reply: "ok"}}
agents:
  - {{name: voice-bench, handler: echo, voice: bench-voice}}
"#,
        connections = calls + 100,
        db = db.display(),
    )
}

/// Starts agentwire, runs `options.calls` calls for `options.duration`,
/// stops it.
pub async fn run(options: &CallsOptions) -> anyhow::Result<CallsReport> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("agentwire.yaml");
    std::fs::write(&path, config(options.calls, &dir.path().join("bench.db")))?;
    let (mut child, addr) =
        spawn_agentwire(Command::new(&options.agentwire_bin), &path, START_TIMEOUT).await?;
    let pid = child.id().context("agentwire's pid")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = probe::sample(pid)?;
    let report = drive(options, addr, pid, idle).await;
    let _ = child.start_kill();
    let _ = child.wait().await;
    report
}

#[derive(Default)]
struct Counters {
    audio_in: AtomicU64,
    audio_out: AtomicU64,
    utterances: AtomicU64,
    errors: AtomicU64,
}

async fn drive(
    options: &CallsOptions,
    addr: SocketAddr,
    pid: u32,
    idle: probe::Sample,
) -> anyhow::Result<CallsReport> {
    let counters = Arc::new(Counters::default());
    let start = Instant::now() + Duration::from_millis(500);
    let end = start + options.duration;
    let mut callers = Vec::with_capacity(options.calls);
    for index in 0..options.calls {
        let counters = counters.clone();
        // Callers start spread over one cycle, as real ones would.
        let offset = FRAME * (index as u32 % (SPEECH_FRAMES + SILENCE_FRAMES));
        callers.push(tokio::spawn(caller(addr, counters, start + offset, end)));
    }
    tokio::time::sleep_until(start.into()).await;
    let before = probe::sample(pid)?;
    tokio::time::sleep_until(end.into()).await;
    let after = probe::sample(pid)?;
    let seconds = (after.cpu_us.saturating_sub(before.cpu_us)) as f64 / 1e6;
    for caller in callers {
        if caller.await.is_err() {
            counters.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
    let late_dropped = late_dropped(addr).await.unwrap_or(u64::MAX);
    let wall = options.duration.as_secs_f64();
    let call_seconds = options.calls as f64 * wall;
    Ok(CallsReport {
        calls: options.calls,
        seconds: wall,
        cpu_cores: seconds / wall,
        cpu_us_per_call_second: seconds * 1e6 / call_seconds,
        rss_idle_kib: idle.rss_kib,
        rss_loaded_kib: after.rss_kib,
        audio_in_bytes: counters.audio_in.load(Ordering::Relaxed),
        audio_out_bytes: counters.audio_out.load(Ordering::Relaxed),
        utterances: counters.utterances.load(Ordering::Relaxed),
        late_dropped,
        errors: counters.errors.load(Ordering::Relaxed),
    })
}

/// `agentwire_call_audio_dropped_total` from `/metrics`.
async fn late_dropped(addr: SocketAddr) -> anyhow::Result<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await?;
    body.lines()
        .find_map(|line| line.strip_prefix("agentwire_call_audio_dropped_total "))
        .and_then(|value| value.trim().parse().ok())
        .context("no agentwire_call_audio_dropped_total")
}

/// One call: connect, then a frame every 20 ms from `start` to `end`,
/// reading whatever comes back meanwhile.
async fn caller(addr: SocketAddr, counters: Arc<Counters>, start: Instant, end: Instant) {
    let url = format!("ws://{addr}/ws?agent=voice-bench&binary=true");
    let Ok((ws, _)) = tokio_tungstenite::connect_async(&url).await else {
        counters.errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let (mut sink, mut stream) = ws.split();
    let reader = {
        let counters = counters.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                match message {
                    Message::Binary(frame) => {
                        let payload = frame.len().saturating_sub(32 + metadata_len(&frame));
                        counters
                            .audio_out
                            .fetch_add(payload as u64, Ordering::Relaxed);
                    }
                    Message::Text(text) if text.contains("\"role\":\"user\"") => {
                        counters.utterances.fetch_add(1, Ordering::Relaxed);
                    }
                    Message::Text(text) if text.contains("\"type\":\"error\"") => {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
        })
    };
    let loud = square_wave();
    let quiet = vec![0u8; FRAME_BYTES];
    let mut tick = tokio::time::interval_at(start.into(), FRAME);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sequence = 0u32;
    while Instant::now() < end {
        tick.tick().await;
        let speaking = sequence % (SPEECH_FRAMES + SILENCE_FRAMES) < SPEECH_FRAMES;
        let payload = if speaking { &loud } else { &quiet };
        let frame = frame(sequence, payload);
        if sink.send(Message::binary(frame)).await.is_err() {
            counters.errors.fetch_add(1, Ordering::Relaxed);
            break;
        }
        counters
            .audio_in
            .fetch_add(FRAME_BYTES as u64, Ordering::Relaxed);
        sequence += 1;
    }
    let _ = sink.send(Message::Close(None)).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
}

fn metadata_len(frame: &[u8]) -> usize {
    frame
        .get(8..12)
        .and_then(|b| b.try_into().ok())
        .map_or(0, |b| u32::from_be_bytes(b) as usize)
}

fn square_wave() -> Vec<u8> {
    (0..FRAME_BYTES / 2)
        .flat_map(|n| if n % 20 < 10 { 6000i16 } else { -6000 }.to_le_bytes())
        .collect()
}

fn frame(sequence: u32, payload: &[u8]) -> Vec<u8> {
    agentwire_omnia::encode_binary(&agentwire_omnia::BinaryFrame {
        flags: 0,
        message_type: agentwire_omnia::MESSAGE_TYPE_MEDIA_CHUNK,
        sequence,
        media_id: [0; 12],
        metadata: agentwire_omnia::BinaryMetadata {
            mime_type: "audio/pcm".to_owned(),
            sample_rate: Some(16_000),
            channels: Some(1),
            codec: Some("pcm".into()),
            ..Default::default()
        },
        payload,
    })
}

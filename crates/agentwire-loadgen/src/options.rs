//! What a run does: the scenario, its bounds, and the loopback target.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The agent whose `stream` script answers "Hello", " ", "world".
pub const SCRIPT_AGENT: &str = "test-agent";
/// The agent that answers with a K-chunk reply (a mock model on agentwire).
pub const CHUNK_AGENT: &str = "bench";
/// Characters per chunk of the mock provider.
pub const CHUNK_CHARS: usize = 20;

/// The most connections one run may ask for.
pub const MAX_CONNECTIONS: usize = 200_000;
/// The most load-generator processes one run may spread over.
pub const MAX_PROCESSES: usize = 64;
/// The longest run phase.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Soak: RSS samples during the run phase, every this long by default.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(5);
/// Soak: the wait between the last socket closing and the last sample.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(5);
/// The longest `--settle`.
pub const MAX_SETTLE: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Connect, hold the sockets silent for the duration, close.
    Idle,
    /// Every connection runs turns back to back.
    Stream,
    /// Every connection closes and reopens its socket back to back.
    Burst,
    /// Turns back to back, like `stream`, for a long time, with the server's
    /// RSS sampled throughout and once more after every socket has closed:
    /// does memory stay flat under steady load and return afterwards?
    Soak,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Idle => "idle",
            Scenario::Stream => "stream",
            Scenario::Burst => "burst",
            Scenario::Soak => "soak",
        }
    }

    /// Whether connections run turns (`stream` and `soak`).
    pub fn runs_turns(self) -> bool {
        matches!(self, Scenario::Stream | Scenario::Soak)
    }
}

/// One run of one scenario against one server.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// A loopback address (refused otherwise).
    pub target: SocketAddr,
    pub scenario: Scenario,
    pub connections: usize,
    /// How long the run phase lasts (after every connection is open).
    pub duration: Duration,
    /// The most turns (stream) or reconnects (burst) over all connections.
    pub max_turns: u64,
    /// 0: the test agent's `stream` script; K > 0: a K-chunk reply from the
    /// `bench` agent.
    pub chunks: u32,
    /// Most connects in flight at once.
    pub connect_concurrency: usize,
    /// The server's pid, for its RSS and CPU time from /proc.
    pub server_pid: Option<u32>,
    /// A name for the server in the report.
    pub label: String,
    /// Soak: how often the server's RSS is sampled during the run phase.
    pub sample_interval: Duration,
    /// Soak: the part of the run phase after which growth is measured;
    /// `None`: a tenth of the duration.
    pub warmup: Option<Duration>,
    /// Soak: how long after every socket has closed the last sample waits.
    pub settle: Duration,
    /// Stream and soak: how many of the run's connections run turns, spread
    /// evenly over them; the rest hold their sockets silent, as in `idle`.
    /// `None`: every connection.
    pub active: Option<Active>,
    /// The fewest load-generator processes the connections are spread over
    /// (more when one process's file limit needs it).
    pub processes: usize,
    /// Stream: how long every socket then stays open and silent before the
    /// server's RSS is sampled again: what sessions with a conversation
    /// behind them cost once idle. `None`: no such wait.
    pub idle_after: Option<Duration>,
}

/// `count` of a run's `of` connections run turns (`--active`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Active {
    pub count: usize,
    pub of: usize,
}

impl Active {
    /// Spread evenly: connection `i` is one of them when
    /// `⌊(i+1)·count/of⌋ > ⌊i·count/of⌋`, which picks exactly `count`.
    pub fn includes(self, index: usize) -> bool {
        let (i, count, of) = (index as u128, self.count as u128, self.of.max(1) as u128);
        (i + 1) * count / of > i * count / of
    }
}

impl RunOptions {
    /// A stream run with the defaults; callers adjust the fields.
    pub fn new(target: SocketAddr, scenario: Scenario) -> RunOptions {
        RunOptions {
            target,
            scenario,
            connections: 50,
            duration: Duration::from_secs(2),
            max_turns: 1_000_000,
            chunks: 0,
            connect_concurrency: 64,
            server_pid: None,
            label: "server".to_owned(),
            sample_interval: DEFAULT_SAMPLE_INTERVAL,
            warmup: None,
            settle: DEFAULT_SETTLE,
            active: None,
            processes: 1,
            idle_after: None,
        }
    }

    /// Whether connection `index` (numbered across processes from 0) runs
    /// turns: every one in a turn-running scenario, or `--active` of them.
    pub fn runs_turns(&self, index: usize) -> bool {
        self.scenario.runs_turns() && self.active.is_none_or(|active| active.includes(index))
    }

    /// The soak's warm-up: `--warmup`, else a tenth of the duration.
    pub fn warmup(&self) -> Duration {
        self.warmup.unwrap_or(self.duration / 10)
    }

    /// Refuses a target off loopback and unbounded runs.
    pub fn validate(&self) -> anyhow::Result<()> {
        check_loopback(self.target)?;
        anyhow::ensure!(
            (1..=MAX_CONNECTIONS).contains(&self.connections),
            "--connections must be 1..={MAX_CONNECTIONS}"
        );
        anyhow::ensure!(
            !self.duration.is_zero() && self.duration <= MAX_DURATION,
            "--duration must be more than 0 and at most {}s",
            MAX_DURATION.as_secs()
        );
        anyhow::ensure!(self.max_turns > 0, "--max-turns must be positive");
        anyhow::ensure!(
            self.connect_concurrency > 0,
            "--connect-concurrency must be positive"
        );
        anyhow::ensure!(
            (1..=MAX_PROCESSES).contains(&self.processes),
            "--processes must be 1..={MAX_PROCESSES}"
        );
        if let Some(active) = self.active {
            anyhow::ensure!(
                self.scenario.runs_turns() && active.count <= active.of,
                "--active needs --scenario stream or soak and at most --connections"
            );
        }
        if self.scenario == Scenario::Soak {
            anyhow::ensure!(
                !self.sample_interval.is_zero() && self.sample_interval <= self.duration,
                "--sample-interval must be more than 0 and at most --duration"
            );
            anyhow::ensure!(
                self.warmup() < self.duration,
                "--warmup must be shorter than --duration"
            );
            anyhow::ensure!(
                self.settle <= MAX_SETTLE,
                "--settle must be at most {}s",
                MAX_SETTLE.as_secs()
            );
        }
        Ok(())
    }

    pub fn agent(&self) -> &'static str {
        if self.chunks == 0 {
            SCRIPT_AGENT
        } else {
            CHUNK_AGENT
        }
    }
}

/// Only loopback targets: this tool never sends traffic off the machine.
pub fn check_loopback(addr: SocketAddr) -> anyhow::Result<()> {
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "refusing {addr}: the load generator only targets loopback addresses (127.0.0.0/8, ::1)"
    );
    Ok(())
}

/// The reply the `bench` agent streams for `chunks` chunks: chunk `i` is
/// `<000000000000000i>` (20 characters), so a lost or reordered chunk shows.
pub fn chunk_reply(chunks: u32) -> String {
    (0..chunks).map(|i| format!("<{i:018}>")).collect()
}

/// `500ms`, `2s`, `5m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: missing unit (ms, s, m)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: not a number"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(format!("{text:?}: unit must be ms, s or m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_targets_off_loopback() {
        assert!(check_loopback("127.0.0.1:80".parse().unwrap()).is_ok());
        assert!(check_loopback("127.3.2.1:80".parse().unwrap()).is_ok());
        assert!(check_loopback("[::1]:80".parse().unwrap()).is_ok());
        for addr in ["10.0.0.1:80", "192.168.1.1:80", "0.0.0.0:80", "8.8.8.8:53"] {
            assert!(check_loopback(addr.parse().unwrap()).is_err(), "{addr}");
        }
    }

    #[test]
    fn chunk_replies_are_twenty_characters_a_chunk() {
        let reply = chunk_reply(3);
        assert_eq!(reply.len(), 3 * CHUNK_CHARS);
        assert_eq!(&reply[..CHUNK_CHARS], "<000000000000000000>");
        assert_eq!(&reply[40..], "<000000000000000002>");
    }

    #[test]
    fn active_connections_are_spread_evenly_and_counted_exactly() {
        let mut options = RunOptions::new("127.0.0.1:9".parse().unwrap(), Scenario::Stream);
        options.connections = 19_000;
        options.active = Some(Active {
            count: 190,
            of: 19_000,
        });
        let active: Vec<usize> = (0..19_000).filter(|&i| options.runs_turns(i)).collect();
        assert_eq!(active.len(), 190);
        assert!(active.windows(2).all(|w| w[1] - w[0] == 100), "{active:?}");
        options.active = None;
        assert!((0..19_000).all(|i| options.runs_turns(i)));
        options.active = Some(Active {
            count: 0,
            of: 19_000,
        });
        assert!((0..19_000).all(|i| !options.runs_turns(i)));
        options.scenario = Scenario::Idle;
        assert!(options.validate().is_err(), "--active with idle");
        options.active = None;
        assert!(!options.runs_turns(0));
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("5h").is_err());
    }
}

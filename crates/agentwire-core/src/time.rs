//! Wall-clock time as the engine sees it.

/// Nanoseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn from_unix_millis(ms: i64) -> Timestamp {
        Timestamp(ms.saturating_mul(1_000_000))
    }

    pub fn unix_millis(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }

    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating.
    pub fn plus(self, d: std::time::Duration) -> Timestamp {
        let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }
}

/// The wall clock. Timers (tokio's) are separate; this is for stamping frames
/// and records and for expiry decisions that must survive a restart.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

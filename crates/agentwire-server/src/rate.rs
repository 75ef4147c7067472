//! A per-connection token bucket for client frames.

use tokio::time::Instant;

use crate::Limits;

pub(crate) struct TokenBucket {
    tokens: f64,
    capacity: f64,
    refill_per_sec: f64,
    last: Instant,
}

impl TokenBucket {
    /// The per-connection bucket for client frames: `messages_per_second`,
    /// `message_burst`.
    pub(crate) fn for_messages(limits: &Limits) -> TokenBucket {
        TokenBucket::new(
            u64::from(limits.messages_per_second),
            u64::from(limits.message_burst),
        )
    }

    pub(crate) fn new(per_second: u64, burst: u64) -> TokenBucket {
        TokenBucket {
            tokens: burst as f64,
            capacity: burst as f64,
            refill_per_sec: per_second as f64,
            last: Instant::now(),
        }
    }

    /// Takes one token if there is one.
    pub(crate) fn try_take(&mut self) -> bool {
        self.try_take_n(1)
    }

    /// Takes `n` tokens if there are that many.
    pub(crate) fn try_take_n(&mut self, n: u64) -> bool {
        let n = n as f64;
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.refill_per_sec).min(self.capacity);
        if self.tokens >= n {
            self.tokens -= n;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_sustained_rate() {
        let mut bucket = TokenBucket::new(50, 100);
        assert_eq!((0..150).filter(|_| bucket.try_take()).count(), 100);
        tokio::time::advance(std::time::Duration::from_millis(100)).await;
        assert_eq!((0..10).filter(|_| bucket.try_take()).count(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn byte_budgets() {
        let mut bucket = TokenBucket::new(1000, 4000);
        assert!(bucket.try_take_n(4000));
        assert!(!bucket.try_take_n(1));
        tokio::time::advance(std::time::Duration::from_millis(500)).await;
        assert!(!bucket.try_take_n(600));
        assert!(bucket.try_take_n(500));
    }
}

//! A per-connection token bucket for client frames.

use tokio::time::Instant;

pub(crate) struct TokenBucket {
    tokens: f64,
    capacity: f64,
    refill_per_sec: f64,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(per_second: u32, burst: u32) -> TokenBucket {
        TokenBucket {
            tokens: f64::from(burst),
            capacity: f64::from(burst),
            refill_per_sec: f64::from(per_second),
            last: Instant::now(),
        }
    }

    /// Takes one token if there is one.
    pub(crate) fn try_take(&mut self) -> bool {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.refill_per_sec).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
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
}

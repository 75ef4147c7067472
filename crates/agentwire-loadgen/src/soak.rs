//! The soak scenario's memory figures: the server's RSS sampled through a
//! long run of turns, and once more after every socket has closed.
//!
//! Two questions, two targets:
//!
//! - **Growth after warm-up**: (RSS at the end of the load − RSS at the end
//!   of the warm-up) / RSS at the end of the warm-up. Memory that is a
//!   function of live work stays flat once the caches are warm; growth
//!   means something accumulates per turn.
//! - **RSS after the load** against the **warm idle** figure: the RSS with
//!   every connection open and no turn run yet (the sample taken once the
//!   connect phase is over). After the load and every close, memory that
//!   returns to the system brings the process back near that figure;
//!   retained memory (live data, or the allocator's caches) keeps it above.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::probe;

/// Growth after warm-up must stay below this, in percent.
pub const GROWTH_TARGET_PCT: f64 = 5.0;
/// RSS after the load must be within this of the warm idle RSS, in percent.
pub const AFTER_LOAD_TARGET_PCT: f64 = 25.0;

/// One RSS reading, `t_secs` from the start of the run phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RssSample {
    pub t_secs: f64,
    pub rss_kib: u64,
}

/// What a soak run measured of the server's memory.
#[derive(Debug, Clone, Serialize)]
pub struct SoakUsage {
    pub sample_interval_secs: f64,
    pub warmup_secs: f64,
    /// Every connection open, no turn run yet.
    pub rss_idle_kib: u64,
    /// The first sample at or after the warm-up.
    pub rss_warm_kib: u64,
    /// The last sample of the run phase.
    pub rss_end_kib: u64,
    /// (end − warm) / warm, in percent.
    pub growth_after_warmup_pct: f64,
    /// Every socket closed, after the settle time.
    pub rss_after_close_kib: u64,
    pub settle_secs: f64,
    /// (after close − idle) / idle, in percent.
    pub after_close_vs_idle_pct: f64,
    /// The run phase's samples, in order (the first at 0 s, the last at its end).
    pub samples: Vec<RssSample>,
}

impl SoakUsage {
    /// `None` without samples (no server pid).
    pub fn new(
        rss_idle_kib: u64,
        samples: Vec<RssSample>,
        sample_interval: Duration,
        warmup: Duration,
        rss_after_close_kib: u64,
        settle: Duration,
    ) -> Option<SoakUsage> {
        let warmup_secs = warmup.as_secs_f64();
        let warm = samples
            .iter()
            .find(|s| s.t_secs >= warmup_secs)
            .or(samples.last())?;
        let end = samples.last()?;
        let percent =
            |value: u64, base: u64| (value as f64 - base as f64) / (base.max(1) as f64) * 100.0;
        Some(SoakUsage {
            sample_interval_secs: sample_interval.as_secs_f64(),
            warmup_secs,
            rss_idle_kib,
            rss_warm_kib: warm.rss_kib,
            rss_end_kib: end.rss_kib,
            growth_after_warmup_pct: percent(end.rss_kib, warm.rss_kib),
            rss_after_close_kib,
            settle_secs: settle.as_secs_f64(),
            after_close_vs_idle_pct: percent(rss_after_close_kib, rss_idle_kib),
            samples,
        })
    }

    pub fn growth_met(&self) -> bool {
        self.growth_after_warmup_pct < GROWTH_TARGET_PCT
    }

    /// Below the idle figure is met too: closed sockets cost nothing.
    pub fn after_close_met(&self) -> bool {
        self.after_close_vs_idle_pct <= AFTER_LOAD_TARGET_PCT
    }
}

/// Samples `pid`'s RSS every `interval` until dropped; the samples so far
/// are taken with [`Sampler::finish`], which adds one last reading.
pub struct Sampler {
    pid: u32,
    started: Instant,
    samples: Vec<RssSample>,
}

impl Sampler {
    /// Takes the first sample (at 0 s).
    pub fn start(pid: u32) -> std::io::Result<Sampler> {
        let mut sampler = Sampler {
            pid,
            started: Instant::now(),
            samples: Vec::new(),
        };
        sampler.take()?;
        Ok(sampler)
    }

    fn take(&mut self) -> std::io::Result<()> {
        let sample = probe::sample(self.pid)?;
        self.samples.push(RssSample {
            t_secs: self.started.elapsed().as_secs_f64(),
            rss_kib: sample.rss_kib,
        });
        Ok(())
    }

    /// Samples every `interval`, for as long as the caller polls it (it is
    /// meant to be raced against the run phase); never returns `Ok`.
    pub async fn every(&mut self, interval: Duration) -> std::io::Result<()> {
        let mut ticks = tokio::time::interval_at(self.started + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.take()?;
        }
    }

    /// The samples, ending with one taken now.
    pub fn finish(mut self) -> std::io::Result<Vec<RssSample>> {
        self.take()?;
        Ok(self.samples)
    }
}

/// At most `rows` samples, evenly spaced, always with the first and last:
/// what a Markdown table shows of a long run (the JSON line has them all).
pub fn thin(samples: &[RssSample], rows: usize) -> Vec<RssSample> {
    if samples.len() <= rows || rows < 2 {
        return samples.to_vec();
    }
    let last = samples.len() - 1;
    let mut picked: Vec<RssSample> = (0..rows).map(|i| samples[i * last / (rows - 1)]).collect();
    picked.dedup();
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rss: &[u64]) -> Vec<RssSample> {
        rss.iter()
            .enumerate()
            .map(|(i, &rss_kib)| RssSample {
                t_secs: i as f64 * 5.0,
                rss_kib,
            })
            .collect()
    }

    #[test]
    fn growth_is_measured_from_the_first_sample_after_the_warm_up() {
        let usage = SoakUsage::new(
            10_000,
            samples(&[10_000, 40_000, 50_000, 51_000, 52_000]),
            Duration::from_secs(5),
            Duration::from_secs(10),
            11_000,
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(usage.rss_warm_kib, 50_000);
        assert_eq!(usage.rss_end_kib, 52_000);
        assert!((usage.growth_after_warmup_pct - 4.0).abs() < 1e-9);
        assert!(usage.growth_met());
        assert!((usage.after_close_vs_idle_pct - 10.0).abs() < 1e-9);
        assert!(usage.after_close_met());
    }

    #[test]
    fn targets_are_missed_by_growth_and_by_retained_memory() {
        let usage = SoakUsage::new(
            10_000,
            samples(&[10_000, 50_000, 60_000]),
            Duration::from_secs(5),
            Duration::from_secs(5),
            20_000,
            Duration::from_secs(5),
        )
        .unwrap();
        assert!(!usage.growth_met(), "{usage:?}");
        assert!(!usage.after_close_met(), "{usage:?}");
        assert!(
            SoakUsage::new(
                1,
                Vec::new(),
                Duration::ZERO,
                Duration::ZERO,
                1,
                Duration::ZERO
            )
            .is_none()
        );
    }

    #[test]
    fn thinning_keeps_the_ends_and_spaces_the_rest() {
        let all = samples(&(0..121).collect::<Vec<_>>());
        let thinned = thin(&all, 13);
        assert_eq!(thinned.len(), 13);
        assert_eq!(thinned[0], all[0]);
        assert_eq!(thinned[12], all[120]);
        assert_eq!(thinned[1], all[10]);
        assert_eq!(thin(&all[..5], 13), all[..5].to_vec());
    }
}

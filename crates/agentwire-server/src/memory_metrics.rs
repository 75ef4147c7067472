//! Agent memory, counted for `/metrics`: [`MeasuredMemory`] wraps the
//! store every user of memory goes through (the tools, ambient recall, the
//! purge, the owners' API) and counts each call, timing recalls and writes
//! in histograms. Nothing a memory says is ever a label.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use agentwire_core::memory::Listing;
use agentwire_core::{
    AgentMemory, Clock, EmbedError, Embedder, Memory, MemoryError, MemoryScope, MemoryTier,
    NewMemory, Owned, Recall, Remembered, TierCounts, Timestamp,
};
use async_trait::async_trait;

/// Upper bounds of the latency buckets, in seconds.
pub const LATENCY_BUCKETS: [f64; 10] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// A latency histogram: a count per bucket (and one past the last), the
/// sum in microseconds, the count.
#[derive(Default)]
pub struct Latency {
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Latency {
    fn observe(&self, started: Instant) {
        let elapsed = started.elapsed();
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (n, bound) in LATENCY_BUCKETS.iter().enumerate() {
            cumulative += self.buckets[n].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.buckets[LATENCY_BUCKETS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
    }
}

/// What memory did, since the process started.
#[derive(Default)]
pub struct MemoryMetrics {
    recall: Latency,
    write: Latency,
    /// Reads that are not a recall: lists, opens, the owners' API.
    reads: AtomicU64,
    forgets: AtomicU64,
    /// Memories deleted for good: purged after their grace, or by an owner.
    hard_deletes: AtomicU64,
    failures: AtomicU64,
    /// Calls to `memory.embeddings`, and those that failed.
    embed: Latency,
    embed_failures: AtomicU64,
    /// Live memories by tier, as last counted (after each purge).
    by_tier: [AtomicU64; 3],
}

impl MemoryMetrics {
    pub fn render(&self, out: &mut String) {
        self.recall.render(
            "agentwire_memory_recall_seconds",
            "Memory recalls (the tool and ambient recall), by how long the store took.",
            out,
        );
        self.write.render(
            "agentwire_memory_write_seconds",
            "Memories written (remembered, replaced, imported), by how long the store took.",
            out,
        );
        self.embed.render(
            "agentwire_memory_embed_seconds",
            "Calls to the embeddings endpoint (memory.embeddings), by how long they took.",
            out,
        );
        let _ = writeln!(
            out,
            "# HELP agentwire_memories Live memories by tier, as counted after the last purge.\n# TYPE agentwire_memories gauge"
        );
        for (n, tier) in TIERS.iter().enumerate() {
            let value = self.by_tier[n].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "agentwire_memories{{tier=\"{}\"}} {value}",
                tier.as_str()
            );
        }
        let counters = [
            (
                "reads_total",
                "Memory reads other than recalls: lists, opens, the owners' API.",
                &self.reads,
            ),
            (
                "forgets_total",
                "Memories forgotten (hidden from every read).",
                &self.forgets,
            ),
            (
                "hard_deletes_total",
                "Memories deleted for good: purged after their grace, or by their owner.",
                &self.hard_deletes,
            ),
            (
                "failures_total",
                "Calls to the memory store that failed.",
                &self.failures,
            ),
            (
                "embed_failures_total",
                "Calls to the embeddings endpoint that failed (memory by words alone).",
                &self.embed_failures,
            ),
        ];
        for (name, help, counter) in counters {
            let value = counter.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "# HELP agentwire_memory_{name} {help}\n# TYPE agentwire_memory_{name} counter\nagentwire_memory_{name} {value}"
            );
        }
    }

    /// Counts `result` as a failure when it is one.
    fn outcome<T>(&self, result: Result<T, MemoryError>) -> Result<T, MemoryError> {
        if result.is_err() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

/// An embeddings endpoint whose calls [`MemoryMetrics`] times and counts.
pub struct MeasuredEmbedder {
    inner: Arc<dyn Embedder>,
    metrics: Arc<MemoryMetrics>,
}

impl MeasuredEmbedder {
    pub fn new(inner: Arc<dyn Embedder>, metrics: Arc<MemoryMetrics>) -> MeasuredEmbedder {
        MeasuredEmbedder { inner, metrics }
    }
}

#[async_trait]
impl Embedder for MeasuredEmbedder {
    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let started = Instant::now();
        let result = self.inner.embed(texts).await;
        self.metrics.embed.observe(started);
        if result.is_err() {
            add(&self.metrics.embed_failures, 1);
        }
        result
    }
}

/// The gauge's tiers, in its order.
const TIERS: [MemoryTier; 3] = [
    MemoryTier::CallerWithAgent,
    MemoryTier::Caller,
    MemoryTier::Agent,
];

/// A memory store whose calls [`MemoryMetrics`] counts; after each purge
/// it counts the memories by tier for the gauge (one grouped count, as
/// often as `memory.purge_every`, never on a scrape).
pub struct MeasuredMemory {
    inner: Arc<dyn AgentMemory>,
    metrics: Arc<MemoryMetrics>,
    clock: Arc<dyn Clock>,
}

impl MeasuredMemory {
    pub fn new(
        inner: Arc<dyn AgentMemory>,
        metrics: Arc<MemoryMetrics>,
        clock: Arc<dyn Clock>,
    ) -> MeasuredMemory {
        MeasuredMemory {
            inner,
            metrics,
            clock,
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

#[async_trait]
impl AgentMemory for MeasuredMemory {
    async fn remember(&self, memory: NewMemory) -> Result<Remembered, MemoryError> {
        let started = Instant::now();
        let result = self.inner.remember(memory).await;
        self.metrics.write.observe(started);
        self.metrics.outcome(result)
    }

    async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &Recall<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        let started = Instant::now();
        let result = self.inner.recall(scopes, query).await;
        self.metrics.recall.observe(started);
        self.metrics.outcome(result)
    }

    async fn list(
        &self,
        scopes: &[MemoryScope],
        page: &Listing<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        add(&self.metrics.reads, 1);
        self.metrics.outcome(self.inner.list(scopes, page).await)
    }

    async fn open(
        &self,
        scopes: &[MemoryScope],
        id: &str,
        now: Timestamp,
    ) -> Result<Option<Memory>, MemoryError> {
        add(&self.metrics.reads, 1);
        self.metrics.outcome(self.inner.open(scopes, id, now).await)
    }

    async fn forget(
        &self,
        scope: &MemoryScope,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, MemoryError> {
        let result = self
            .metrics
            .outcome(self.inner.forget(scope, id, now).await);
        if let Ok(true) = result {
            add(&self.metrics.forgets, 1);
        }
        result
    }

    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError> {
        let result = self
            .metrics
            .outcome(self.inner.purge_forgotten(before).await);
        if let Ok(purged) = result {
            add(&self.metrics.hard_deletes, purged);
        }
        // The gauge's failure is the store's, logged by whoever reads it;
        // the purge's own result stands.
        let _ = self.count_by_tier(self.clock.now()).await;
        result
    }

    async fn count_by_tier(&self, now: Timestamp) -> Result<TierCounts, MemoryError> {
        let counts = self.metrics.outcome(self.inner.count_by_tier(now).await)?;
        for (n, (_, count)) in counts.by_tier().into_iter().enumerate() {
            self.metrics.by_tier[n].store(count, Ordering::Relaxed);
        }
        Ok(counts)
    }

    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError> {
        add(&self.metrics.reads, 1);
        self.metrics.outcome(self.inner.owned(page).await)
    }

    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError> {
        let result = self
            .metrics
            .outcome(self.inner.delete_owned(owner, id).await);
        if let Ok(true) = result {
            add(&self.metrics.hard_deletes, 1);
        }
        result
    }

    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError> {
        let result = self
            .metrics
            .outcome(self.inner.delete_all_owned(owner, now).await);
        if let Ok(deleted) = result {
            add(&self.metrics.hard_deletes, deleted);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_cumulative_with_sum_and_count() {
        let latency = Latency::default();
        latency.buckets[0].store(2, Ordering::Relaxed);
        latency.buckets[3].store(1, Ordering::Relaxed);
        latency.buckets[LATENCY_BUCKETS.len()].store(1, Ordering::Relaxed);
        latency.sum_micros.store(2_500_000, Ordering::Relaxed);
        let mut out = String::new();
        latency.render("m", "help", &mut out);
        assert!(
            out.starts_with("# HELP m help\n# TYPE m histogram\n"),
            "{out}"
        );
        assert!(out.contains("m_bucket{le=\"0.0005\"} 2\n"), "{out}");
        assert!(out.contains("m_bucket{le=\"0.0025\"} 2\n"), "{out}");
        assert!(out.contains("m_bucket{le=\"0.005\"} 3\n"), "{out}");
        assert!(out.contains("m_bucket{le=\"1\"} 3\n"), "{out}");
        assert!(
            out.contains("m_bucket{le=\"+Inf\"} 4\nm_sum 2.5\nm_count 4\n"),
            "{out}"
        );
    }
}

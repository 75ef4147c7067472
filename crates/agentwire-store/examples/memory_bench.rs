//! Agent memory's latency at scale, store by store: fills a store with
//! `MEMORIES` memories across `CALLERS` callers (three agents each, no
//! facet), then times `SAMPLES` recalls (two words of the vocabulary, the
//! caller's scope and the agent's) and `SAMPLES` remembers, one at a time,
//! and prints p50, p95 and p99 in milliseconds. With `DIMENSIONS` above 0,
//! every memory is stored with a random vector of that length and every
//! recall and remember carries one (the exact search and the supersession
//! check then run). `bench/memory.sh` runs it on SQLite and PostgreSQL and
//! writes the figures to the book.
//!
//! `cargo run --release -p agentwire-store --features postgres --example
//! memory_bench -- sqlite|postgres [MEMORIES] [CALLERS] [DIMENSIONS]`;
//! PostgreSQL's URL is `AGENTWIRE_BENCH_POSTGRES` (a database the bench
//! may fill).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::memory::{Fact, Recall};
use agentwire_core::{AgentMemory, MemoryScope, MemoryTier, NewMemory, Timestamp, TurnCaller};

const SAMPLES: usize = 2_000;
/// Writes in flight while filling: enough for the stores to batch.
const FILL_CONCURRENCY: usize = 64;
const AGENTS: usize = 3;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }

    /// `dimensions` numbers in [-1, 1); none for 0.
    fn vector(&mut self, dimensions: usize) -> Option<Vec<f32>> {
        let number = |rng: &mut Rng| rng.below(1 << 16) as f32 / 32_768.0 - 1.0;
        (dimensions > 0).then(|| (0..dimensions).map(|_| number(self)).collect())
    }
}

/// 4,096 made-up words: syllables, so every word is distinct.
fn vocabulary() -> Vec<String> {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "bo", "di", "fu", "go", "hi",
        "ju",
    ];
    let mut words = Vec::with_capacity(4096);
    for a in SYLLABLES {
        for b in SYLLABLES {
            for c in SYLLABLES {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

fn sentence(rng: &mut Rng, words: &[String]) -> String {
    let length = 8 + rng.below(8);
    let chosen: Vec<&str> = (0..length)
        .map(|_| words[rng.below(words.len())].as_str())
        .collect();
    chosen.join(" ")
}

fn scope(caller: usize, agent: usize) -> MemoryScope {
    let caller = TurnCaller {
        owner: Some(format!("caller-{caller}")),
        memory_facet: None,
    };
    MemoryScope::new(
        MemoryTier::CallerWithAgent,
        &caller,
        &format!("agent-{agent}"),
    )
    .unwrap()
}

fn fact(content: String) -> Fact {
    Fact {
        kind: "general".to_owned(),
        content,
        metadata: serde_json::Map::new(),
        confidence: 0.8,
        category: None,
        about: None,
        purpose: None,
        title: None,
        summary: None,
    }
}

fn new(
    id: String,
    scope: MemoryScope,
    content: String,
    at: i64,
    vector: Option<Vec<f32>>,
) -> NewMemory {
    NewMemory {
        id,
        scope,
        fact: fact(content),
        session_id: None,
        now: Timestamp(at),
        expires_at: None,
        vector,
    }
}

/// What to fill and measure.
#[derive(Clone, Copy)]
struct Shape {
    memories: usize,
    callers: usize,
    dimensions: usize,
}

async fn fill(store: Arc<dyn AgentMemory>, shape: Shape) {
    let Shape {
        memories, callers, ..
    } = shape;
    let words = Arc::new(vocabulary());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..FILL_CONCURRENCY {
        let (store, words) = (store.clone(), words.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (worker as u64 + 1));
            for n in (worker..memories).step_by(FILL_CONCURRENCY) {
                let scope = scope(n % callers, (n / callers) % AGENTS);
                let content = sentence(&mut rng, &words);
                let vector = rng.vector(shape.dimensions);
                let memory = new(format!("m{n}"), scope, content, n as i64, vector);
                store.remember(memory).await.expect("remember");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let took = started.elapsed();
    let dimensions = shape.dimensions;
    println!(
        "filled {memories} memories across {callers} callers ({dimensions} dimensions) in {took:.1?}"
    );
}

fn percentiles(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name}: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms ({} samples)",
        ms(at(0.50)),
        ms(at(0.95)),
        ms(at(0.99)),
        samples.len()
    );
}

async fn measure(store: &dyn AgentMemory, shape: Shape) {
    let Shape {
        memories,
        callers,
        dimensions,
    } = shape;
    let words = vocabulary();
    let mut rng = Rng(0x1234_5678);
    let mut recalls = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let agent = rng.below(AGENTS);
        let caller = TurnCaller {
            owner: Some(format!("caller-{}", rng.below(callers))),
            memory_facet: None,
        };
        let name = format!("agent-{agent}");
        let scopes = [
            MemoryScope::new(MemoryTier::CallerWithAgent, &caller, &name).unwrap(),
            MemoryScope::new(MemoryTier::Agent, &caller, &name).unwrap(),
        ];
        let text = format!(
            "{} {}",
            words[rng.below(words.len())],
            words[rng.below(words.len())]
        );
        let vector = rng.vector(dimensions);
        let query = Recall {
            text: &text,
            vector: vector.as_deref(),
            kinds: &[],
            limit: 10,
            min_confidence: 0.0,
            now: Timestamp(i64::MAX / 2),
        };
        let started = Instant::now();
        store.recall(&scopes, &query).await.expect("recall");
        recalls.push(started.elapsed());
    }
    percentiles("recall", recalls);
    let mut writes = Vec::with_capacity(SAMPLES);
    for n in 0..SAMPLES {
        let scope = scope(rng.below(callers), rng.below(AGENTS));
        let memory = new(
            format!("w{n}"),
            scope,
            sentence(&mut rng, &words),
            (memories + n) as i64,
            rng.vector(dimensions),
        );
        let started = Instant::now();
        store.remember(memory).await.expect("remember");
        writes.push(started.elapsed());
    }
    percentiles("remember", writes);
}

async fn open(kind: &str) -> Arc<dyn AgentMemory> {
    match kind {
        "sqlite" => {
            let dir =
                std::env::temp_dir().join(format!("agentwire-memory-bench-{}", std::process::id()));
            let store = agentwire_store::SqliteStore::open(&dir.join("bench.db"))
                .await
                .unwrap();
            println!("sqlite: {}", dir.display());
            Arc::new(store)
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let url = std::env::var("AGENTWIRE_BENCH_POSTGRES").expect("AGENTWIRE_BENCH_POSTGRES");
            let options = agentwire_store::PgOptions {
                url: agentwire_store::PgUrl::parse(&url).unwrap(),
                pool_size: 16,
                connect_timeout: Some(Duration::from_secs(10)),
                statement_timeout: None,
                migrations: agentwire_store::Migrations::Apply,
            };
            Arc::new(agentwire_store::PgStore::connect(&options).await.unwrap())
        }
        other => panic!("no store {other:?}: sqlite or postgres"),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map_or("sqlite", String::as_str);
    let shape = Shape {
        memories: args.get(2).map_or(1_000_000, |n| n.parse().unwrap()),
        callers: args.get(3).map_or(10_000, |n| n.parse().unwrap()),
        dimensions: args.get(4).map_or(0, |n| n.parse().unwrap()),
    };
    let store = open(kind).await;
    fill(store.clone(), shape).await;
    measure(store.as_ref(), shape).await;
}

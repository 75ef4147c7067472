//! The tools with an embedder: a fact said again supersedes the one before,
//! one that resembles it is kept and flagged, recall finds by meaning, and
//! an embedder that fails leaves memory working by words.

use agentwire_core::{EmbedError, Embedder};
use async_trait::async_trait;
use parking_lot::Mutex;

use super::*;

/// Vectors by the words a text holds: one dimension per meaning, a few
/// words each, so "chai" means what "tea" does.
#[derive(Default)]
struct Words {
    seen: Mutex<Vec<String>>,
}

const MEANINGS: [&[&str]; 3] = [&["tea", "chai", "beverage"], &["coffee"], &["lisbon"]];

#[async_trait]
impl Embedder for Words {
    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.seen.lock().extend(texts.iter().map(|t| t.to_string()));
        let vector = |text: &str| {
            let words: Vec<String> = text.split(' ').map(str::to_lowercase).collect();
            let count = |meaning: &[&str]| {
                words
                    .iter()
                    .filter(|w| meaning.contains(&w.as_str()))
                    .count() as f32
            };
            MEANINGS.iter().map(|m| count(m)).collect()
        };
        Ok(texts.iter().map(|t| vector(t)).collect())
    }
}

struct Down;

#[async_trait]
impl Embedder for Down {
    async fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError("503 from the endpoint".to_owned()))
    }
}

fn with(embedder: Arc<dyn Embedder>, store: &Arc<MemoryStore>) -> MemorySettings {
    MemorySettings {
        embedder: Some(embedder),
        ..settings(store, MemoryTier::CallerWithAgent)
    }
}

async fn remember(memory: &MemorySettings, turn: &TurnContext, content: &str) -> Value {
    let arguments = json!({"content": content});
    let result = call(memory, "helper", turn, specs::REMEMBER_TOOL, arguments).await;
    result.unwrap()
}

#[tokio::test]
async fn a_fact_said_again_supersedes_and_is_recalled_by_meaning() {
    let store = Arc::new(MemoryStore::new());
    let memory = with(Arc::new(Words::default()), &store);
    let alice = turn(Some("alice"), None);
    let first = remember(&memory, &alice, "likes tea").await;
    assert_eq!(first, json!({"status": "remembered", "id": first["id"]}));
    let again = remember(&memory, &alice, "drinks chai").await;
    assert_eq!(
        again,
        json!({"status": "remembered", "id": first["id"], "superseded": {"similarity": 1.0}})
    );
    // No word in common with "drinks chai": found by meaning.
    let query = json!({"query": "which beverage"});
    let found = call(&memory, "helper", &alice, specs::RECALL_TOOL, query).await;
    let found = found.unwrap();
    assert_eq!(found["count"], 1);
    assert_eq!(found["memories"][0]["content"], "drinks chai");
    // Bob's same words are his own memory, superseding nothing of Alice's
    // (his turn's ids count from where hers stopped: ids are unique).
    let bob = turn(Some("bob"), None);
    bob.new_call_id();
    bob.new_call_id();
    let his = remember(&memory, &bob, "drinks chai").await;
    assert_eq!(his, json!({"status": "remembered", "id": "call-2"}));
    let hers = call(&memory, "helper", &alice, specs::LIST_TOOL, json!({})).await;
    assert_eq!(hers.unwrap()["memories"][0]["id"], first["id"]);
}

#[tokio::test]
async fn a_fact_that_resembles_one_is_kept_and_flagged() {
    let store = Arc::new(MemoryStore::new());
    let memory = with(Arc::new(Words::default()), &store);
    let alice = turn(Some("alice"), None);
    let tea = remember(&memory, &alice, "tea").await;
    // cos([3, 1, 0], [1, 0, 0]) = 0.949: alike, not the same.
    let near = remember(&memory, &alice, "tea tea tea coffee").await;
    assert_ne!(near["id"], tea["id"]);
    assert_eq!(
        near["potential_duplicates"],
        json!([{"memory_id": tea["id"], "similarity": 0.949}])
    );
    let listed = call(&memory, "helper", &alice, specs::LIST_TOOL, json!({})).await;
    assert_eq!(listed.unwrap()["count"], 2);
}

#[tokio::test]
async fn an_embedder_that_fails_leaves_memory_working_by_words() {
    let store = Arc::new(MemoryStore::new());
    let memory = with(Arc::new(Down), &store);
    let alice = turn(Some("alice"), None);
    let written = remember(&memory, &alice, "likes tea").await;
    assert_eq!(written["status"], "remembered");
    let query = json!({"query": "tea"});
    let found = call(&memory, "helper", &alice, specs::RECALL_TOOL, query).await;
    assert_eq!(found.unwrap()["count"], 1);
}

#[tokio::test]
async fn only_the_beginning_of_a_long_fact_is_embedded() {
    let store = Arc::new(MemoryStore::new());
    let words = Arc::new(Words::default());
    let memory = with(words.clone(), &store);
    let alice = turn(Some("alice"), None);
    let long = "é".repeat(super::super::MAX_EMBEDDED_BYTES);
    remember(&memory, &alice, &long).await;
    let seen = words.seen.lock();
    assert_eq!(
        seen[0].len(),
        super::super::MAX_EMBEDDED_BYTES,
        "cut on a character"
    );
}

use super::*;

fn memory(id: &str, updated_at: i64) -> Memory {
    Memory {
        id: id.to_owned(),
        scope: conformance::scope("o", "a", None),
        fact: conformance::fact(id),
        session_id: None,
        created_at: Timestamp(0),
        updated_at: Timestamp(updated_at),
        expires_at: None,
    }
}

fn ids(memories: &[Memory]) -> Vec<&str> {
    memories.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn fusion_adds_reciprocal_ranks_across_lists() {
    // b: 1/62 + 1/61 = 0.032522; a: 1/61 + 1/63 = 0.032266;
    // c: 1/63 + 1/62 = 0.032002.
    let text = vec![memory("a", 0), memory("b", 0), memory("c", 0)];
    let vectors = vec![memory("b", 0), memory("c", 0), memory("a", 0)];
    let fused = fuse(vec![text, vectors], Timestamp(0), 10);
    assert_eq!(ids(&fused), ["b", "a", "c"]);
    // One list alone keeps its order; the limit cuts it.
    let alone = fuse(vec![vec![memory("x", 0), memory("y", 0)]], Timestamp(0), 1);
    assert_eq!(ids(&alone), ["x"]);
}

#[test]
fn an_older_memory_loses_half_its_score_per_half_life() {
    let month = RECENCY_HALF_LIFE_NANOS as i64;
    let now = Timestamp(2 * month);
    // First by text but two half-lives old: 1/61 / 4 < 1/62.
    let fused = fuse(
        vec![vec![memory("old", 0), memory("new", 2 * month)]],
        now,
        10,
    );
    assert_eq!(ids(&fused), ["new", "old"]);
    // One half-life: 1/61 / 2 < 1/62 still; a tiny age does not reorder.
    let fused = fuse(
        vec![vec![
            memory("old", 2 * month - 1_000),
            memory("new", 2 * month),
        ]],
        now,
        10,
    );
    assert_eq!(ids(&fused), ["old", "new"]);
}

#[test]
fn search_words_are_lowercase_unique_and_free_of_syntax() {
    assert_eq!(
        search_words("Dog* OR \"rex\" dog-park"),
        ["dog", "or", "park", "rex"]
    );
    assert!(search_words("  ** \" ").is_empty());
    assert_eq!(search_words(&"w ".repeat(100)).len(), 1);
    let many: String = (0..100).map(|n| format!("w{n} ")).collect();
    assert_eq!(search_words(&many).len(), MAX_SEARCH_WORDS);
}

#[test]
fn only_an_identified_caller_has_a_caller_tier() {
    let anonymous = TurnCaller::default();
    for tier in [MemoryTier::CallerWithAgent, MemoryTier::Caller] {
        assert_eq!(
            MemoryScope::new(tier, &anonymous, "a"),
            Err(ScopeError::Anonymous)
        );
    }
    let agent = MemoryScope::new(MemoryTier::Agent, &anonymous, "a").unwrap();
    assert_eq!((agent.owner(), agent.agent(), agent.facet()), ("", "a", ""));
    let caller = TurnCaller {
        owner: Some("o".to_owned()),
        memory_facet: Some("f".to_owned()),
    };
    let agents = MemoryScope::new(MemoryTier::Agent, &caller, "a").unwrap();
    assert_eq!(
        agents, agent,
        "the agent's own memory has no owner and no facet"
    );
    let shared = MemoryScope::new(MemoryTier::Caller, &caller, "a").unwrap();
    assert_eq!(
        (shared.owner(), shared.agent(), shared.facet()),
        ("o", "", "f")
    );
    for tier in [
        MemoryTier::CallerWithAgent,
        MemoryTier::Caller,
        MemoryTier::Agent,
    ] {
        assert_eq!(MemoryTier::parse(tier.as_str()), Some(tier));
    }
}

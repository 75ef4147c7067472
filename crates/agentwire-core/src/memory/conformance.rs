//! The conformance suite every [`AgentMemory`] store passes, for the
//! stores' own tests: scopes never leak, a subject is replaced in place,
//! forgetting holds, and what is written reads back as written. Each check
//! takes a store with no memories of the owners it uses (`prefix` keeps
//! the owners of one run apart on a shared database).

use super::*;

mod isolation;
mod vectors;
pub use isolation::{Universe, isolation_holds};
pub use vectors::vectors_rank_supersede_and_resemble;

fn caller(owner: &str, facet: Option<&str>) -> TurnCaller {
    TurnCaller {
        owner: Some(owner.to_owned()),
        memory_facet: facet.map(str::to_owned),
    }
}

/// The scope of `owner`'s memory with `agent`, in `facet`.
pub fn scope(owner: &str, agent: &str, facet: Option<&str>) -> MemoryScope {
    MemoryScope::new(MemoryTier::CallerWithAgent, &caller(owner, facet), agent)
        .expect("an identified caller")
}

/// A fact of kind `general` saying `content`.
pub fn fact(content: &str) -> Fact {
    Fact {
        kind: "general".to_owned(),
        content: content.to_owned(),
        metadata: serde_json::Map::new(),
        confidence: 0.8,
        category: None,
        about: None,
        purpose: None,
        title: None,
        summary: None,
    }
}

fn new(id: &str, scope: &MemoryScope, fact: Fact, at: i64) -> NewMemory {
    NewMemory {
        id: id.to_owned(),
        scope: scope.clone(),
        fact,
        session_id: None,
        now: Timestamp(at),
        expires_at: None,
        vector: None,
    }
}

fn recall(text: &str, at: i64) -> Recall<'_> {
    Recall {
        text,
        vector: None,
        kinds: &[],
        limit: 10,
        min_confidence: 0.0,
        now: Timestamp(at),
    }
}

fn listing(at: i64) -> Listing<'static> {
    Listing {
        kinds: &[],
        limit: 10,
        offset: 0,
        now: Timestamp(at),
    }
}

async fn ids_recalled(store: &dyn AgentMemory, scope: &MemoryScope, text: &str) -> Vec<String> {
    let found = store
        .recall(std::slice::from_ref(scope), &recall(text, 100))
        .await;
    found.unwrap().into_iter().map(|m| m.id).collect()
}

async fn ids_listed(store: &dyn AgentMemory, scope: &MemoryScope) -> Vec<String> {
    let found = store.list(std::slice::from_ref(scope), &listing(100)).await;
    found.unwrap().into_iter().map(|m| m.id).collect()
}

/// A memory is read in its own scope and in no other: not another
/// caller's, agent's, facet's, nor the agent tier's, by recall, list or id.
pub async fn scopes_do_not_leak(store: &dyn AgentMemory, prefix: &str) {
    let alice = format!("{prefix}-alice");
    let bob = format!("{prefix}-bob");
    let own = scope(&alice, "helper", None);
    let id = format!("{prefix}-m1");
    let written = store
        .remember(new(&id, &own, fact("prefers window seats"), 10))
        .await;
    assert_eq!(written.unwrap(), Remembered::Created { id: id.clone() });
    let only = std::slice::from_ref(&id);
    assert_eq!(ids_recalled(store, &own, "window seats").await, only);
    assert_eq!(ids_listed(store, &own).await, only);
    let agent_tier = MemoryScope::new(MemoryTier::Agent, &caller(&alice, None), "helper").unwrap();
    let shared = MemoryScope::new(MemoryTier::Caller, &caller(&alice, None), "helper").unwrap();
    let others = [
        scope(&bob, "helper", None),
        scope(&alice, "other", None),
        scope(&alice, "helper", Some("project-x")),
        agent_tier,
        shared,
    ];
    for other in &others {
        assert!(
            ids_recalled(store, other, "window seats").await.is_empty(),
            "{other:?}"
        );
        assert!(ids_listed(store, other).await.is_empty(), "{other:?}");
        let opened = store
            .open(std::slice::from_ref(other), &id, Timestamp(100))
            .await;
        assert!(opened.unwrap().is_none(), "{other:?} opened {id}");
        let forgot = store.forget(other, &id, Timestamp(100)).await.unwrap();
        assert!(!forgot, "{other:?} forgot {id}");
    }
    assert_eq!(ids_recalled(store, &own, "window").await, [id]);
}

/// A second fact about the same subject replaces the first in place: the
/// same id, the new text, one memory.
pub async fn a_subject_is_replaced_in_place(store: &dyn AgentMemory, prefix: &str) {
    let own = scope(&format!("{prefix}-carol"), "helper", None);
    let about = About {
        kind: "preference".to_owned(),
        key: "seat".to_owned(),
    };
    let first = Fact {
        about: Some(about.clone()),
        ..fact("prefers aisle seats")
    };
    let id = format!("{prefix}-m2");
    store.remember(new(&id, &own, first, 10)).await.unwrap();
    let second = Fact {
        about: Some(about),
        ..fact("prefers window seats")
    };
    let replaced = store
        .remember(new(&format!("{prefix}-m3"), &own, second, 20))
        .await;
    assert_eq!(replaced.unwrap(), Remembered::Replaced { id: id.clone() });
    let listed = store
        .list(std::slice::from_ref(&own), &listing(100))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].fact.content, "prefers window seats");
    assert_eq!(listed[0].created_at, Timestamp(10));
    assert_eq!(listed[0].updated_at, Timestamp(20));
    assert!(ids_recalled(store, &own, "aisle").await.is_empty());
    // Another scope's fact about the same subject is its own memory.
    let elsewhere = scope(&format!("{prefix}-carol"), "other", None);
    let theirs = Fact {
        about: listed[0].fact.about.clone(),
        ..fact("prefers aisle seats")
    };
    let written = store
        .remember(new(&format!("{prefix}-m4"), &elsewhere, theirs, 30))
        .await;
    assert!(matches!(written.unwrap(), Remembered::Created { .. }));
}

/// Forgetting hides a memory from every read at once; purging deletes it
/// once its grace has passed, and not before.
pub async fn forgetting_holds(store: &dyn AgentMemory, prefix: &str) {
    let own = scope(&format!("{prefix}-dave"), "helper", None);
    let id = format!("{prefix}-m5");
    store
        .remember(new(&id, &own, fact("lives in Lisbon"), 10))
        .await
        .unwrap();
    assert!(store.forget(&own, &id, Timestamp(50)).await.unwrap());
    assert!(ids_recalled(store, &own, "Lisbon").await.is_empty());
    assert!(ids_listed(store, &own).await.is_empty());
    let opened = store
        .open(std::slice::from_ref(&own), &id, Timestamp(60))
        .await;
    assert!(opened.unwrap().is_none());
    assert!(!store.forget(&own, &id, Timestamp(60)).await.unwrap());
    // A new fact after forgetting is a new memory.
    let again = format!("{prefix}-m6");
    store
        .remember(new(&again, &own, fact("lives in Porto"), 70))
        .await
        .unwrap();
    // Expired (at 80) is purged as forgotten is, after the same grace.
    let soon = format!("{prefix}-m6b");
    let expiring = NewMemory {
        expires_at: Some(Timestamp(80)),
        ..new(&soon, &own, fact("visits Porto"), 75)
    };
    store.remember(expiring).await.unwrap();
    assert_eq!(store.purge_forgotten(Timestamp(50)).await.unwrap(), 0);
    assert!(store.purge_forgotten(Timestamp(51)).await.unwrap() >= 1);
    let scopes = std::slice::from_ref(&own);
    let live = store.open(scopes, &soon, Timestamp(79)).await.unwrap();
    assert!(live.is_some(), "not expired yet, not purged");
    assert!(store.purge_forgotten(Timestamp(81)).await.unwrap() >= 1);
    assert_eq!(ids_listed(store, &own).await, [again]);
}

/// What is written reads back as written: every field of the fact, the
/// scope, the session and the times.
pub async fn a_memory_reads_back_as_written(store: &dyn AgentMemory, prefix: &str) {
    let own = MemoryScope::new(
        MemoryTier::Caller,
        &caller(&format!("{prefix}-erin"), Some("matter/7")),
        "helper",
    )
    .unwrap();
    let mut metadata = serde_json::Map::new();
    metadata.insert("provenance".to_owned(), "user_requested".into());
    metadata.insert("n".to_owned(), serde_json::json!([1, {"a": true}]));
    let fact = Fact {
        kind: "preference".to_owned(),
        content: "drinks tea, not coffee — «chá»".to_owned(),
        metadata,
        confidence: 0.65,
        category: Some("memory:preferences".to_owned()),
        about: Some(About {
            kind: "drink".to_owned(),
            key: "morning".to_owned(),
        }),
        purpose: Some("personalization".to_owned()),
        title: Some("Tea".to_owned()),
        summary: Some("Tea in the morning".to_owned()),
    };
    let id = format!("{prefix}-m7");
    let memory = NewMemory {
        session_id: Some(SessionId::parse("s-1").unwrap()),
        expires_at: Some(Timestamp(1_000)),
        ..new(&id, &own, fact.clone(), 10)
    };
    store.remember(memory).await.unwrap();
    let opened = store
        .open(std::slice::from_ref(&own), &id, Timestamp(20))
        .await;
    let opened = opened.unwrap().expect("the memory");
    assert_eq!(opened.scope, own);
    assert_eq!(opened.fact, fact);
    assert_eq!(
        opened.session_id.as_ref().map(SessionId::as_str),
        Some("s-1")
    );
    assert_eq!(
        (opened.created_at, opened.updated_at),
        (Timestamp(10), Timestamp(10))
    );
    assert_eq!(opened.expires_at, Some(Timestamp(1_000)));
    // Expired, it is gone from every read.
    let late = store
        .open(std::slice::from_ref(&own), &id, Timestamp(1_000))
        .await;
    assert!(late.unwrap().is_none());
}

/// Recall matches words, not syntax; filters kinds and confidence; ranks
/// the better match first; honours its limit. List pages newest first.
pub async fn reads_filter_rank_and_page(store: &dyn AgentMemory, prefix: &str) {
    let own = scope(&format!("{prefix}-frank"), "helper", None);
    let texts = [
        ("general", 0.9, "the user's dog is called Rex"),
        (
            "preference",
            0.5,
            "likes dog walks and dog parks in the rain",
        ),
        ("general", 0.9, "works as a nurse"),
    ];
    for (n, (kind, confidence, text)) in texts.into_iter().enumerate() {
        let fact = Fact {
            kind: kind.to_owned(),
            confidence,
            ..fact(text)
        };
        let id = format!("{prefix}-r{n}");
        store
            .remember(new(&id, &own, fact, 10 + n as i64))
            .await
            .unwrap();
    }
    let scopes = std::slice::from_ref(&own);
    let found = |query: Recall<'static>| async move {
        let found = store.recall(scopes, &query).await.unwrap();
        found.into_iter().map(|m| m.id).collect::<Vec<_>>()
    };
    let r = |n: usize| format!("{prefix}-r{n}");
    assert_eq!(found(recall("nurse", 100)).await, [r(2)]);
    let mut dogs = found(recall("dog", 100)).await;
    dogs.sort();
    assert_eq!(dogs, [r(0), r(1)]);
    assert!(found(recall("cat", 100)).await.is_empty());
    assert!(found(recall("", 100)).await.len() <= 3);
    for hostile in [
        "\"dog",
        "dog*",
        "NEAR(dog rex)",
        "dog OR",
        "-dog",
        "'; DROP",
        "%_",
    ] {
        assert!(
            store.recall(scopes, &recall(hostile, 100)).await.is_ok(),
            "{hostile}"
        );
    }
    let preferences = ["preference".to_owned()];
    let kinds = Recall {
        kinds: &preferences,
        ..recall("dog", 100)
    };
    assert_eq!(store.recall(scopes, &kinds).await.unwrap()[0].id, r(1));
    let confident = Recall {
        min_confidence: 0.6,
        ..recall("dog", 100)
    };
    let confident = store.recall(scopes, &confident).await.unwrap();
    assert_eq!(confident.iter().map(|m| &m.id).collect::<Vec<_>>(), [&r(0)]);
    let one = Recall {
        limit: 1,
        ..recall("dog", 100)
    };
    assert_eq!(store.recall(scopes, &one).await.unwrap().len(), 1);
    let page = Listing {
        limit: 2,
        offset: 1,
        ..listing(100)
    };
    let page = store.list(scopes, &page).await.unwrap();
    assert_eq!(
        page.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
        [r(1), r(0)]
    );
}

/// The ids of `owner`'s live memories `filter` keeps, newest first.
async fn owned_ids(store: &dyn AgentMemory, filter: Owned<'_>) -> Vec<String> {
    let found = store.owned(&filter).await.unwrap();
    found.into_iter().map(|m| m.id).collect()
}

fn owned_by(owner: &str) -> Owned<'_> {
    Owned {
        owner,
        agent: None,
        facet: None,
        id: None,
        limit: 10,
        offset: 0,
        now: Timestamp(100),
    }
}

/// Memories `o1`..`o6`: four of `{prefix}-gina`'s (two agents, a facet,
/// the shared tier), one of `{prefix}-hank`'s, one of the agent's own.
async fn write_owned(store: &dyn AgentMemory, prefix: &str) -> Vec<MemoryScope> {
    let alice = format!("{prefix}-gina");
    let bob = format!("{prefix}-hank");
    let shared = MemoryScope::new(MemoryTier::Caller, &caller(&alice, None), "helper").unwrap();
    let agents = MemoryScope::new(MemoryTier::Agent, &caller(&alice, None), "helper").unwrap();
    let scopes = vec![
        scope(&alice, "helper", None),
        scope(&alice, "helper", Some("f1")),
        shared,
        scope(&alice, "other", None),
        scope(&bob, "helper", None),
        agents,
    ];
    for (n, scope) in scopes.iter().enumerate() {
        let id = format!("{prefix}-o{}", n + 1);
        store
            .remember(new(&id, scope, fact("owned fact"), 10 + n as i64))
            .await
            .unwrap();
    }
    scopes
}

/// An owner reads every memory they own, and only theirs, filtered by
/// agent, facet or id; never an agent's own, never with no owner.
pub async fn an_owner_reads_their_own(store: &dyn AgentMemory, prefix: &str) {
    write_owned(store, prefix).await;
    let alice = format!("{prefix}-gina");
    let o = |n: u8| format!("{prefix}-o{n}");
    let all = owned_by(&alice);
    assert_eq!(owned_ids(store, all).await, [o(4), o(3), o(2), o(1)]);
    let helper = Owned {
        agent: Some("helper"),
        ..all
    };
    assert_eq!(owned_ids(store, helper).await, [o(2), o(1)]);
    let in_f1 = Owned {
        facet: Some("f1"),
        ..all
    };
    assert_eq!(owned_ids(store, in_f1).await, [o(2)]);
    let no_facet = Owned {
        facet: Some(""),
        ..all
    };
    assert_eq!(owned_ids(store, no_facet).await, [o(4), o(3), o(1)]);
    let two = o(2);
    let one = Owned {
        id: Some(&two),
        ..all
    };
    assert_eq!(owned_ids(store, one).await, [o(2)]);
    let five = o(5);
    let bobs = Owned {
        id: Some(&five),
        ..all
    };
    assert!(owned_ids(store, bobs).await.is_empty(), "not theirs");
    assert!(
        owned_ids(store, owned_by("")).await.is_empty(),
        "the agent tier has no owner"
    );
}

/// An owner deletes one or all of their memories for good (forgotten ones
/// too), never another's and never an agent's own.
pub async fn an_owner_deletes_their_own(store: &dyn AgentMemory, prefix: &str) {
    let prefix = format!("{prefix}-del");
    let scopes = write_owned(store, &prefix).await;
    let (alice, bob) = (format!("{prefix}-gina"), format!("{prefix}-hank"));
    let o = |n: u8| format!("{prefix}-o{n}");
    assert!(
        store
            .forget(&scopes[0], &o(1), Timestamp(50))
            .await
            .unwrap()
    );
    assert_eq!(owned_ids(store, owned_by(&alice)).await, [o(4), o(3), o(2)]);
    assert!(!store.delete_owned(&bob, &o(2)).await.unwrap());
    assert!(!store.delete_owned(&alice, &o(6)).await.unwrap());
    assert!(
        store.delete_owned(&alice, &o(1)).await.unwrap(),
        "forgotten, still theirs"
    );
    assert!(store.delete_owned(&alice, &o(2)).await.unwrap());
    assert!(!store.delete_owned(&alice, &o(2)).await.unwrap());
    assert_eq!(owned_ids(store, owned_by(&alice)).await, [o(4), o(3)]);
    assert_eq!(
        store.delete_all_owned(&alice, Timestamp(60)).await.unwrap(),
        2
    );
    assert!(owned_ids(store, owned_by(&alice)).await.is_empty());
    assert_eq!(
        store.delete_all_owned(&alice, Timestamp(61)).await.unwrap(),
        0
    );
    for (scope, n) in [(&scopes[4], 5), (&scopes[5], 6)] {
        let kept = store
            .open(std::slice::from_ref(scope), &o(n), Timestamp(100))
            .await;
        assert!(kept.unwrap().is_some(), "another's memory stays: o{n}");
    }
}

/// The tiers' counts follow writes, forgets and expiry (run on a store no
/// other writer uses meanwhile).
pub async fn tiers_are_counted(store: &dyn AgentMemory, prefix: &str) {
    let before = store.count_by_tier(Timestamp(100)).await.unwrap();
    let owner = format!("{prefix}-tess");
    let own = scope(&owner, "helper", None);
    let shared = MemoryScope::new(MemoryTier::Caller, &caller(&owner, None), "helper").unwrap();
    let tally = format!("{prefix}-tally");
    let agents = MemoryScope::new(MemoryTier::Agent, &caller(&owner, None), &tally).unwrap();
    let id = |n: u32| format!("{prefix}-c{n}");
    for (n, scope) in [(1, &own), (2, &own), (3, &shared), (4, &agents)] {
        store
            .remember(new(&id(n), scope, fact("counted"), 10))
            .await
            .unwrap();
    }
    let expiring = NewMemory {
        expires_at: Some(Timestamp(150)),
        ..new(&id(5), &own, fact("counted until 150"), 10)
    };
    store.remember(expiring).await.unwrap();
    assert!(store.forget(&own, &id(1), Timestamp(20)).await.unwrap());
    let after = store.count_by_tier(Timestamp(100)).await.unwrap();
    let grown = |tier: MemoryTier| {
        let of = |counts: &TierCounts| counts.by_tier().iter().find(|(t, _)| *t == tier).unwrap().1;
        of(&after) - of(&before)
    };
    assert_eq!(
        grown(MemoryTier::CallerWithAgent),
        2,
        "{before:?} {after:?}"
    );
    assert_eq!(grown(MemoryTier::Caller), 1);
    assert_eq!(grown(MemoryTier::Agent), 1);
    let later = store.count_by_tier(Timestamp(200)).await.unwrap();
    assert_eq!(later.caller_agent, after.caller_agent - 1, "expired at 150");
}

/// Every check, in one call.
pub async fn all(store: &dyn AgentMemory, prefix: &str) {
    scopes_do_not_leak(store, prefix).await;
    a_subject_is_replaced_in_place(store, prefix).await;
    forgetting_holds(store, prefix).await;
    a_memory_reads_back_as_written(store, prefix).await;
    reads_filter_rank_and_page(store, prefix).await;
    an_owner_reads_their_own(store, prefix).await;
    an_owner_deletes_their_own(store, prefix).await;
    vectors_rank_supersede_and_resemble(store, prefix).await;
    tiers_are_counted(store, prefix).await;
}

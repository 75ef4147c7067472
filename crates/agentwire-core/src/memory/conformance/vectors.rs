//! The vector checks: a write nearly the same as a memory of its own scope
//! supersedes it (and never one of another scope), a write that resembles
//! one is kept beside it and says so, and recall fuses the full-text and
//! the vector rankings by reciprocal rank.

use super::*;

fn with_vector(id: &str, scope: &MemoryScope, content: &str, vector: &[f32]) -> NewMemory {
    NewMemory {
        vector: Some(vector.to_vec()),
        ..new(id, scope, fact(content), 10)
    }
}

async fn content_of(store: &dyn AgentMemory, scope: &MemoryScope, id: &str) -> Option<String> {
    let opened = store.open(std::slice::from_ref(scope), id, Timestamp(100));
    opened.await.unwrap().map(|m| m.fact.content)
}

/// Supersession and possible duplicates, within a scope only.
pub async fn vectors_rank_supersede_and_resemble(store: &dyn AgentMemory, prefix: &str) {
    let own = scope(&format!("{prefix}-vera"), "helper", None);
    let other = scope(&format!("{prefix}-vic"), "helper", None);
    let id = |n: u32| format!("{prefix}-v{n}");
    let write = |memory: NewMemory| async move { store.remember(memory).await.unwrap() };
    let tea = write(with_vector(&id(1), &own, "likes tea", &[1.0, 0.0, 0.0])).await;
    assert_eq!(tea, Remembered::Created { id: id(1) });
    let city = write(with_vector(
        &id(2),
        &own,
        "lives in Lisbon",
        &[0.0, 1.0, 0.0],
    ))
    .await;
    assert_eq!(city, Remembered::Created { id: id(2) });
    // cos([1, 0.2, 0], [1, 0, 0]) = 0.981: the same fact, said again.
    let again = write(with_vector(&id(3), &own, "drinks tea", &[1.0, 0.2, 0.0])).await;
    let Remembered::Superseded {
        id: kept,
        similarity,
    } = again
    else {
        panic!("{again:?}")
    };
    assert_eq!(kept, id(1));
    assert!((similarity - 0.981).abs() < 0.001, "{similarity}");
    assert_eq!(
        content_of(store, &own, &id(1)).await.as_deref(),
        Some("drinks tea")
    );
    assert_eq!(content_of(store, &own, &id(3)).await, None);
    // Another caller's same vector supersedes nothing of this one's.
    let theirs = write(with_vector(&id(4), &other, "drinks tea", &[1.0, 0.2, 0.0])).await;
    assert_eq!(theirs, Remembered::Created { id: id(4) });
    assert_eq!(
        content_of(store, &own, &id(1)).await.as_deref(),
        Some("drinks tea")
    );
    // cos([1, 0.8, 0], [1, 0.2, 0]) = 0.888: alike, kept beside it.
    let near = write(with_vector(
        &id(5),
        &own,
        "tea and coffee",
        &[1.0, 0.8, 0.0],
    ))
    .await;
    let Remembered::CreatedBeside {
        id: new_id,
        similar,
    } = near
    else {
        panic!("{near:?}")
    };
    assert_eq!(new_id, id(5));
    assert_eq!(similar.len(), 1, "{similar:?}");
    assert_eq!(similar[0].id, id(1));
    assert!((similar[0].similarity - 0.888).abs() < 0.001, "{similar:?}");
    recall_fuses_text_and_vectors(store, &own, prefix).await;
    forgotten_vectors_are_not_compared(store, &own, prefix).await;
}

/// Text ranks only v1 ("drinks tea"); vectors rank v2 (0.995), v5
/// (0.699), v1 (0.293) for `[0.1, 1, 0]`. Fused: v1 (1/61 + 1/63) before
/// v2 (1/61) before v5 (1/62).
async fn recall_fuses_text_and_vectors(store: &dyn AgentMemory, own: &MemoryScope, prefix: &str) {
    let id = |n: u32| format!("{prefix}-v{n}");
    let scopes = std::slice::from_ref(own);
    let vector = [0.1, 1.0, 0.0];
    let by_meaning = Recall {
        vector: Some(&vector),
        ..recall("nothing matches", 100)
    };
    let found = store.recall(scopes, &by_meaning).await.unwrap();
    let ids: Vec<String> = found.into_iter().map(|m| m.id).collect();
    assert_eq!(ids, [id(2), id(5), id(1)], "by vector alone");
    let both = Recall {
        vector: Some(&vector),
        ..recall("drinks", 100)
    };
    let found = store.recall(scopes, &both).await.unwrap();
    let ids: Vec<String> = found.into_iter().map(|m| m.id).collect();
    assert_eq!(ids, [id(1), id(2), id(5)], "fused");
    let other = scope(&format!("{prefix}-vic"), "helper", None);
    let theirs = store.recall(std::slice::from_ref(&other), &both).await;
    let ids: Vec<String> = theirs.unwrap().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, [id(4)], "another scope's recall sees its own alone");
}

/// A forgotten memory neither answers a recall by vector nor is
/// superseded by a later write.
async fn forgotten_vectors_are_not_compared(
    store: &dyn AgentMemory,
    own: &MemoryScope,
    prefix: &str,
) {
    let id = |n: u32| format!("{prefix}-v{n}");
    assert!(store.forget(own, &id(2), Timestamp(50)).await.unwrap());
    let vector = [0.0, 1.0, 0.0];
    let query = Recall {
        vector: Some(&vector),
        ..recall("nothing matches", 100)
    };
    let found = store.recall(std::slice::from_ref(own), &query).await;
    assert!(found.unwrap().iter().all(|m| m.id != id(2)));
    let memory = NewMemory {
        now: Timestamp(60),
        ..with_vector(&id(6), own, "lives in Lisbon", &vector)
    };
    let written = store.remember(memory).await.unwrap();
    assert_eq!(written, Remembered::Created { id: id(6) });
}

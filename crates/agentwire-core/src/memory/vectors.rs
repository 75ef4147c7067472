//! Memory by meaning: the [`Embedder`] port (`memory.embeddings`, an
//! OpenAI-compatible endpoint), cosine similarity, and the rules every
//! store applies to the vectors it keeps with its rows: a recall ranks the
//! scope's memories by similarity beside the full-text ranking (the two
//! fused by [`fuse`](super::fuse)), and a write that says nearly what a
//! memory of its scope already says supersedes it or is flagged beside it.
//!
//! The search is exact: every live memory of the scopes with a vector is
//! compared, up to [`VECTOR_CANDIDATES`] of them, the most recently written
//! first. No index is approximate, so a scope's nearest memory is never
//! missed for another scope's.

use async_trait::async_trait;

/// A write at least this similar to a live memory of its scope replaces it
/// in place: same id, the old version kept as history.
pub const SUPERSEDE_SIMILARITY: f32 = 0.95;

/// A write at least this similar (and under [`SUPERSEDE_SIMILARITY`]) is
/// kept as a memory of its own, and the model is told of the one it
/// resembles.
pub const DUPLICATE_SIMILARITY: f32 = 0.85;

/// The most possible duplicates a write reports.
pub const MAX_DUPLICATES: usize = 3;

/// The most memories a vector search compares, the most recently written
/// first: what bounds a recall's and a write's work in a scope that has
/// grown large.
pub const VECTOR_CANDIDATES: usize = 2_000;

/// The longest vector kept, in numbers: larger than any embedding model
/// in use (3,072), small enough that a row stays small.
pub const MAX_DIMENSIONS: usize = 8_192;

/// An embeddings endpoint failed; the message names no text it was given.
#[derive(Debug, Clone, thiserror::Error)]
#[error("embeddings: {0}")]
pub struct EmbedError(pub String);

/// Turns texts into vectors: the memory's way to search by meaning.
#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// One vector per text, in order, all of the same length.
    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The cosine of the angle between `a` and `b`; `None` when their lengths
/// differ (vectors of another model) or either is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> Option<f32> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    let norms = (aa * bb).sqrt();
    (norms > 0.0).then(|| (dot / norms) as f32)
}

/// The `limit` candidates most similar to `query`, best first (ties by
/// key); a candidate whose vector cannot be compared is left out.
pub fn nearest<K: Ord, V: AsRef<[f32]>>(
    query: &[f32],
    candidates: impl IntoIterator<Item = (K, V)>,
    limit: usize,
) -> Vec<(K, f32)> {
    let mut scored: Vec<(K, f32)> = candidates
        .into_iter()
        .filter_map(|(key, vector)| Some((key, cosine(query, vector.as_ref())?)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
}

/// A live memory of the write's scope that says nearly the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Similar {
    pub id: String,
    /// The cosine similarity, 0.85 to 1.
    pub similarity: f32,
}

/// What a write's vector says about the scope's memories.
#[derive(Debug, Clone, PartialEq)]
pub enum Likeness<K> {
    /// Nothing alike.
    New,
    /// `K` says nearly the same: the write replaces it.
    Supersedes(K, f32),
    /// These resemble it (at most [`MAX_DUPLICATES`], best first): the
    /// write is kept beside them.
    Resembles(Vec<(K, f32)>),
}

/// Judges a write by the scope's memories nearest to it (best first, as
/// [`nearest`] returns them).
pub fn likeness<K>(nearest: Vec<(K, f32)>) -> Likeness<K> {
    let mut alike = nearest
        .into_iter()
        .filter(|(_, s)| *s >= DUPLICATE_SIMILARITY)
        .take(MAX_DUPLICATES)
        .peekable();
    match alike.peek() {
        None => Likeness::New,
        Some((_, s)) if *s >= SUPERSEDE_SIMILARITY => {
            let (key, similarity) = alike.next().expect("peeked");
            Likeness::Supersedes(key, similarity)
        }
        Some(_) => Likeness::Resembles(alike.collect()),
    }
}

/// A vector as the stores keep it: each number as four little-endian
/// bytes.
pub fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector read back; `None` when its length is not a whole number
/// of numbers.
pub fn vector_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let numbers = bytes.chunks_exact(4);
    Some(
        numbers
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_is_one_for_the_same_direction_and_none_across_lengths() {
        let c = cosine(&[1.0, 2.0], &[2.0, 4.0]).unwrap();
        assert!((c - 1.0).abs() < 1e-6, "{c}");
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).unwrap().abs() < 1e-6);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
    }

    #[test]
    fn nearest_orders_by_similarity_then_key() {
        let found = nearest(
            &[1.0, 0.0],
            [
                ("b", vec![1.0, 0.0]),
                ("a", vec![1.0, 0.0]),
                ("c", vec![0.0, 1.0]),
                ("d", vec![1.0]),
            ],
            3,
        );
        let keys: Vec<&str> = found.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["a", "b", "c"]);
    }

    #[test]
    fn a_write_supersedes_at_095_and_resembles_at_085() {
        assert_eq!(
            likeness(vec![("a", 0.96), ("b", 0.9)]),
            Likeness::Supersedes("a", 0.96)
        );
        assert_eq!(
            likeness(vec![
                ("a", 0.94),
                ("b", 0.86),
                ("c", 0.85),
                ("d", 0.85),
                ("e", 0.2)
            ]),
            Likeness::Resembles(vec![("a", 0.94), ("b", 0.86), ("c", 0.85)])
        );
        assert_eq!(likeness(vec![("a", 0.84)]), Likeness::New);
        assert_eq!(likeness::<&str>(vec![]), Likeness::New);
    }

    #[test]
    fn vectors_round_trip_through_bytes() {
        let v = vec![0.25, -1.5, f32::MIN_POSITIVE];
        assert_eq!(vector_from_bytes(&vector_bytes(&v)).unwrap(), v);
        assert_eq!(vector_bytes(&[1.0]), [0, 0, 0x80, 0x3f]);
        assert_eq!(vector_from_bytes(&[1, 2, 3]), None);
    }
}

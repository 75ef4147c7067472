//! A memory as the SQL stores keep it: one row of plain columns (the
//! metadata as a JSON object), the scope as four strings and a token the
//! full-text index holds, and the search the recall's words become.
//!
//! The scope token puts each scope's rows in the text index under one word
//! of their own, so a recall intersects the scope's short posting list with
//! the words' instead of filtering every match in the database. Two scopes
//! may share a token (a 64-bit hash): every query also checks the scope's
//! columns, so a shared token costs a few candidates, never a leak.

use agentwire_core::memory::vectors::vector_bytes;
use agentwire_core::{
    About, Fact, Memory, MemoryError, MemoryScope, MemoryTier, NewMemory, SessionId, Timestamp,
};

/// A memory's row, written or read.
#[derive(Debug, Clone)]
pub(crate) struct MemoryRow {
    pub(crate) id: String,
    pub(crate) tier: &'static str,
    pub(crate) owner: String,
    pub(crate) agent: String,
    pub(crate) facet: String,
    pub(crate) scope_token: String,
    pub(crate) kind: String,
    pub(crate) content: String,
    /// A JSON object.
    pub(crate) metadata: String,
    pub(crate) confidence: f64,
    pub(crate) category: Option<String>,
    pub(crate) about_kind: Option<String>,
    pub(crate) about_key: Option<String>,
    pub(crate) purpose: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) expires_at: Option<i64>,
    /// The embedding ([`vector_bytes`]); written, never read back with
    /// the row (a vector search reads it apart).
    pub(crate) vector: Option<Vec<u8>>,
}

/// The columns of a [`MemoryRow`], in its order, for `SELECT`s.
pub(crate) const MEMORY_COLUMNS: &str = "id, tier, owner, agent, facet, scope_token, kind, \
    content, metadata, confidence, category, about_kind, about_key, purpose, title, summary, \
    session_id, created_at, updated_at, expires_at";

impl MemoryRow {
    pub(crate) fn encode(memory: NewMemory) -> MemoryRow {
        let NewMemory {
            id,
            scope,
            fact,
            session_id,
            now,
            expires_at,
            vector,
        } = memory;
        let (about_kind, about_key) = match fact.about {
            Some(About { kind, key }) => (Some(kind), Some(key)),
            None => (None, None),
        };
        MemoryRow {
            id,
            tier: scope.tier().as_str(),
            owner: scope.owner().to_owned(),
            agent: scope.agent().to_owned(),
            facet: scope.facet().to_owned(),
            scope_token: scope_token(&scope),
            kind: fact.kind,
            content: fact.content,
            metadata: serde_json::Value::Object(fact.metadata).to_string(),
            confidence: fact.confidence,
            category: fact.category,
            about_kind,
            about_key,
            purpose: fact.purpose,
            title: fact.title,
            summary: fact.summary,
            session_id: session_id.map(|id| id.as_str().to_owned()),
            created_at: now.0,
            updated_at: now.0,
            expires_at: expires_at.map(|at| at.0),
            vector: vector.as_deref().map(vector_bytes),
        }
    }

    /// The memory, or why the row cannot be one (never quoting it).
    pub(crate) fn decode(self) -> Result<Memory, MemoryError> {
        let broken = |what: &str| MemoryError(format!("memory {}: unreadable {what}", self.id));
        let tier = MemoryTier::parse(self.tier).ok_or_else(|| broken("tier"))?;
        let metadata = match serde_json::from_str(&self.metadata) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => return Err(broken("metadata")),
        };
        let session_id = match &self.session_id {
            Some(id) => Some(SessionId::parse(id).map_err(|_| broken("session id"))?),
            None => None,
        };
        let about = match (self.about_kind, self.about_key) {
            (Some(kind), Some(key)) => Some(About { kind, key }),
            _ => None,
        };
        Ok(Memory {
            scope: MemoryScope::from_parts(tier, &self.owner, &self.agent, &self.facet),
            fact: Fact {
                kind: self.kind,
                content: self.content,
                metadata,
                confidence: self.confidence,
                category: self.category,
                about,
                purpose: self.purpose,
                title: self.title,
                summary: self.summary,
            },
            session_id,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
            expires_at: self.expires_at.map(Timestamp),
            id: self.id,
        })
    }
}

/// The tier's name as a row holds it: the same `&'static str` every time.
pub(crate) fn tier_name(name: &str) -> Option<&'static str> {
    MemoryTier::parse(name).map(MemoryTier::as_str)
}

/// The word a scope's rows carry in the text index: `s` and 16 hex digits
/// of a 64-bit FNV-1a hash of the scope's parts. Stable across builds: it
/// is stored.
pub(crate) fn scope_token(scope: &MemoryScope) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let parts = [
        scope.tier().as_str(),
        scope.owner(),
        scope.agent(),
        scope.facet(),
    ];
    let mut hash = OFFSET;
    for part in parts {
        // A zero byte between parts: ("ab", "") and ("a", "b") differ.
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    format!("s{hash:016x}")
}

/// A full-text query for any of `words` (already split and lowercased by
/// [`agentwire_core::memory::search_words`]), each quoted as a string:
/// nothing in a recall's text is query syntax.
pub(crate) fn any_of(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    quoted.join(" OR ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::memory::conformance::scope;

    #[test]
    fn scope_tokens_differ_by_every_part_and_are_stable() {
        let a = scope_token(&scope("ab", "x", None));
        assert_eq!(a, scope_token(&scope("ab", "x", None)));
        assert_ne!(a, scope_token(&scope("a", "bx", None)));
        assert_ne!(a, scope_token(&scope("ab", "x", Some("f"))));
        assert_eq!(a.len(), 17);
        // Stored: this value must never change.
        assert_eq!(
            scope_token(&MemoryScope::from_parts(MemoryTier::Agent, "", "", "")),
            "sf4b156a31b7adb46"
        );
    }

    #[test]
    fn a_search_quotes_every_word() {
        let words = vec!["dog".to_owned(), "or".to_owned()];
        assert_eq!(any_of(&words), "\"dog\" OR \"or\"");
    }
}

//! A memory as the tools return it: PromptKit's `Memory` object (`id`,
//! `type`, `content`, `metadata`, `confidence`, `scope`, `session_id`,
//! `turn_range`, `created_at`, `accessed_at`, `expires_at`), Omnia's
//! extras in its metadata, and recall's short form of a long body.

use agentwire_core::{Memory, Timestamp};
use serde_json::{Map, Value, json};

/// A body longer than this (bytes) is recalled short: title, summary and
/// the first [`PREVIEW_CHARS`] characters, with `has_full_body: true`.
pub(super) const INLINE_BYTES: usize = 2048;
pub(super) const PREVIEW_CHARS: usize = 240;

/// How much of a memory a result shows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    Full,
    /// A long body as a preview (recall).
    ShortWhenLong,
}

fn time(at: Timestamp) -> Value {
    Value::String(at.to_utc().to_string())
}

/// The memory's metadata as Omnia's store reads it: what the model gave,
/// with the typed extras under their own keys.
fn metadata(memory: &Memory) -> Map<String, Value> {
    let fact = &memory.fact;
    let mut metadata = fact.metadata.clone();
    let extras = [
        ("about_kind", fact.about.as_ref().map(|a| &a.kind)),
        ("about_key", fact.about.as_ref().map(|a| &a.key)),
        ("purpose", fact.purpose.as_ref()),
        ("title", fact.title.as_ref()),
        ("summary", fact.summary.as_ref()),
        ("category", fact.category.as_ref()),
    ];
    for (key, value) in extras {
        if let Some(value) = value {
            metadata.insert(key.to_owned(), Value::String(value.clone()));
        }
    }
    metadata
}

/// The scope as the server set it: its tier and the keys it has.
fn scope(memory: &Memory) -> Value {
    let scope = &memory.scope;
    let mut keys = Map::new();
    keys.insert("tier".to_owned(), scope.tier().as_str().into());
    let parts = [
        ("virtual_user_id", scope.owner()),
        ("agent_id", scope.agent()),
        ("memory_facet", scope.facet()),
    ];
    for (key, value) in parts.into_iter().filter(|(_, v)| !v.is_empty()) {
        keys.insert(key.to_owned(), value.into());
    }
    Value::Object(keys)
}

pub(super) fn memory(memory: &Memory, body: Body) -> Value {
    let fact = &memory.fact;
    let mut out = json!({
        "id": memory.id,
        "type": fact.kind,
        "confidence": fact.confidence,
        "scope": scope(memory),
        // PromptKit's turn range; agentwire does not track one.
        "turn_range": [0, 0],
        "created_at": time(memory.created_at),
        // When it was last written: reads do not write.
        "accessed_at": time(memory.updated_at),
    });
    let fields = out.as_object_mut().expect("an object");
    let metadata = metadata(memory);
    if !metadata.is_empty() {
        fields.insert("metadata".to_owned(), Value::Object(metadata));
    }
    if let Some(session) = &memory.session_id {
        fields.insert("session_id".to_owned(), session.as_str().into());
    }
    if let Some(at) = memory.expires_at {
        fields.insert("expires_at".to_owned(), time(at));
    }
    match body {
        Body::ShortWhenLong if fact.content.len() > INLINE_BYTES => {
            let preview: String = fact.content.chars().take(PREVIEW_CHARS).collect();
            fields.insert("content_preview".to_owned(), preview.into());
            fields.insert("has_full_body".to_owned(), true.into());
            for (key, value) in [("title", &fact.title), ("summary", &fact.summary)] {
                if let Some(value) = value {
                    fields.insert(key.to_owned(), value.as_str().into());
                }
            }
        }
        _ => {
            fields.insert("content".to_owned(), fact.content.as_str().into());
        }
    }
    out
}

/// `{"memories": [...], "count": N}`.
pub(super) fn memories(found: &[Memory], body: Body) -> Value {
    let memories: Vec<Value> = found.iter().map(|m| memory(m, body)).collect();
    json!({"count": memories.len(), "memories": memories})
}

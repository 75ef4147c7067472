//! `memory__remember {content, type?, confidence?, category?, metadata?,
//! about_kind?, about_key?, purpose?, title?, summary?}`: keeps a fact in
//! the caller's memory, replacing the one about the same subject.
//! `metadata.provenance` is always `user_requested`.

use agentwire_core::memory::MEMORY_CATEGORIES;
use agentwire_core::{About, Fact, NewMemory, Remembered};
use serde_json::{Value, json};

use super::args::Args;
use super::{Memory, unavailable};

/// The longest fact kept, in bytes; memory is read into every recall.
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;
/// The most bytes of `metadata`, as JSON.
const MAX_METADATA_BYTES: usize = 8 * 1024;
const DEFAULT_CONFIDENCE: f64 = 0.8;

/// The longest type, subject, purpose, title or summary, in bytes.
const MAX_FIELD_BYTES: usize = 1024;

pub(super) async fn run(memory: &Memory<'_>, arguments: &Value) -> Result<Value, String> {
    let args = Args::new("remember", arguments)?;
    let fact = fact(&args)?;
    let scope = memory.own("remember")?.clone();
    let now = memory.now();
    let ttl = fact
        .category
        .as_ref()
        .and_then(|c| memory.settings.category_ttl.get(c));
    let vector = memory.settings.embed(&fact.content, "remember").await;
    let new = NewMemory {
        id: (memory.acting.new_id)(),
        scope,
        fact,
        session_id: Some(memory.acting.session_id.clone()),
        now,
        expires_at: ttl.map(|ttl| now.plus(*ttl)),
        vector,
    };
    let remembered = memory
        .store()
        .remember(new)
        .await
        .map_err(|e| unavailable("remember", &e))?;
    Ok(result(&remembered))
}

/// `{"status": "remembered", "id"}`, as Omnia answers; a write that
/// superseded a memory that said nearly the same adds its `similarity`,
/// and one kept beside memories that resemble it lists them as
/// `potential_duplicates` (`{memory_id, similarity}`), as Omnia's store
/// does.
fn result(remembered: &Remembered) -> Value {
    let mut result = json!({"status": "remembered", "id": remembered.id()});
    match remembered {
        Remembered::Superseded { similarity, .. } => {
            result["superseded"] = json!({"similarity": rounded(*similarity)});
        }
        Remembered::CreatedBeside { similar, .. } => {
            let alike: Vec<Value> = similar
                .iter()
                .map(|s| json!({"memory_id": s.id, "similarity": rounded(s.similarity)}))
                .collect();
            result["potential_duplicates"] = alike.into();
        }
        Remembered::Created { .. } | Remembered::Replaced { .. } => {}
    }
    result
}

/// A similarity to three decimals, as the model reads it.
fn rounded(similarity: f32) -> f64 {
    (f64::from(similarity) * 1000.0).round() / 1000.0
}

fn fact(args: &Args<'_>) -> Result<Fact, String> {
    let content = args.required("content")?;
    if content.len() > MAX_CONTENT_BYTES {
        return Err(args.problem(&format!("content is over {MAX_CONTENT_BYTES} bytes")));
    }
    let short = |key: &str| -> Result<Option<String>, String> {
        match args.string(key)? {
            Some(s) if s.len() > MAX_FIELD_BYTES => {
                Err(args.problem(&format!("{key} is over {MAX_FIELD_BYTES} bytes")))
            }
            Some(s) if !s.is_empty() => Ok(Some(s.to_owned())),
            _ => Ok(None),
        }
    };
    let category = short("category")?;
    if let Some(category) = &category
        && !MEMORY_CATEGORIES.contains(&category.as_str())
    {
        let known = MEMORY_CATEGORIES.join(", ");
        return Err(args.problem(&format!("category must be one of {known}")));
    }
    let about = match (short("about_kind")?, short("about_key")?) {
        (Some(kind), Some(key)) => Some(About { kind, key }),
        (None, None) => None,
        _ => return Err(args.problem("about_kind and about_key go together")),
    };
    let mut metadata = args.object("metadata")?;
    if serde_json::Value::Object(metadata.clone())
        .to_string()
        .len()
        > MAX_METADATA_BYTES
    {
        return Err(args.problem(&format!("metadata is over {MAX_METADATA_BYTES} bytes")));
    }
    metadata.insert("provenance".to_owned(), "user_requested".into());
    Ok(Fact {
        kind: short("type")?.unwrap_or_else(|| "general".to_owned()),
        content: content.to_owned(),
        metadata,
        // PromptKit's rule: none, or 0, is the default.
        confidence: args
            .fraction("confidence")?
            .filter(|c| *c > 0.0)
            .unwrap_or(DEFAULT_CONFIDENCE),
        category,
        about,
        purpose: short("purpose")?,
        title: short("title")?,
        summary: short("summary")?,
    })
}

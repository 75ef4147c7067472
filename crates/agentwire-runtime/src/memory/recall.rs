//! `memory__recall {query, types?, limit?, min_confidence?}`: the caller's
//! and the agent's memories that match, best first.

use agentwire_core::Recall;
use agentwire_core::memory::MAX_READ;
use serde_json::Value;

use super::args::Args;
use super::output::{self, Body};
use super::{Memory, unavailable};

/// Memories a recall returns when it does not say.
const DEFAULT_LIMIT: usize = 10;

pub(super) async fn run(memory: &Memory<'_>, arguments: &Value) -> Result<Value, String> {
    let args = Args::new("recall", arguments)?;
    let text = args.required("query")?;
    let kinds = args.strings("types")?;
    let vector = memory.settings.embed(text, "recall").await;
    let query = Recall {
        text,
        vector: vector.as_deref(),
        kinds: &kinds,
        limit: args.count("limit", DEFAULT_LIMIT, MAX_READ)?,
        min_confidence: args.fraction("min_confidence")?.unwrap_or(0.0),
        now: memory.now(),
    };
    let found = memory
        .store()
        .recall(&memory.scopes.readable, &query)
        .await
        .map_err(|e| unavailable("recall", &e))?;
    Ok(output::memories(&found, Body::ShortWhenLong))
}

//! `memory__list {types?, limit?, offset?}`: the caller's and the agent's
//! memories, newest first.

use agentwire_core::memory::{Listing, MAX_READ};
use serde_json::Value;

use super::args::Args;
use super::output::{self, Body};
use super::{Memory, unavailable};

/// Memories a list returns when it does not say.
const DEFAULT_LIMIT: usize = 20;

pub(super) async fn run(memory: &Memory<'_>, arguments: &Value) -> Result<Value, String> {
    let args = Args::new("list", arguments)?;
    let kinds = args.strings("types")?;
    let page = Listing {
        kinds: &kinds,
        limit: args.count("limit", DEFAULT_LIMIT, MAX_READ)?,
        offset: args.count("offset", 0, usize::MAX)?,
        now: memory.now(),
    };
    let found = memory
        .store()
        .list(&memory.scopes.readable, &page)
        .await
        .map_err(|e| unavailable("list", &e))?;
    Ok(output::memories(&found, Body::Full))
}

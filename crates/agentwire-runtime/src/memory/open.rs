//! `memory__open {memory_id}`: one memory in full (recall shows a long one
//! short).

use serde_json::Value;

use super::args::Args;
use super::output::{self, Body};
use super::{Memory, unavailable};

pub(super) async fn run(memory: &Memory<'_>, arguments: &Value) -> Result<Value, String> {
    let args = Args::new("open", arguments)?;
    let id = args.required("memory_id")?;
    let found = memory
        .store()
        .open(&memory.scopes.readable, id, memory.now())
        .await
        .map_err(|e| unavailable("open", &e))?;
    match found {
        Some(found) => Ok(output::memory(&found, Body::Full)),
        None => Err(args.problem("memory not found")),
    }
}

//! `memory__forget {memory_id}`: hides one of the caller's memories from
//! every read at once (the row goes after the grace). The agent's own
//! memories are not the model's to forget.

use serde_json::{Value, json};

use super::args::Args;
use super::{Memory, unavailable};

pub(super) async fn run(memory: &Memory<'_>, arguments: &Value) -> Result<Value, String> {
    let args = Args::new("forget", arguments)?;
    let id = args.required("memory_id")?;
    let own = memory.own("forget")?;
    let forgot = memory
        .store()
        .forget(own, id, memory.now())
        .await
        .map_err(|e| unavailable("forget", &e))?;
    match forgot {
        true => Ok(json!({"status": "forgotten", "memory_id": id})),
        false => Err(args.problem("memory not found")),
    }
}

//! Agent memory as the model sees it: Omnia's four tools (`memory__recall`,
//! `memory__remember`, `memory__list`, `memory__forget`, with PromptKit's
//! arguments and results and Omnia's extras) and `memory__open`, which
//! Omnia's docs name and agentwire ships.
//!
//! Each tool is a file; every one reads or writes through
//! [`AgentMemory`] in scopes built here from the turn's [`TurnCaller`] (set
//! by the server) and the agent's name. No argument a model writes reaches a
//! scope: an id of another scope is "not found". A write is one store call,
//! never a model call.

mod ambient;
mod args;
mod forget;
mod list;
mod open;
mod output;
mod recall;
mod remember;
mod specs;
mod voice;

use std::sync::Arc;

use agentwire_core::{
    AgentMemory, Clock, Embedder, MemoryScope, MemoryTier, ModelToolCall, SessionId, ToolOutcome,
    ToolSpec, TurnCaller, TurnContext,
};

pub(crate) use ambient::with_note;
pub use ambient::{NOTE_HEADING, Retrieval};
pub use specs::{FORGET_TOOL, LIST_TOOL, OPEN_TOOL, RECALL_TOOL, REMEMBER_TOOL};
pub use voice::CallMemory;

/// What a model is told when its caller is anonymous and it tries to
/// write: caller memory needs an identified caller.
pub const ANONYMOUS: &str = "memory needs an identified caller";

/// An agent's memory (`agents[].memory` with `enabled: true`).
#[derive(Clone)]
pub struct MemorySettings {
    pub store: Arc<dyn AgentMemory>,
    /// The caller's tier the agent writes to and reads: `CallerWithAgent`
    /// (the default) or `Caller` (shared by the agents that choose it).
    /// The agent's own tier is read besides.
    pub tier: MemoryTier,
    pub clock: Arc<dyn Clock>,
    /// Ambient recall before each answer; `None`: the tools alone.
    pub retrieval: Option<Retrieval>,
    /// How long a memory of each consent category lives; a category not
    /// named here, and a memory without one, lives until forgotten.
    pub category_ttl: Arc<std::collections::BTreeMap<String, std::time::Duration>>,
    /// `memory.embeddings`: memories are kept with vectors and recalled
    /// by meaning too; `None`: by words alone.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The agent name the scopes carry when it is not the agent's own: a
    /// team file's agent is `<team>/<agent id>`, so two files' agents of
    /// the same id keep apart.
    pub scope_agent: Option<String>,
}

/// The most bytes of a text that are embedded: about 2,000 tokens, inside
/// every embedding model's input limit. A longer memory is found by
/// meaning through its beginning, and by any of its words.
pub const MAX_EMBEDDED_BYTES: usize = 8 * 1024;

impl MemorySettings {
    /// The agent name the scopes carry: `scope_agent`, else `agent`.
    pub fn scope_agent_or<'a>(&'a self, agent: &'a str) -> &'a str {
        self.scope_agent.as_deref().unwrap_or(agent)
    }

    /// The embedding of `text` (its first [`MAX_EMBEDDED_BYTES`]), or
    /// `None`: no embedder, or it failed (logged without the text; the
    /// memory is then written, or recalled, by words alone).
    pub(crate) async fn embed(&self, text: &str, tool: &str) -> Option<Vec<f32>> {
        let embedder = self.embedder.as_ref()?;
        let mut end = text.len().min(MAX_EMBEDDED_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        match embedder.embed(&[&text[..end]]).await {
            Ok(mut vectors) if vectors.len() == 1 => vectors.pop(),
            Ok(vectors) => {
                let count = vectors.len();
                tracing::warn!(
                    tool,
                    count,
                    "the embeddings endpoint answered the wrong count"
                );
                None
            }
            Err(error) => {
                tracing::warn!(tool, %error, "embedding failed; memory by words alone");
                None
            }
        }
    }
}

/// The memory tools of one agent's part of a turn.
pub(crate) struct MemoryTools<'a> {
    settings: &'a MemorySettings,
    agent: &'a str,
}

/// The scopes one call may touch.
pub(crate) struct Scopes {
    /// Where `remember` and `forget` act; `None`: the caller is anonymous.
    own: Option<MemoryScope>,
    /// What reads see: the own scope, then the agent's.
    pub(crate) readable: Vec<MemoryScope>,
}

impl<'a> MemoryTools<'a> {
    pub(crate) fn new(settings: &'a MemorySettings, agent: &'a str) -> MemoryTools<'a> {
        MemoryTools { settings, agent }
    }

    pub(crate) fn specs(&self) -> &'static [ToolSpec] {
        specs::all()
    }

    pub(crate) fn handles(&self, name: &str) -> bool {
        specs::NAMES.contains(&name)
    }

    /// Runs `call` in `turn`; every failure is an error result for the
    /// model.
    pub(crate) async fn run(&self, turn: &TurnContext, call: &ModelToolCall) -> ToolOutcome {
        let acting = Acting {
            caller: &turn.caller,
            session_id: &turn.session_id,
            new_id: &|| turn.new_call_id(),
        };
        self.run_for(&acting, &call.name, &call.arguments).await
    }

    /// Runs the tool `name` for `acting`; every failure is an error result
    /// for the model.
    pub(crate) async fn run_for(
        &self,
        acting: &Acting<'_>,
        name: &str,
        arguments: &serde_json::Value,
    ) -> ToolOutcome {
        let scopes = self.scopes(acting.caller);
        let memory = Memory {
            settings: self.settings,
            scopes: &scopes,
            acting,
        };
        let result = match name {
            specs::RECALL_TOOL => recall::run(&memory, arguments).await,
            specs::REMEMBER_TOOL => remember::run(&memory, arguments).await,
            specs::LIST_TOOL => list::run(&memory, arguments).await,
            specs::FORGET_TOOL => forget::run(&memory, arguments).await,
            specs::OPEN_TOOL => open::run(&memory, arguments).await,
            other => Err(format!("unknown tool {other:?}")),
        };
        match result {
            Ok(value) => ToolOutcome::Ok(value),
            Err(error) => ToolOutcome::Error(error),
        }
    }

    pub(crate) fn scopes(&self, caller: &TurnCaller) -> Scopes {
        let own = MemoryScope::new(self.settings.tier, caller, self.agent).ok();
        let agents = MemoryScope::new(MemoryTier::Agent, caller, self.agent)
            .expect("the agent tier needs no caller");
        let readable = own.iter().cloned().chain([agents]).collect();
        Scopes { own, readable }
    }
}

/// Whom a memory call acts for, as the server established it: the caller,
/// the session, and where a new memory's id comes from.
pub(crate) struct Acting<'a> {
    pub(crate) caller: &'a TurnCaller,
    pub(crate) session_id: &'a SessionId,
    pub(crate) new_id: &'a (dyn Fn() -> String + Sync),
}

/// What a tool call works with.
struct Memory<'a> {
    settings: &'a MemorySettings,
    scopes: &'a Scopes,
    acting: &'a Acting<'a>,
}

impl Memory<'_> {
    fn store(&self) -> &dyn AgentMemory {
        self.settings.store.as_ref()
    }

    fn now(&self) -> agentwire_core::Timestamp {
        self.settings.clock.now()
    }

    /// The scope a write acts on, or the error the model gets.
    fn own(&self, tool: &str) -> Result<&MemoryScope, String> {
        self.scopes
            .own
            .as_ref()
            .ok_or_else(|| format!("memory {tool}: {ANONYMOUS}"))
    }
}

/// A store failure, as the model sees it: no detail (it is in the log).
fn unavailable(tool: &str, error: &agentwire_core::MemoryError) -> String {
    tracing::warn!(tool, %error, "memory store call failed");
    format!("memory {tool}: memory is unavailable right now")
}

#[cfg(test)]
mod tests;

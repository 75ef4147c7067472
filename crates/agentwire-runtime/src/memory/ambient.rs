//! Ambient recall (`agents[].memory.retrieval`): before an agent answers,
//! the memories of the turn's scopes that best match the user's message go
//! into its system prompt as a note, so the model knows them without
//! calling a tool. A store that fails leaves the note out; the turn goes on.

use agentwire_core::{Recall, TurnContext};

use super::{MemorySettings, MemoryTools, unavailable};

/// How much ambient recall adds to a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retrieval {
    /// The most memories in the note.
    pub limit: usize,
    /// The most characters of memory text in the note; a memory that does
    /// not fit whole is left out.
    pub max_chars: usize,
}

/// The note's first line.
pub const NOTE_HEADING: &str = "What you remember about this user from earlier conversations:";

/// `system` with the note of what `turn`'s caller's memories recall for
/// its message, when the agent has ambient recall and any match.
pub(crate) async fn with_note(
    system: Option<String>,
    settings: &MemorySettings,
    agent: &str,
    turn: &TurnContext,
) -> Option<String> {
    let Some(retrieval) = settings.retrieval else {
        return system;
    };
    let Some(note) = note(settings, retrieval, agent, turn).await else {
        return system;
    };
    Some(match system {
        Some(system) => format!("{system}\n\n{note}"),
        None => note,
    })
}

async fn note(
    settings: &MemorySettings,
    retrieval: Retrieval,
    agent: &str,
    turn: &TurnContext,
) -> Option<String> {
    if turn.input.text.trim().is_empty() {
        return None;
    }
    let scopes = MemoryTools::new(settings, agent).scopes(&turn.caller);
    let vector = settings.embed(&turn.input.text, "retrieval").await;
    let query = Recall {
        text: &turn.input.text,
        vector: vector.as_deref(),
        kinds: &[],
        limit: retrieval.limit,
        min_confidence: 0.0,
        now: settings.clock.now(),
    };
    let found = match settings.store.recall(&scopes.readable, &query).await {
        Ok(found) => found,
        Err(e) => {
            unavailable("retrieval", &e);
            return None;
        }
    };
    let mut note = NOTE_HEADING.to_owned();
    let mut budget = retrieval.max_chars;
    for memory in &found {
        let chars = memory.fact.content.chars().count();
        if chars > budget {
            continue;
        }
        budget -= chars;
        note.push_str("\n- ");
        note.push_str(&memory.fact.content);
    }
    (note.len() > NOTE_HEADING.len()).then_some(note)
}

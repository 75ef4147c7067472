//! The memory tools' names, descriptions and argument schemas: Omnia's
//! (PromptKit's four, with Omnia's extras on `remember`), and `open`.

use agentwire_core::ToolSpec;
use agentwire_core::memory::MEMORY_CATEGORIES;
use serde_json::{Value, json};

pub const RECALL_TOOL: &str = "memory__recall";
pub const REMEMBER_TOOL: &str = "memory__remember";
pub const LIST_TOOL: &str = "memory__list";
pub const FORGET_TOOL: &str = "memory__forget";
pub const OPEN_TOOL: &str = "memory__open";

pub(super) const NAMES: [&str; 5] = [
    RECALL_TOOL,
    REMEMBER_TOOL,
    LIST_TOOL,
    FORGET_TOOL,
    OPEN_TOOL,
];

const RECALL: &str = "Search what you remember about this user before you answer: facts, \
    preferences and decisions from earlier conversations, and what this agent was given to \
    know. Call it whenever the user mentions something they expect you to know already.";

const REMEMBER: &str = "Keep a durable fact for future conversations with this user: when \
    they ask you to remember something, state a lasting preference, or share a fact worth \
    recalling later.\n\nName what the fact is about with about_kind (a category such as \
    'user_profile', 'preference', 'project') and about_key (a stable name within it, such as \
    'seat' or a project's name). Remembering again with the same about_kind and about_key \
    replaces the earlier fact: that is how you correct or update one, never by forgetting it \
    first.\n\nOptional: purpose (why it is kept, e.g. 'personalization'); category (the consent \
    category); title and summary (for a long fact: a short title and a one-line summary, the \
    full text staying in content).";

const LIST: &str = "List the memories you hold for this user, newest first, optionally of \
    some types only. Use memory__recall to search; use this to browse, for example to find \
    the id of a memory to forget.";

const FORGET: &str = "Forget one memory by its id (from memory__recall or memory__list): it \
    is never recalled again. Only when the user asks you to forget it, or it is wrong and the \
    correction is already remembered; to change a fact, remember it again about the same \
    subject instead.";

const OPEN: &str = "Read one memory in full by its id. memory__recall shows a long memory as \
    its title, summary and the start of its content with has_full_body: true; open it for the \
    rest.";

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn types(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string"}, "description": description})
}

fn integer(description: &str) -> Value {
    json!({"type": "integer", "description": description})
}

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

fn recall() -> ToolSpec {
    let parameters = json!({
        "type": "object",
        "properties": {
            "query": string("What to look for."),
            "types": types("Only memories of these types (e.g. 'preference', 'fact')."),
            "limit": integer("The most memories to return."),
            "min_confidence": {
                "type": "number", "minimum": 0, "maximum": 1,
                "description": "Only memories at least this confident (0.0-1.0).",
            },
        },
        "required": ["query"],
    });
    spec(RECALL_TOOL, RECALL, parameters)
}

fn remember() -> ToolSpec {
    let parameters = json!({
        "type": "object",
        "properties": {
            "content": string("The fact, in plain language."),
            "type": string("Its type (e.g. 'preference', 'fact', 'decision'). Default: 'general'."),
            "confidence": {
                "type": "number", "minimum": 0, "maximum": 1,
                "description": "How sure you are (0.0-1.0). Default: 0.8.",
            },
            "category": {
                "type": "string", "enum": MEMORY_CATEGORIES,
                "description": "The consent category the fact falls under.",
            },
            "metadata": {"type": "object", "description": "Structured data to keep with it."},
            "about_kind": string("What kind of subject the fact is about, e.g. 'user_profile', 'preference', 'project'."),
            "about_key": string("Which one of that kind, e.g. 'seat' or a project's name. The same about_kind and about_key replace the earlier fact."),
            "purpose": string("Why it is kept, e.g. 'personalization', 'support_context'."),
            "title": string("A short title, for a long fact."),
            "summary": string("A one-line summary, for a long fact."),
        },
        "required": ["content"],
    });
    spec(REMEMBER_TOOL, REMEMBER, parameters)
}

fn list() -> ToolSpec {
    let parameters = json!({
        "type": "object",
        "properties": {
            "types": types("Only memories of these types."),
            "limit": integer("The most memories to return."),
            "offset": integer("How many of the newest to skip."),
        },
    });
    spec(LIST_TOOL, LIST, parameters)
}

fn by_id(name: &str, description: &str, what: &str) -> ToolSpec {
    let parameters = json!({
        "type": "object",
        "properties": {"memory_id": string(what)},
        "required": ["memory_id"],
    });
    spec(name, description, parameters)
}

/// The five tools, in the order they are offered.
/// The five tools, built once: every turn of an agent with memory offers
/// them.
pub(super) fn all() -> &'static [ToolSpec] {
    static ALL: std::sync::OnceLock<[ToolSpec; 5]> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        [
            recall(),
            remember(),
            list(),
            by_id(FORGET_TOOL, FORGET, "The id of the memory to forget."),
            by_id(OPEN_TOOL, OPEN, "The id of the memory to read."),
        ]
    })
}

//! `agents[].pack`: a PromptPack agent. The pack gives a `handler:
//! runtime` agent its instructions (a prompt's `system_template`, its
//! variables filled), model parameters, tool policy, tools (as the pack
//! declares them, each run by a `tools[]` entry the agent names) and
//! `max_length` validator; the config gives the provider, how each tool
//! runs, and the variables the operator fixes.
//!
//! `compile: at_startup` (the default) reads and checks the pack when the
//! config loads, so a pack that does not compile, or that asks for what
//! the config cannot give, is a startup error naming the pack file and the
//! JSON path (or the config key). `compile: per_session` reads it at every
//! session open instead (`crate::app::pack`), for authoring.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use agentwire_providers::ProviderSettings;
use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::{ConfigError, NamedTool};

mod bind;

pub use bind::{PackPlan, Place, PlanTool, PlanVariable, bind};

/// `agents[].pack` as written: the pack file's path, or the block.
pub(super) struct RawPack(RawPackBlock);

/// The forms `pack` takes, for the error about one that takes neither.
const PACK_FORMS: &str =
    "a pack file's path, or a mapping with `path` (and `prompt`, `variables`, `tools`, `compile`)";

/// `agents[].pack` in full.
#[derive(Deserialize, Serialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPackBlock {
    /// The PromptPack: its JSON (`.json`), or the same document in YAML
    /// (`.yaml`, `.yml`), read relative to the working directory.
    path: String,
    /// The prompt the agent runs: a key of the pack's `prompts`. Required
    /// when the pack has more than one.
    prompt: Option<String>,
    /// Values of the prompt's variables, fixed here: a message's metadata
    /// cannot change them. A variable not fixed here takes the message's
    /// `metadata.<name>`, else its default. Default: none.
    #[serde(default)]
    variables: BTreeMap<String, Value>,
    /// The `tools[]` entry that runs each of the pack's tools, by the pack
    /// tool's name (several may name one `mcp` server, which must offer
    /// tools of those names). Default: the entry of the pack tool's own
    /// name. Every entry must be in the agent's `tools`.
    #[serde(default)]
    tools: BTreeMap<String, String>,
    /// `at_startup`: the pack is read and checked when the config loads
    /// (one that does not compile is a startup error). `per_session`
    /// (compile mode, for authoring): read and compiled at every session
    /// open, so an edit shows on the next session; a pack that does not
    /// compile refuses the session with `pack_compile_failed` and the
    /// server starts anyway. Default: `at_startup`.
    #[serde(default)]
    compile: CompileMode,
}

/// When a pack is compiled.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CompileMode {
    #[default]
    AtStartup,
    PerSession,
}

impl CompileMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CompileMode::AtStartup => "at_startup",
            CompileMode::PerSession => "per_session",
        }
    }
}

impl Serialize for RawPack {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl JsonSchema for RawPack {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Pack".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let block = generator.subschema_for::<RawPackBlock>();
        schemars::json_schema!({
            "description": PACK_FORMS,
            "anyOf": [{"type": "string"}, block],
        })
    }
}

impl<'de> Deserialize<'de> for RawPack {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RawPack, D::Error> {
        struct PackVisitor;
        impl<'de> Visitor<'de> for PackVisitor {
            type Value = RawPack;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(PACK_FORMS)
            }

            fn visit_str<E: de::Error>(self, path: &str) -> Result<RawPack, E> {
                Ok(RawPack(RawPackBlock {
                    path: path.to_owned(),
                    prompt: None,
                    variables: BTreeMap::new(),
                    tools: BTreeMap::new(),
                    compile: CompileMode::AtStartup,
                }))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawPack, A::Error> {
                RawPackBlock::deserialize(MapAccessDeserializer::new(map)).map(RawPack)
            }
        }
        deserializer.deserialize_any(PackVisitor)
    }
}

/// A pack agent's pack, checked as far as the config can be.
#[derive(Debug, Clone)]
pub struct PackConfig {
    pub path: PathBuf,
    pub source: PackSource,
    pub mode: PackMode,
}

/// What the agent's config says about its pack, and what binding a pack
/// to the agent needs from the rest of the config.
#[derive(Debug, Clone)]
pub struct PackSource {
    /// `agents[i]`, which config errors are named under.
    pub agent_key: String,
    pub prompt: Option<String>,
    pub variables: BTreeMap<String, Value>,
    /// Pack tool → `tools[]` entry.
    pub tool_map: BTreeMap<String, String>,
    /// The agent's provider.
    pub provider: ProviderSettings,
    /// The agent's `tools`, in its order.
    pub tools: Vec<NamedTool>,
    /// `agents[i].requires_ai_disclosure`.
    pub requires_ai_disclosure: Option<bool>,
    /// `agents[i].max_rounds`.
    pub max_rounds: Option<u32>,
}

/// When the pack is compiled.
#[derive(Debug, Clone)]
pub enum PackMode {
    /// Compiled and bound when the config loaded.
    AtStartup(Box<PackPlan>),
    /// Compiled at every session open.
    PerSession,
}

/// What the rest of an agent's config says, for [`validate`].
pub(super) struct AgentSide<'a> {
    pub(super) index: usize,
    pub(super) provider: &'a ProviderSettings,
    pub(super) tools: Vec<NamedTool>,
    pub(super) requires_ai_disclosure: Option<bool>,
    pub(super) max_rounds: Option<u32>,
}

/// `agents[i].pack`: with `compile: at_startup`, the pack read, compiled
/// and bound to the agent now.
pub(super) fn validate(raw: &RawPack, agent: AgentSide<'_>) -> Result<PackConfig, ConfigError> {
    let block = &raw.0;
    let key = |field: &str| format!("agents[{}].pack.{field}", agent.index);
    if block.path.trim().is_empty() {
        return Err(ConfigError::new(key("path"), "must name the pack file"));
    }
    let source = PackSource {
        agent_key: format!("agents[{}]", agent.index),
        prompt: block.prompt.clone(),
        variables: block.variables.clone(),
        tool_map: block.tools.clone(),
        provider: agent.provider.clone(),
        tools: agent.tools,
        requires_ai_disclosure: agent.requires_ai_disclosure,
        max_rounds: agent.max_rounds,
    };
    let path = PathBuf::from(&block.path);
    let mode = match block.compile {
        CompileMode::PerSession => PackMode::PerSession,
        CompileMode::AtStartup => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                ConfigError::new(key("path"), format!("cannot read {}: {e}", block.path))
            })?;
            let plan = compile(&text, &block.path, &source).map_err(|e| {
                ConfigError::new(format!("agents[{}].pack", agent.index), e.one_line())
            })?;
            PackMode::AtStartup(Box::new(plan))
        }
    };
    Ok(PackConfig { path, source, mode })
}

/// Why a pack cannot serve an agent: the compiler's verdict (its `error`
/// string, packc's wording) and its diagnostics placed in `file`, or a
/// binding problem; with the warnings found on the way.
#[derive(Debug, Clone)]
pub struct PackFailure {
    /// The one error string (`details.error` of `pack_compile_failed`).
    pub error: String,
    /// Each problem as `file:line:column: path: message` (or `file: path:
    /// message` without a position).
    pub lines: Vec<String>,
    pub warnings: Vec<String>,
}

impl PackFailure {
    /// The first problem, and how many more (a config error is one line).
    pub fn one_line(&self) -> String {
        let first = self
            .lines
            .first()
            .cloned()
            .unwrap_or_else(|| self.error.clone());
        match self.lines.len() {
            0 | 1 => first,
            n => format!(
                "{first} (and {} more; `agentwire pack compile` lists them)",
                n - 1
            ),
        }
    }
}

/// A diagnostic as a line naming the file: `file:line:column: path:
/// message`, or `file: path: message` where the position is unknown.
pub fn diagnostic_line(file: &str, diagnostic: &agentwire_pack::Diagnostic) -> String {
    format!(
        "{}: {}: {}",
        diagnostic.location(file),
        diagnostic.path,
        diagnostic.message
    )
}

/// Compiles `text` (the file `file`) and binds it to the agent `source`
/// describes.
pub fn compile(text: &str, file: &str, source: &PackSource) -> Result<PackPlan, PackFailure> {
    let compiled = agentwire_pack::compile(text, file).map_err(|e| PackFailure {
        lines: e
            .diagnostics
            .iter()
            .map(|d| diagnostic_line(file, d))
            .collect(),
        error: e.error,
        warnings: e.warnings,
    })?;
    bind(&compiled.pack, compiled.warnings.clone(), source).map_err(|e| {
        let line = match &e.place {
            Place::Pack(path) => {
                let at = agentwire_pack::position_of(text, path);
                let diagnostic = agentwire_pack::Diagnostic {
                    path: path.clone(),
                    line: at.map(|p| p.line),
                    column: at.map(|p| p.column),
                    message: e.message.clone(),
                };
                diagnostic_line(file, &diagnostic)
            }
            Place::Config(key) => format!("{key}: {}", e.message),
        };
        PackFailure {
            error: e.to_string(),
            lines: vec![line],
            warnings: compiled.warnings,
        }
    })
}

//! PromptPack v1.x as agentwire reads it: a pack's JSON (or the same
//! document written in YAML, for authoring) parsed, checked against the
//! format's rules, and typed ([`Pack`]), with what an agent takes from it.
//!
//! [`compile`] is the one entry: text and the name of the file it came
//! from in, a pack and its warnings out, or an error that names each
//! problem by its JSON path (`prompts.chat.version`), and by line and
//! column where the text says. Three steps, each stopping the next:
//!
//! 1. **Parse** ([`Format`] by the file's extension): a syntax error keeps
//!    the parser's line and column.
//! 2. **The schema** (`schema`): the public JSON Schema's rules, written
//!    here (required keys, types, patterns, SemVer versions, no unknown key
//!    at the top level or in a prompt, …), worded as gojsonschema words
//!    them, since that is what packc prints. `requires_ai_disclosure` is
//!    accepted at the top level as well as in `metadata`.
//! 3. **The rules** (`rules`): what packc's `Pack.Validate()` checks (a
//!    `system_template` that references variables none of which are
//!    declared, …), what agentwire can run (a feature it cannot, such as
//!    `evals` or a validator type it has no meaning for, is an error naming
//!    its path, never dropped), and warnings (a declared variable the
//!    template never uses, a feature ignored where that is harmless).
//!
//! No message quotes a template or a fragment: a system prompt is not for
//! logs or error frames. The crate does no IO: its caller reads the file.

mod model;
mod positions;
mod rules;
mod schema;
pub mod template;
#[cfg(test)]
mod tests;

pub use model::{
    Compilation, MaxLength, Pack, Parameters, Prompt, TemplateEngine, Tool, ToolChoice, ToolPolicy,
    Validator, Variable, VariableType,
};
pub use positions::Position;
pub use template::{Template, TemplateError};

/// The `$schema` URL packc writes.
pub const SCHEMA_URL: &str = "https://promptpack.org/schema/latest/promptpack.schema.json";

/// How a source is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// By the file's extension (`.json`; `.yaml`, `.yml`); otherwise JSON
    /// when the text starts with `{`, else YAML.
    pub fn of(file_name: &str, text: &str) -> Format {
        let lower = file_name.to_ascii_lowercase();
        if lower.ends_with(".json") {
            Format::Json
        } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            Format::Yaml
        } else if text.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Yaml
        }
    }
}

/// A pack that compiled, and what is worth knowing about it.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub pack: Pack,
    /// Plain strings, `<path>: <message>`.
    pub warnings: Vec<String>,
}

/// A source that did not compile: one error string (packc's wording where
/// packc has one), the warnings found on the way, and each problem as a
/// diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct CompileError {
    pub error: String,
    pub warnings: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// One problem: the JSON path it is about (`(root)` for the document),
/// where the source has it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub path: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
}

impl Diagnostic {
    /// Where it is in `file`: `file:line:column`, or `file` alone when
    /// the position is unknown.
    pub fn location(&self, file: &str) -> String {
        match (self.line, self.column) {
            (Some(line), Some(column)) => format!("{file}:{line}:{column}"),
            _ => file.to_owned(),
        }
    }
}

/// A problem found by the schema or the rules, before it is placed.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    /// The path the message is about, as printed (`(root)` for ``).
    pub(crate) path: String,
    /// The path whose position the diagnostic takes (an unknown key's own,
    /// though the message is about its object).
    pub(crate) at: String,
    pub(crate) message: String,
    /// A short scalar the message is about, printed as packc prints it:
    /// ` (value: x)`.
    pub(crate) value: Option<String>,
    /// packc's own wording of the whole error, where it has one.
    pub(crate) packc: Option<String>,
}

impl Finding {
    pub(crate) fn new(path: &str, message: impl Into<String>) -> Finding {
        Finding {
            path: path.to_owned(),
            at: path.to_owned(),
            message: message.into(),
            value: None,
            packc: None,
        }
    }

    pub(crate) fn at(mut self, path: &str) -> Finding {
        self.at = path.to_owned();
        self
    }

    pub(crate) fn value(mut self, value: Option<String>) -> Finding {
        self.value = value;
        self
    }

    pub(crate) fn packc(mut self, text: String) -> Finding {
        self.packc = Some(text);
        self
    }

    fn shown_path(&self) -> &str {
        match self.path.is_empty() {
            true => "(root)",
            false => &self.path,
        }
    }

    /// As one entry of the error string.
    fn entry(&self) -> String {
        if let Some(packc) = &self.packc {
            return packc.clone();
        }
        match &self.value {
            Some(value) => format!("{}: {} (value: {value})", self.shown_path(), self.message),
            None => format!("{}: {}", self.shown_path(), self.message),
        }
    }

    fn place(&self, positions: &positions::Positions) -> Diagnostic {
        let at = positions.find(&self.at);
        Diagnostic {
            path: self.shown_path().to_owned(),
            line: at.map(|p| p.line),
            column: at.map(|p| p.column),
            message: self.message.clone(),
        }
    }
}

/// Where `path` (a JSON path as diagnostics name them, `(root)` aside)
/// starts in `source`, else where its nearest ancestor in it does: for a
/// caller that finds a problem after [`compile`] (binding a pack to an
/// agent) and wants to place it.
pub fn position_of(source: &str, path: &str) -> Option<Position> {
    positions::Positions::of(source).find(path)
}

/// Compiles `source`, the text of the file `file_name` (which names it in
/// errors and decides its [`Format`]).
pub fn compile(source: &str, file_name: &str) -> Result<Compiled, CompileError> {
    let format = Format::of(file_name, source);
    let document = parse(source, file_name, format)?;
    let positions = positions::Positions::of(source);
    let findings = schema::check(&document);
    if !findings.is_empty() {
        return Err(failure(
            "pack failed schema validation",
            &findings,
            Vec::new(),
            &positions,
        ));
    }
    let pack: Pack = serde_json::from_value(document).map_err(|e| CompileError {
        error: format!("pack failed schema validation: [(root): {e}]"),
        warnings: Vec::new(),
        diagnostics: vec![Diagnostic {
            path: "(root)".to_owned(),
            line: None,
            column: None,
            message: e.to_string(),
        }],
    })?;
    let checked = rules::check(&pack);
    if !checked.errors.is_empty() {
        return Err(failure(
            "pack failed validation",
            &checked.errors,
            checked.warnings,
            &positions,
        ));
    }
    Ok(Compiled {
        pack,
        warnings: checked.warnings,
    })
}

/// The error for `findings`: packc's `<what>: [a b]` for several, the one
/// entry alone for one (schema errors always bracketed, as packc does).
fn failure(
    what: &str,
    findings: &[Finding],
    warnings: Vec<String>,
    positions: &positions::Positions,
) -> CompileError {
    let entries: Vec<String> = findings.iter().map(Finding::entry).collect();
    let error = match (entries.as_slice(), what) {
        ([one], "pack failed validation") => one.clone(),
        _ => format!("{what}: [{}]", entries.join(" ")),
    };
    CompileError {
        error,
        warnings,
        diagnostics: findings.iter().map(|f| f.place(positions)).collect(),
    }
}

/// The document, or the parser's error with its position.
fn parse(source: &str, file_name: &str, format: Format) -> Result<serde_json::Value, CompileError> {
    let (message, line, column) = match format {
        Format::Json => match serde_json::from_str(source) {
            Ok(value) => return Ok(value),
            Err(e) => {
                let text = e.to_string();
                let message = match text.rfind(" at line ") {
                    Some(cut) => text[..cut].to_owned(),
                    None => text,
                };
                let line = u32::try_from(e.line()).ok().filter(|&l| l > 0);
                let column = u32::try_from(e.column()).ok().filter(|&c| c > 0);
                (format!("invalid JSON: {message}"), line, column)
            }
        },
        Format::Yaml => match serde_saphyr::from_str(source) {
            Ok(value) => return Ok(value),
            Err(e) => {
                let at = e.location();
                let line = at.and_then(|l| u32::try_from(l.line()).ok());
                let column = at.and_then(|l| u32::try_from(l.column()).ok());
                (format!("invalid YAML: {}", yaml_message(&e)), line, column)
            }
        },
    };
    let place = match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line} column {column}"),
        _ => String::new(),
    };
    Err(CompileError {
        error: format!("failed to parse {file_name}: {message}{place}"),
        warnings: Vec::new(),
        diagnostics: vec![Diagnostic {
            path: "(root)".to_owned(),
            line,
            column,
            message,
        }],
    })
}

/// The YAML parser's message without the source excerpt it may draw (a
/// pack's text is not for error frames) or the position it repeats: its
/// first line, cut to the message.
fn yaml_message(error: &serde_saphyr::Error) -> String {
    let text = error.to_string();
    let mut message = text.lines().next().unwrap_or_default().trim();
    message = message.strip_prefix("error: ").unwrap_or(message);
    if let Some(rest) = message.strip_prefix("line ")
        && let Some((_, after)) = rest.split_once(": ")
    {
        message = after;
    }
    if let Some(cut) = message.find(" at line ") {
        message = &message[..cut];
    }
    message.trim_end_matches(':').to_owned()
}

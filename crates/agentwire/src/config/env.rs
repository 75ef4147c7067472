//! `${VAR}` and `${VAR:default}` in the values of a YAML file; `$${` is a
//! literal `${`.
//!
//! Substitution runs on scalar values after parsing, never on the text: a
//! comment that mentions a variable stays a comment, a value with a quote or
//! a colon in it cannot change the file's structure, and an unset variable
//! is reported at the key that needs it. A substituted value is the text it
//! was: only a field that asks for a number or a boolean reads a plain
//! (unquoted) one as a decimal number or a boolean (so `max_connections:
//! ${MAX}` is still a number and `api_key: ${KEY}` is text, whatever `KEY`
//! holds); a quoted or block value stays text. No error shows a substituted
//! value: it names the reference instead. Keys are never substituted: a
//! reference in one is an error.

use std::collections::{BTreeMap, HashMap};

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

use super::ConfigError;

mod tree;

use tree::Substituted;
pub(super) use tree::Tree;

/// Where the substituted values came from, by key path, so a later error
/// about one of them shows the reference as written instead of the value
/// (which may be a secret).
#[derive(Default)]
pub(super) struct Written {
    by_path: BTreeMap<String, (String, String)>,
}

impl Written {
    /// `error` with every substituted value at its key, under it or above
    /// it replaced by the reference it came from.
    pub(super) fn redact(&self, error: ConfigError) -> ConfigError {
        let message = self
            .by_path
            .iter()
            .filter(|(path, _)| related(path, &error.key))
            .fold(error.message, |message, (_, (written, value))| {
                hide_value(&message, value, written)
            });
        ConfigError {
            key: error.key,
            message,
        }
    }

    /// The substituted values whose reference names a variable that reads
    /// like a secret (a name with `KEY`, `SECRET`, `TOKEN`, `PASSWORD`,
    /// `PASSWD`, `CREDENTIAL` or `AUTH` in it), for `check-config --print`.
    pub(super) fn secret_values(&self) -> Vec<&str> {
        const MARKERS: [&str; 7] = [
            "KEY",
            "SECRET",
            "TOKEN",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "AUTH",
        ];
        self.by_path
            .values()
            .filter(|(written, value)| {
                !value.is_empty()
                    && referenced_names(written).any(|name| {
                        let name = name.to_ascii_uppercase();
                        MARKERS.iter().any(|marker| name.contains(marker))
                    })
            })
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

/// Whether the value at `path` can show in an error at `key`: the same
/// key, one inside it (`providers[0].base_url` in an error about
/// `providers[0]`) or one it is inside.
fn related(path: &str, key: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    inside(path, key) || inside(key, path)
}

/// Values this long are replaced wherever they stand; a shorter one inside
/// a longer word is taken for the message's own text (`30` in "such as
/// 30s").
const LONG_VALUE: usize = 8;

/// `message` with `value` replaced by `written`, the reference it came
/// from: quoted as `{:?}` quotes it, and as it is, as `{:?}` escapes it and
/// as a URL with its password hidden (a short value only as a word of its
/// own, see [`LONG_VALUE`]).
pub(super) fn hide_value(message: &str, value: &str, written: &str) -> String {
    if value.is_empty() {
        return message.to_owned();
    }
    let mut message = message.replace(&format!("{value:?}"), &format!("{written:?}"));
    for form in [
        agentwire_store::redact_url(value),
        value.to_owned(),
        debug_escaped(value),
    ] {
        message = if form.chars().count() >= LONG_VALUE {
            message.replace(&form, written)
        } else {
            replace_words(&message, &form, written)
        };
    }
    message
}

/// `text` with each occurrence of `word` that does not run on into a
/// longer word replaced by `with`.
fn replace_words(text: &str, word: &str, with: &str) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let joins_before = word.starts_with(is_word);
    let joins_after = word.ends_with(is_word);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().last().or_else(|| out.chars().last());
        let after = rest[at + word.len()..].chars().next();
        let runs_on = (joins_before && before.is_some_and(is_word))
            || (joins_after && after.is_some_and(is_word));
        out.push_str(&rest[..at]);
        out.push_str(if runs_on { word } else { with });
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// `text` as `{:?}` writes it, without the quotes.
fn debug_escaped(text: &str) -> String {
    let quoted = format!("{text:?}");
    quoted[1..quoted.len() - 1].to_owned()
}

/// The variable names `${NAME}` and `${NAME:default}` in `text` refer to
/// (`$${` is no reference).
fn referenced_names(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("${").filter_map(move |(i, _)| {
        if i > 0 && text.as_bytes()[i - 1] == b'$' {
            return None;
        }
        let body = &text[i + 2..];
        let end = body.find('}')?;
        let reference = &body[..end];
        Some(reference.split(':').next().unwrap_or(reference))
    })
}

/// Why a file cannot be loaded.
pub(super) enum LoadError {
    /// Not YAML: the parser's message.
    Yaml(String),
    /// A reference that cannot be replaced, at its key.
    At(ConfigError),
}

/// Parses `text` and replaces the references in its values. Errors name the
/// key path (`agents[2].provider`) and the line.
pub(super) fn parse(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(Tree, Written), LoadError> {
    if text.trim().is_empty() {
        return Ok((
            Tree::Json(Value::Object(Default::default())),
            Written::default(),
        ));
    }
    let masked = mask(text);
    let source = masked.as_deref().unwrap_or(text);
    let tree: Value = serde_saphyr::from_str(source).map_err(|e| {
        // The message about the text as written, whose columns are the user's.
        match serde_saphyr::from_str::<Value>(text) {
            Err(original) => LoadError::Yaml(original.to_string()),
            Ok(_) => LoadError::Yaml(unmask(&e.to_string())),
        }
    })?;
    let mut substitution = Substitution {
        scalars: scalars_with_references(source),
        lookup,
        written: Written::default(),
        path: String::new(),
    };
    let tree = substitution.walk(tree).map_err(LoadError::At)?;
    Ok((tree, substitution.written))
}

/// `tree` read as `T`. An error names its key path (`root` for the file as
/// a whole, a single scalar) and, about a substituted value, the reference
/// instead of the value.
pub(super) fn deserialize<T: DeserializeOwned>(tree: Tree, root: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(tree).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." { root.to_owned() } else { path };
        ConfigError::new(key, e.into_inner().to_string())
    })
}

/// Stand-ins for `${`, `$${` and the `}` that closes them while the text is
/// parsed: private-use characters, plain text to YAML anywhere, so that an
/// unquoted reference inside `{...}` or `[...]` (where `{` and `}` are
/// syntax) parses as it did when the text itself was substituted.
const OPEN: char = '\u{E000}';
const OPEN_LITERAL: char = '\u{E001}';
const CLOSE: char = '\u{E002}';

/// `text` with each reference's `${` (or `$${`) and the `}` that closes it on
/// the same line replaced by stand-ins; `None` when there is nothing to
/// replace or the text uses the stand-ins itself.
fn mask(text: &str) -> Option<String> {
    if !text.contains("${") || text.contains([OPEN, OPEN_LITERAL, CLOSE]) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut rest = line;
        while let Some(start) = rest.find("${") {
            let literal = start > 0 && rest.as_bytes()[start - 1] == b'$';
            let head = if literal { start - 1 } else { start };
            let body = &rest[start + 2..];
            let Some(end) = body.find('}') else {
                // Unterminated: left as written, for the value's own error.
                out.push_str(&rest[..start + 2]);
                rest = body;
                continue;
            };
            out.push_str(&rest[..head]);
            out.push(if literal { OPEN_LITERAL } else { OPEN });
            out.push_str(&body[..end]);
            out.push(CLOSE);
            rest = &body[end + 1..];
        }
        out.push_str(rest);
    }
    Some(out)
}

/// `text` with the stand-ins of [`mask`] turned back into what they stand for.
fn unmask(text: &str) -> String {
    if !text.contains([OPEN, OPEN_LITERAL, CLOSE]) {
        return text.to_owned();
    }
    text.replace(OPEN, "${")
        .replace(OPEN_LITERAL, "$${")
        .replace(CLOSE, "}")
}

fn is_masked_or_dollar(c: char) -> bool {
    matches!(c, '$' | OPEN | OPEN_LITERAL)
}

/// What the tree does not say about a scalar: its style and its line.
#[derive(Clone, Copy)]
struct ScalarInfo {
    /// Plain and untagged: a number or boolean field reads it as one.
    plain: bool,
    line: usize,
}

/// One walk over a parsed file, replacing references.
struct Substitution<'a> {
    scalars: HashMap<String, ScalarInfo>,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    written: Written,
    /// The key path of the node being walked.
    path: String,
}

impl Substitution<'_> {
    fn walk(&mut self, value: Value) -> Result<Tree, ConfigError> {
        match value {
            Value::String(text) if text.contains(is_masked_or_dollar) => self.substitute(text),
            Value::Array(items) => {
                let mut trees = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    let len = self.path.len();
                    self.path.push_str(&format!("[{i}]"));
                    trees.push(self.walk(item)?);
                    self.path.truncate(len);
                }
                Ok(match trees.iter().all(Tree::is_json) {
                    true => Tree::Json(trees.into_iter().filter_map(Tree::into_json).collect()),
                    false => Tree::List(trees),
                })
            }
            Value::Object(map) => {
                let mut entries = Vec::with_capacity(map.len());
                for (key, item) in map {
                    let len = self.path.len();
                    let key = unmask(&key);
                    push_key(&mut self.path, &key);
                    if has_reference(&key) {
                        return Err(ConfigError::new(
                            self.path.clone(),
                            "`${...}` is substituted in values only, not in keys",
                        ));
                    }
                    entries.push((key.replace("$${", "${"), self.walk(item)?));
                    self.path.truncate(len);
                }
                Ok(match entries.iter().all(|(_, tree)| tree.is_json()) {
                    true => Tree::Json(Value::Object(
                        entries
                            .into_iter()
                            .filter_map(|(key, tree)| Some((key, tree.into_json()?)))
                            .collect(),
                    )),
                    false => Tree::Map(entries),
                })
            }
            other => Ok(Tree::Json(other)),
        }
    }

    /// A scalar with `${`, `$${` or `$` in it, replaced.
    fn substitute(&mut self, text: String) -> Result<Tree, ConfigError> {
        let text = unmask(&text);
        let info = self.scalars.get(self.path.as_str()).copied();
        let replaced = replace_references(&text, self.lookup).map_err(|e| {
            let message = match info {
                Some(info) => format!("{e} (line {})", info.line),
                None => e.to_string(),
            };
            ConfigError::new(self.path.clone(), message)
        })?;
        if replaced == text {
            return Ok(Tree::Json(Value::String(text)));
        }
        self.written
            .by_path
            .insert(self.path.clone(), (text.clone(), replaced.clone()));
        Ok(Tree::Substituted(Substituted {
            text: replaced,
            written: text,
            typed: info.is_some_and(|info| info.plain),
        }))
    }
}

/// Appends `key` as `serde_path_to_error` prints it, so the paths of
/// substitution errors and of deserialization errors look alike.
fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn has_reference(text: &str) -> bool {
    text.match_indices("${")
        .any(|(i, _)| i == 0 || text.as_bytes()[i - 1] != b'$')
}

/// Why a value's references cannot be replaced.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum ReferenceError {
    #[error("${{{0}}}: environment variable is not set and has no default")]
    Unset(String),
    #[error("unterminated `${{` (write `$${{` for a literal `${{`)")]
    Unterminated,
    #[error("invalid variable name {0:?} in `${{...}}`: letters, digits and `_` only")]
    InvalidName(String),
}

/// `text` with each `${NAME}` / `${NAME:default}` replaced and each `$${`
/// turned into `${`.
pub(super) fn replace_references(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ReferenceError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        if let Some(literal) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = literal;
            continue;
        }
        let Some(body) = after.strip_prefix("${") else {
            out.push('$');
            rest = &after[1..];
            continue;
        };
        let end = body.find('}').ok_or(ReferenceError::Unterminated)?;
        let (name, default) = match body[..end].split_once(':') {
            Some((name, default)) => (name, Some(default)),
            None => (&body[..end], None),
        };
        let valid_name =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(ReferenceError::InvalidName(name.to_owned()));
        }
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(ReferenceError::Unset(name.to_owned())),
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The style and line of every scalar value that contains a `$`, by key
/// path. Nodes reached through an alias or a merge key are not listed (the
/// parser reports them once, where they are defined): their values stay text.
fn scalars_with_references(text: &str) -> HashMap<String, ScalarInfo> {
    enum Frame {
        Map { path: String, key: Option<String> },
        Seq { path: String, next: usize },
    }
    /// The path of the node that comes next in `frames`' innermost
    /// collection; `None` in a key position.
    fn child_path(frames: &[Frame]) -> Option<String> {
        match frames.last() {
            None => Some(String::new()),
            Some(Frame::Map { key: None, .. }) => None,
            Some(Frame::Map {
                path,
                key: Some(key),
            }) => {
                let mut path = path.clone();
                push_key(&mut path, key);
                Some(path)
            }
            Some(Frame::Seq { path, next }) => Some(format!("{path}[{next}]")),
        }
    }
    /// Moves the innermost collection past one node (`key`: the node was a
    /// mapping key with that text).
    fn advance(frames: &mut [Frame], key: Option<String>) {
        match frames.last_mut() {
            Some(Frame::Map { key: slot, .. }) => {
                *slot = match slot {
                    None => Some(key.unwrap_or_else(|| "?".to_owned())),
                    Some(_) => None,
                }
            }
            Some(Frame::Seq { next, .. }) => *next += 1,
            None => {}
        }
    }
    let mut found = HashMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    for event in Parser::new_from_str(text) {
        // A syntax error was reported by the parse before this one.
        let Ok((event, span)) = event else { break };
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = child_path(&frames).unwrap_or_else(|| "?".to_owned());
                frames.push(match event {
                    Event::MappingStart(..) => Frame::Map { path, key: None },
                    _ => Frame::Seq { path, next: 0 },
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                frames.pop();
                advance(&mut frames, None);
            }
            Event::Scalar(value, style, _, tag) => match child_path(&frames) {
                Some(path) => {
                    if value.contains(is_masked_or_dollar) {
                        let info = ScalarInfo {
                            plain: style == ScalarStyle::Plain && tag.is_none(),
                            line: span.start.line(),
                        };
                        found.insert(path, info);
                    }
                    advance(&mut frames, None);
                }
                None => advance(&mut frames, Some(unmask(&value))),
            },
            Event::Alias(_) => advance(&mut frames, None),
            Event::DocumentEnd => frames.clear(),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests;

//! `${VAR}` and `${VAR:default}` in the values of a YAML file; `$${` is a
//! literal `${`.
//!
//! Substitution runs on scalar values after parsing, never on the text: a
//! comment that mentions a variable stays a comment, a value with a quote or
//! a colon in it cannot change the file's structure, and an unset variable
//! is reported at the key that needs it. A plain (unquoted) value is then
//! read as YAML reads a plain value, but only as a number, a boolean or null
//! (so `max_connections: ${MAX}` is still a number); a quoted or block value
//! stays text. Keys are never substituted: a reference in one is an error.

use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

use super::ConfigError;

/// Where the substituted values came from, by key path, so a later error
/// about one of them shows the reference as written instead of the value
/// (which may be a secret).
#[derive(Default)]
pub(super) struct Written {
    by_path: HashMap<String, (String, String)>,
}

impl Written {
    /// `error` with every occurrence of a substituted value at its key
    /// replaced by the reference it came from.
    pub(super) fn redact(&self, error: ConfigError) -> ConfigError {
        match self.by_path.get(&error.key) {
            // Messages quote values with `{:?}`, which escapes some
            // characters: the escaped form is replaced as well.
            Some((written, value)) if !value.is_empty() => ConfigError {
                message: error
                    .message
                    .replace(value.as_str(), written)
                    .replace(&debug_escaped(value), &debug_escaped(written)),
                key: error.key,
            },
            _ => error,
        }
    }

    /// A deserialization error at serde_path_to_error's `path`, redacted
    /// as [`Written::redact`]. The root, `.` there and `""` here (a file
    /// that is one scalar), is named `root`.
    pub(super) fn redact_path(&self, path: String, root: &str, message: String) -> ConfigError {
        if path == "." {
            let redacted = self.redact(ConfigError::new("", message));
            return ConfigError::new(root, redacted.message);
        }
        self.redact(ConfigError::new(path, message))
    }
}

impl Written {
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
) -> Result<(Value, Written), LoadError> {
    if text.trim().is_empty() {
        return Ok((Value::Object(Default::default()), Written::default()));
    }
    let masked = mask(text);
    let source = masked.as_deref().unwrap_or(text);
    let mut tree: Value = serde_saphyr::from_str(source).map_err(|e| {
        // The message about the text as written, whose columns are the user's.
        match serde_saphyr::from_str::<Value>(text) {
            Err(original) => LoadError::Yaml(original.to_string()),
            Ok(_) => LoadError::Yaml(unmask(&e.to_string())),
        }
    })?;
    let scalars = scalars_with_references(source);
    let mut written = Written::default();
    let mut path = String::new();
    walk(&mut tree, &mut path, &scalars, lookup, &mut written).map_err(LoadError::At)?;
    Ok((tree, written))
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
    /// Plain and untagged: resolved as YAML resolves a plain value.
    plain: bool,
    line: usize,
}

fn walk(
    value: &mut Value,
    path: &mut String,
    scalars: &HashMap<String, ScalarInfo>,
    lookup: &dyn Fn(&str) -> Option<String>,
    written: &mut Written,
) -> Result<(), ConfigError> {
    match value {
        Value::String(text) if text.contains(is_masked_or_dollar) => {
            let text = unmask(text);
            let info = scalars.get(path.as_str()).copied();
            let at_line = |message: String| match info {
                Some(info) => format!("{message} (line {})", info.line),
                None => message,
            };
            let replaced = replace_references(&text, lookup)
                .map_err(|e| ConfigError::new(path.clone(), at_line(e.to_string())))?;
            if replaced != text {
                written
                    .by_path
                    .insert(path.clone(), (text, replaced.clone()));
            }
            *value = match info {
                Some(ScalarInfo { plain: true, .. }) => resolve_plain(replaced),
                _ => Value::String(replaced),
            };
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, scalars, lookup, written)?;
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let len = path.len();
                let key = unmask(key);
                push_key(path, &key);
                if has_reference(&key) {
                    return Err(ConfigError::new(
                        path.clone(),
                        "`${...}` is substituted in values only, not in keys",
                    ));
                }
                walk(item, path, scalars, lookup, written)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
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

/// A substituted plain value as the YAML parser reads the same text written
/// there (`9000`, `true`, `yes`, `~`), except that it never becomes a
/// sequence or a mapping.
fn resolve_plain(text: String) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    let one_token = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-' | b'~'));
    if one_token
        && let Ok(value @ (Value::Null | Value::Bool(_) | Value::Number(_))) =
            serde_saphyr::from_str::<Value>(&text)
    {
        return value;
    }
    Value::String(text)
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

//! `docs/src/config-reference.md`, generated from the structs the loader
//! deserializes (`raw::File` and what it holds): their JSON Schema
//! (`schemars`), whose descriptions are the fields' doc comments and whose
//! defaults are the structs' own. A key the loader accepts is in the
//! reference because it is a field; a field without a doc comment is an
//! error, not a gap.

use serde_json::{Map, Value};

/// The JSON Schema of the configuration file.
pub fn schema() -> Value {
    let schema = schemars::schema_for!(super::raw::File);
    schema.to_value()
}

/// One key of the reference.
struct Row {
    path: String,
    kind: String,
    default: String,
    description: String,
}

/// The reference as Markdown, or the key paths that have no description.
pub fn markdown() -> Result<String, Vec<String>> {
    let schema = schema();
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut walk = Walk {
        defs,
        rows: Vec::new(),
        missing: Vec::new(),
    };
    walk.object(&schema, "", 0);
    if !walk.missing.is_empty() {
        return Err(walk.missing);
    }
    let mut out = String::from(HEADER);
    let mut section = String::new();
    for row in walk.rows {
        let top = row
            .path
            .split(['.', '['])
            .next()
            .unwrap_or(&row.path)
            .to_owned();
        if top != section {
            out.push_str(&format!(
                "\n## `{top}`\n\n| key | type | default | meaning |\n|---|---|---|---|\n"
            ));
            section = top;
        }
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            row.path,
            cell(&row.kind),
            cell(&row.default),
            cell(&row.description)
        ));
    }
    Ok(out)
}

const HEADER: &str = "# Configuration reference

<!-- Generated from the loader's structs (crates/agentwire/src/config.rs and
config/*.rs) by `agentwire::config::reference`. Do not edit: change the doc
comment of the field, then run
`AGENTWIRE_UPDATE_DOCS=1 cargo test -p agentwire --lib config_reference`. -->

Every key `agentwire` reads from its YAML file, with its type, its default and
what it means. Unknown keys are errors. `a[]` is each entry of the list `a`,
`a.<key>` each entry of the mapping `a`. A duration is an integer and a unit:
`500ms`, `30s`, `5m`, `24h`. Any value may be `${VAR}` or `${VAR:default}`,
replaced from the environment (see README, Configuration). \"—\" in the
default column: the key is optional and unset unless its meaning says
otherwise. `agentwire check-config --config FILE --print` shows a file with
every default filled in.

Gnosari team files (`teams[].file`) have a format of their own: see
[gnosari.md](gnosari.md).
";

/// Markdown table cell text: one line, no unescaped `|`.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// `$ref` followed, once.
fn resolve<'a>(node: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    match node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name))
    {
        Some(target) => target,
        None => node,
    }
}

/// The variants of a node, `null` left out: `anyOf`/`oneOf` members, or the
/// node itself.
fn variants<'a>(node: &'a Value, defs: &'a Map<String, Value>) -> Vec<&'a Value> {
    let node = resolve(node, defs);
    for key in ["anyOf", "oneOf"] {
        if let Some(list) = node.get(key).and_then(Value::as_array) {
            // A unit enum with documented variants is a oneOf of consts.
            if list.iter().all(|v| v.get("const").is_some() || is_null(v)) {
                return vec![node];
            }
            return list
                .iter()
                .filter(|v| !is_null(v))
                .flat_map(|v| variants(v, defs))
                .collect();
        }
    }
    vec![node]
}

fn is_null(node: &Value) -> bool {
    node.get("type").and_then(Value::as_str) == Some("null")
}

/// The JSON types of a node, `null` left out.
fn types(node: &Value) -> Vec<&str> {
    match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    }
}

/// The allowed values of an enum node, if it is one.
fn enum_values(node: &Value) -> Option<Vec<String>> {
    let quote = |v: &Value| match v {
        Value::String(s) => Some(format!("`{s}`")),
        Value::Null => None,
        other => Some(format!("`{other}`")),
    };
    if let Some(list) = node.get("enum").and_then(Value::as_array) {
        return Some(list.iter().filter_map(quote).collect());
    }
    let list = node.get("oneOf").and_then(Value::as_array)?;
    if list.iter().all(|v| v.get("const").is_some() || is_null(v)) {
        return Some(
            list.iter()
                .filter_map(|v| v.get("const"))
                .filter_map(quote)
                .collect(),
        );
    }
    None
}

/// A readable type: `string`, `duration`, `integer`, `` `a` | `b` ``,
/// `list of string`, `mapping`, `map of string to mapping`.
fn kind(node: &Value, defs: &Map<String, Value>, depth: usize) -> String {
    if depth > 8 {
        return "…".to_owned();
    }
    let names: Vec<String> = variants(node, defs)
        .into_iter()
        .map(|v| single_kind(v, defs, depth))
        .collect();
    let mut unique: Vec<String> = Vec::new();
    for name in names {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    if unique.is_empty() {
        "any".to_owned()
    } else {
        unique.join(" or ")
    }
}

fn single_kind(node: &Value, defs: &Map<String, Value>, depth: usize) -> String {
    let node = resolve(node, defs);
    if let Some(values) = enum_values(node) {
        return values.join(" | ");
    }
    if node.get("format").and_then(Value::as_str) == Some("duration") {
        return "duration".to_owned();
    }
    let types = types(node);
    let Some(first) = types.first() else {
        return "any (JSON)".to_owned();
    };
    match *first {
        "array" => match node.get("items") {
            Some(items) => format!("list of {}", kind(items, defs, depth + 1)),
            None => "list".to_owned(),
        },
        "object" if node.get("properties").is_some() => "mapping".to_owned(),
        "object" => match map_values(node) {
            Some((_, values)) => format!("map of string to {}", kind(values, defs, depth + 1)),
            None => "mapping (any keys)".to_owned(),
        },
        "integer" | "number" | "string" | "boolean" => types.join(" or "),
        other => other.to_owned(),
    }
}

/// A map's value schema and the placeholder its keys are shown as.
fn map_values(node: &Value) -> Option<(&'static str, &Value)> {
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        return Some(("<name>", values));
    }
    let patterns = node.get("patternProperties")?.as_object()?;
    let (pattern, values) = patterns.iter().next()?;
    let placeholder = if pattern.contains("\\d") || pattern.contains("0-9") {
        "<n>"
    } else {
        "<name>"
    };
    Some((placeholder, values))
}

fn default_text(node: &Value, required: bool) -> String {
    match node.get("default") {
        None | Some(Value::Null) if required => "*required*".to_owned(),
        None | Some(Value::Null) => "—".to_owned(),
        Some(Value::String(s)) if s.is_empty() => "`\"\"`".to_owned(),
        Some(Value::String(s)) => format!("`{s}`"),
        Some(Value::Object(map)) if map.is_empty() => "`{}`".to_owned(),
        Some(Value::Object(_)) => "(see below)".to_owned(),
        Some(other) => format!("`{other}`"),
    }
}

fn description(node: &Value) -> Option<String> {
    let part = |key: &str| {
        node.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    match (part("title"), part("description")) {
        (Some(title), Some(text)) => Some(format!("{title}. {text}")),
        (Some(one), None) | (None, Some(one)) => Some(one.to_owned()),
        (None, None) => None,
    }
}

/// A walk over the schema: the rows found so far, and the keys without a
/// description.
struct Walk<'a> {
    defs: &'a Map<String, Value>,
    rows: Vec<Row>,
    missing: Vec<String>,
}

impl Walk<'_> {
    /// Adds a row for each property of `node` (an object schema, or one
    /// that `$ref`s one) and for what each holds.
    fn object(&mut self, node: &Value, prefix: &str, depth: usize) {
        let node = resolve(node, self.defs);
        let Some(properties) = node.get("properties").and_then(Value::as_object) else {
            return;
        };
        let required: Vec<&str> = node
            .get("required")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (name, property) in properties {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            let Some(text) = description(property) else {
                self.missing.push(path);
                continue;
            };
            self.rows.push(Row {
                path: path.clone(),
                kind: kind(property, self.defs, 0),
                default: default_text(property, required.contains(&name.as_str())),
                description: text,
            });
            self.inner(property, &path, depth + 1);
        }
    }

    /// The keys inside a property's value: a mapping's fields, a list's
    /// entries', a map's values'.
    fn inner(&mut self, node: &Value, path: &str, depth: usize) {
        if depth > 8 {
            return;
        }
        for variant in variants(node, self.defs) {
            let variant = resolve(variant, self.defs);
            if variant.get("properties").is_some() {
                self.object(variant, path, depth);
            } else if types(variant).contains(&"array") {
                if let Some(items) = variant.get("items") {
                    self.inner(items, &format!("{path}[]"), depth + 1);
                }
            } else if types(variant).contains(&"object")
                && let Some((placeholder, values)) = map_values(variant)
            {
                self.inner(values, &format!("{path}.{placeholder}"), depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    fn committed_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/config-reference.md")
    }

    /// docs/src/config-reference.md is what the loader's structs say today: a
    /// key added without a doc comment, or a doc comment changed without
    /// regenerating, fails here.
    #[test]
    fn config_reference_is_current() {
        let generated = match super::markdown() {
            Ok(text) => text,
            Err(missing) => panic!(
                "these config keys have no doc comment (write one on the field: type, default, meaning): {missing:?}"
            ),
        };
        let path = committed_path();
        if std::env::var_os("AGENTWIRE_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &generated).expect("write docs/src/config-reference.md");
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/src/config-reference.md is out of date with the config structs; update it with\n  \
             AGENTWIRE_UPDATE_DOCS=1 cargo test -p agentwire --lib config_reference"
        );
    }

    #[test]
    fn config_reference_names_every_top_level_key() {
        let text = super::markdown().unwrap_or_default();
        for key in [
            "`server.listen`",
            "`server.limits.ping_interval`",
            "`storage.media.backend`",
            "`auth.api_keys[].sha256`",
            "`providers[].scenarios.<name>.turns.<n>.tool_calls[].name`",
            "`tools[].request.url`",
            "`agents[].handler`",
            "`teams[].file`",
        ] {
            assert!(text.contains(key), "{key} missing from the reference");
        }
    }
}

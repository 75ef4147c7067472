//! The shape a pack must have: the public PromptPack JSON Schema's rules
//! (v1.4/v1.5: required keys, types, patterns, ranges, no unknown key where
//! the schema closes an object), written as code and worded as
//! gojsonschema words its errors, since packc prints those. agentwire adds
//! two things: `requires_ai_disclosure` is accepted at the top level, and a
//! variable's `type` must be one of the five it knows how to read.
//!
//! Every problem is found, not only the first; paths are `a.b[0].c`.

use serde_json::{Map, Value};

use crate::Finding;
use crate::positions::{child, item};

mod formats;
mod prompt;

use formats::{is_date_time, is_semver};

const TOP_KEYS: &[&str] = &[
    "$schema",
    "id",
    "name",
    "version",
    "description",
    "template_engine",
    "prompts",
    "fragments",
    "tools",
    "metadata",
    "compilation",
    "evals",
    "workflow",
    "agents",
    "skills",
    "compositions",
    "requires_ai_disclosure",
];

const PROMPT_KEYS: &[&str] = &[
    "id",
    "name",
    "description",
    "version",
    "system_template",
    "variables",
    "tools",
    "tool_policy",
    "pipeline",
    "parameters",
    "validators",
    "evals",
    "tested_models",
    "model_overrides",
    "media",
];

const VARIABLE_KEYS: &[&str] = &[
    "name",
    "type",
    "required",
    "default",
    "description",
    "example",
    "validation",
    "binding",
];

/// The variable types agentwire reads values of.
pub(crate) const VARIABLE_TYPES: &[&str] = &["string", "number", "boolean", "object", "array"];

/// An object's required and known keys; `None`: any key.
struct Shape {
    required: &'static [&'static str],
    known: Option<&'static [&'static str]>,
}

/// A string's constraints.
#[derive(Default)]
struct Str {
    min: usize,
    max: Option<usize>,
    pattern: Option<Pattern>,
}

/// A pattern, as the message shows it, and its matcher.
struct Pattern {
    shown: &'static str,
    matches: fn(&str) -> bool,
}

const PACK_ID: Pattern = Pattern {
    shown: "^[a-z][a-z0-9-]*$",
    matches: |s| {
        lower_start(s)
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    },
};

const PROMPT_ID: Pattern = Pattern {
    shown: "^[a-z][a-z0-9_-]*$",
    matches: |s| {
        lower_start(s)
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    },
};

const NAME: Pattern = Pattern {
    shown: "^[a-zA-Z_][a-zA-Z0-9_]*$",
    matches: crate::template::is_name,
};

const LANGUAGE: Pattern = Pattern {
    shown: "^[a-z]{2}$",
    matches: |s| s.len() == 2 && s.bytes().all(|b| b.is_ascii_lowercase()),
};

const SEMVER: Pattern = Pattern {
    shown: "SemVer 2.0.0 (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], optional v prefix)",
    matches: is_semver,
};

fn lower_start(s: &str) -> bool {
    s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
}

/// The schema's problems with `document`; empty when it has the shape.
pub(crate) fn check(document: &Value) -> Vec<Finding> {
    let mut check = Check::default();
    check.top(document);
    check.findings
}

#[derive(Default)]
struct Check {
    findings: Vec<Finding>,
}

/// gojsonschema's names for JSON types.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A short scalar, as packc shows a value; nothing for long or composite
/// values (which may be prompt text).
fn shown(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if s.chars().count() <= 64 && !s.contains('\n') => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) | Value::Null => Some(value.to_string()),
        _ => None,
    }
}

impl Check {
    fn fail(&mut self, path: &str, message: impl Into<String>, value: Option<&Value>) {
        self.findings
            .push(Finding::new(path, message).value(value.and_then(shown)));
    }

    fn wrong_type(&mut self, path: &str, expected: &str, value: &Value) {
        let message = format!(
            "Invalid type. Expected: {expected}, given: {}",
            type_name(value)
        );
        self.fail(path, message, None);
    }

    /// An object with `shape`'s keys; `None` (and a finding) if not one.
    fn object<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        shape: &Shape,
    ) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = value else {
            self.wrong_type(path, "object", value);
            return None;
        };
        for key in shape.required {
            if !map.contains_key(*key) {
                self.fail(path, format!("{key} is required"), None);
            }
        }
        if let Some(known) = shape.known {
            for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                let finding =
                    Finding::new(path, format!("Additional property {key} is not allowed"))
                        .at(&child(path, key));
                self.findings.push(finding);
            }
        }
        Some(map)
    }

    /// Calls `check` on `map[key]` with its path, when present.
    fn field(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
        check: impl FnOnce(&mut Check, &str, &Value),
    ) {
        if let Some(value) = map.get(key) {
            check(self, &child(path, key), value);
        }
    }

    fn string(&mut self, path: &str, value: &Value, rule: &Str) {
        let Value::String(text) = value else {
            self.wrong_type(path, "string", value);
            return;
        };
        let length = text.chars().count();
        if length < rule.min {
            self.fail(
                path,
                format!(
                    "String length must be greater than or equal to {}",
                    rule.min
                ),
                Some(value),
            );
        }
        if let Some(max) = rule.max.filter(|&max| length > max) {
            self.fail(
                path,
                format!("String length must be less than or equal to {max}"),
                None,
            );
        }
        if let Some(pattern) = &rule.pattern
            && length >= rule.min
            && !(pattern.matches)(text)
        {
            self.fail(
                path,
                format!("Does not match pattern '{}'", pattern.shown),
                Some(value),
            );
        }
    }

    fn text(&mut self, path: &str, value: &Value) {
        self.string(path, value, &Str::default());
    }

    fn format(&mut self, path: &str, value: &Value, format: &str, matches: fn(&str) -> bool) {
        match value {
            Value::String(text) if !matches(text) => {
                self.fail(
                    path,
                    format!("Does not match format '{format}'"),
                    Some(value),
                );
            }
            Value::String(_) => {}
            other => self.wrong_type(path, "string", other),
        }
    }

    fn boolean(&mut self, path: &str, value: &Value) {
        if !value.is_boolean() {
            self.wrong_type(path, "boolean", value);
        }
    }

    fn integer(&mut self, path: &str, value: &Value, minimum: i64) {
        match value.as_i64() {
            Some(n) if n < minimum => {
                self.fail(
                    path,
                    format!("Must be greater than or equal to {minimum}"),
                    Some(value),
                );
            }
            Some(_) => {}
            None if value.is_u64() => {}
            None => self.wrong_type(path, "integer", value),
        }
    }

    fn number(&mut self, path: &str, value: &Value, minimum: Option<f64>, maximum: Option<f64>) {
        let Some(n) = value.as_f64() else {
            self.wrong_type(path, "number", value);
            return;
        };
        if let Some(min) = minimum.filter(|&min| n < min) {
            self.fail(
                path,
                format!("Must be greater than or equal to {min}"),
                Some(value),
            );
        }
        if let Some(max) = maximum.filter(|&max| n > max) {
            self.fail(
                path,
                format!("Must be less than or equal to {max}"),
                Some(value),
            );
        }
    }

    fn one_of(&mut self, path: &str, value: &Value, allowed: &[&str]) {
        match value.as_str() {
            Some(text) if allowed.contains(&text) => {}
            Some(_) => {
                let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
                let message = format!("{path} must be one of the following: {}", list.join(", "));
                self.fail(path, message, Some(value));
            }
            None => self.wrong_type(path, "string", value),
        }
    }

    fn array<'v>(&mut self, path: &str, value: &'v Value) -> Option<&'v [Value]> {
        match value {
            Value::Array(items) => Some(items),
            other => {
                self.wrong_type(path, "array", other);
                None
            }
        }
    }

    /// An array, each item checked by `each` with its path.
    fn items(&mut self, path: &str, value: &Value, each: impl Fn(&mut Check, &str, &Value)) {
        for (i, entry) in self.array(path, value).into_iter().flatten().enumerate() {
            each(self, &item(path, i), entry);
        }
    }

    fn strings(&mut self, path: &str, value: &Value) {
        self.items(path, value, Check::text);
    }

    /// An object of any keys, each value checked by `each` with its path.
    fn entries(
        &mut self,
        path: &str,
        value: &Value,
        min: usize,
        each: impl Fn(&mut Check, &str, &Value),
    ) {
        let any = Shape {
            required: &[],
            known: None,
        };
        let Some(map) = self.object(path, value, &any) else {
            return;
        };
        if map.len() < min {
            self.fail(path, format!("Must have at least {min} properties"), None);
        }
        for (key, entry) in map {
            each(self, &child(path, key), entry);
        }
    }

    fn any_array(&mut self, path: &str, value: &Value) {
        self.array(path, value);
    }

    fn any_object(&mut self, path: &str, value: &Value) {
        self.object(
            path,
            value,
            &Shape {
                required: &[],
                known: None,
            },
        );
    }
}

impl Check {
    fn top(&mut self, document: &Value) {
        let shape = Shape {
            required: &["id", "name", "version", "template_engine", "prompts"],
            known: Some(TOP_KEYS),
        };
        let Some(map) = self.object("", document, &shape) else {
            return;
        };
        self.field(map, "", "$schema", Check::text);
        self.field(map, "", "id", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 1,
                    max: Some(100),
                    pattern: Some(PACK_ID),
                },
            );
        });
        self.field(map, "", "name", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 1,
                    max: Some(200),
                    pattern: None,
                },
            );
        });
        self.field(map, "", "version", Check::version);
        self.field(map, "", "description", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 0,
                    max: Some(5000),
                    pattern: None,
                },
            );
        });
        self.field(map, "", "template_engine", Check::template_engine);
        self.field(map, "", "prompts", |c, p, v| {
            c.entries(p, v, 1, Check::prompt)
        });
        self.field(map, "", "fragments", |c, p, v| {
            c.entries(p, v, 0, Check::text)
        });
        self.field(map, "", "tools", |c, p, v| c.entries(p, v, 0, Check::tool));
        self.field(map, "", "metadata", Check::metadata);
        self.field(map, "", "compilation", Check::compilation);
        self.field(map, "", "requires_ai_disclosure", Check::boolean);
        for key in ["evals", "skills"] {
            self.field(map, "", key, Check::any_array);
        }
        for key in ["workflow", "agents", "compositions"] {
            self.field(map, "", key, Check::any_object);
        }
    }

    fn version(&mut self, path: &str, value: &Value) {
        self.string(
            path,
            value,
            &Str {
                min: 0,
                max: None,
                pattern: Some(SEMVER),
            },
        );
    }

    fn template_engine(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["version", "syntax"],
            known: Some(&["version", "syntax", "features"]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "version", Check::text);
        self.field(map, path, "syntax", Check::text);
        self.field(map, path, "features", |c, p, v| {
            c.items(p, v, |c, p, v| {
                let features = [
                    "basic_substitution",
                    "fragments",
                    "conditionals",
                    "loops",
                    "filters",
                ];
                c.one_of(p, v, &features);
            });
        });
    }

    fn metadata(&mut self, path: &str, value: &Value) {
        let Some(map) = self.object(
            path,
            value,
            &Shape {
                required: &[],
                known: None,
            },
        ) else {
            return;
        };
        self.field(map, path, "domain", Check::text);
        self.field(map, path, "language", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 0,
                    max: None,
                    pattern: Some(LANGUAGE),
                },
            );
        });
        self.field(map, path, "tags", Check::strings);
        self.field(map, path, "requires_ai_disclosure", Check::boolean);
        self.field(map, path, "cost_estimate", |c, p, v| {
            let Some(costs) = c.object(
                p,
                v,
                &Shape {
                    required: &[],
                    known: None,
                },
            ) else {
                return;
            };
            for key in ["min_cost_usd", "max_cost_usd", "avg_cost_usd"] {
                c.field(costs, p, key, |c, p, v| c.number(p, v, Some(0.0), None));
            }
        });
    }

    fn compilation(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["compiled_with", "created_at", "schema"],
            known: None,
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        for key in ["compiled_with", "schema", "source"] {
            self.field(map, path, key, Check::text);
        }
        self.field(map, path, "created_at", |c, p, v| {
            c.format(p, v, "date-time", is_date_time)
        });
    }

    fn tool(&mut self, path: &str, value: &Value) {
        let shape = Shape {
            required: &["name", "description"],
            known: Some(&["name", "description", "parameters"]),
        };
        let Some(map) = self.object(path, value, &shape) else {
            return;
        };
        self.field(map, path, "name", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 0,
                    max: None,
                    pattern: Some(NAME),
                },
            );
        });
        self.field(map, path, "description", |c, p, v| {
            c.string(
                p,
                v,
                &Str {
                    min: 1,
                    max: None,
                    pattern: None,
                },
            );
        });
        self.field(map, path, "parameters", |c, p, v| {
            let shape = Shape {
                required: &["type", "properties"],
                known: None,
            };
            let Some(parameters) = c.object(p, v, &shape) else {
                return;
            };
            c.field(parameters, p, "type", |c, p, v| c.one_of(p, v, &["object"]));
            c.field(parameters, p, "properties", |c, p, v| {
                c.entries(p, v, 0, Check::any_object)
            });
            c.field(parameters, p, "required", Check::strings);
        });
    }
}

//! A memory tool's arguments, read field by field: each problem is an
//! error the model reads, worded as Omnia words them ("memory remember:
//! content is required").

use serde_json::{Map, Value};

/// One call's arguments.
pub(super) struct Args<'a> {
    tool: &'static str,
    fields: Option<&'a Map<String, Value>>,
}

impl<'a> Args<'a> {
    /// `value` must be a JSON object (or nothing at all).
    pub(super) fn new(tool: &'static str, value: &'a Value) -> Result<Args<'a>, String> {
        let fields = match value {
            Value::Object(fields) => Some(fields),
            Value::Null => None,
            _ => {
                return Err(format!(
                    "memory {tool}: the arguments must be a JSON object"
                ));
            }
        };
        Ok(Args { tool, fields })
    }

    pub(super) fn problem(&self, what: &str) -> String {
        format!("memory {}: {what}", self.tool)
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.fields?.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(self.problem(&format!("{key} must be a string"))),
        }
    }

    /// A string that must be there and not empty.
    pub(super) fn required(&self, key: &str) -> Result<&'a str, String> {
        match self.string(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(self.problem(&format!("{key} is required"))),
        }
    }

    pub(super) fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        let not_strings = || self.problem(&format!("{key} must be an array of strings"));
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned).ok_or_else(not_strings))
                .collect(),
            Some(_) => Err(not_strings()),
        }
    }

    /// A whole number of at least 0 (PromptKit's 0: the default), at most
    /// `max`.
    pub(super) fn count(&self, key: &str, default: usize, max: usize) -> Result<usize, String> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => match value.as_u64() {
                Some(0) => Ok(default),
                Some(n) => Ok(usize::try_from(n).unwrap_or(max).min(max)),
                None => Err(self.problem(&format!("{key} must be a whole number of 0 or more"))),
            },
        }
    }

    /// A number from 0 to 1.
    pub(super) fn fraction(&self, key: &str) -> Result<Option<f64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => match value.as_f64() {
                Some(n) if (0.0..=1.0).contains(&n) => Ok(Some(n)),
                _ => Err(self.problem(&format!("{key} must be a number from 0 to 1"))),
            },
        }
    }

    pub(super) fn object(&self, key: &str) -> Result<Map<String, Value>, String> {
        match self.get(key) {
            None => Ok(Map::new()),
            Some(Value::Object(fields)) => Ok(fields.clone()),
            Some(_) => Err(self.problem(&format!("{key} must be a JSON object"))),
        }
    }
}

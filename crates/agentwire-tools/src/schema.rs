//! JSON Schema validation of tool arguments.

use serde_json::Value;

use crate::truncate;

/// How many violations a failed validation lists.
const MAX_LISTED: usize = 3;

/// How long one listed violation may be (the validator's messages quote the
/// offending value, which can be long).
const MAX_VIOLATION_LEN: usize = 200;

/// A compiled JSON Schema for a tool's arguments: compile once, validate
/// every call.
pub struct ArgumentSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentSchema").finish_non_exhaustive()
    }
}

impl ArgumentSchema {
    /// Compiles `schema` (its `$schema` picks the draft; 2020-12 otherwise).
    /// References to other documents are not fetched: a schema that needs
    /// them does not compile.
    pub fn compile(schema: &Value) -> Result<ArgumentSchema, String> {
        let validator = jsonschema::validator_for(schema)
            .map_err(|error| format!("the schema is invalid: {error}"))?;
        Ok(ArgumentSchema { validator })
    }

    /// `Err` is a message for the model: the first few violations, each with
    /// where it is (a JSON pointer into the arguments).
    pub fn validate(&self, arguments: &Value) -> Result<(), String> {
        match self.violations(arguments, "the arguments", |e| e.to_string()) {
            None => Ok(()),
            Some(listed) => Err(format!(
                "the arguments do not match the tool's schema: {listed}"
            )),
        }
    }

    /// Like [`ArgumentSchema::validate`], for a message that may reach a
    /// log or a client who is not the value's author: each violation names
    /// where it is (a JSON pointer) and the schema's rule it breaks, never
    /// the value, which can be a secret. What it names comes from the
    /// schema (a required property, an expected type) or the path.
    pub fn validate_without_values(&self, value: &Value) -> Result<(), String> {
        match self.violations(value, "(root)", |e| rule_broken(e.kind())) {
            None => Ok(()),
            Some(listed) => Err(format!("does not match the schema: {listed}")),
        }
    }

    /// The first few violations, `place: what` each (`root` for the value
    /// itself), and how many more; `None` when `value` matches.
    fn violations(
        &self,
        value: &Value,
        root: &str,
        what: impl Fn(&jsonschema::ValidationError<'_>) -> String,
    ) -> Option<String> {
        let mut listed = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(value) {
            if listed.len() < MAX_LISTED {
                let path = error.instance_path().to_string();
                let place = if path.is_empty() { root } else { &path };
                listed.push(truncate(
                    format!("{place}: {}", what(&error)),
                    MAX_VIOLATION_LEN,
                ));
            } else {
                more += 1;
            }
        }
        if listed.is_empty() {
            return None;
        }
        let mut message = listed.join("; ");
        if more > 0 {
            message.push_str(&format!(" (and {more} more)"));
        }
        Some(message)
    }
}

/// The schema's rule a violation breaks, in words taken from the schema
/// alone.
fn rule_broken(kind: &jsonschema::error::ValidationErrorKind) -> String {
    use jsonschema::error::{TypeKind, ValidationErrorKind};
    match kind {
        ValidationErrorKind::Required { property } => match property.as_str() {
            Some(name) => format!("missing the required property {name:?}"),
            None => "missing a required property".to_owned(),
        },
        ValidationErrorKind::Type {
            kind: TypeKind::Single(expected),
        } => format!("not of type {expected}"),
        other => format!("breaks the schema's `{}` rule", other.keyword()),
    }
}

/// Validates `arguments` against a tool's JSON Schema `schema`: `Err` is a
/// message for the model listing the first few violations (or saying that the
/// schema itself is invalid).
///
/// This compiles the schema on each call; to validate many calls against one
/// schema, compile it once with [`ArgumentSchema::compile`].
pub fn validate_arguments(schema: &Value, arguments: &Value) -> Result<(), String> {
    ArgumentSchema::compile(schema)?.validate(arguments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn weather() -> Value {
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1},
                "units": {"enum": ["metric", "imperial"]}
            },
            "required": ["city"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(
            validate_arguments(&weather(), &json!({"city": "Paris", "days": 2})),
            Ok(())
        );
    }

    #[test]
    fn violations_are_listed_with_their_place() {
        let error = validate_arguments(&weather(), &json!({"city": 5, "days": 0})).unwrap_err();
        assert!(
            error.starts_with("the arguments do not match the tool's schema: "),
            "{error}"
        );
        assert!(
            error.contains("/city: 5 is not of type \"string\""),
            "{error}"
        );
        assert!(
            error.contains("/days: 0 is less than the minimum of 1"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_property_is_reported_at_the_top() {
        let error = validate_arguments(&weather(), &json!({})).unwrap_err();
        assert!(
            error.contains("the arguments: \"city\" is a required property"),
            "{error}"
        );
    }

    #[test]
    fn only_the_first_few_violations_are_listed() {
        let error = validate_arguments(
            &weather(),
            &json!({"city": 1, "days": "x", "units": "kelvin", "extra": 1, "more": 2}),
        )
        .unwrap_err();
        assert_eq!(error.matches("; ").count(), MAX_LISTED - 1, "{error}");
        assert!(error.ends_with("more)"), "{error}");
    }

    #[test]
    fn long_values_are_cut() {
        let long = "x".repeat(1000);
        let error =
            validate_arguments(&weather(), &json!({"city": "Paris", "units": long})).unwrap_err();
        assert!(error.len() < 400, "{error}");
    }

    #[test]
    fn violations_without_values_name_the_place_and_the_rule_only() {
        let compiled = ArgumentSchema::compile(&weather()).unwrap();
        let error = compiled
            .validate_without_values(&json!({"city": 5, "days": 0, "units": "sk-secret-1"}))
            .unwrap_err();
        assert!(error.starts_with("does not match the schema: "), "{error}");
        assert!(error.contains("/city: not of type string"), "{error}");
        assert!(
            error.contains("/days: breaks the schema's `minimum` rule"),
            "{error}"
        );
        assert!(!error.contains("sk-secret-1"), "a value is echoed: {error}");
        let error = compiled.validate_without_values(&json!({})).unwrap_err();
        assert!(
            error.contains("(root): missing the required property \"city\""),
            "{error}"
        );
        assert_eq!(
            compiled.validate_without_values(&json!({"city": "Oslo"})),
            Ok(())
        );
    }

    #[test]
    fn an_invalid_schema_is_an_error() {
        let error = validate_arguments(&json!({"type": "nonsense"}), &json!({})).unwrap_err();
        assert!(error.starts_with("the schema is invalid: "), "{error}");
        let error = ArgumentSchema::compile(&json!({"minimum": "one"})).unwrap_err();
        assert!(error.starts_with("the schema is invalid: "), "{error}");
    }

    #[test]
    fn older_drafts_are_understood() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"]
        });
        let compiled = ArgumentSchema::compile(&schema).unwrap();
        assert!(compiled.validate(&json!({"message": "hi"})).is_ok());
        assert!(compiled.validate(&json!({"message": 1})).is_err());
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let schema = json!({"$ref": "https://example.com/schema.json"});
        assert!(ArgumentSchema::compile(&schema).is_err());
    }

    #[test]
    fn compiled_schemas_can_be_shared_between_tasks() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ArgumentSchema>();
    }
}

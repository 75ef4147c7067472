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
        let mut listed = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(arguments) {
            if listed.len() < MAX_LISTED {
                let path = error.instance_path().to_string();
                let place = if path.is_empty() {
                    "the arguments".to_owned()
                } else {
                    path
                };
                listed.push(truncate(format!("{place}: {error}"), MAX_VIOLATION_LEN));
            } else {
                more += 1;
            }
        }
        if listed.is_empty() {
            return Ok(());
        }
        let mut message = format!(
            "the arguments do not match the tool's schema: {}",
            listed.join("; ")
        );
        if more > 0 {
            message.push_str(&format!(" (and {more} more)"));
        }
        Err(message)
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

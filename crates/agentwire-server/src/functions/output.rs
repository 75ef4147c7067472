//! A turn's ending as a function's output.
//!
//! Without an output schema the answer is text, and the output is that
//! text as a JSON string, whatever it looks like (an answer `42` stays the
//! string `"42"`), so a function's output type never depends on what the
//! model happened to write. With a schema the answer must be JSON that
//! matches it; an answer that is one fenced code block (```` ```json ````)
//! is read inside the fence, as models often write JSON that way.

use serde_json::Value;

use super::error::FunctionError;
use crate::Schema;
use crate::facade::Ending;

/// What the caller is told when a turn was cancelled (a drain past its
/// timeout, or the session's owner cancelling it on a socket).
const CANCELLED: &str = "CANCELLED: the turn was cancelled before it completed";

pub(super) fn of(ending: Ending, schema: Option<&Schema>) -> Result<Value, FunctionError> {
    let reply = match ending {
        Ending::Completed(reply) => reply,
        // The failure's message is what every client is shown: never a
        // provider's body or a secret (`TurnFailure`).
        Ending::Failed(failure) => {
            return Err(FunctionError::runtime_error(format!(
                "{}: {}",
                failure.code.as_str(),
                failure.message
            )));
        }
        Ending::Cancelled(_) => return Err(FunctionError::runtime_error(CANCELLED.to_owned())),
    };
    let Some(schema) = schema else {
        return Ok(Value::String(reply.text));
    };
    let Ok(output) = serde_json::from_str::<Value>(unfenced(&reply.text)) else {
        return Err(FunctionError::output_invalid(
            "the agent's answer is not JSON".to_owned(),
            reply.text,
        ));
    };
    match schema.validator.validate(&output) {
        Ok(()) => Ok(output),
        Err(why) => Err(FunctionError::output_invalid(
            format!("the agent's answer {why}"),
            reply.text,
        )),
    }
}

/// `text` inside its code fence when it is one fenced block (with or
/// without a language), else `text`.
fn unfenced(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(opened) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(inner) = opened.strip_suffix("```") else {
        return trimmed;
    };
    // The info string (`json`) runs to the end of the opening line.
    match inner.split_once('\n') {
        Some((_info, body)) => body.trim(),
        None => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentwire_core::tools::ArgumentValidator;
    use agentwire_core::{ErrorCode, Reply, TurnFailure};
    use axum::response::IntoResponse;
    use serde_json::json;

    use super::*;

    /// Accepts objects only.
    struct ObjectsOnly;

    impl ArgumentValidator for ObjectsOnly {
        fn validate(&self, value: &Value) -> Result<(), String> {
            match value.is_object() {
                true => Ok(()),
                false => Err("does not match the schema: (root): not of type object".to_owned()),
            }
        }
    }

    fn objects() -> Schema {
        Schema {
            document: json!({"type": "object"}),
            validator: Arc::new(ObjectsOnly),
        }
    }

    fn completed(text: &str) -> Ending {
        Ending::Completed(Reply::text(text))
    }

    async fn body_of(error: FunctionError) -> (u16, Value) {
        let response = error.into_response();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn without_a_schema_the_answer_is_a_string_even_when_it_looks_like_json() {
        assert_eq!(of(completed("42"), None).unwrap(), json!("42"));
        assert_eq!(of(completed("Echo: hi"), None).unwrap(), json!("Echo: hi"));
    }

    #[test]
    fn with_a_schema_the_answer_is_parsed_fenced_or_not() {
        let schema = objects();
        assert_eq!(
            of(completed(r#" {"a": 1} "#), Some(&schema)).unwrap(),
            json!({"a": 1})
        );
        let fenced = "```json\n{\"a\": 2}\n```";
        assert_eq!(
            of(completed(fenced), Some(&schema)).unwrap(),
            json!({"a": 2})
        );
    }

    #[tokio::test]
    async fn an_answer_the_schema_refuses_is_502_with_the_raw_answer() {
        let schema = objects();
        let error = of(completed("[1, 2]"), Some(&schema)).unwrap_err();
        let (status, body) = body_of(error).await;
        assert_eq!(status, 502);
        assert_eq!(body["error"], "output_invalid");
        assert_eq!(
            body["detail"],
            "the agent's answer does not match the schema: (root): not of type object"
        );
        assert_eq!(body["raw_output"], "[1, 2]");
        let (_, body) = body_of(of(completed("Echo: x"), Some(&schema)).unwrap_err()).await;
        assert_eq!(body["detail"], "the agent's answer is not JSON");
        assert_eq!(body["raw_output"], "Echo: x");
    }

    #[tokio::test]
    async fn a_failed_or_cancelled_turn_is_a_runtime_error_with_its_code() {
        let failed = Ending::Failed(TurnFailure::new(
            ErrorCode::ProviderUnavailable,
            "the model is unavailable",
        ));
        let (status, body) = body_of(of(failed, None).unwrap_err()).await;
        assert_eq!(status, 502);
        assert_eq!(
            body,
            json!({"error": "runtime_error", "detail": "PROVIDER_UNAVAILABLE: the model is unavailable"})
        );
        let cancelled = Ending::Cancelled(Reply::text("half an ans"));
        let (status, body) = body_of(of(cancelled, None).unwrap_err()).await;
        assert_eq!(status, 502);
        assert_eq!(body["detail"], CANCELLED);
    }

    #[test]
    fn a_fence_is_removed_only_around_the_whole_answer() {
        assert_eq!(unfenced("```\n[1]\n```"), "[1]");
        assert_eq!(unfenced("```json\n{}\n```\n"), "{}");
        assert_eq!(unfenced("see ```json\n{}\n```"), "see ```json\n{}\n```");
        assert_eq!(unfenced("```{}```"), "```{}```");
    }
}

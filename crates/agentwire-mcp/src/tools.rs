//! The agents as tools: `ask_<agent>`, its schemas, its arguments and its
//! results.

use serde::Deserialize;
use serde_json::{Value, json};

/// The tool that asks the agent `agent`. A character a tool name may not
/// hold (SEP-986: letters, digits, `_`, `-`, `.`) becomes `_`.
pub fn tool_name(agent: &str) -> String {
    let safe: String = agent
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '.' => c,
            _ => '_',
        })
        .collect();
    format!("ask_{safe}")
}

/// The tool as `tools/list` shows it.
pub fn descriptor(agent: &str, description: &str) -> Value {
    json!({
        "name": tool_name(agent),
        "title": format!("Ask {agent}"),
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "description": "What to say to the agent.",
                },
                "session_id": {
                    "type": "string",
                    "description": "Continue this conversation (the session_id of an earlier answer); omit to start a new one.",
                },
            },
            "required": ["message"],
            "additionalProperties": false,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "session_id": {"type": "string"},
                "reply": {"type": "string"},
            },
            "required": ["session_id", "reply"],
        },
        "annotations": {"readOnlyHint": false, "openWorldHint": true},
    })
}

/// A `tools/call`'s parameters: the tool, its arguments, and the progress
/// token when the client asked for progress.
#[derive(Debug, Clone, PartialEq)]
pub struct CallParams {
    pub tool: String,
    pub arguments: Value,
    pub progress_token: Option<Value>,
}

/// Reads a `tools/call`'s parameters; an error says what is wrong (a
/// protocol error, -32602).
pub fn call_params(params: &Value) -> Result<CallParams, String> {
    let tool = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or("params.name must be a string")?;
    let progress_token = params
        .pointer("/_meta/progressToken")
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned();
    Ok(CallParams {
        tool: tool.to_owned(),
        arguments: params.get("arguments").cloned().unwrap_or(Value::Null),
        progress_token,
    })
}

/// An `ask_<agent>` call's arguments.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskArguments {
    pub message: String,
    #[serde(default)]
    pub session_id: Option<String>,
}

/// Reads an `ask_<agent>` call's arguments; an error is a tool error the
/// model can correct (SEP-1303), not a protocol error.
pub fn ask_arguments(arguments: &Value) -> Result<AskArguments, String> {
    AskArguments::deserialize(arguments)
        .map_err(|_| "arguments must be {\"message\": string, \"session_id\"?: string}".to_owned())
}

/// A turn's reply as the call's result.
pub fn reply_result(session_id: &str, reply: &str) -> Value {
    json!({
        "content": [{"type": "text", "text": reply}],
        "structuredContent": {"session_id": session_id, "reply": reply},
        "isError": false,
    })
}

/// A call that failed: `code` and `message` (the fixed texts a client
/// sees; never a provider's body), the text already streamed, and the
/// session when there is one.
pub fn error_result(session_id: Option<&str>, code: &str, message: &str, reply: &str) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": format!("{code}: {message}")}],
        "isError": true,
    });
    if let Some(session_id) = session_id {
        result["structuredContent"] = json!({
            "session_id": session_id,
            "reply": reply,
            "error": {"code": code, "message": message},
        });
    }
    result
}

/// `notifications/progress` params: `progress` grows with every
/// notification (the spec's rule); `message` is the text streamed since
/// the last one, absent when nothing was.
pub fn progress(token: &Value, progress: f64, message: Option<&str>) -> Value {
    let mut params = json!({"progressToken": token, "progress": progress});
    if let Some(message) = message {
        params["message"] = json!(message);
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_keep_only_what_sep_986_allows() {
        assert_eq!(tool_name("echo"), "ask_echo");
        assert_eq!(tool_name("my agent/v2"), "ask_my_agent_v2");
    }

    #[test]
    fn arguments_need_a_message_and_nothing_unknown() {
        let ok = ask_arguments(&json!({"message": "hi", "session_id": "s"})).unwrap();
        assert_eq!(ok.session_id.as_deref(), Some("s"));
        assert!(ask_arguments(&json!({"session_id": "s"})).is_err());
        assert!(ask_arguments(&json!({"message": "hi", "other": 1})).is_err());
        assert!(ask_arguments(&Value::Null).is_err());
    }

    #[test]
    fn call_params_carry_the_progress_token() {
        let params = json!({"name": "ask_echo", "arguments": {"message": "x"}, "_meta": {"progressToken": 3}});
        let call = call_params(&params).unwrap();
        assert_eq!(call.progress_token, Some(json!(3)));
        assert!(call_params(&json!({})).is_err());
    }

    #[test]
    fn a_failed_call_names_its_code_and_keeps_its_session() {
        let result = error_result(Some("s1"), "PROVIDER_ERROR", "the model failed", "par");
        assert_eq!(result["isError"], true);
        assert_eq!(
            result["content"][0]["text"],
            "PROVIDER_ERROR: the model failed"
        );
        assert_eq!(result["structuredContent"]["session_id"], "s1");
    }
}

/// Client capabilities that matter here, from `initialize`.
pub mod client {
    use serde_json::Value;

    /// Whether the client takes form elicitation (2025-06-18's
    /// `elicitation: {}`, or 2025-11-25's `elicitation: {form: {}}`; a
    /// client with only `url` mode does not).
    pub fn elicits_forms(initialize_params: &Value) -> bool {
        match initialize_params.pointer("/capabilities/elicitation") {
            Some(Value::Object(modes)) => modes.is_empty() || modes.contains_key("form"),
            _ => false,
        }
    }
}

/// The `elicitation/create` params that ask the user to run the agent's
/// client tool `name` with `arguments` and give its result.
pub fn elicitation(name: &str, arguments: &Value, consent: Option<&str>) -> Value {
    let asks = format!("The agent asks to run the tool {name} with {arguments}.");
    let message = match consent {
        Some(consent) => format!("{consent}\n\n{asks}"),
        None => asks,
    };
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "result": {
                    "type": "string",
                    "title": "Result",
                    "description": format!("What {name} gives back"),
                },
            },
            "required": ["result"],
        },
    })
}

/// What an elicitation's answer says: the result to hand the model, or
/// why there is none.
pub fn elicited(result: Option<&Value>) -> Result<Value, String> {
    let Some(result) = result else {
        return Err("the client could not ask its user".to_owned());
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(result
            .pointer("/content/result")
            .cloned()
            .unwrap_or(Value::Null)),
        Some("decline") => Err("the user declined to run the tool".to_owned()),
        _ => Err("the user dismissed the request".to_owned()),
    }
}

#[cfg(test)]
mod elicitation_tests {
    use super::*;

    #[test]
    fn form_elicitation_is_read_from_either_version_of_the_capability() {
        let caps = |e: Value| json!({"capabilities": {"elicitation": e}});
        assert!(client::elicits_forms(&caps(json!({}))));
        assert!(client::elicits_forms(&caps(json!({"form": {}}))));
        assert!(!client::elicits_forms(&caps(json!({"url": {}}))));
        assert!(!client::elicits_forms(&json!({"capabilities": {}})));
    }

    #[test]
    fn an_answer_is_the_result_or_a_reason() {
        let accept = json!({"action": "accept", "content": {"result": "Berlin"}});
        assert_eq!(elicited(Some(&accept)), Ok(json!("Berlin")));
        assert!(elicited(Some(&json!({"action": "decline"}))).is_err());
        assert!(elicited(None).is_err());
    }
}

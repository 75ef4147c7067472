//! One turn's engine events as Gnosari events.
//!
//! The engine emits the same [`TurnEvent`]s for every dialect; this maps
//! them once, as they arrive:
//!
//! | engine event | Gnosari event |
//! |---|---|
//! | `TextDelta` | `token` |
//! | `ToolCall` (server side) | `tool_call`, `args` always an object |
//! | `ToolResult` (server side) | `tool_result`, `tool_name` from the call |
//! | `Completed` | `agent_completed`, `full_response` the reply's text |
//! | `Failed` | `error`, with the session id |
//! | `AgentSwitched` | nothing; later events carry the new `agent_name` |
//! | client-side calls and results, media, interrupts, audio formats | nothing |
//!
//! Gnosari has no client-tool flow, so client-side calls are not shown; the
//! server denies them at once.
//!
//! **Teams.** A delegation's sub-turn and a handoff switch the answering
//! agent: the behaviour notes (§2.4) give no event for it, so the events that
//! follow carry the new `agent_name`, down to `agent_completed` after a
//! handoff.

use std::collections::HashMap;

use agentwire_core::content::effective_text;
use agentwire_core::{ToolOutcome, ToolSide, TurnEvent};
use serde_json::{Value, json};

use crate::outbound::{
    ErrorEvent, encode_agent_completed, encode_agent_started, encode_error, encode_token,
    encode_tool_call, encode_tool_result,
};

/// Encodes the events of one turn of `agent_name` on `session_id`; the name
/// follows the turn's `AgentSwitched` events.
#[derive(Debug, Clone)]
pub struct TurnEncoder {
    agent_name: String,
    session_id: String,
    client_message_id: Option<String>,
    /// Call id → tool name, from `tool_call` until its `tool_result`: the
    /// engine's results carry only the id.
    tool_names: HashMap<String, String>,
}

impl TurnEncoder {
    /// `client_message_id`, when the message had one, is echoed on the
    /// turn's `error` event.
    pub fn new(
        agent_name: impl Into<String>,
        session_id: impl Into<String>,
        client_message_id: Option<String>,
    ) -> TurnEncoder {
        TurnEncoder {
            agent_name: agent_name.into(),
            session_id: session_id.into(),
            client_message_id,
            tool_names: HashMap::new(),
        }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The turn's first event.
    pub fn agent_started(&self) -> String {
        encode_agent_started(&self.agent_name, &self.session_id)
    }

    /// The event for `event`, or `None` when the dialect has none.
    pub fn encode(&mut self, event: &TurnEvent) -> Option<String> {
        let agent = self.agent_name.as_str();
        match event {
            TurnEvent::TextDelta(delta) if delta.is_empty() => None,
            TurnEvent::TextDelta(delta) => Some(encode_token(agent, delta)),
            TurnEvent::ToolCall(call) if call.side == ToolSide::Server => {
                self.tool_names.insert(call.id.clone(), call.name.clone());
                Some(encode_tool_call(
                    &self.agent_name,
                    &call.name,
                    &tool_args(&call.arguments),
                ))
            }
            TurnEvent::ToolResult {
                id,
                outcome,
                side: ToolSide::Server,
            } => {
                let name = self.tool_names.remove(id).unwrap_or_default();
                Some(encode_tool_result(
                    &self.agent_name,
                    &name,
                    &tool_result(outcome),
                ))
            }
            TurnEvent::AgentSwitched { name, .. } => {
                self.agent_name.clone_from(name);
                None
            }
            TurnEvent::ToolCall(_)
            | TurnEvent::ToolResult { .. }
            | TurnEvent::Media(_)
            | TurnEvent::Interrupt
            | TurnEvent::AudioFormat(_) => None,
            TurnEvent::Completed(reply) => Some(encode_agent_completed(
                agent,
                &effective_text(Some(&reply.text), &reply.parts),
            )),
            TurnEvent::Failed(failure) => Some(encode_error(&ErrorEvent {
                agent_name: agent,
                error: &failure.message,
                session_id: Some(&self.session_id),
                client_message_id: self.client_message_id.as_deref(),
            })),
        }
    }
}

/// `args` is always an object (behaviour notes §5.11): `null` is `{}`, a
/// string holding a JSON object is that object, and anything else is kept
/// under `_raw`.
fn tool_args(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => object,
            _ => json!({ "_raw": text }),
        },
        other => json!({ "_raw": other.to_string() }),
    }
}

/// A success is the tool's value; a failure or a denial is `{"error": …}`,
/// since the contract's `tool_result` has no error field of its own.
fn tool_result(outcome: &ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Ok(value) => value.clone(),
        ToolOutcome::Error(error) | ToolOutcome::Denied(error) => json!({ "error": error }),
    }
}

#[cfg(test)]
mod tests {
    use agentwire_core::{ContentPart, ErrorCode, MediaChunk, Reply, ToolCall, TurnFailure};

    use super::*;

    fn encoder() -> TurnEncoder {
        TurnEncoder::new("Weather Assistant", "s1", Some("c1".to_owned()))
    }

    fn call(id: &str, name: &str, arguments: Value, side: ToolSide) -> TurnEvent {
        TurnEvent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            side,
            consent_message: None,
            categories: Vec::new(),
        })
    }

    fn parse(event: Option<String>) -> Value {
        serde_json::from_str(&event.expect("an event")).unwrap()
    }

    #[test]
    fn started_deltas_and_completion() {
        let mut e = encoder();
        assert_eq!(
            e.agent_started(),
            r#"{"type":"agent_started","agent_name":"Weather Assistant","session_id":"s1"}"#
        );
        assert_eq!(
            e.encode(&TurnEvent::TextDelta("The ".into())).as_deref(),
            Some(r#"{"type":"token","content":"The ","agent_name":"Weather Assistant"}"#)
        );
        assert_eq!(e.encode(&TurnEvent::TextDelta(String::new())), None);
        assert_eq!(
            e.encode(&TurnEvent::Completed(Reply::text("The end.")))
                .as_deref(),
            Some(
                r#"{"type":"agent_completed","agent_name":"Weather Assistant","full_response":"The end."}"#
            )
        );
    }

    #[test]
    fn full_response_prefers_text_parts() {
        let reply = Reply {
            text: String::new(),
            parts: vec![
                ContentPart::text("Here's an image"),
                ContentPart::text("and more"),
            ],
        };
        let v = parse(encoder().encode(&TurnEvent::Completed(reply)));
        assert_eq!(v["full_response"], "Here's an image\n\nand more");
    }

    #[test]
    fn server_tools_carry_their_name_on_the_result() {
        let mut e = encoder();
        let started = e.encode(&call(
            "call_1",
            "get_weather",
            json!({"location": "San Francisco"}),
            ToolSide::Server,
        ));
        assert_eq!(
            started.as_deref(),
            Some(
                r#"{"type":"tool_call","tool_name":"get_weather","args":{"location":"San Francisco"},"agent_name":"Weather Assistant"}"#
            )
        );
        let finished = e.encode(&TurnEvent::ToolResult {
            id: "call_1".into(),
            outcome: ToolOutcome::Ok(json!({"temperature": "72°F"})),
            side: ToolSide::Server,
        });
        assert_eq!(
            finished.as_deref(),
            Some(
                r#"{"type":"tool_result","tool_name":"get_weather","result":{"temperature":"72°F"},"agent_name":"Weather Assistant"}"#
            )
        );
        assert!(e.tool_names.is_empty(), "names are forgotten once used");
    }

    #[test]
    fn tool_failures_are_error_objects() {
        let mut e = encoder();
        e.encode(&call("c", "http", Value::Null, ToolSide::Server));
        let v = parse(e.encode(&TurnEvent::ToolResult {
            id: "c".into(),
            outcome: ToolOutcome::Error("HTTP 500".into()),
            side: ToolSide::Server,
        }));
        assert_eq!(v["result"], json!({"error": "HTTP 500"}));
        assert_eq!(v["tool_name"], "http");
    }

    #[test]
    fn args_are_always_objects() {
        assert_eq!(tool_args(&Value::Null), json!({}));
        assert_eq!(tool_args(&json!(r#"{"a":1}"#)), json!({"a": 1}));
        assert_eq!(tool_args(&json!("not json")), json!({"_raw": "not json"}));
        assert_eq!(tool_args(&json!([1, 2])), json!({"_raw": "[1,2]"}));
        assert_eq!(tool_args(&json!({"k": "v"})), json!({"k": "v"}));
    }

    #[test]
    fn client_side_tools_media_and_audio_are_not_in_the_dialect() {
        let mut e = encoder();
        assert_eq!(
            e.encode(&call("x", "get_location", json!({}), ToolSide::Client)),
            None
        );
        assert_eq!(
            e.encode(&TurnEvent::ToolResult {
                id: "x".into(),
                outcome: ToolOutcome::Denied("no".into()),
                side: ToolSide::Client,
            }),
            None
        );
        let chunk = MediaChunk {
            media_id: "m".into(),
            mime_type: "image/png".into(),
            sequence: 0,
            is_last: true,
            data: vec![1],
        };
        assert_eq!(e.encode(&TurnEvent::Media(chunk)), None);
        assert_eq!(e.encode(&TurnEvent::Interrupt), None);
    }

    #[test]
    fn switched_agents_name_the_events_that_follow() {
        let mut e = encoder();
        let switch = |name: &str| TurnEvent::AgentSwitched {
            name: name.into(),
            delegated: false,
        };
        assert_eq!(e.encode(&switch("Billing")), None);
        assert_eq!(
            parse(e.encode(&TurnEvent::TextDelta("a".into())))["agent_name"],
            "Billing"
        );
        e.encode(&call("c", "lookup", json!({}), ToolSide::Server));
        assert_eq!(e.encode(&switch("Tech Support")), None);
        let result = parse(e.encode(&TurnEvent::ToolResult {
            id: "c".into(),
            outcome: ToolOutcome::Ok(json!(1)),
            side: ToolSide::Server,
        }));
        assert_eq!(
            (&result["tool_name"], &result["agent_name"]),
            (&json!("lookup"), &json!("Tech Support"))
        );
        let done = parse(e.encode(&TurnEvent::Completed(Reply::text("ok"))));
        assert_eq!(done["agent_name"], "Tech Support");
    }

    #[test]
    fn failures_are_error_events_with_the_session() {
        let failure = TurnFailure::new(ErrorCode::Custom("TEST_ERROR"), "something went wrong");
        assert_eq!(
            encoder().encode(&TurnEvent::Failed(failure)).as_deref(),
            Some(
                r#"{"type":"error","error":"something went wrong","agent_name":"Weather Assistant","session_id":"s1","client_message_id":"c1"}"#
            )
        );
    }
}

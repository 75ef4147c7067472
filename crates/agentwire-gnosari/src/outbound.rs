//! Server → client events, with the keys in the order the contract writes
//! them. Every event but `message_rejected` is flat (`type` plus its fields,
//! no timestamp); `message_rejected` alone is the `{event_type, type, data,
//! timestamp}` envelope, with both `event_type` and `type` set.

use agentwire_core::Timestamp;
use serde::Serialize;
use serde_json::Value;

/// `agent_started`: the first event of every turn that runs. For a new
/// session it carries the id the server minted.
pub fn encode_agent_started(agent_name: &str, session_id: &str) -> String {
    to_json(&AgentStarted {
        kind: "agent_started",
        agent_name,
        session_id,
    })
}

/// `token`: a piece of streamed text.
pub fn encode_token(agent_name: &str, content: &str) -> String {
    to_json(&Token {
        kind: "token",
        content,
        agent_name,
    })
}

/// `tool_call`: a server-side tool starts. `args` is written as given; the
/// turn encoder makes sure it is an object.
pub fn encode_tool_call(agent_name: &str, tool_name: &str, args: &Value) -> String {
    to_json(&ToolCallOut {
        kind: "tool_call",
        tool_name,
        args,
        agent_name,
    })
}

/// `tool_result`: a server-side tool finished with `result`.
pub fn encode_tool_result(agent_name: &str, tool_name: &str, result: &Value) -> String {
    to_json(&ToolResultOut {
        kind: "tool_result",
        tool_name,
        result,
        agent_name,
    })
}

/// `agent_completed`: the last event of a successful turn.
pub fn encode_agent_completed(agent_name: &str, full_response: &str) -> String {
    to_json(&AgentCompleted {
        kind: "agent_completed",
        agent_name,
        full_response,
    })
}

/// `agent_completed` of a cancelled turn, for clients that asked for
/// positions: `full_response` is what was streamed, and `cancelled: true`.
pub fn encode_agent_cancelled(agent_name: &str, full_response: &str) -> String {
    to_json(&AgentCancelled {
        kind: "agent_completed",
        agent_name,
        full_response,
        cancelled: true,
    })
}

#[derive(Serialize)]
struct AgentCancelled<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    agent_name: &'a str,
    full_response: &'a str,
    cancelled: bool,
}

/// `session_summary_scheduled`: sent after `agent_completed` when the turn
/// (re)scheduled the session's summary. `scheduled_at` is the summary's due
/// time, written like every timestamp of the contract (to the second) and
/// rounded up, so it never names a time before the summary can exist.
pub fn encode_session_summary_scheduled(session_id: &str, scheduled_at: Timestamp) -> String {
    const NANOS_PER_SEC: i64 = 1_000_000_000;
    let rounded_up = match scheduled_at.0.rem_euclid(NANOS_PER_SEC) {
        0 => scheduled_at,
        fraction => Timestamp(scheduled_at.0.saturating_add(NANOS_PER_SEC - fraction)),
    };
    to_json(&SummaryScheduled {
        kind: "session_summary_scheduled",
        session_id,
        scheduled_at: format_timestamp(rounded_up),
    })
}

/// An `error` event. The contract's fields are `error` and `agent_name`;
/// `session_id` and `client_message_id` are optional extras (behaviour notes
/// §5.12) written only when known, for clients that correlate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorEvent<'a> {
    pub agent_name: &'a str,
    pub error: &'a str,
    pub session_id: Option<&'a str>,
    pub client_message_id: Option<&'a str>,
}

pub fn encode_error(event: &ErrorEvent<'_>) -> String {
    to_json(&ErrorOut {
        kind: "error",
        error: event.error,
        agent_name: event.agent_name,
        session_id: event.session_id,
        client_message_id: event.client_message_id,
    })
}

/// Why a message was screened out at ingress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    PromptInjection,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::PromptInjection => "prompt_injection",
        }
    }
}

/// `message_rejected`: the envelope. `client_message_id` and `session_id`
/// echo the frame's and are `null` when it had none.
pub fn encode_message_rejected(
    reason: RejectReason,
    client_message_id: Option<&str>,
    session_id: Option<&str>,
    at: Timestamp,
) -> String {
    to_json(&Rejected {
        event_type: "message_rejected",
        kind: "message_rejected",
        data: RejectedData {
            reason: reason.as_str(),
            client_message_id,
            session_id,
        },
        timestamp: format_timestamp(at),
    })
}

/// ISO 8601 in UTC to the second, as the contract's examples write it:
/// `2026-09-14T10:30:00Z`.
pub fn format_timestamp(at: Timestamp) -> String {
    let t = at.to_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Where the session's log stands, for clients that asked for positions
/// (`stream=2`): sent when a turn starts (`turn_id`, the seq of its start)
/// and first on a rejoin (`replayed`: whether what the client missed
/// follows; `false`: reload the history from the sessions API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamInfo<'a> {
    pub session_id: &'a str,
    pub epoch: &'a str,
    pub head: u64,
    pub turn_id: Option<u64>,
    pub replayed: Option<bool>,
}

pub fn encode_stream_info(info: &StreamInfo<'_>) -> String {
    to_json(&StreamInfoOut {
        kind: "stream_info",
        session_id: info.session_id,
        epoch: info.epoch,
        head: info.head,
        turn_id: info.turn_id,
        replayed: info.replayed,
    })
}

#[derive(Serialize)]
struct StreamInfoOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    epoch: &'a str,
    head: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replayed: Option<bool>,
}

/// A planned close ahead (the server drains), for clients that asked for
/// positions: the time left, a jittered delay before reconnecting, and the
/// position to rejoin from; flat, like every Gnosari event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoingAway<'a> {
    pub session_id: &'a str,
    pub time_left_ms: u64,
    pub retry_after_ms: u64,
    pub epoch: &'a str,
    pub after: u64,
}

pub fn encode_going_away(notice: &GoingAway<'_>) -> String {
    to_json(&GoingAwayOut {
        kind: "going_away",
        session_id: notice.session_id,
        time_left_ms: notice.time_left_ms,
        retry_after_ms: notice.retry_after_ms,
        resume: ResumeOut {
            session_id: notice.session_id,
            after: notice.after,
            epoch: notice.epoch,
        },
    })
}

#[derive(Serialize)]
struct GoingAwayOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    time_left_ms: u64,
    retry_after_ms: u64,
    resume: ResumeOut<'a>,
}

#[derive(Serialize)]
struct ResumeOut<'a> {
    session_id: &'a str,
    after: u64,
    epoch: &'a str,
}

/// `event`, any flat event this module writes (every one but
/// `message_rejected`), with a last key `seq`: the position of the log
/// entry it encodes, for clients that asked for positions.
pub fn with_seq(mut event: String, seq: u64) -> String {
    if event.ends_with('}') {
        event.pop();
        event.push_str(&format!(",\"seq\":{seq}}}"));
    }
    event
}

fn to_json<T: Serialize>(event: &T) -> String {
    // String keys, strings, JSON values: serialization cannot fail.
    serde_json::to_string(event).expect("event serialization is infallible")
}

#[derive(Serialize)]
struct AgentStarted<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    agent_name: &'a str,
    session_id: &'a str,
}

#[derive(Serialize)]
struct Token<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    content: &'a str,
    agent_name: &'a str,
}

#[derive(Serialize)]
struct ToolCallOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tool_name: &'a str,
    args: &'a Value,
    agent_name: &'a str,
}

#[derive(Serialize)]
struct ToolResultOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tool_name: &'a str,
    result: &'a Value,
    agent_name: &'a str,
}

#[derive(Serialize)]
struct AgentCompleted<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    agent_name: &'a str,
    full_response: &'a str,
}

#[derive(Serialize)]
struct SummaryScheduled<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    session_id: &'a str,
    scheduled_at: String,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: &'a str,
    agent_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_message_id: Option<&'a str>,
}

#[derive(Serialize)]
struct Rejected<'a> {
    event_type: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    data: RejectedData<'a>,
    timestamp: String,
}

/// Every key is always written; absent ids are `null`.
#[derive(Serialize)]
struct RejectedData<'a> {
    reason: &'static str,
    client_message_id: Option<&'a str>,
    session_id: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// 2026-09-14T10:30:00.25Z
    const AT: Timestamp = Timestamp(1_789_381_800_250_000_000);

    #[test]
    fn agent_started_golden() {
        assert_eq!(
            encode_agent_started("Weather Assistant", "session-abc123"),
            r#"{"type":"agent_started","agent_name":"Weather Assistant","session_id":"session-abc123"}"#
        );
    }

    #[test]
    fn token_golden() {
        assert_eq!(
            encode_token("Weather Assistant", "The "),
            r#"{"type":"token","content":"The ","agent_name":"Weather Assistant"}"#
        );
    }

    #[test]
    fn tool_call_golden() {
        assert_eq!(
            encode_tool_call(
                "Weather Assistant",
                "get_weather",
                &json!({"location": "San Francisco"})
            ),
            r#"{"type":"tool_call","tool_name":"get_weather","args":{"location":"San Francisco"},"agent_name":"Weather Assistant"}"#
        );
    }

    #[test]
    fn tool_result_golden() {
        assert_eq!(
            encode_tool_result(
                "Weather Assistant",
                "get_weather",
                &json!({"temperature": "72°F"})
            ),
            r#"{"type":"tool_result","tool_name":"get_weather","result":{"temperature":"72°F"},"agent_name":"Weather Assistant"}"#
        );
        assert_eq!(
            encode_tool_result("a", "search", &json!("found results")),
            r#"{"type":"tool_result","tool_name":"search","result":"found results","agent_name":"a"}"#
        );
    }

    #[test]
    fn agent_completed_golden() {
        assert_eq!(
            encode_agent_completed(
                "Weather Assistant",
                "The weather in San Francisco is sunny with a temperature of 72°F."
            ),
            r#"{"type":"agent_completed","agent_name":"Weather Assistant","full_response":"The weather in San Francisco is sunny with a temperature of 72°F."}"#
        );
    }

    #[test]
    fn session_summary_scheduled_golden() {
        // 2025-02-15T10:30:00Z exactly, and a quarter second before it.
        let due = Timestamp(1_739_615_400_000_000_000);
        let expected = r#"{"type":"session_summary_scheduled","session_id":"session-abc123","scheduled_at":"2025-02-15T10:30:00Z"}"#;
        assert_eq!(
            encode_session_summary_scheduled("session-abc123", due),
            expected
        );
        assert_eq!(
            encode_session_summary_scheduled("session-abc123", Timestamp(due.0 - 250_000_000)),
            expected
        );
    }

    #[test]
    fn error_golden_is_the_contract_shape_when_nothing_else_is_known() {
        let event = ErrorEvent {
            agent_name: "Weather Assistant",
            error: "Error description",
            session_id: None,
            client_message_id: None,
        };
        assert_eq!(
            encode_error(&event),
            r#"{"type":"error","error":"Error description","agent_name":"Weather Assistant"}"#
        );
    }

    #[test]
    fn error_carries_session_and_client_message_ids_when_known() {
        let event = ErrorEvent {
            agent_name: "a",
            error: "session not found",
            session_id: Some("s1"),
            client_message_id: Some("c1"),
        };
        assert_eq!(
            encode_error(&event),
            r#"{"type":"error","error":"session not found","agent_name":"a","session_id":"s1","client_message_id":"c1"}"#
        );
    }

    #[test]
    fn message_rejected_golden() {
        assert_eq!(
            encode_message_rejected(
                RejectReason::PromptInjection,
                Some("your-client-side-id"),
                Some("session-abc123"),
                AT
            ),
            r#"{"event_type":"message_rejected","type":"message_rejected","data":{"reason":"prompt_injection","client_message_id":"your-client-side-id","session_id":"session-abc123"},"timestamp":"2026-09-14T10:30:00Z"}"#
        );
    }

    #[test]
    fn message_rejected_writes_null_for_absent_ids() {
        assert_eq!(
            encode_message_rejected(RejectReason::PromptInjection, None, None, Timestamp(0)),
            r#"{"event_type":"message_rejected","type":"message_rejected","data":{"reason":"prompt_injection","client_message_id":null,"session_id":null},"timestamp":"1970-01-01T00:00:00Z"}"#
        );
    }

    #[test]
    fn strings_are_json_escaped() {
        let event = encode_token("a\"b", "line\n<tag> \u{1F600}");
        let v: Value = serde_json::from_str(&event).unwrap();
        assert_eq!(v["content"], "line\n<tag> \u{1F600}");
        assert_eq!(v["agent_name"], "a\"b");
    }

    #[test]
    fn timestamps_are_utc_seconds() {
        assert_eq!(format_timestamp(AT), "2026-09-14T10:30:00Z");
        assert_eq!(format_timestamp(Timestamp(-1)), "1969-12-31T23:59:59Z");
    }
}

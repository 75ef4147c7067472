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
//! | `Completed` | the reply's text not yet streamed as a last `token`, then `agent_completed` |
//! | `Failed` | `error`, with the session id |
//! | `AgentSwitched` | nothing; later events carry the new `agent_name` |
//! | client-side calls and results, media, interrupts, audio formats | nothing |
//!
//! Gnosari has no client-tool flow, so client-side calls are not shown; the
//! server denies them at once.
//!
//! **Tokens add up to `full_response`.** The contract's client shows only
//! the tokens and keeps `full_response` for the record, so a reply whose
//! text was not all streamed (Omnia's rule that `done` may carry more than
//! the chunks: the demo's weather answer, echo's whole reply) would never
//! be shown. The encoder keeps the text the answering agent streamed; at
//! the end of the turn the part of the reply it did not stream goes out as
//! one last token, and `full_response` is that agent's tokens joined. That
//! is the reply itself whenever the tokens were its beginning, and the
//! whole streamed text when an agent wrote text before its tools (the reply
//! is then only the last round's). Holding it here makes it true for every
//! handler, and leaves Omnia's `done` as it is.
//!
//! **Teams.** A handoff switches the answering agent: the behaviour notes
//! (§2.4) give no event for it, so the events that follow carry the new
//! `agent_name`, down to `agent_completed`, and only its tokens make the
//! `full_response`. A delegation's sub-run is not streamed (§5.18): between
//! the `delegate_agent` call and its result the delegate's own events are
//! dropped, and its answer is the call's `tool_result`.

use std::collections::HashMap;

use agentwire_core::content::effective_text;
use agentwire_core::{ToolOutcome, ToolSide, TurnEvent};
use serde_json::{Value, json};

use crate::outbound::{
    ErrorEvent, encode_agent_cancelled, encode_agent_completed, encode_agent_started, encode_error,
    encode_token, encode_tool_call, encode_tool_result,
};

/// Encodes the events of one turn of `agent_name` on `session_id`; the name
/// follows the turn's handoffs.
#[derive(Debug, Clone)]
pub struct TurnEncoder {
    agent_name: String,
    session_id: String,
    client_message_id: Option<String>,
    /// Call id → tool name, from `tool_call` until its `tool_result`: the
    /// engine's results carry only the id.
    tool_names: HashMap<String, String>,
    /// A delegate is answering a delegation: nothing it does is streamed.
    in_delegation: bool,
    /// The tokens the answering agent has sent this turn, joined.
    streamed: String,
}

/// The events one engine event becomes: none, one, or, for a completed turn
/// whose reply holds text not yet streamed, that text's token and
/// `agent_completed`.
#[derive(Debug, Default)]
pub struct Frames {
    first: Option<String>,
    second: Option<String>,
}

impl Frames {
    fn one(frame: String) -> Frames {
        Frames {
            first: Some(frame),
            second: None,
        }
    }
}

impl Iterator for Frames {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        self.first.take().or_else(|| self.second.take())
    }
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
            in_delegation: false,
            streamed: String::new(),
        }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The turn's first event.
    pub fn agent_started(&self) -> String {
        encode_agent_started(&self.agent_name, &self.session_id)
    }

    /// The events for `event`, in order; none when the dialect has none.
    pub fn encode(&mut self, event: &TurnEvent) -> Frames {
        if let TurnEvent::AgentSwitched { name, delegated } = event {
            self.switch(name, *delegated);
            return Frames::default();
        }
        if self.in_delegation && !event.is_terminal() {
            return Frames::default();
        }
        let agent = self.agent_name.as_str();
        let frame = match event {
            TurnEvent::TextDelta(delta) if delta.is_empty() => return Frames::default(),
            TurnEvent::TextDelta(delta) => {
                self.streamed.push_str(delta);
                encode_token(agent, delta)
            }
            TurnEvent::ToolCall(call) if call.side == ToolSide::Server => {
                self.tool_names.insert(call.id.clone(), call.name.clone());
                encode_tool_call(agent, &call.name, &tool_args(&call.arguments))
            }
            TurnEvent::ToolResult {
                id,
                outcome,
                side: ToolSide::Server,
            } => {
                let name = self.tool_names.remove(id).unwrap_or_default();
                encode_tool_result(agent, &name, &tool_result(outcome))
            }
            TurnEvent::TurnStarted { .. } => self.agent_started(),
            TurnEvent::ToolCall(_)
            | TurnEvent::ToolResult { .. }
            | TurnEvent::Media(_)
            | TurnEvent::Interrupt
            | TurnEvent::AudioFormat(_)
            | TurnEvent::AgentSwitched { .. } => return Frames::default(),
            TurnEvent::Completed(reply) => {
                let reply = effective_text(Some(&reply.text), &reply.parts);
                return self.completed(&reply);
            }
            // What was streamed is what the user saw; the dialect turns a
            // cancel into an error for clients that cannot cancel.
            TurnEvent::Cancelled(_) => encode_agent_cancelled(agent, &self.streamed),
            TurnEvent::Failed(failure) => encode_error(&ErrorEvent {
                agent_name: agent,
                error: &failure.message,
                session_id: Some(&self.session_id),
                client_message_id: self.client_message_id.as_deref(),
            }),
        };
        Frames::one(frame)
    }

    /// A delegation begins or ends (`delegated` says whether a delegate
    /// answers from here on), or a handoff gives the turn to `name`.
    fn switch(&mut self, name: &str, delegated: bool) {
        self.in_delegation = delegated;
        if !delegated && name != self.agent_name {
            self.agent_name.clear();
            self.agent_name.push_str(name);
            self.streamed.clear();
        }
    }

    /// The last token (what of `reply` was not streamed) and
    /// `agent_completed`, whose `full_response` the tokens add up to.
    fn completed(&mut self, reply: &str) -> Frames {
        let streamed = std::mem::take(&mut self.streamed);
        let (unstreamed, full_response) = if let Some(rest) = reply.strip_prefix(&*streamed) {
            (rest, reply.to_owned())
        } else if streamed.ends_with(reply) {
            ("", streamed)
        } else {
            (reply, streamed + reply)
        };
        let agent = self.agent_name.as_str();
        let token = (!unstreamed.is_empty()).then(|| encode_token(agent, unstreamed));
        let completed = encode_agent_completed(agent, &full_response);
        match token {
            Some(token) => Frames {
                first: Some(token),
                second: Some(completed),
            },
            None => Frames::one(completed),
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

    /// The events for `event`, which must be at most one.
    fn one(e: &mut TurnEncoder, event: &TurnEvent) -> Option<String> {
        let mut frames: Vec<String> = e.encode(event).collect();
        assert!(frames.len() <= 1, "{frames:?}");
        frames.pop()
    }

    fn all(e: &mut TurnEncoder, event: &TurnEvent) -> Vec<Value> {
        e.encode(event)
            .map(|frame| serde_json::from_str(&frame).unwrap())
            .collect()
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
            one(&mut e, &TurnEvent::TextDelta("The ".into())).as_deref(),
            Some(r#"{"type":"token","content":"The ","agent_name":"Weather Assistant"}"#)
        );
        assert_eq!(one(&mut e, &TurnEvent::TextDelta(String::new())), None);
        assert_eq!(
            one(&mut e, &TurnEvent::TextDelta("end.".into())).as_deref(),
            Some(r#"{"type":"token","content":"end.","agent_name":"Weather Assistant"}"#)
        );
        assert_eq!(
            one(&mut e, &TurnEvent::Completed(Reply::text("The end."))).as_deref(),
            Some(
                r#"{"type":"agent_completed","agent_name":"Weather Assistant","full_response":"The end."}"#
            )
        );
    }

    #[test]
    fn full_response_prefers_text_parts_and_is_streamed_first() {
        let reply = Reply {
            text: String::new(),
            parts: vec![
                ContentPart::text("Here's an image"),
                ContentPart::text("and more"),
            ],
        };
        let events = all(&mut encoder(), &TurnEvent::Completed(reply));
        assert_eq!(
            events,
            [
                json!({"type": "token", "content": "Here's an image\n\nand more", "agent_name": "Weather Assistant"}),
                json!({"type": "agent_completed", "agent_name": "Weather Assistant", "full_response": "Here's an image\n\nand more"}),
            ]
        );
    }

    /// Joins the tokens and checks they make the `full_response` of the
    /// `agent_completed` that ends `events`.
    fn tokens_and_full_response(events: &[Value]) -> (String, String) {
        let tokens = events
            .iter()
            .filter(|e| e["type"] == "token")
            .map(|e| e["content"].as_str().unwrap())
            .collect();
        let last = events.last().unwrap();
        assert_eq!(last["type"], "agent_completed", "{events:?}");
        (tokens, last["full_response"].as_str().unwrap().to_owned())
    }

    fn turn(events: &[TurnEvent]) -> Vec<Value> {
        let mut e = encoder();
        events.iter().flat_map(|event| all(&mut e, event)).collect()
    }

    #[test]
    fn the_reply_s_unstreamed_text_is_a_last_token() {
        let delta = |t: &str| TurnEvent::TextDelta(t.into());
        let done = |t: &str| TurnEvent::Completed(Reply::text(t));
        // The demo's weather turn: a streamed lead, a tool, the full answer.
        let weather = turn(&[
            delta("Checking"),
            delta("..."),
            call("c", "weather", json!({}), ToolSide::Server),
            done("Checking...\n\nSunny."),
        ]);
        assert_eq!(
            weather.last().unwrap()["full_response"],
            "Checking...\n\nSunny."
        );
        assert_eq!(weather[weather.len() - 2]["content"], "\n\nSunny.");
        // Text before a tool round and the last round's reply: the reply
        // was streamed already, and the answer is everything the agent said.
        let rounds = turn(&[delta("Let me look. "), delta("It is 5."), done("It is 5.")]);
        assert_eq!(rounds.len(), 3, "{rounds:?}");
        // A reply unrelated to the chunks follows them.
        let unrelated = turn(&[delta("chunk1"), done("done")]);
        // Everything streamed, nothing new.
        let exact = turn(&[delta("Hello"), delta(" world"), done("Hello world")]);
        assert_eq!(exact.len(), 3, "{exact:?}");
        let silent = turn(&[done("")]);
        assert_eq!(silent.len(), 1, "no empty token: {silent:?}");
        for (events, full) in [
            (weather, "Checking...\n\nSunny."),
            (rounds, "Let me look. It is 5."),
            (unrelated, "chunk1done"),
            (exact, "Hello world"),
            (silent, ""),
        ] {
            let (tokens, full_response) = tokens_and_full_response(&events);
            assert_eq!(tokens, full_response, "{events:?}");
            assert_eq!(full_response, full, "{events:?}");
        }
    }

    #[test]
    fn a_delegate_s_run_is_not_streamed_and_its_answer_is_the_tool_result() {
        let switch = |name: &str, delegated: bool| TurnEvent::AgentSwitched {
            name: name.into(),
            delegated,
        };
        let events = turn(&[
            TurnEvent::TextDelta("Asking. ".into()),
            call(
                "d",
                "delegate_agent",
                json!({"target_agent": "Researcher"}),
                ToolSide::Server,
            ),
            switch("Researcher", true),
            TurnEvent::TextDelta("inner thoughts".into()),
            call("x", "search", json!({}), ToolSide::Server),
            TurnEvent::ToolResult {
                id: "x".into(),
                outcome: ToolOutcome::Ok(json!("found")),
                side: ToolSide::Server,
            },
            // A nested delegation and its return, still inside the first.
            switch("Librarian", true),
            TurnEvent::TextDelta("deeper".into()),
            switch("Researcher", true),
            switch("Weather Assistant", false),
            TurnEvent::ToolResult {
                id: "d".into(),
                outcome: ToolOutcome::Ok(json!("5 days")),
                side: ToolSide::Server,
            },
            TurnEvent::TextDelta("5 days.".into()),
            TurnEvent::Completed(Reply::text("5 days.")),
        ]);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "token",
                "tool_call",
                "tool_result",
                "token",
                "agent_completed"
            ],
            "{events:?}"
        );
        assert!(
            events
                .iter()
                .all(|e| e["agent_name"] == "Weather Assistant"),
            "{events:?}"
        );
        assert_eq!(
            (&events[2]["tool_name"], &events[2]["result"]),
            (&json!("delegate_agent"), &json!("5 days"))
        );
        let (tokens, full_response) = tokens_and_full_response(&events);
        assert_eq!(
            (tokens.as_str(), full_response.as_str()),
            ("Asking. 5 days.", "Asking. 5 days.")
        );
    }

    #[test]
    fn after_a_handoff_only_the_new_agent_s_tokens_make_the_answer() {
        let events = turn(&[
            TurnEvent::TextDelta("Routing you.".into()),
            TurnEvent::AgentSwitched {
                name: "Closer".into(),
                delegated: false,
            },
            TurnEvent::TextDelta("Closer here.".into()),
            TurnEvent::Completed(Reply::text("Closer here.")),
        ]);
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(
            events[2],
            json!({"type": "agent_completed", "agent_name": "Closer", "full_response": "Closer here."})
        );
    }

    #[test]
    fn server_tools_carry_their_name_on_the_result() {
        let mut e = encoder();
        let started = one(
            &mut e,
            &call(
                "call_1",
                "get_weather",
                json!({"location": "San Francisco"}),
                ToolSide::Server,
            ),
        );
        assert_eq!(
            started.as_deref(),
            Some(
                r#"{"type":"tool_call","tool_name":"get_weather","args":{"location":"San Francisco"},"agent_name":"Weather Assistant"}"#
            )
        );
        let finished = one(
            &mut e,
            &TurnEvent::ToolResult {
                id: "call_1".into(),
                outcome: ToolOutcome::Ok(json!({"temperature": "72°F"})),
                side: ToolSide::Server,
            },
        );
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
        one(&mut e, &call("c", "http", Value::Null, ToolSide::Server));
        let v = parse(one(
            &mut e,
            &TurnEvent::ToolResult {
                id: "c".into(),
                outcome: ToolOutcome::Error("HTTP 500".into()),
                side: ToolSide::Server,
            },
        ));
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
            one(
                &mut e,
                &call("x", "get_location", json!({}), ToolSide::Client)
            ),
            None
        );
        assert_eq!(
            one(
                &mut e,
                &TurnEvent::ToolResult {
                    id: "x".into(),
                    outcome: ToolOutcome::Denied("no".into()),
                    side: ToolSide::Client,
                }
            ),
            None
        );
        let chunk = MediaChunk {
            media_id: "m".into(),
            mime_type: "image/png".into(),
            sequence: 0,
            is_last: true,
            data: vec![1],
        };
        assert_eq!(one(&mut e, &TurnEvent::Media(chunk)), None);
        assert_eq!(one(&mut e, &TurnEvent::Interrupt), None);
    }

    #[test]
    fn switched_agents_name_the_events_that_follow() {
        let mut e = encoder();
        let switch = |name: &str| TurnEvent::AgentSwitched {
            name: name.into(),
            delegated: false,
        };
        assert_eq!(one(&mut e, &switch("Billing")), None);
        assert_eq!(
            parse(one(&mut e, &TurnEvent::TextDelta("a".into())))["agent_name"],
            "Billing"
        );
        one(&mut e, &call("c", "lookup", json!({}), ToolSide::Server));
        assert_eq!(one(&mut e, &switch("Tech Support")), None);
        let result = parse(one(
            &mut e,
            &TurnEvent::ToolResult {
                id: "c".into(),
                outcome: ToolOutcome::Ok(json!(1)),
                side: ToolSide::Server,
            },
        ));
        assert_eq!(
            (&result["tool_name"], &result["agent_name"]),
            (&json!("lookup"), &json!("Tech Support"))
        );
        let done = all(&mut e, &TurnEvent::Completed(Reply::text("ok")));
        assert_eq!(
            (&done[0]["agent_name"], &done[1]["agent_name"]),
            (&json!("Tech Support"), &json!("Tech Support"))
        );
    }

    #[test]
    fn failures_are_error_events_with_the_session() {
        let failure = TurnFailure::new(ErrorCode::Custom("TEST_ERROR"), "something went wrong");
        assert_eq!(
            one(&mut encoder(), &TurnEvent::Failed(failure)).as_deref(),
            Some(
                r#"{"type":"error","error":"something went wrong","agent_name":"Weather Assistant","session_id":"s1","client_message_id":"c1"}"#
            )
        );
    }

    /// The frames of every entry `reader` yields, each turn on a fresh
    /// encoder (as a connection makes one per turn); the entries up to
    /// `after` are encoded and dropped, as a rejoin warms up.
    fn frames_after(mut reader: agentwire_core::LogReader, after: u64) -> Vec<(u64, String)> {
        let mut encoder = encoder();
        let mut frames = Vec::new();
        while let Some(entry) = reader.try_next().expect("not lagged") {
            if let TurnEvent::TurnStarted { agent, .. } = &*entry.event {
                encoder = TurnEncoder::new(agent.as_str(), "s1", Some("c1".to_owned()));
            }
            for frame in encoder.encode(&entry.event) {
                if entry.seq > after {
                    frames.push((entry.seq, frame));
                }
            }
        }
        frames
    }

    #[test]
    fn a_rejoin_after_any_entry_sees_exactly_the_events_it_had_not_seen() {
        let log = agentwire_core::SessionLog::new(agentwire_core::Epoch(3));
        for _ in 0..2 {
            let (agent, events) = agentwire_core::testing::multi_event_turn();
            let writer = log.start_turn(&agent, None);
            let (terminal, events) = events.split_last().unwrap();
            for event in events {
                writer.append(event.clone());
            }
            writer.finish(terminal.clone());
        }
        let full = frames_after(log.reader_after(0), 0);
        let text: String = full.iter().map(|(_, f)| f.as_str()).collect();
        // The delegation is not streamed; its answer is the call's result.
        assert!(!text.contains("internal notes"), "{text}");
        assert!(text.contains(r#""tool_name":"delegate_agent""#), "{text}");
        for after in 0..=log.head() {
            let reader = log.rejoin_reader(after).expect("the log holds both turns");
            let expected: Vec<_> = full
                .iter()
                .filter(|(seq, _)| *seq > after)
                .cloned()
                .collect();
            assert_eq!(
                frames_after(reader, after),
                expected,
                "rejoined after {after}"
            );
        }
    }
}

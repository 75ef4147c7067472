//! A turn's log entries as a task's stream events.
//!
//! The reply streams as one artifact (`reply`), a chunk per text delta; a
//! client tool call is `input-required` with the call in the status
//! message; the terminal is the task's last status. Every event carries
//! its log position in `metadata["agentwire.position"]`.

use agentwire_core::{Epoch, LogEntry, ToolSide, TurnEvent};
use serde_json::{Value, json};

use crate::POSITION_KEY;
use crate::task::{Artifact, Event, Message, Part, Role, Status, TaskState};

/// The artifact the reply streams into.
pub const REPLY_ARTIFACT: &str = "reply";

/// The task stream of one turn.
pub struct TaskStream {
    task_id: String,
    context_id: String,
    epoch: Epoch,
    /// Some text went out as a chunk of the reply artifact.
    streamed: bool,
    /// The last status sent waits on the client.
    waiting: bool,
}

/// A log position as events and SSE ids carry it: `<epoch>-<seq>`.
pub fn position(epoch: Epoch, seq: u64) -> String {
    format!("{epoch}-{seq}")
}

/// The position `text` names, as [`position`] writes it.
pub fn parse_position(text: &str) -> Option<(Epoch, u64)> {
    let (epoch, seq) = text.trim().split_once('-')?;
    let epoch = u64::from_str_radix(epoch, 16).ok()?;
    Some((Epoch(epoch), seq.parse().ok()?))
}

impl TaskStream {
    pub fn new(task_id: String, context_id: String, epoch: Epoch) -> TaskStream {
        TaskStream {
            task_id,
            context_id,
            epoch,
            streamed: false,
            waiting: false,
        }
    }

    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    fn metadata(&self, seq: u64) -> Option<Value> {
        Some(json!({ POSITION_KEY: position(self.epoch, seq) }))
    }

    /// An agent message of this task.
    pub fn agent_message(&self, id: String, parts: Vec<Part>, metadata: Option<Value>) -> Message {
        Message {
            message_id: id,
            context_id: self.context_id.clone(),
            task_id: self.task_id.clone(),
            role: Role::Agent,
            parts,
            metadata,
        }
    }

    /// A status event of this task at `seq`.
    pub fn status(&self, state: TaskState, message: Option<Message>, seq: u64, now: &str) -> Event {
        Event::Status {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status: Status {
                state,
                message,
                timestamp: now.to_owned(),
            },
            metadata: self.metadata(seq),
        }
    }

    fn chunk(&mut self, text: &str, last_chunk: bool, seq: u64) -> Event {
        let append = std::mem::replace(&mut self.streamed, true);
        Event::Artifact {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact: Artifact {
                artifact_id: REPLY_ARTIFACT.to_owned(),
                name: None,
                parts: vec![Part::Text(text.to_owned())],
            },
            append,
            last_chunk,
            metadata: self.metadata(seq),
        }
    }

    /// The events `entry` makes, appended to `out`; `now` is the status
    /// timestamp (RFC 3339).
    pub fn push(&mut self, entry: &LogEntry, now: &str, out: &mut Vec<Event>) {
        let seq = entry.seq;
        match entry.event.as_ref() {
            TurnEvent::TextDelta(text) => out.push(self.chunk(text, false, seq)),
            TurnEvent::ToolCall(call) if call.side == ToolSide::Client => {
                self.waiting = true;
                let ask = call.consent_message.clone().unwrap_or_else(|| {
                    format!("The agent asks the client to run the tool {}.", call.name)
                });
                let parts = vec![
                    Part::Text(ask),
                    Part::Data(json!({"tool_call": {
                        "call_id": call.id, "name": call.name, "arguments": call.arguments,
                    }})),
                ];
                let message = self.agent_message(format!("{}-{seq}", self.task_id), parts, None);
                out.push(self.status(TaskState::InputRequired, Some(message), seq, now));
            }
            TurnEvent::ToolResult {
                side: ToolSide::Client,
                ..
            } if self.waiting => {
                self.waiting = false;
                out.push(self.status(TaskState::Working, None, seq, now));
            }
            TurnEvent::Completed(reply) => {
                match self.streamed {
                    true => out.push(self.chunk("", true, seq)),
                    false if !reply.text.is_empty() => out.push(self.chunk(&reply.text, true, seq)),
                    false => {}
                }
                let message = self.reply_message(&reply.text, seq);
                out.push(self.status(TaskState::Completed, message, seq, now));
            }
            TurnEvent::Cancelled(reply) => {
                let message = self.reply_message(&reply.text, seq);
                out.push(self.status(TaskState::Canceled, message, seq, now));
            }
            TurnEvent::Failed(failure) => {
                let metadata = Some(json!({"error_code": failure.code.as_str()}));
                let parts = vec![Part::Text(failure.message.clone())];
                let message =
                    self.agent_message(format!("{}-{seq}", self.task_id), parts, metadata);
                out.push(self.status(TaskState::Failed, Some(message), seq, now));
            }
            _ => {}
        }
    }

    fn reply_message(&self, text: &str, seq: u64) -> Option<Message> {
        (!text.is_empty()).then(|| {
            self.agent_message(
                format!("{}-{seq}", self.task_id),
                vec![Part::Text(text.to_owned())],
                None,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentwire_core::{Reply, ToolCall, TurnId};

    use super::*;

    fn entry(seq: u64, event: TurnEvent) -> LogEntry {
        LogEntry {
            seq,
            turn: TurnId(1),
            event: Arc::new(event),
        }
    }

    #[test]
    fn a_streamed_reply_is_chunks_then_the_last_then_completed() {
        let mut stream = TaskStream::new("t".into(), "c".into(), Epoch(0xab));
        let mut out = Vec::new();
        stream.push(
            &entry(
                1,
                TurnEvent::TurnStarted {
                    agent: "a".into(),
                    question: None,
                },
            ),
            "now",
            &mut out,
        );
        stream.push(
            &entry(2, TurnEvent::TextDelta("he".into())),
            "now",
            &mut out,
        );
        stream.push(
            &entry(3, TurnEvent::TextDelta("llo".into())),
            "now",
            &mut out,
        );
        stream.push(
            &entry(4, TurnEvent::Completed(Reply::text("hello"))),
            "now",
            &mut out,
        );
        assert_eq!(out.len(), 4);
        let Event::Artifact { append, .. } = &out[0] else {
            panic!()
        };
        assert!(!append);
        let Event::Artifact {
            append,
            last_chunk,
            metadata,
            ..
        } = &out[2]
        else {
            panic!()
        };
        assert!(*append && *last_chunk);
        assert_eq!(
            metadata.as_ref().unwrap()[POSITION_KEY],
            "00000000000000ab-4"
        );
        assert!(out[3].ends_stream());
    }

    #[test]
    fn a_client_tool_call_asks_for_input() {
        let mut stream = TaskStream::new("t".into(), "c".into(), Epoch(1));
        let mut out = Vec::new();
        let call = ToolCall {
            id: "call-1".into(),
            name: "locate".into(),
            arguments: json!({"x": 1}),
            side: ToolSide::Client,
            consent_message: None,
            categories: vec![],
        };
        stream.push(&entry(2, TurnEvent::ToolCall(call)), "now", &mut out);
        let Event::Status { status, .. } = &out[0] else {
            panic!()
        };
        assert_eq!(status.state, TaskState::InputRequired);
        let Part::Data(data) = &status.message.as_ref().unwrap().parts[1] else {
            panic!()
        };
        assert_eq!(data["tool_call"]["call_id"], "call-1");
        assert!(out[0].ends_stream());
    }

    #[test]
    fn positions_round_trip() {
        let text = position(Epoch(0xdead), 42);
        assert_eq!(parse_position(&text), Some((Epoch(0xdead), 42)));
        assert_eq!(parse_position("nope"), None);
    }
}

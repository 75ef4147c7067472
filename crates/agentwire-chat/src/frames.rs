//! The server's frames, as far as a terminal shows them. Fields this client
//! does not use are ignored, as the dialect asks of clients.

use serde_json::Value;

#[derive(Debug)]
pub(crate) enum Frame {
    Connected {
        session_id: Option<String>,
        /// `connected.capabilities.cancel` (agentwire's `stream=2`).
        cancel_supported: bool,
    },
    /// Assistant text as it is produced.
    Chunk(String),
    /// The caller's transcribed speech (`chunk{role:"user"}`).
    UserTranscript(String),
    ToolCall(ToolCall),
    /// The server's result of a tool it ran (`tool_result.id`), or its
    /// denial of a client call; `outcome` is the result or `error: …`.
    ToolResult {
        id: String,
        outcome: String,
    },
    Done(Done),
    Error {
        code: String,
        message: String,
    },
    GoingAway,
    Other,
}

#[derive(Debug)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: Value,
    pub(crate) consent_message: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Done {
    /// `content`, or the text parts of `parts` (which take precedence).
    pub(crate) text: String,
    /// One line per media part: `image: URL (image/png)`.
    pub(crate) media: Vec<String>,
    pub(crate) cancelled: bool,
}

/// How a turn ended.
#[derive(Debug, PartialEq, Eq)]
pub enum TurnEnd {
    Done,
    Cancelled,
    Error { code: String, message: String },
}

/// The text of the reply so far, to print only what `done` adds to it.
#[derive(Default)]
pub(crate) struct Reply {
    pub(crate) streamed: String,
}

impl Reply {
    /// What `done` carries beyond the streamed chunks: all of it when
    /// nothing streamed, the tail when the chunks were its start, nothing
    /// when it says something else (the chunks were shown already).
    pub(crate) fn rest_of(&self, done: &Done) -> String {
        done.text
            .strip_prefix(self.streamed.as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn opt_str(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

pub(crate) fn classify(json: &str) -> Result<Frame, serde_json::Error> {
    let frame: Value = serde_json::from_str(json)?;
    Ok(match frame["type"].as_str().unwrap_or_default() {
        "connected" => Frame::Connected {
            session_id: opt_str(&frame["session_id"]),
            cancel_supported: frame["connected"]["capabilities"]["cancel"] == Value::Bool(true),
        },
        "chunk" if frame["role"] == "user" => Frame::UserTranscript(text(&frame["content"])),
        "chunk" => Frame::Chunk(text(&frame["content"])),
        "tool_call" => {
            let call = &frame["tool_call"];
            Frame::ToolCall(ToolCall {
                id: text(&call["id"]),
                name: text(&call["name"]),
                arguments: call["arguments"].clone(),
                consent_message: opt_str(&call["consent_message"]),
            })
        }
        "tool_result" => {
            let result = &frame["tool_result"];
            let outcome = match result["error"].as_str() {
                Some(error) => format!("error: {error}"),
                None => text(&result["result"]),
            };
            Frame::ToolResult {
                id: text(&result["id"]),
                outcome,
            }
        }
        "done" => Frame::Done(done(&frame)),
        "error" => Frame::Error {
            code: text(&frame["error"]["code"]),
            message: text(&frame["error"]["message"]),
        },
        "going_away" => Frame::GoingAway,
        _ => Frame::Other,
    })
}

fn done(frame: &Value) -> Done {
    let mut done = Done {
        cancelled: frame["done"]["cancelled"] == Value::Bool(true)
            || frame["cancelled"] == Value::Bool(true),
        ..Done::default()
    };
    match frame["parts"].as_array() {
        Some(parts) => {
            for part in parts {
                match part["type"].as_str().unwrap_or_default() {
                    "text" => done
                        .text
                        .push_str(part["text"].as_str().unwrap_or_default()),
                    kind => {
                        let media = &part["media"];
                        let at = media["url"]
                            .as_str()
                            .or(media["storage_ref"].as_str())
                            .unwrap_or("(inline data)");
                        let mime = media["mime_type"].as_str().unwrap_or("unknown type");
                        done.media.push(format!("{kind}: {at} ({mime})"));
                    }
                }
            }
        }
        None => done.text = text(&frame["content"]),
    }
    done
}

#[cfg(test)]
mod tests {
    use super::{Frame, Reply, classify};

    fn done_of(json: &str) -> super::Done {
        match classify(json).unwrap() {
            Frame::Done(done) => done,
            other => panic!("not done: {other:?}"),
        }
    }

    #[test]
    fn done_adds_only_what_the_chunks_did_not_show() {
        let done = done_of(r#"{"type":"done","content":"Hello there, friend"}"#);
        let reply = Reply {
            streamed: "Hello there".into(),
        };
        assert_eq!(reply.rest_of(&done), ", friend");
        assert_eq!(Reply::default().rest_of(&done), "Hello there, friend");
        let other = Reply {
            streamed: "Something else".into(),
        };
        assert_eq!(other.rest_of(&done), "");
    }

    #[test]
    fn parts_take_precedence_and_media_is_listed() {
        let done = done_of(
            r#"{"type":"done","content":"ignored","parts":[{"type":"text","text":"Here:"},
            {"type":"image","media":{"url":"http://x/a.png","mime_type":"image/png"}}]}"#,
        );
        assert_eq!(done.text, "Here:");
        assert_eq!(done.media, ["image: http://x/a.png (image/png)"]);
    }

    #[test]
    fn connected_reports_cancel_support() {
        let frame = classify(
            r#"{"type":"connected","session_id":"s1","connected":{"capabilities":{"cancel":true}}}"#,
        )
        .unwrap();
        assert!(matches!(
            frame,
            Frame::Connected { session_id: Some(ref s), cancel_supported: true } if s == "s1"
        ));
    }
}

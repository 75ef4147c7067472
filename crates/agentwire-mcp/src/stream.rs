//! The SSE event ids of a tool call's stream (SEP-1699).
//!
//! An id names a position in the session's turn log, as A2A's do
//! (`<epoch>-<seq>`), and after a `.` the call it belongs to (the agent,
//! the session, the request's id and progress token, as hex of a JSON
//! array). A client that lost the stream sends the last id it read as
//! `Last-Event-ID` on a GET; that alone says what to replay and how to
//! answer, so any replica can resume it from the session's log. The id is
//! not a credential: the GET carries the caller's, and only the session's
//! owner rejoins it.

use std::fmt::Write as _;

use agentwire_core::log::Epoch;
use serde_json::{Value, json};

/// The call a stream answers.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRef {
    pub agent: String,
    pub session: String,
    pub request_id: Value,
    pub progress_token: Option<Value>,
}

/// The event id of the entry `seq` of the log `epoch`, on `stream`.
pub fn event_id(stream: &StreamRef, epoch: Epoch, seq: u64) -> String {
    let call = json!([
        stream.agent,
        stream.session,
        stream.request_id,
        stream.progress_token
    ])
    .to_string();
    let mut id = format!("{epoch}-{seq}.");
    for byte in call.as_bytes() {
        let _ = write!(id, "{byte:02x}");
    }
    id
}

/// The stream and position an event id names; `None` for one we did not
/// write.
pub fn parse_event_id(id: &str) -> Option<(StreamRef, Epoch, u64)> {
    let (position, call) = id.trim().split_once('.')?;
    let (epoch, seq) = position.split_once('-')?;
    let epoch = Epoch(u64::from_str_radix(epoch, 16).ok()?);
    let seq = seq.parse().ok()?;
    if call.len() % 2 != 0 || !call.is_ascii() {
        return None;
    }
    let bytes = (0..call.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&call[i..i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let parts: (String, String, Value, Option<Value>) = serde_json::from_slice(&bytes).ok()?;
    let (agent, session, request_id, progress_token) = parts;
    let stream = StreamRef {
        agent,
        session,
        request_id,
        progress_token,
    };
    Some((stream, epoch, seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_names_its_position_and_its_call() {
        let stream = StreamRef {
            agent: "echo".into(),
            session: "sess-1".into(),
            request_id: json!(4),
            progress_token: Some(json!("p")),
        };
        let id = event_id(&stream, Epoch(0xab), 17);
        assert!(id.starts_with("00000000000000ab-17."), "{id}");
        assert_eq!(parse_event_id(&id), Some((stream, Epoch(0xab), 17)));
    }

    #[test]
    fn foreign_ids_are_not_read() {
        for id in ["", "1-2", "zz-1.00", "1-2.0", "1-2.zz", "1-2.5b5d"] {
            assert_eq!(parse_event_id(id), None, "{id}");
        }
    }
}

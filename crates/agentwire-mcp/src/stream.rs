//! A tool call's SSE stream: its events as written, and their ids
//! (SEP-1699).
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

/// One SSE event: its id (if any) and its data, one JSON text. Written
/// here rather than by axum, which leaves out an empty `data` field and
/// with it the priming event's.
pub fn event(id: Option<&str>, data: &str) -> String {
    let mut event = String::with_capacity(data.len() + 64);
    if let Some(id) = id {
        let _ = writeln!(event, "id: {id}");
    }
    for line in data.split('\n') {
        let _ = writeln!(event, "data: {line}");
    }
    event.push('\n');
    event
}

/// The event a stream opens with: an id to resume from, the delay a client
/// waits before it reconnects, and empty data.
pub fn primer(id: &str, retry_ms: u64) -> String {
    format!("id: {id}\nretry: {retry_ms}\ndata:\n\n")
}

/// A comment line that keeps an idle stream open through proxies.
pub const KEEP_ALIVE: &str = ": keep-alive\n\n";

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
    fn events_are_framed_as_sse() {
        assert_eq!(event(Some("1-2.ab"), "{}"), "id: 1-2.ab\ndata: {}\n\n");
        assert_eq!(event(None, "a\nb"), "data: a\ndata: b\n\n");
        assert_eq!(primer("7", 1000), "id: 7\nretry: 1000\ndata:\n\n");
    }

    #[test]
    fn foreign_ids_are_not_read() {
        for id in ["", "1-2", "zz-1.00", "1-2.0", "1-2.zz", "1-2.5b5d"] {
            assert_eq!(parse_event_id(id), None, "{id}");
        }
    }
}

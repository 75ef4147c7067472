//! A Server-Sent Events parser over a byte stream (the WHATWG
//! "event stream interpretation", minus `retry`).
//!
//! Bytes are pushed in whatever pieces the network delivers: an event, a
//! line, a `\r\n` pair or a multi-byte UTF-8 character may be split at any
//! offset. Lines end at `\r\n`, `\n` or `\r`; lines starting with `:` are
//! comments; several `data:` lines join with `\n`; a blank line dispatches
//! the event. A leading byte-order mark is skipped.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type (`message`).
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// The last `id:` seen on the stream, if any.
    pub id: Option<String>,
}

/// Incremental parser: [`push`](SseParser::push) bytes as they arrive,
/// [`finish`](SseParser::finish) at the end of the stream.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` starting the next one
    /// belongs to that line ending.
    skip_lf: bool,
    /// Whether the start of the stream (and a possible BOM) was handled.
    started: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    last_id: Option<String>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds a piece of the stream and appends every event it completes to
    /// `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started {
            // The BOM itself may arrive split: hold back a proper prefix.
            self.line.extend_from_slice(bytes);
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return;
            }
            self.started = true;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            self.push_started(rest, out);
            return;
        }
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        self.push_started(bytes, out);
    }

    fn push_started(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (head, rest) = bytes.split_at(end);
            let line = if self.line.is_empty() {
                head.to_vec()
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                line
            };
            self.line_done(&line, out);
            bytes = if rest[0] == b'\r' {
                match rest.get(1) {
                    Some(b'\n') => &rest[2..],
                    Some(_) => &rest[1..],
                    None => {
                        self.skip_lf = true;
                        &[]
                    }
                }
            } else {
                &rest[1..]
            };
        }
        self.line.extend_from_slice(bytes);
    }

    /// Ends the stream. An unterminated last line counts as a line, and a
    /// pending event that has data is dispatched (the standard discards it;
    /// servers that omit the final blank line are common enough to forgive).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.started {
            self.started = true;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held).to_vec();
            self.line = rest;
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out);
        }
        self.dispatch(out);
        self.skip_lf = false;
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if !self.has_data {
            return;
        }
        self.has_data = false;
        out.push(SseEvent {
            event: event.filter(|e| !e.is_empty()),
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            parser.push(piece, &mut out);
        }
        parser.finish(&mut out);
        out
    }

    fn ev(event: Option<&str>, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
            id: id.map(str::to_owned),
        }
    }

    /// A stream mixing every feature: BOM, `\n`, `\r\n` and `\r` endings,
    /// comments, named events, multi-line data, fields without a space or a
    /// colon, ids, an event with no data (not dispatched), multi-byte text.
    const STREAM: &[u8] = b"\xEF\xBB\xBF: a comment\n\
data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"delta\":{\"content\":\"Hi \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"}}]}\n\n\
event: content_block_delta\r\n\
data: {\"type\":\"content_block_delta\"}\r\n\r\n\
event: ping\rdata:no-space\r\r\
data: line one\n\
data: line two\n\
data\n\
id: 42\n\
retry: 1000\n\
\n\
event: empty\n\
\n\
:keepalive\r\n\
data: [DONE]\n\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            ev(
                None,
                "{\"id\":\"chatcmpl-1\",\"choices\":[{\"delta\":{\"content\":\"Hi é€😀\"}}]}",
                None,
            ),
            ev(
                Some("content_block_delta"),
                "{\"type\":\"content_block_delta\"}",
                None,
            ),
            ev(Some("ping"), "no-space", None),
            ev(None, "line one\nline two\n", Some("42")),
            ev(None, "[DONE]", Some("42")),
        ]
    }

    #[test]
    fn parses_the_whole_stream_at_once() {
        assert_eq!(parse_all(&[STREAM]), expected());
    }

    #[test]
    fn parses_the_stream_byte_by_byte() {
        let pieces: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(parse_all(&pieces), expected());
    }

    #[test]
    fn unterminated_last_event_is_dispatched_at_finish() {
        assert_eq!(
            parse_all(&[b"data: a\n\ndata: [DONE]"]),
            vec![ev(None, "a", None), ev(None, "[DONE]", None)]
        );
        assert_eq!(parse_all(&[b"data: x\r"]), vec![ev(None, "x", None)]);
        assert_eq!(parse_all(&[b""]), vec![]);
        assert_eq!(parse_all(&[b"\xEF\xBB"]), vec![]);
    }

    #[test]
    fn cr_at_a_chunk_end_followed_by_lf_is_one_line_ending() {
        assert_eq!(
            parse_all(&[b"data: a\r", b"\n", b"\r", b"\ndata: b\r", b"\r"]),
            vec![ev(None, "a", None), ev(None, "b", None)]
        );
    }

    #[test]
    fn events_come_out_as_soon_as_their_blank_line_arrives() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.push(b"data: one\n", &mut out);
        assert!(out.is_empty());
        parser.push(b"\nda", &mut out);
        assert_eq!(out, vec![ev(None, "one", None)]);
    }

    proptest! {
        #[test]
        fn any_cutting_of_the_stream_gives_the_same_events(
            mut cuts in proptest::collection::vec(0..=STREAM.len(), 0..24)
        ) {
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for cut in cuts {
                pieces.push(&STREAM[start..cut]);
                start = cut;
            }
            pieces.push(&STREAM[start..]);
            prop_assert_eq!(parse_all(&pieces), expected());
        }
    }
}

//! The Anthropic stream decoder (`agentwire_providers::fuzzing::anthropic_stream`:
//! the SSE body read as a response body is, without the HTTP). No input
//! panics; the reply does not depend on how the body is cut (the first
//! byte seeds the cuts), and its text is what was streamed.
#![no_main]

use agentwire_fuzz::{Collect, block_on, cut};
use agentwire_providers::fuzzing::anthropic_stream;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (stream, pieces) = cut(data);
    let whole_sink = Collect::default();
    let whole = block_on(anthropic_stream(
        vec![Bytes::copy_from_slice(stream)],
        &whole_sink,
    ));
    let cut_sink = Collect::default();
    let pieces = pieces.into_iter().map(Bytes::copy_from_slice).collect();
    let in_pieces = block_on(anthropic_stream(pieces, &cut_sink));
    assert_eq!(whole, in_pieces);
    assert_eq!(whole_sink.collected(), cut_sink.collected());
    if let Ok(reply) = &whole {
        assert_eq!(reply.text, whole_sink.collected());
    }
});

//! The SSE parser (`agentwire_providers::sse::SseParser`): no input panics,
//! and the events do not depend on how the stream is cut (the first byte
//! seeds the cuts).
#![no_main]

use agentwire_fuzz::cut;
use agentwire_providers::sse::SseParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (stream, pieces) = cut(data);
    let mut whole = Vec::new();
    let mut parser = SseParser::new();
    parser.push(stream, &mut whole);
    parser.finish(&mut whole);
    let mut cut_events = Vec::new();
    let mut parser = SseParser::new();
    for piece in pieces {
        parser.push(piece, &mut cut_events);
    }
    parser.finish(&mut cut_events);
    assert_eq!(whole, cut_events);
    // Byte by byte, the smallest cut.
    let mut single = Vec::new();
    let mut parser = SseParser::new();
    for byte in stream {
        parser.push(std::slice::from_ref(byte), &mut single);
    }
    parser.finish(&mut single);
    assert_eq!(whole, single);
});

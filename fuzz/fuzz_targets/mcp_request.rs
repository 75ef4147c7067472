//! MCP JSON-RPC request bodies and SSE event ids (`agentwire_mcp`): the
//! envelope, a tool call's parameters and arguments, and the
//! `Last-Event-ID` a resuming client sends. No input panics; an event id
//! that parses is written back to one that parses to the same.
#![no_main]

use agentwire_mcp::{rpc, stream, tools};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(incoming) = rpc::decode(data) {
        let _ = format!("{incoming:?}");
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = tools::call_params(&value);
        let _ = tools::ask_arguments(&value);
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Some((reference, epoch, seq)) = stream::parse_event_id(text)
    {
        let again = stream::event_id(&reference, epoch, seq);
        let reparsed = stream::parse_event_id(&again).expect("an id written parses");
        assert_eq!(reparsed, (reference, epoch, seq));
    }
});

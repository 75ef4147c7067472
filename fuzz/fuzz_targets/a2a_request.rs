//! A2A JSON-RPC request bodies (`agentwire_a2a`), in both protocol
//! versions: the envelope, then the parameters of each method that has
//! any, and the `Last-Event-ID` positions. No input panics; a decoded
//! request's method has a name in the version it was decoded in, and a
//! position that parses writes back to the same text's value.
#![no_main]

use agentwire_a2a::Version;
use agentwire_a2a::{message, rpc, turn};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for version in [Version::V1_0, Version::V0_3] {
        let Ok(request) = rpc::decode(data, version) else {
            continue;
        };
        assert!(request.params.is_object());
        let _ = message::send_params(&request.params, version).map(|p| p.message.content_parts());
        let _ = message::task_id(&request.params);
        let _ = message::list_params(&request.params);
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Some((epoch, seq)) = turn::parse_position(text)
    {
        assert_eq!(turn::parse_position(&turn::position(epoch, seq)), Some((epoch, seq)));
    }
});

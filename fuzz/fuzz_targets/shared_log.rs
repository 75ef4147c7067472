//! What replicas read back from Redis (`agentwire_live::codec`): a turn log
//! batch and a control. No input panics; a batch that decodes encodes back
//! to one that decodes to the same entries.
#![no_main]

use agentwire_live::codec::{decode_batch, decode_control, encode_batch, encode_control};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = decode_batch(data) {
        let again = encode_batch(&entries);
        assert_eq!(decode_batch(again.as_bytes()).unwrap(), entries);
    }
    if let Ok((session, control)) = decode_control(data) {
        let again = encode_control(&session, &control);
        assert_eq!(
            decode_control(again.as_bytes()).unwrap(),
            (session, control)
        );
    }
});

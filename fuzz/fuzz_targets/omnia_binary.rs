//! OMNI binary frames (`agentwire_omnia::decode_binary`): decoding never
//! panics, and a decoded frame encodes (`encode_binary`) to bytes that
//! decode to the same frame. The chunked media they carry is
//! `omnia_media`'s (a target of its own: each of its inputs is a megabyte).
//!
//! The first byte is skipped (the seeds kept the layout of when both lived
//! here).
#![no_main]

use agentwire_omnia::{decode_binary, encode_binary};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((_, frame)) = data.split_first() else {
        return;
    };
    let Ok(decoded) = decode_binary(frame) else {
        return;
    };
    let encoded = encode_binary(&decoded);
    assert_eq!(decode_binary(&encoded).as_ref(), Ok(&decoded));
});

//! `POST /assets` bodies (`agentwire_server::fuzzing::asset_form`: axum's
//! multipart extractor and our form reader around it, in memory). The
//! first line of the input is the `Content-Type` (so the boundary can be
//! fuzzed too), the rest the body. No input panics; an accepted form has a
//! file of an allowed type within the cap, and a session.
#![no_main]

use agentwire_fuzz::block_on;
use agentwire_server::fuzzing::asset_form;
use libfuzzer_sys::fuzz_target;

/// Small, so the cap is reached.
const MAX_BYTES: u64 = 256;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let (content_type, body) = data.split_at(split);
    let Ok(content_type) = std::str::from_utf8(content_type) else {
        return;
    };
    let body = body.get(1..).unwrap_or_default().to_vec();
    match block_on(asset_form(
        content_type.trim_end_matches('\r'),
        body,
        MAX_BYTES,
    )) {
        Ok(form) => {
            assert!(!form.bytes.is_empty());
            assert!(form.bytes.len() as u64 <= MAX_BYTES);
            assert!(
                [
                    "image/png",
                    "image/jpeg",
                    "image/webp",
                    "image/gif",
                    "application/pdf"
                ]
                .contains(&form.mime_type.as_str())
            );
            assert!(!form.session_id.is_empty());
        }
        Err((status, _)) => assert!([0, 400, 413, 415].contains(&status), "{status}"),
    }
});

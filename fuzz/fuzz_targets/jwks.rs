//! JWKS documents (`agentwire_auth::fuzzing::jwks_verify`: the parser a
//! JWKS file or fetch goes through, then `ring`'s verifier with every key
//! kept). The input is `<document>\0<message>\0<signature>`. No input
//! panics, and parsing is a function of the document.
#![no_main]

use agentwire_auth::fuzzing::jwks_verify;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let document = parts.next().unwrap_or_default();
    let message = parts.next().unwrap_or_default();
    let signature = parts.next().unwrap_or_default();
    let verdicts = jwks_verify(document, message, signature);
    assert_eq!(verdicts, jwks_verify(document, message, signature));
});

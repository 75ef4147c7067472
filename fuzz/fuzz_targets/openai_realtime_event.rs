//! The OpenAI Realtime adapter's server-event decoder
//! (`openai_realtime::wire::decode`): no input panics; an event it reads is
//! of a type named in the input; an `error` event becomes words of
//! identifier characters only (they reach the log: never the provider's
//! message or anything else it sent); audio decodes to no more than base64
//! can hold.
#![no_main]

use agentwire_providers::fuzzing::openai_realtime_event;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(event) = openai_realtime_event(text) else {
        return;
    };
    assert!(!event.kind.is_empty());
    assert!(text.contains(event.kind) || text.contains('\\'), "{event:?}");
    if let Some(words) = &event.error {
        let rest = words
            .strip_prefix("provider error ")
            .expect("error words name the provider");
        assert!(
            rest.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-. ()".contains(c)),
            "{words:?}"
        );
        assert!(words.len() <= 15 + 64 + 3 + 64, "{words:?}");
    }
    assert!(event.audio_bytes <= text.len() / 4 * 3 + 3, "{event:?}");
});

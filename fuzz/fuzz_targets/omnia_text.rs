//! Omnia client text frames (`agentwire_omnia::decode_client_text`): no
//! input panics, and what is accepted is within the contract's limits.
#![no_main]

use agentwire_omnia::{ClientFrame, decode_client_text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let frame = decode_client_text(text);
    // Decoding is a function of the text.
    assert_eq!(
        format!("{frame:?}"),
        format!("{:?}", decode_client_text(text))
    );
    if let Ok(ClientFrame::Message(message)) = frame {
        assert!(message.content.is_some() || !message.parts.is_empty());
        assert!(message.content.as_deref() != Some(""));
        assert!(message.metadata.len() <= 32);
        let mut total = 0;
        for (key, value) in &message.metadata {
            assert!((1..=64).contains(&key.len()), "{key:?}");
            assert!(
                key.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
            );
            assert!(value.len() <= 8 * 1024);
            total += key.len() + value.len();
        }
        assert!(total <= 32 * 1024);
        if let Some(declare) = &message.declare {
            assert!(declare.get().len() <= 16 * 1024);
        }
    }
});

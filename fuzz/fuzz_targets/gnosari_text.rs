//! Gnosari client text frames (`agentwire_gnosari::decode_inbound`, the
//! `cancel` control frame and the attachment check): no input panics, and
//! what is accepted is within the dialect's limits.
#![no_main]

use agentwire_gnosari::{decode_cancel, decode_inbound};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = decode_cancel(text);
    let decoded = decode_inbound(text);
    assert_eq!(decoded, decode_inbound(text));
    let Ok(message) = decoded else {
        return;
    };
    assert!(!message.message.trim().is_empty());
    assert_ne!(message.session_id.as_deref(), Some(""));
    if let Some(id) = &message.client_message_id {
        assert!(!id.is_empty() && id.chars().count() <= 256);
    }
    assert!(message.metadata.len() <= 32);
    let total: usize = message
        .metadata
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    assert!(total <= 32 * 1024);
    for key in message.metadata.keys() {
        assert!((1..=64).contains(&key.chars().count()));
    }
    if let Ok(Some(_)) = message.check_attachments() {
        assert_eq!(message.attachments.len(), 1);
        assert!(message.session_id.is_some());
    }
});

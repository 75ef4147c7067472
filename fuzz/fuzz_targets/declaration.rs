//! Omnia's `declare` as the engine reads it (`Declaration::parse`), from
//! any JSON a client sends. No input panics; an accepted declaration's
//! handles are made of the names it holds, and no mount id can name a path.
#![no_main]

use agentwire_core::Declaration;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(declaration) = Declaration::parse(&value) else {
        return;
    };
    for (handle, sandbox) in &declaration.sandboxes {
        let rebuilt = match &sandbox.instance {
            Some(instance) => format!("{}/{instance}", sandbox.sandbox),
            None => sandbox.sandbox.clone(),
        };
        assert_eq!(&rebuilt, handle);
        for mount in &sandbox.mounts {
            assert!(!mount.id.contains('/') && !mount.id.starts_with('.'));
        }
    }
    assert_eq!(Declaration::parse(&value), Ok(declaration));
});

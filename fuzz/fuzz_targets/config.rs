//! The config loader (`agentwire::config::parse`: YAML, `${VAR}`
//! substitution, validation) on a text, with a fixed environment. No input
//! panics, and an error never shows a substituted secret.
//!
//! No file IO: a config may name files (`teams[].file`, a mock provider's
//! `mock_config`), which the loader reads. Inputs that could name one are
//! skipped: keys are never substituted, so a key `file` or `mock_config`
//! must be written in the text, directly or through a YAML escape.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The secret values of [`lookup`].
const SECRETS: [&str; 2] = ["sk-fuzz-0123456789", "hs256-fuzz-secret-0123456789abcdef"];

/// The environment `${VAR}` reads. No value can complete a key a file
/// would be named under.
fn lookup(name: &str) -> Option<String> {
    let value = match name {
        "HOME" => "/home/agentwire",
        "PORT" => "8080",
        "LISTEN" => "127.0.0.1:8080",
        "API_KEY" | "OPENAI_API_KEY" | "ANTHROPIC_API_KEY" => SECRETS[0],
        "JWT_SECRET" => SECRETS[1],
        "EMPTY" => "",
        "MULTILINE" => "a\nb: c\n- d",
        "QUOTE" => "\"'{}[],#&*!|>%@`",
        "NUMBER" => "-12.5e3",
        "BOOL" => "true",
        "NULL" => "null",
        _ => return None,
    };
    Some(value.to_owned())
}

/// As `main` does: the loader builds the providers' HTTP clients (without
/// connecting), which need one.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn names_a_file(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key == "file" || key == "mock_config" || names_a_file(value)),
        Value::Array(items) => items.iter().any(names_a_file),
        _ => false,
    }
}

/// Whether the loader could open a file for `text`.
fn may_read_a_file(text: &str) -> bool {
    if !(text.contains("file") || text.contains("mock_config") || text.contains('\\')) {
        // Neither key is written, nor can an escape spell one.
        return false;
    }
    if text.contains("${") {
        // The loader parses a masked text, whose keys could differ.
        return true;
    }
    match serde_saphyr::from_str::<Value>(text) {
        Ok(tree) => names_a_file(&tree),
        Err(_) => true,
    }
}

fuzz_target!(init: install_crypto_provider(), |data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if may_read_a_file(text) {
        return;
    }
    // An error shows a substituted secret as the reference written.
    if let Err(error) = agentwire::config::parse(text, lookup) {
        let shown = error.to_string();
        for secret in SECRETS {
            assert!(
                text.contains(secret) || !shown.contains(secret),
                "a substituted secret in an error: {shown}"
            );
        }
    }
});

//! Credentials for the identity tests of both dialects: an `auth:` block
//! with two API keys and an HS256 issuer, and the helpers that mint what it
//! accepts.

use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const SECRET: &str = "a-test-secret-of-at-least-32-bytes!!";
/// Alice's key admits her to every agent.
pub const ALICE_KEY: &str = "ak_alice_0123456789";
/// Bob's key admits him to `echo` only.
pub const BOB_KEY: &str = "ak_bob_0123456789";

pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An HS256 JWT with `claims`, signed with `secret`.
pub fn hs256(claims: &Value, secret: &str) -> String {
    let header = base64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = base64url(claims.to_string().as_bytes());
    let signing_input = format!("{header}.{payload}");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(signing_input.as_bytes());
    format!(
        "{signing_input}.{}",
        base64url(&mac.finalize().into_bytes())
    )
}

/// A valid token for `subject`, expiring `ttl_secs` from now.
pub fn token(subject: &str, ttl_secs: i64) -> String {
    hs256(
        &json!({"iss": "https://issuer.test", "aud": "agentwire", "sub": subject, "exp": now_secs() + ttl_secs}),
        SECRET,
    )
}

/// The `auth:` block that accepts [`ALICE_KEY`], [`BOB_KEY`] and
/// [`token`]s.
pub fn auth_yaml() -> String {
    format!(
        r#"
auth:
  pseudonym_key: "a-pseudonym-key-for-tests"
  api_keys:
    - id: alice-key
      sha256: "{}"
      subject: alice
    - id: bob-key
      sha256: "{}"
      subject: bob
      agents: [echo]
  jwt:
    issuer: https://issuer.test
    audience: agentwire
    hs256_secret: "{SECRET}"
    leeway: 0s
"#,
        sha256_hex(ALICE_KEY),
        sha256_hex(BOB_KEY)
    )
}

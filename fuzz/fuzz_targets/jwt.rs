//! JWT parsing and validation through the authenticator
//! (`agentwire_auth::build`, HS256), as a bearer and as a
//! `credential_refresh` token.
//!
//! The first byte picks the mode:
//! - even: the rest is the token, as sent.
//! - odd: the rest is `<header JSON>\n<claims JSON>`, encoded and signed
//!   with the configured secret, so the claim checks are reached.
//!
//! No input panics; an admitted token is a JWT identity with a subject and
//! an expiry, not yet expired, from the configured issuer.
#![no_main]

use std::sync::{Arc, OnceLock};

use agentwire_auth::{AuthSettings, JwtKeys, JwtSettings, Secret};
use agentwire_core::auth::{AgentAuth, Authenticator, Credentials, IdentityOrigin};
use agentwire_core::time::{Clock, Timestamp};
use agentwire_fuzz::block_on;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "fuzz-secret-fuzz-secret-fuzz-secret";
/// 2026-01-01T00:00:00Z.
const NOW: i64 = 1_767_225_600;

struct Fixed;

impl Clock for Fixed {
    fn now(&self) -> Timestamp {
        Timestamp(NOW * 1_000_000_000)
    }
}

fn authenticator() -> &'static dyn Authenticator {
    static AUTH: OnceLock<Arc<dyn Authenticator>> = OnceLock::new();
    AUTH.get_or_init(|| {
        let mut jwt = JwtSettings::new(
            "https://issuer.example",
            "agentwire",
            JwtKeys::Hs256Secret(Secret::new(SECRET)),
        );
        jwt.session_claim = Some("sid".to_owned());
        let settings = AuthSettings {
            api_keys: Vec::new(),
            jwt: Some(jwt),
        };
        agentwire_auth::build(settings, Arc::new(Fixed)).expect("HS256 settings")
    })
    .as_ref()
}

fn signed(header: &[u8], claims: &[u8]) -> String {
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
    let tag = ring::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let token = if mode & 1 == 0 {
        let Ok(token) = std::str::from_utf8(rest) else {
            return;
        };
        token.to_owned()
    } else {
        let split = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let (header, claims) = rest.split_at(split);
        signed(header, claims.get(1..).unwrap_or_default())
    };
    let auth = authenticator();
    let agent = AgentAuth {
        name: "agent",
        password_argon2: None,
    };
    let credentials = Credentials {
        bearer: Some(&token),
        api_key: None,
        password: None,
    };
    let bearer = block_on(auth.authenticate(&credentials, &agent));
    let refresh = block_on(auth.authenticate_refresh(&token));
    if let Ok(Some(identity)) = &bearer {
        assert_eq!(identity.origin, IdentityOrigin::Jwt);
        assert!(!identity.subject.is_empty());
        let expires = identity.expires_at.expect("a JWT identity expires");
        // Not expired, with the default leeway of 30 s.
        assert!(expires.0.saturating_add(30_000_000_000) > NOW * 1_000_000_000);
        assert_eq!(refresh.as_ref().ok(), Some(identity));
    }
});

//! The authenticator's settings: plain structs, filled by the binary from its
//! YAML configuration.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use agentwire_core::time::Timestamp;

/// The claim that names the subject unless the settings say otherwise.
pub const DEFAULT_SUBJECT_CLAIM: &str = "sub";
/// The claim that lists the resource ids a token grants (what its holder
/// may mount into a sandbox) unless the settings say otherwise.
pub const DEFAULT_GRANTS_CLAIM: &str = "projects";
/// The clock skew allowed on `exp` and `nbf` unless the settings say otherwise.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// The least time between two fetches of a JWKS unless the settings say
/// otherwise: a token naming an unknown `kid` refetches the key set at most
/// this often.
pub const DEFAULT_JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);

/// One configured API key. Only the key's SHA-256 digest is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyEntry {
    /// The key's id: logged, and carried in the identity's origin.
    pub id: String,
    /// SHA-256 of the key (see [`parse_sha256_hex`](crate::parse_sha256_hex)).
    pub sha256: [u8; 32],
    /// The subject the key authenticates.
    pub subject: String,
    /// The agents the key may use; `None` is every agent.
    pub agents: Option<Vec<String>>,
    /// When the key stops being accepted.
    pub expires_at: Option<Timestamp>,
    /// The resource ids the key grants ([`Identity::grants`]).
    ///
    /// [`Identity::grants`]: agentwire_core::Identity::grants
    pub grants: Vec<String>,
}

/// A secret string whose `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(secret: impl Into<String>) -> Secret {
        Secret(secret.into())
    }

    /// The secret itself; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<String> for Secret {
    fn from(secret: String) -> Secret {
        Secret(secret)
    }
}

impl From<&str> for Secret {
    fn from(secret: &str) -> Secret {
        Secret(secret.to_owned())
    }
}

/// Where the keys that verify JWTs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtKeys {
    /// HS256 with this shared secret (at least 32 bytes). Only HS256 tokens
    /// are accepted.
    Hs256Secret(Secret),
    /// A JWKS file, read once when the authenticator is built.
    JwksFile(PathBuf),
    /// A JWKS served at this URL, fetched when first needed and cached.
    JwksUrl(String),
    /// The issuer URL: its `<issuer>/.well-known/openid-configuration` names
    /// the `jwks_uri`, fetched when first needed and cached.
    OidcDiscovery(String),
}

/// JWT validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud` (a string, or one of an array).
    pub audience: String,
    pub keys: JwtKeys,
    /// The string claim that names the subject; [`DEFAULT_SUBJECT_CLAIM`].
    pub subject_claim: String,
    /// Clock skew allowed on `exp` and `nbf`; [`DEFAULT_LEEWAY`].
    pub leeway: Duration,
    /// A string claim copied into `Identity::session_claim` (session binding).
    pub session_claim: Option<String>,
    /// The least time between two JWKS fetches; [`DEFAULT_JWKS_MIN_REFRESH`].
    pub jwks_min_refresh: Duration,
    /// The claim listing the resource ids the token grants
    /// ([`Identity::grants`]): a JSON array of strings, or one string of
    /// ids separated by spaces; [`DEFAULT_GRANTS_CLAIM`].
    ///
    /// [`Identity::grants`]: agentwire_core::Identity::grants
    pub grants_claim: String,
}

impl JwtSettings {
    /// Settings with the defaults for everything but the issuer, audience and keys.
    pub fn new(
        issuer: impl Into<String>,
        audience: impl Into<String>,
        keys: JwtKeys,
    ) -> JwtSettings {
        JwtSettings {
            issuer: issuer.into(),
            audience: audience.into(),
            keys,
            subject_claim: DEFAULT_SUBJECT_CLAIM.to_owned(),
            leeway: DEFAULT_LEEWAY,
            session_claim: None,
            jwks_min_refresh: DEFAULT_JWKS_MIN_REFRESH,
            grants_claim: DEFAULT_GRANTS_CLAIM.to_owned(),
        }
    }
}

/// Everything the authenticator accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthSettings {
    pub api_keys: Vec<ApiKeyEntry>,
    pub jwt: Option<JwtSettings>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug() {
        let keys = JwtKeys::Hs256Secret(Secret::new("hunter2-hunter2-hunter2-hunter2-x"));
        let shown = format!("{keys:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("redacted"));
    }

    #[test]
    fn jwt_defaults() {
        let s = JwtSettings::new("iss", "aud", JwtKeys::JwksUrl("https://x".into()));
        assert_eq!(s.subject_claim, "sub");
        assert_eq!(s.leeway, Duration::from_secs(30));
        assert_eq!(s.jwks_min_refresh, Duration::from_secs(30));
        assert_eq!(s.session_claim, None);
        assert_eq!(s.grants_claim, "projects");
    }
}

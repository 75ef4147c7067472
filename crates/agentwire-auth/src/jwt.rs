//! JWT validation (RFC 7519 / JWS compact serialisation, RFC 7515).

use std::sync::Arc;
use std::time::Duration;

use agentwire_core::auth::{AuthError, Identity, IdentityOrigin};
use agentwire_core::time::{Clock, Timestamp};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::jwk::{Alg, Jwk};
use crate::jwks::Jwks;
use crate::settings::{JwtKeys, JwtSettings};

/// A bearer longer than this is not taken for a JWT.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// RFC 7518 §3.2: an HS256 key must be at least as long as the hash.
const MIN_HMAC_SECRET_BYTES: usize = 32;

/// A compact JWS split into its parts, the header decoded.
struct Token<'a> {
    header: Header,
    /// `<header>.<payload>`, what the signature covers.
    signing_input: &'a str,
    payload: &'a str,
    signature: &'a str,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    kid: Option<String>,
    /// Extensions we would have to understand; none are.
    crit: Option<Value>,
}

fn is_base64url(segment: &str) -> bool {
    segment
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Splits `token` if it is three dot-separated base64url segments whose
/// header decodes to a JSON object. Anything else is not a JWT (and so,
/// for a bearer, an API key). An empty signature still counts, so an
/// unsigned (`alg: none`) token is refused as a JWT rather than looked up
/// as a key.
fn split(token: &str) -> Option<Result<Token<'_>, AuthError>> {
    if token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let mut parts = token.split('.');
    let (header, payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || header.is_empty()
        || ![header, payload, signature].into_iter().all(is_base64url)
    {
        return None;
    }
    let header_json = URL_SAFE_NO_PAD.decode(header).ok()?;
    let header_object: Map<String, Value> = serde_json::from_slice(&header_json).ok()?;
    let signing_input = &token[..header.len() + 1 + payload.len()];
    Some(
        serde_json::from_value::<Header>(Value::Object(header_object))
            .map_err(|_| AuthError::Malformed)
            .map(|header| Token {
                header,
                signing_input,
                payload,
                signature,
            }),
    )
}

/// Whether `token` is shaped like a JWT (see [`split`]).
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    split(token).is_some()
}

enum Keys {
    Hmac(hmac::Key),
    Jwks(Jwks),
}

pub(crate) struct JwtValidator {
    issuer: String,
    audience: String,
    subject_claim: String,
    session_claim: Option<String>,
    grants_claim: String,
    leeway: Duration,
    keys: Keys,
    clock: Arc<dyn Clock>,
}

impl JwtValidator {
    pub(crate) fn new(
        settings: JwtSettings,
        clock: Arc<dyn Clock>,
    ) -> Result<JwtValidator, String> {
        if settings.issuer.is_empty() {
            return Err("the JWT issuer is empty".to_owned());
        }
        if settings.audience.is_empty() {
            return Err("the JWT audience is empty".to_owned());
        }
        if settings.subject_claim.is_empty() {
            return Err("the JWT subject claim is empty".to_owned());
        }
        if settings.session_claim.as_deref() == Some("") {
            return Err("the JWT session claim is empty".to_owned());
        }
        if settings.grants_claim.is_empty() {
            return Err("the JWT grants claim is empty".to_owned());
        }
        let issuer = &settings.issuer;
        let min_refresh = settings.jwks_min_refresh;
        let keys = match &settings.keys {
            JwtKeys::Hs256Secret(secret) => {
                if secret.expose().len() < MIN_HMAC_SECRET_BYTES {
                    return Err(format!(
                        "the JWT HS256 secret must be at least {MIN_HMAC_SECRET_BYTES} bytes"
                    ));
                }
                Keys::Hmac(hmac::Key::new(
                    hmac::HMAC_SHA256,
                    secret.expose().as_bytes(),
                ))
            }
            JwtKeys::JwksFile(path) => Keys::Jwks(Jwks::from_file(path, issuer)?),
            JwtKeys::JwksUrl(url) => Keys::Jwks(Jwks::from_url(url, issuer, min_refresh)?),
            JwtKeys::OidcDiscovery(discovery) => {
                Keys::Jwks(Jwks::from_discovery(discovery, issuer, min_refresh)?)
            }
        };
        Ok(JwtValidator {
            issuer: settings.issuer,
            audience: settings.audience,
            subject_claim: settings.subject_claim,
            session_claim: settings.session_claim,
            grants_claim: settings.grants_claim,
            leeway: settings.leeway,
            keys,
            clock,
        })
    }

    /// Validates `token`; the caller has seen that it [`looks_like_jwt`].
    pub(crate) async fn validate(&self, token: &str) -> Result<Identity, AuthError> {
        let result = self.validate_inner(token).await;
        match &result {
            Ok(_) => tracing::debug!(issuer = %self.issuer, "JWT admitted"),
            Err(e) => tracing::debug!(issuer = %self.issuer, reason = %e, "JWT refused"),
        }
        result
    }

    async fn validate_inner(&self, token: &str) -> Result<Identity, AuthError> {
        let token = split(token).ok_or(AuthError::Malformed)??;
        if token.header.crit.is_some() {
            return Err(AuthError::Rejected("unsupported critical header"));
        }
        if token.header.alg == "none" {
            return Err(AuthError::Rejected("unsigned token (alg none)"));
        }
        let alg =
            Alg::parse(&token.header.alg).ok_or(AuthError::Rejected("unsupported algorithm"))?;
        let signature = URL_SAFE_NO_PAD
            .decode(token.signature)
            .map_err(|_| AuthError::Malformed)?;
        let message = token.signing_input.as_bytes();
        match &self.keys {
            Keys::Hmac(key) => {
                if alg != Alg::Hs256 {
                    return Err(AuthError::Rejected("algorithm not allowed"));
                }
                hmac::verify(key, message, &signature).map_err(|_| AuthError::BadSignature)?;
            }
            Keys::Jwks(jwks) => {
                if alg == Alg::Hs256 {
                    // Never HMAC with a public key as the secret.
                    return Err(AuthError::Rejected("algorithm not allowed"));
                }
                let kid = token.header.kid.as_deref();
                let keys = jwks.keys_for(kid).await?;
                verify_with(&keys, kid, alg, message, &signature).inspect_err(|_| {
                    tracing::debug!(issuer = %self.issuer, kid = ?kid, "JWT signature check failed");
                })?;
            }
        }
        let payload = URL_SAFE_NO_PAD
            .decode(token.payload)
            .map_err(|_| AuthError::Malformed)?;
        let claims: Map<String, Value> =
            serde_json::from_slice(&payload).map_err(|_| AuthError::Malformed)?;
        self.check_claims(&claims)
    }

    fn check_claims(&self, claims: &Map<String, Value>) -> Result<Identity, AuthError> {
        let now = self.clock.now();
        let leeway = i64::try_from(self.leeway.as_nanos()).unwrap_or(i64::MAX);
        let exp = numeric_date(claims.get("exp"))?.ok_or(AuthError::Rejected("no exp claim"))?;
        if now.0 >= exp.0.saturating_add(leeway) {
            return Err(AuthError::Expired);
        }
        if let Some(nbf) = numeric_date(claims.get("nbf"))?
            && nbf.0 > now.0.saturating_add(leeway)
        {
            return Err(AuthError::NotYetValid);
        }
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(AuthError::Rejected("wrong issuer"));
        }
        let audience_ok = match claims.get("aud") {
            Some(Value::String(aud)) => *aud == self.audience,
            Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(&self.audience)),
            _ => false,
        };
        if !audience_ok {
            return Err(AuthError::Rejected("wrong audience"));
        }
        let subject = claims
            .get(&self.subject_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(AuthError::Rejected("no subject claim"))?;
        let session_claim = match &self.session_claim {
            None => None,
            Some(name) => match claims.get(name) {
                None | Some(Value::Null) => None,
                Some(Value::String(value)) => Some(value.clone()),
                Some(_) => return Err(AuthError::Rejected("session claim not a string")),
            },
        };
        Ok(Identity {
            subject: subject.to_owned(),
            origin: IdentityOrigin::Jwt,
            expires_at: Some(exp),
            session_claim,
            allowed_agents: None,
            grants: self.grants(claims),
        })
    }

    /// The ids the grants claim lists: a JSON array of strings, or one
    /// string of ids separated by spaces (as OAuth's `scope`). Anything
    /// else grants nothing; the token is still admitted, and only the
    /// claim's name and the shape found are logged.
    fn grants(&self, claims: &Map<String, Value>) -> Vec<String> {
        match claims.get(&self.grants_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(ids)) => ids.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(ids)) => match ids
                .iter()
                .map(|id| id.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
            {
                Some(ids) => ids,
                None => {
                    tracing::warn!(claim = %self.grants_claim, "JWT grants claim has a non-string item: no grants");
                    Vec::new()
                }
            },
            Some(other) => {
                let shape = match other {
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    _ => "an object",
                };
                tracing::warn!(claim = %self.grants_claim, shape, "JWT grants claim is not a list of strings: no grants");
                Vec::new()
            }
        }
    }
}

/// Verifies with the key named `kid` (or, without a `kid`, any key of the
/// algorithm's type). The key's type must be the token's algorithm.
fn verify_with(
    keys: &[Jwk],
    kid: Option<&str>,
    alg: Alg,
    message: &[u8],
    signature: &[u8],
) -> Result<(), AuthError> {
    let named: Vec<&Jwk> = match kid {
        Some(kid) => {
            let named: Vec<&Jwk> = keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .collect();
            if named.is_empty() {
                return Err(AuthError::Rejected("unknown key id"));
            }
            named
        }
        None => keys.iter().collect(),
    };
    let mut candidates = named.into_iter().filter(|k| k.key.alg() == alg).peekable();
    if candidates.peek().is_none() {
        return Err(AuthError::Rejected("algorithm does not match the key"));
    }
    if candidates.any(|k| k.key.verify(message, signature)) {
        Ok(())
    } else {
        Err(AuthError::BadSignature)
    }
}

/// A NumericDate claim (seconds since the epoch, possibly fractional).
fn numeric_date(value: Option<&Value>) -> Result<Option<Timestamp>, AuthError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let Value::Number(number) = value else {
        return Err(AuthError::Malformed);
    };
    if let Some(seconds) = number.as_i64() {
        return Ok(Some(Timestamp(seconds.saturating_mul(1_000_000_000))));
    }
    match number.as_f64() {
        // `as` saturates: out-of-range dates clamp to the ends of time.
        Some(seconds) if seconds.is_finite() => Ok(Some(Timestamp((seconds * 1e9) as i64))),
        _ => Err(AuthError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(value: &Value) -> String {
        URL_SAFE_NO_PAD.encode(value.to_string())
    }

    struct FixedClock(Timestamp);
    impl Clock for FixedClock {
        fn now(&self) -> Timestamp {
            self.0
        }
    }

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn validator(session_claim: Option<&str>) -> JwtValidator {
        let mut settings = JwtSettings::new("iss", "aud", JwtKeys::Hs256Secret(SECRET.into()));
        settings.session_claim = session_claim.map(str::to_owned);
        settings.leeway = Duration::from_secs(10);
        JwtValidator::new(
            settings,
            Arc::new(FixedClock(Timestamp(1_000 * 1_000_000_000))),
        )
        .unwrap()
    }

    fn sign(header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", enc(header), enc(claims));
        let key = hmac::Key::new(hmac::HMAC_SHA256, SECRET.as_bytes());
        let tag = hmac::sign(&key, input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    fn hs(claims: Value) -> String {
        sign(&json!({"alg": "HS256", "typ": "JWT"}), &claims)
    }

    #[test]
    fn jwt_shape_detection() {
        let token = hs(json!({"exp": 1}));
        assert!(looks_like_jwt(&token));
        let unsigned = format!("{}.{}.", enc(&json!({"alg": "none"})), enc(&json!({})));
        assert!(looks_like_jwt(&unsigned));
        assert!(!looks_like_jwt("sk-live-abcdef"));
        assert!(!looks_like_jwt("a.b.c"), "header must decode as JSON");
        assert!(!looks_like_jwt(&format!(
            "{}.e30",
            enc(&json!({"alg": "HS256"}))
        )));
        assert!(!looks_like_jwt(&format!("{token}.x")));
        assert!(!looks_like_jwt(&format!("{}==.e30.e30", enc(&json!({})))));
        assert!(!looks_like_jwt(&format!(
            "{}.e30.e30",
            URL_SAFE_NO_PAD.encode("[1]")
        )));
        assert!(!looks_like_jwt(&format!(
            "{}.e30.{}",
            enc(&json!({})),
            "x".repeat(MAX_TOKEN_BYTES)
        )));
        // Shaped like a JWT, but the header has no alg: a malformed JWT.
        assert!(looks_like_jwt(&format!(
            "{}.e30.e30",
            enc(&json!({"typ": "JWT"}))
        )));
    }

    #[tokio::test]
    async fn claims_are_checked_with_leeway() {
        let v = validator(Some("sid"));
        let ok = json!({"iss": "iss", "aud": ["other", "aud"], "sub": "alice", "exp": 1_005, "nbf": 1_005, "sid": "s-1"});
        let id = v.validate(&hs(ok)).await.unwrap();
        assert_eq!(id.subject, "alice");
        assert_eq!(id.origin, IdentityOrigin::Jwt);
        assert_eq!(id.expires_at, Some(Timestamp(1_005 * 1_000_000_000)));
        assert_eq!(id.session_claim.as_deref(), Some("s-1"));
        assert_eq!(id.allowed_agents, None);

        let base = json!({"iss": "iss", "aud": "aud", "sub": "alice", "exp": 2_000});
        let with = |key: &str, value: Value| {
            let mut claims = base.clone();
            claims[key] = value;
            hs(claims)
        };
        // Within the 10 s leeway.
        assert!(v.validate(&with("exp", json!(991))).await.is_ok());
        assert!(v.validate(&with("exp", json!(990.5))).await.is_ok());
        assert_eq!(
            v.validate(&with("exp", json!(990))).await,
            Err(AuthError::Expired)
        );
        assert!(v.validate(&with("nbf", json!(1_010))).await.is_ok());
        assert_eq!(
            v.validate(&with("nbf", json!(1_011))).await,
            Err(AuthError::NotYetValid)
        );
        assert_eq!(
            v.validate(&with("exp", json!("soon"))).await,
            Err(AuthError::Malformed)
        );
        assert_eq!(
            v.validate(&with("iss", json!("x"))).await,
            Err(AuthError::Rejected("wrong issuer"))
        );
        assert_eq!(
            v.validate(&with("aud", json!(["x"]))).await,
            Err(AuthError::Rejected("wrong audience"))
        );
        assert_eq!(
            v.validate(&with("aud", json!(null))).await,
            Err(AuthError::Rejected("wrong audience"))
        );
        assert_eq!(
            v.validate(&with("sub", json!(7))).await,
            Err(AuthError::Rejected("no subject claim"))
        );
        assert_eq!(
            v.validate(&with("sub", json!(""))).await,
            Err(AuthError::Rejected("no subject claim"))
        );
        assert_eq!(
            v.validate(&with("sid", json!(1))).await,
            Err(AuthError::Rejected("session claim not a string"))
        );
        assert_eq!(
            v.validate(&hs(base.clone())).await.unwrap().session_claim,
            None
        );
        let mut no_exp = base.clone();
        no_exp.as_object_mut().unwrap().remove("exp");
        assert_eq!(
            v.validate(&hs(no_exp)).await,
            Err(AuthError::Rejected("no exp claim"))
        );
        // Claims that are not an object.
        assert_eq!(v.validate(&hs(json!([1]))).await, Err(AuthError::Malformed));
    }

    #[tokio::test]
    async fn headers_and_signatures() {
        let v = validator(None);
        let claims = json!({"iss": "iss", "aud": "aud", "sub": "alice", "exp": 2_000});
        let token = hs(claims.clone());
        // A flipped signature bit.
        let mut tampered = token.clone().into_bytes();
        let last = tampered.len() - 2;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(v.validate(&tampered).await, Err(AuthError::BadSignature));
        // Another payload under the original signature.
        let (_, sig) = token.rsplit_once('.').unwrap();
        let forged = format!(
            "{}.{}.{sig}",
            enc(&json!({"alg": "HS256"})),
            enc(&json!({"iss": "iss", "aud": "aud", "sub": "mallory", "exp": 2_000}))
        );
        assert_eq!(v.validate(&forged).await, Err(AuthError::BadSignature));
        let none = format!("{}.{}.", enc(&json!({"alg": "none"})), enc(&claims));
        assert_eq!(
            v.validate(&none).await,
            Err(AuthError::Rejected("unsigned token (alg none)"))
        );
        let hs512 = sign(&json!({"alg": "HS512"}), &claims);
        assert_eq!(
            v.validate(&hs512).await,
            Err(AuthError::Rejected("unsupported algorithm"))
        );
        let rs = sign(&json!({"alg": "RS256"}), &claims);
        assert_eq!(
            v.validate(&rs).await,
            Err(AuthError::Rejected("algorithm not allowed"))
        );
        let crit = sign(
            &json!({"alg": "HS256", "crit": ["b64"], "b64": false}),
            &claims,
        );
        assert_eq!(
            v.validate(&crit).await,
            Err(AuthError::Rejected("unsupported critical header"))
        );
        let no_alg = sign(&json!({"typ": "JWT"}), &claims);
        assert_eq!(v.validate(&no_alg).await, Err(AuthError::Malformed));
    }

    #[test]
    fn short_secrets_and_empty_settings_are_refused() {
        let clock: Arc<dyn Clock> = Arc::new(FixedClock(Timestamp(0)));
        let short = JwtSettings::new("iss", "aud", JwtKeys::Hs256Secret("short-secret".into()));
        let err = JwtValidator::new(short, clock.clone()).err().unwrap();
        assert!(
            err.contains("at least 32 bytes") && !err.contains("short-secret"),
            "{err}"
        );
        let empty_iss = JwtSettings::new("", "aud", JwtKeys::Hs256Secret(SECRET.into()));
        assert!(JwtValidator::new(empty_iss, clock.clone()).is_err());
        let bad_url = JwtSettings::new("iss", "aud", JwtKeys::JwksUrl("ftp://x/y".into()));
        assert!(JwtValidator::new(bad_url, clock.clone()).is_err());
        let bad_issuer_url = JwtSettings::new("iss", "aud", JwtKeys::OidcDiscovery("idp".into()));
        assert!(JwtValidator::new(bad_issuer_url, clock).is_err());
    }

    #[test]
    fn numeric_dates() {
        assert_eq!(numeric_date(None), Ok(None));
        assert_eq!(
            numeric_date(Some(&json!(1))),
            Ok(Some(Timestamp(1_000_000_000)))
        );
        assert_eq!(
            numeric_date(Some(&json!(1.5))),
            Ok(Some(Timestamp(1_500_000_000)))
        );
        assert_eq!(
            numeric_date(Some(&json!(i64::MAX))),
            Ok(Some(Timestamp(i64::MAX)))
        );
        assert_eq!(
            numeric_date(Some(&json!(1e300))),
            Ok(Some(Timestamp(i64::MAX)))
        );
        assert_eq!(
            numeric_date(Some(&json!(u64::MAX))),
            Ok(Some(Timestamp(i64::MAX)))
        );
        assert_eq!(numeric_date(Some(&json!("1"))), Err(AuthError::Malformed));
    }
}

//! `auth.*` and the access fields of `agents[]`.

use agentwire_auth::{ApiKeyEntry, AuthSettings, JwtKeys, JwtSettings, Secret};
use agentwire_core::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// Identity settings: the validators and the pseudonym key.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    pub settings: AuthSettings,
    /// Keys owner pseudonyms. Debug shows only whether it is set.
    pub pseudonym_key: Option<Secret>,
}

impl AuthConfig {
    /// Any validator configured.
    pub fn is_configured(&self) -> bool {
        !self.settings.api_keys.is_empty() || self.settings.jwt.is_some()
    }
}

/// `auth`: who callers are. With any validator configured,
/// `server.allow_unauthenticated` defaults to false and agents to private.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// API keys, checked by their SHA-256 (on `/ws` as `Authorization: Bearer`;
    /// on the Gnosari endpoints also `X-AUTH-TOKEN` or `?api_key=`).
    #[serde(default)]
    api_keys: Vec<RawApiKey>,
    /// JWT validation: issuer, audience and exactly one key source.
    jwt: Option<RawJwt>,
    /// The key of the owner pseudonyms (HMAC-SHA-256 of subject and session
    /// claim); at least 16 characters; keep it stable, or sessions lose
    /// their owners. Default: none (pseudonyms are then an unkeyed
    /// SHA-256). A secret: use `${VAR}`.
    pseudonym_key: Option<String>,
}

/// One API key of `auth.api_keys`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawApiKey {
    /// Names the key in logs; unique. The key itself is never stored.
    id: String,
    /// The SHA-256 hex of the key (`echo -n "$KEY" | agentwire hash-key`).
    sha256: String,
    /// Who the key speaks for: the subject its sessions are owned by.
    subject: String,
    /// The agents the key may use; others answer 403. Default: every agent.
    agents: Option<Vec<String>>,
    /// When the key stops working, RFC 3339 UTC (`2027-01-01T00:00:00Z`).
    /// Default: never.
    expires_at: Option<String>,
    /// The resource ids the key grants: the project ids (or other mount
    /// ids) its holder may mount into a sandbox whose mount role has
    /// `authorize: grants`. Default: none.
    #[serde(default)]
    grants: Vec<String>,
}

/// `auth.jwt`: JWTs checked for `iss`, `aud`, `exp` and `nbf`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    /// The required `iss` claim.
    issuer: String,
    /// The required `aud` claim.
    audience: String,
    /// Key source: an HS256 shared secret. A secret: use `${VAR}`.
    hs256_secret: Option<String>,
    /// Key source: a JWKS JSON file on disk.
    jwks_file: Option<String>,
    /// Key source: a JWKS URL (cached; refetched on an unknown `kid` at most
    /// every 30 s).
    jwks_url: Option<String>,
    /// Key source: an OIDC issuer URL whose discovery document names the JWKS.
    oidc_discovery: Option<String>,
    /// The claim that names the subject. Default: `sub`.
    subject_claim: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`. Default: `30s`.
    leeway: Option<ConfigDuration>,
    /// A claim whose value binds sessions: a session resumes only under the
    /// same value. Default: none.
    session_claim: Option<String>,
    /// The claim listing the resource ids the token grants: the project
    /// ids (or other mount ids) its holder may mount into a sandbox whose
    /// mount role has `authorize: grants`. A JSON array of strings, or one
    /// string of ids separated by spaces; any other value grants nothing.
    /// Default: `projects`.
    grants_claim: Option<String>,
}

pub(super) fn validate(raw: Option<RawAuth>) -> Result<AuthConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(AuthConfig::default());
    };
    let mut api_keys = Vec::with_capacity(raw.api_keys.len());
    for (i, key) in raw.api_keys.into_iter().enumerate() {
        let at = |field: &str| format!("auth.api_keys[{i}].{field}");
        if key.id.is_empty() {
            return Err(ConfigError::new(at("id"), "must not be empty"));
        }
        if api_keys.iter().any(|k: &ApiKeyEntry| k.id == key.id) {
            return Err(ConfigError::new(
                at("id"),
                format!("duplicate key id {:?}", key.id),
            ));
        }
        let sha256 = agentwire_auth::parse_sha256_hex(&key.sha256)
            .map_err(|e| ConfigError::new(at("sha256"), e))?;
        if key.subject.is_empty() {
            return Err(ConfigError::new(at("subject"), "must not be empty"));
        }
        let expires_at = key
            .expires_at
            .as_deref()
            .map(|text| {
                parse_rfc3339(text).ok_or_else(|| {
                    ConfigError::new(
                        at("expires_at"),
                        "expected RFC 3339 UTC, such as 2027-01-01T00:00:00Z",
                    )
                })
            })
            .transpose()?;
        api_keys.push(ApiKeyEntry {
            id: key.id,
            sha256,
            subject: key.subject,
            agents: key.agents,
            expires_at,
            grants: key.grants,
        });
    }
    let jwt = raw.jwt.map(validate_jwt).transpose()?;
    let pseudonym_key = match raw.pseudonym_key {
        Some(key) if key.len() < 16 => {
            return Err(ConfigError::new(
                "auth.pseudonym_key",
                "at least 16 characters",
            ));
        }
        other => other.map(Secret::new),
    };
    Ok(AuthConfig {
        settings: AuthSettings { api_keys, jwt },
        pseudonym_key,
    })
}

fn validate_jwt(raw: RawJwt) -> Result<JwtSettings, ConfigError> {
    let sources = [
        raw.hs256_secret
            .map(|s| JwtKeys::Hs256Secret(Secret::new(s))),
        raw.jwks_file.map(|f| JwtKeys::JwksFile(f.into())),
        raw.jwks_url.map(JwtKeys::JwksUrl),
        raw.oidc_discovery.map(JwtKeys::OidcDiscovery),
    ];
    let mut given = sources.into_iter().flatten();
    let (Some(keys), None) = (given.next(), given.next()) else {
        return Err(ConfigError::new(
            "auth.jwt",
            "exactly one of hs256_secret, jwks_file, jwks_url or oidc_discovery",
        ));
    };
    if raw.issuer.is_empty() {
        return Err(ConfigError::new("auth.jwt.issuer", "must not be empty"));
    }
    if raw.audience.is_empty() {
        return Err(ConfigError::new("auth.jwt.audience", "must not be empty"));
    }
    let mut settings = JwtSettings::new(raw.issuer, raw.audience, keys);
    if let Some(claim) = raw.subject_claim {
        settings.subject_claim = claim;
    }
    if let Some(leeway) = raw.leeway {
        settings.leeway = leeway.0;
    }
    settings.session_claim = raw.session_claim;
    if let Some(claim) = raw.grants_claim {
        if claim.is_empty() {
            return Err(ConfigError::new(
                "auth.jwt.grants_claim",
                "must not be empty",
            ));
        }
        settings.grants_claim = claim;
    }
    Ok(settings)
}

/// `YYYY-MM-DDTHH:MM:SSZ`, UTC only.
fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(Timestamp::from_unix_millis(
        (days * 86_400 + hour * 3600 + minute * 60 + second) * 1000,
    ))
}

/// An agent's access fields, as written.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawAccessLevel {
    Public,
    Private,
}

/// `memory_facet`: 1 to 128 of `A-Z a-z 0-9 . _ : / -`, starting alphanumeric.
pub(super) fn valid_memory_facet(facet: &str) -> bool {
    let b = facet.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'/' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(Timestamp(0)));
        assert_eq!(
            parse_rfc3339("2027-01-01T00:00:00Z").map(|t| t.unix_millis()),
            Some(1_798_761_600_000)
        );
        assert_eq!(parse_rfc3339("2027-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2027-01-01 00:00:00"), None);
    }
}

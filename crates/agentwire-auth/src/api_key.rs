//! API keys: opaque strings, known only by their SHA-256 digests.

use std::collections::HashSet;

use agentwire_core::auth::{AuthError, Identity, IdentityOrigin};
use agentwire_core::time::Timestamp;
use ring::digest;
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::settings::ApiKeyEntry;

/// SHA-256 of `key`, as 64 lowercase hex digits (what `agentwire hash-key` prints).
pub fn sha256_hex(key: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = digest::digest(&digest::SHA256, key.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest.as_ref() {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// Parses a SHA-256 digest written as 64 hex digits (either case). The error
/// never repeats the input, in case a raw key was pasted by mistake.
pub fn parse_sha256_hex(hex: &str) -> Result<[u8; 32], String> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return Err(format!(
            "expected a SHA-256 digest as 64 hexadecimal digits, got {} characters",
            hex.chars().count()
        ));
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(high), Some(low)) => *byte = (high << 4) | low,
            _ => {
                return Err(
                    "expected a SHA-256 digest as 64 hexadecimal digits, found a non-hex character"
                        .to_owned(),
                );
            }
        }
    }
    Ok(out)
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The configured keys.
pub(crate) struct ApiKeys {
    entries: Vec<ApiKeyEntry>,
}

impl ApiKeys {
    pub(crate) fn new(entries: Vec<ApiKeyEntry>) -> Result<ApiKeys, String> {
        let mut ids = HashSet::new();
        let mut digests = HashSet::new();
        for entry in &entries {
            if entry.id.is_empty() {
                return Err("an API key has an empty id".to_owned());
            }
            if !ids.insert(entry.id.as_str()) {
                return Err(format!("API key id `{}` is used twice", entry.id));
            }
            if entry.subject.is_empty() {
                return Err(format!("API key `{}` has an empty subject", entry.id));
            }
            if !digests.insert(entry.sha256) {
                return Err(format!(
                    "API key `{}` has the same digest as another key",
                    entry.id
                ));
            }
        }
        Ok(ApiKeys { entries })
    }

    /// Admits `key` if its digest is configured and unexpired. Every digest
    /// is compared, in constant time, whatever matches.
    pub(crate) fn check(&self, key: &str, now: Timestamp) -> Result<Identity, AuthError> {
        let digest = digest::digest(&digest::SHA256, key.as_bytes());
        let digest = digest.as_ref();
        // 1 + the index of the matching entry; 0 is none.
        let mut found = 0u64;
        for (index, entry) in (1u64..).zip(&self.entries) {
            let equal = digest.ct_eq(&entry.sha256[..]);
            found.conditional_assign(&index, equal);
        }
        let Some(entry) = usize::try_from(found)
            .ok()
            .and_then(|found| found.checked_sub(1))
            .and_then(|index| self.entries.get(index))
        else {
            tracing::debug!("API key refused: unknown key");
            return Err(AuthError::Rejected("unknown API key"));
        };
        if entry.expires_at.is_some_and(|expires| expires <= now) {
            tracing::debug!(key_id = %entry.id, "API key refused: expired");
            return Err(AuthError::Expired);
        }
        tracing::debug!(key_id = %entry.id, "API key admitted");
        Ok(Identity {
            subject: entry.subject.clone(),
            origin: IdentityOrigin::ApiKey {
                key_id: entry.id.clone(),
            },
            expires_at: entry.expires_at,
            session_claim: None,
            allowed_agents: entry.agents.clone(),
            grants: entry.grants.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, key: &str) -> ApiKeyEntry {
        ApiKeyEntry {
            id: id.into(),
            sha256: parse_sha256_hex(&sha256_hex(key)).unwrap(),
            subject: format!("subject-{id}"),
            agents: None,
            expires_at: None,
            grants: Vec::new(),
        }
    }

    #[test]
    fn sha256_hex_matches_a_known_vector() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parse_accepts_either_case_and_round_trips() {
        let lower = sha256_hex("key");
        let upper = lower.to_uppercase();
        assert_eq!(
            parse_sha256_hex(&lower).unwrap(),
            parse_sha256_hex(&upper).unwrap()
        );
        assert_eq!(
            parse_sha256_hex(&format!(" {lower}\n")).unwrap(),
            parse_sha256_hex(&lower).unwrap()
        );
    }

    #[test]
    fn parse_refuses_bad_input_without_echoing_it() {
        let raw_key = "sk-live-this-is-not-a-digest";
        let err = parse_sha256_hex(raw_key).unwrap_err();
        assert!(!err.contains(raw_key), "{err}");
        let bad = format!("{}zz", &sha256_hex("k")[..62]);
        let err = parse_sha256_hex(&bad).unwrap_err();
        assert!(err.contains("non-hex"), "{err}");
        assert!(!err.contains(&bad));
        // 64 bytes but not 64 ASCII characters.
        let err = parse_sha256_hex(&"é".repeat(32)).unwrap_err();
        assert!(err.contains("non-hex"), "{err}");
        let err = parse_sha256_hex("abc").unwrap_err();
        assert!(err.contains("got 3 characters"), "{err}");
    }

    #[test]
    fn matches_the_right_entry_among_many() {
        let keys = ApiKeys::new(vec![
            entry("a", "key-a"),
            entry("b", "key-b"),
            entry("c", "key-c"),
        ])
        .unwrap();
        let id = keys.check("key-b", Timestamp(0)).unwrap();
        assert_eq!(id.origin, IdentityOrigin::ApiKey { key_id: "b".into() });
        assert_eq!(id.subject, "subject-b");
        assert_eq!(
            keys.check("key-d", Timestamp(0)),
            Err(AuthError::Rejected("unknown API key"))
        );
        let empty = ApiKeys::new(vec![]).unwrap();
        assert_eq!(
            empty.check("key-a", Timestamp(0)),
            Err(AuthError::Rejected("unknown API key"))
        );
    }

    #[test]
    fn expiry_is_inclusive() {
        let mut e = entry("a", "key-a");
        e.expires_at = Some(Timestamp(100));
        let keys = ApiKeys::new(vec![e]).unwrap();
        assert!(keys.check("key-a", Timestamp(99)).is_ok());
        assert_eq!(keys.check("key-a", Timestamp(100)), Err(AuthError::Expired));
    }

    #[test]
    fn configuration_errors() {
        assert!(
            ApiKeys::new(vec![entry("a", "k1"), entry("a", "k2")])
                .err()
                .unwrap()
                .contains("used twice")
        );
        assert!(
            ApiKeys::new(vec![entry("a", "k1"), entry("b", "k1")])
                .err()
                .unwrap()
                .contains("same digest")
        );
        assert!(ApiKeys::new(vec![entry("", "k1")]).is_err());
        let mut e = entry("a", "k1");
        e.subject.clear();
        assert!(
            ApiKeys::new(vec![e])
                .err()
                .unwrap()
                .contains("empty subject")
        );
    }
}

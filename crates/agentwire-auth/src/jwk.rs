//! JSON Web Keys (RFC 7517) as far as verification needs them, and the
//! signature algorithms this crate verifies with `ring`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ED25519, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents,
    UnparsedPublicKey,
};
use serde::Deserialize;

/// The JWS algorithms accepted. Everything else (`none` included) is refused
/// before any key is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alg {
    Hs256,
    Rs256,
    Es256,
    EdDsa,
}

impl Alg {
    pub(crate) fn parse(alg: &str) -> Option<Alg> {
        match alg {
            "HS256" => Some(Alg::Hs256),
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            "EdDSA" => Some(Alg::EdDsa),
            _ => None,
        }
    }
}

/// A public key, of one type; each type verifies exactly one algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PublicKey {
    /// RS256: big-endian modulus and exponent, without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// ES256: the uncompressed point, `04 || x || y`.
    P256 { point: Vec<u8> },
    /// EdDSA on Ed25519.
    Ed25519 { x: Vec<u8> },
}

impl PublicKey {
    /// The one algorithm this key verifies (no algorithm confusion).
    pub(crate) fn alg(&self) -> Alg {
        match self {
            PublicKey::Rsa { .. } => Alg::Rs256,
            PublicKey::P256 { .. } => Alg::Es256,
            PublicKey::Ed25519 { .. } => Alg::EdDsa,
        }
    }

    /// Verifies `signature` over `message`; the caller has checked that
    /// the token's algorithm is [`PublicKey::alg`].
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok(),
            PublicKey::P256 { point } => UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(message, signature)
                .is_ok(),
            PublicKey::Ed25519 { x } => UnparsedPublicKey::new(&ED25519, x)
                .verify(message, signature)
                .is_ok(),
        }
    }
}

/// A usable verification key from a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Jwk {
    pub(crate) kid: Option<String>,
    pub(crate) key: PublicKey,
}

#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawJwk {
    kty: String,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    key_ops: Option<Vec<String>>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

/// Parses a JWKS document, keeping the keys that can verify RS256, ES256 or
/// EdDSA signatures; the rest (encryption keys, symmetric keys, other curves
/// or sizes) are skipped and logged by `kid`. The error is a reason only.
pub(crate) fn parse_jwks(document: &[u8]) -> Result<Vec<Jwk>, String> {
    let raw: RawJwks = serde_json::from_slice(document)
        .map_err(|_| "not a JWKS (a JSON object with a `keys` array)".to_owned())?;
    let mut keys = Vec::with_capacity(raw.keys.len());
    for value in raw.keys {
        let kid = value
            .get("kid")
            .and_then(|kid| kid.as_str())
            .map(str::to_owned);
        match parse_jwk(value) {
            Ok(jwk) => keys.push(jwk),
            Err(reason) => tracing::debug!(kid = ?kid, reason, "JWKS key skipped"),
        }
    }
    Ok(keys)
}

fn parse_jwk(value: serde_json::Value) -> Result<Jwk, &'static str> {
    let raw: RawJwk = serde_json::from_value(value).map_err(|_| "malformed key")?;
    if raw.use_.as_deref().is_some_and(|u| u != "sig") {
        return Err("not a signature key (`use`)");
    }
    if let Some(ops) = &raw.key_ops
        && !ops.iter().any(|op| op == "verify")
    {
        return Err("not a verification key (`key_ops`)");
    }
    let key = match raw.kty.as_str() {
        "RSA" => {
            let n = strip_leading_zeros(b64(raw.n.as_deref())?);
            let e = strip_leading_zeros(b64(raw.e.as_deref())?);
            if n.len() < 256 || n.len() > 1024 {
                return Err("RSA modulus not between 2048 and 8192 bits");
            }
            if e.is_empty() || e.len() > 4 {
                return Err("RSA exponent out of range");
            }
            PublicKey::Rsa { n, e }
        }
        "EC" => {
            if raw.crv.as_deref() != Some("P-256") {
                return Err("EC curve not P-256");
            }
            let x = b64(raw.x.as_deref())?;
            let y = b64(raw.y.as_deref())?;
            if x.len() != 32 || y.len() != 32 {
                return Err("EC coordinates not 32 bytes");
            }
            let mut point = Vec::with_capacity(65);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            PublicKey::P256 { point }
        }
        "OKP" => {
            if raw.crv.as_deref() != Some("Ed25519") {
                return Err("OKP curve not Ed25519");
            }
            let x = b64(raw.x.as_deref())?;
            if x.len() != 32 {
                return Err("Ed25519 key not 32 bytes");
            }
            PublicKey::Ed25519 { x }
        }
        "oct" => return Err("symmetric keys are never taken from a JWKS"),
        _ => return Err("unsupported key type"),
    };
    if let Some(alg) = raw.alg.as_deref()
        && Alg::parse(alg) != Some(key.alg())
    {
        return Err("`alg` not the key type's algorithm (RS256, ES256 or EdDSA)");
    }
    Ok(Jwk { kid: raw.kid, key })
}

fn b64(field: Option<&str>) -> Result<Vec<u8>, &'static str> {
    let field = field.ok_or("missing key member")?;
    URL_SAFE_NO_PAD
        .decode(field)
        .map_err(|_| "key member not base64url")
}

fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    #[test]
    fn parses_each_supported_type_and_skips_the_rest() {
        let mut n = vec![0u8];
        n.extend(vec![0xc5; 256]);
        let doc = json!({"keys": [
            {"kty": "RSA", "kid": "r", "n": enc(&n), "e": "AQAB", "alg": "RS256", "use": "sig"},
            {"kty": "EC", "kid": "e", "crv": "P-256", "x": enc(&[1; 32]), "y": enc(&[2; 32])},
            {"kty": "OKP", "kid": "o", "crv": "Ed25519", "x": enc(&[3; 32])},
            {"kty": "oct", "kid": "s", "k": "c2VjcmV0"},
            {"kty": "RSA", "kid": "enc", "n": enc(&n), "e": "AQAB", "use": "enc"},
            {"kty": "RSA", "kid": "small", "n": enc(&[0xc5; 128]), "e": "AQAB"},
            {"kty": "RSA", "kid": "ps", "n": enc(&n), "e": "AQAB", "alg": "PS256"},
            {"kty": "EC", "kid": "p384", "crv": "P-384", "x": enc(&[1; 48]), "y": enc(&[2; 48])},
            {"kty": "EC", "kid": "alg-mismatch", "crv": "P-256", "x": enc(&[1; 32]), "y": enc(&[2; 32]), "alg": "RS256"},
            {"kty": "OKP", "kid": "ops", "crv": "Ed25519", "x": enc(&[3; 32]), "key_ops": ["encrypt"]},
            {"kty": 5},
        ]});
        let keys = parse_jwks(doc.to_string().as_bytes()).unwrap();
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, ["r", "e", "o"]);
        assert_eq!(keys[0].key.alg(), Alg::Rs256);
        assert!(matches!(&keys[0].key, PublicKey::Rsa { n, .. } if n.len() == 256));
        assert_eq!(keys[1].key.alg(), Alg::Es256);
        assert!(
            matches!(&keys[1].key, PublicKey::P256 { point } if point.len() == 65 && point[0] == 4)
        );
        assert_eq!(keys[2].key.alg(), Alg::EdDsa);
    }

    #[test]
    fn refuses_documents_that_are_not_jwks() {
        assert!(parse_jwks(b"[]").is_err());
        assert!(parse_jwks(b"{\"keys\": 1}").is_err());
        assert!(parse_jwks(b"not json").is_err());
        assert_eq!(parse_jwks(b"{\"keys\": []}").unwrap(), vec![]);
    }

    #[test]
    fn alg_names_are_exact() {
        assert_eq!(Alg::parse("RS256"), Some(Alg::Rs256));
        assert_eq!(Alg::parse("EdDSA"), Some(Alg::EdDsa));
        for refused in [
            "none", "None", "NONE", "rs256", "RS384", "PS256", "ES384", "HS512", "",
        ] {
            assert_eq!(Alg::parse(refused), None, "{refused}");
        }
    }
}

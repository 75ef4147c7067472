//! JWT verification: RS256, ES256 and EdDSA tokens admitted from each key
//! source (JWKS URL, OIDC discovery, JWKS file), forged and mismatched
//! signatures, time claims with leeway, issuer and audience, `alg: none`
//! and algorithm confusion, HS256, and no issuer configured.

use std::sync::atomic::Ordering;

use agentwire_auth::{AuthSettings, JwtKeys, build};
use agentwire_core::auth::{AuthError, Credentials, Identity, IdentityOrigin};
use agentwire_core::time::Timestamp;
use serde_json::json;

use crate::support::{
    AGENT, AUDIENCE, HS_SECRET, Idp, NOW, Pair, TestClock, TestKey, admit, b64, claims,
    claims_with, hs256, hs256_auth, jwks, jwks_url_auth, jwt_settings, refuse_token, with_jwt,
};

#[tokio::test]
async fn no_credential_is_none() {
    let clock = TestClock::new();
    let auth = build(AuthSettings::default(), clock.clone()).unwrap();
    assert_eq!(
        auth.authenticate(&Credentials::default(), &AGENT).await,
        Ok(None)
    );
    let key = TestKey::es256("k1");
    let idp = Idp::start(&[&key]).await;
    let auth = jwks_url_auth(&idp, clock);
    assert_eq!(
        auth.authenticate(&Credentials::default(), &AGENT).await,
        Ok(None)
    );
    // Nothing is fetched until a token needs it.
    assert_eq!(idp.fetches(), 0);
}

#[tokio::test]
async fn rs256_from_a_jwks_url_is_admitted() {
    let key = TestKey::rsa("rsa-1");
    let idp = Idp::start(&[&key]).await;
    let auth = jwks_url_auth(&idp, TestClock::new());
    let identity = admit(&auth, &key.mint(&claims())).await;
    assert_eq!(
        identity,
        Identity {
            subject: "alice".into(),
            origin: IdentityOrigin::Jwt,
            expires_at: Some(Timestamp((NOW + 300) * 1_000_000_000)),
            session_claim: Some("conv-7".into()),
            allowed_agents: None,
            grants: Vec::new(),
        }
    );
    // Cached: a second token fetches nothing.
    let again = key.mint(&claims_with("sub", json!("bob")));
    assert_eq!(admit(&auth, &again).await.subject, "bob");
    assert_eq!(idp.fetches(), 1);
    // `aud` as an array; the session claim missing.
    let mut c = claims_with("aud", json!(["other", AUDIENCE]));
    c.as_object_mut().unwrap().remove("sid");
    assert_eq!(admit(&auth, &key.mint(&c)).await.session_claim, None);
}

#[tokio::test]
async fn es256_through_oidc_discovery_is_admitted() {
    let key = TestKey::es256("ec-1");
    let idp = Idp::start(&[&key]).await;
    let mut settings = jwt_settings(JwtKeys::OidcDiscovery(format!("{}/", idp.base)));
    settings.subject_claim = "email".into();
    let auth = with_jwt(settings, TestClock::new());
    let token = key.mint(&claims_with("email", json!("alice@example.com")));
    assert_eq!(admit(&auth, &token).await.subject, "alice@example.com");
    assert_eq!(admit(&auth, &token).await.subject, "alice@example.com");
    assert_eq!(idp.discoveries.load(Ordering::SeqCst), 1);
    assert_eq!(idp.fetches(), 1);
    // The configured subject claim is required.
    assert_eq!(
        refuse_token(&auth, &key.mint(&claims())).await,
        AuthError::Rejected("no subject claim")
    );
}

#[tokio::test]
async fn eddsa_from_a_jwks_file_is_admitted() {
    let ed = TestKey::ed25519("ed-1");
    let rsa = TestKey::rsa("rsa-1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks(&[&ed, &rsa]).to_string()).unwrap();
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksFile(path.clone())),
        TestClock::new(),
    );
    assert_eq!(admit(&auth, &ed.mint(&claims())).await.subject, "alice");
    assert_eq!(admit(&auth, &rsa.mint(&claims())).await.subject, "alice");
    // Without a kid, a key of the algorithm's type is used.
    let no_kid = ed.mint_with_header(&json!({"alg": "EdDSA"}), &claims());
    assert_eq!(admit(&auth, &no_kid).await.subject, "alice");
    // A file is never refetched: an unknown kid is refused at once.
    let other = TestKey::ed25519("ed-2");
    assert_eq!(
        refuse_token(&auth, &other.mint(&claims())).await,
        AuthError::Rejected("unknown key id")
    );
}

#[tokio::test]
async fn bad_signatures_are_refused() {
    let rsa = TestKey::rsa("rsa-1");
    let ec = TestKey::es256("ec-1");
    let idp = Idp::start(&[&rsa, &ec]).await;
    let auth = jwks_url_auth(&idp, TestClock::new());
    // Another payload under a genuine signature.
    let genuine = rsa.mint(&claims());
    let (_, signature) = genuine.rsplit_once('.').unwrap();
    let forged = format!(
        "{}.{}.{signature}",
        b64(rsa.header().to_string()),
        b64(claims_with("sub", json!("mallory")).to_string())
    );
    assert_eq!(refuse_token(&auth, &forged).await, AuthError::BadSignature);
    // A different key claiming a served kid.
    let impostor = TestKey::es256("ec-1");
    assert_eq!(
        refuse_token(&auth, &impostor.mint(&claims())).await,
        AuthError::BadSignature
    );
    // A signature that is not base64url.
    let (input, _) = genuine.rsplit_once('.').unwrap();
    assert_eq!(
        refuse_token(&auth, &format!("{input}.!!")).await,
        AuthError::Rejected("unknown API key"),
        "not shaped like a JWT, so taken for an API key"
    );
    // A truncated signature.
    let short = format!("{}.{}", input, b64([1u8; 10]));
    assert_eq!(refuse_token(&auth, &short).await, AuthError::BadSignature);
}

#[tokio::test]
async fn time_claims_are_checked_with_leeway() {
    let key = TestKey::es256("ec-1");
    let idp = Idp::start(&[&key]).await;
    let clock = TestClock::new();
    let auth = jwks_url_auth(&idp, clock.clone());
    // Expired beyond the 30 s leeway; within it.
    let expired = key.mint(&claims_with("exp", json!(NOW - 31)));
    assert_eq!(refuse_token(&auth, &expired).await, AuthError::Expired);
    let just = key.mint(&claims_with("exp", json!(NOW - 29)));
    admit(&auth, &just).await;
    // Not yet valid beyond the leeway; within it.
    let early = key.mint(&claims_with("nbf", json!(NOW + 31)));
    assert_eq!(refuse_token(&auth, &early).await, AuthError::NotYetValid);
    admit(&auth, &key.mint(&claims_with("nbf", json!(NOW + 29)))).await;
    // The clock moving makes a valid token expire.
    let token = key.mint(&claims());
    admit(&auth, &token).await;
    clock.0.store(NOW + 330, Ordering::SeqCst);
    assert_eq!(refuse_token(&auth, &token).await, AuthError::Expired);
    // `exp` is required.
    let mut no_exp = claims();
    no_exp.as_object_mut().unwrap().remove("exp");
    assert_eq!(
        refuse_token(&auth, &key.mint(&no_exp)).await,
        AuthError::Rejected("no exp claim")
    );
}

#[tokio::test]
async fn wrong_issuer_or_audience_is_refused() {
    let key = TestKey::rsa("rsa-1");
    let idp = Idp::start(&[&key]).await;
    let auth = jwks_url_auth(&idp, TestClock::new());
    for (claims, reason) in [
        (
            claims_with("iss", json!("https://evil.test")),
            "wrong issuer",
        ),
        (claims_with("iss", json!(null)), "wrong issuer"),
        (claims_with("aud", json!("other")), "wrong audience"),
        (claims_with("aud", json!(["a", "b"])), "wrong audience"),
        (claims_with("aud", json!(7)), "wrong audience"),
    ] {
        assert_eq!(
            refuse_token(&auth, &key.mint(&claims)).await,
            AuthError::Rejected(reason)
        );
    }
}

#[tokio::test]
async fn alg_none_is_refused() {
    let key = TestKey::rsa("rsa-1");
    let idp = Idp::start(&[&key]).await;
    let jwks_auth = jwks_url_auth(&idp, TestClock::new());
    let hs_auth = hs256_auth();
    for header in [
        json!({"alg": "none", "kid": "rsa-1"}),
        json!({"alg": "none"}),
    ] {
        let unsigned = format!("{}.{}.", b64(header.to_string()), b64(claims().to_string()));
        for auth in [&jwks_auth, &hs_auth] {
            assert_eq!(
                refuse_token(auth, &unsigned).await,
                AuthError::Rejected("unsigned token (alg none)")
            );
        }
        // Even with a signature attached.
        let signed = key.mint_with_header(&header, &claims());
        assert_eq!(
            refuse_token(&jwks_auth, &signed).await,
            AuthError::Rejected("unsigned token (alg none)")
        );
    }
    let none_upper = key.mint_with_header(&json!({"alg": "NONE", "kid": "rsa-1"}), &claims());
    assert_eq!(
        refuse_token(&jwks_auth, &none_upper).await,
        AuthError::Rejected("unsupported algorithm")
    );
}

#[tokio::test]
async fn algorithm_confusion_is_refused() {
    let rsa = TestKey::rsa("rsa-1");
    let ec = TestKey::es256("ec-1");
    let idp = Idp::start(&[&rsa, &ec]).await;
    let auth = jwks_url_auth(&idp, TestClock::new());
    // HS256 "signed" with the RSA public key as the HMAC secret, in each
    // form an attacker might try.
    let Pair::Rsa(pair) = &rsa.pair else {
        unreachable!()
    };
    let header = json!({"alg": "HS256", "kid": "rsa-1"});
    for secret in [
        pair.public().as_ref().to_vec(),
        rsa.jwk().to_string().into_bytes(),
        jwks(&[&rsa]).to_string().into_bytes(),
    ] {
        let token = hs256(&secret, &header, &claims());
        assert_eq!(
            refuse_token(&auth, &token).await,
            AuthError::Rejected("algorithm not allowed")
        );
    }
    // An EC signature labelled RS256 under the EC key's kid, and the reverse.
    let ec_as_rs = ec.mint_with_header(&json!({"alg": "RS256", "kid": "ec-1"}), &claims());
    assert_eq!(
        refuse_token(&auth, &ec_as_rs).await,
        AuthError::Rejected("algorithm does not match the key")
    );
    let rs_as_es = rsa.mint_with_header(&json!({"alg": "ES256", "kid": "rsa-1"}), &claims());
    assert_eq!(
        refuse_token(&auth, &rs_as_es).await,
        AuthError::Rejected("algorithm does not match the key")
    );
    let ps256 = rsa.mint_with_header(&json!({"alg": "PS256", "kid": "rsa-1"}), &claims());
    assert_eq!(
        refuse_token(&auth, &ps256).await,
        AuthError::Rejected("unsupported algorithm")
    );
    // With an HS256 secret configured, an RS256 token is refused unverified.
    let hs_auth = hs256_auth();
    assert_eq!(
        refuse_token(&hs_auth, &rsa.mint(&claims())).await,
        AuthError::Rejected("algorithm not allowed")
    );
}

#[tokio::test]
async fn hs256_with_the_configured_secret() {
    let auth = hs256_auth();
    let header = json!({"alg": "HS256", "typ": "JWT"});
    let token = hs256(HS_SECRET.as_bytes(), &header, &claims());
    let identity = admit(&auth, &token).await;
    assert_eq!(identity.subject, "alice");
    assert_eq!(identity.session_claim.as_deref(), Some("conv-7"));
    let wrong = hs256(b"another-secret-of-at-least-32-bytes!!", &header, &claims());
    assert_eq!(refuse_token(&auth, &wrong).await, AuthError::BadSignature);
    // The secret never shows in Debug output of the settings.
    let shown = format!("{:?}", jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into())));
    assert!(!shown.contains(HS_SECRET), "{shown}");
}

#[tokio::test]
async fn a_jwt_without_an_issuer_configured_is_refused() {
    let auth = build(AuthSettings::default(), TestClock::new()).unwrap();
    let token = TestKey::es256("k").mint(&claims());
    assert_eq!(
        refuse_token(&auth, &token).await,
        AuthError::Rejected("no JWT issuer configured")
    );
    assert_eq!(
        auth.authenticate_refresh(&token).await,
        Err(AuthError::Rejected("no JWT issuer configured"))
    );
}

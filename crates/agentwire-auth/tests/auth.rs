//! The authenticator end to end: real RS256, ES256 and EdDSA tokens signed
//! with keys generated here, verified against a JWKS served by an in-process
//! identity provider (directly and through OIDC discovery) or read from a
//! file; HS256; API keys; passwords.

use std::convert::Infallible;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use agentwire_auth::{
    ApiKeyEntry, AuthSettings, JwtKeys, JwtSettings, build, hash_password, parse_sha256_hex,
    sha256_hex,
};
use agentwire_core::auth::{
    AgentAuth, AuthError, Authenticator, Credentials, Identity, IdentityOrigin,
};
use agentwire_core::time::{Clock, Timestamp};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RSA_PKCS1_SHA256,
    RsaKeyPair, RsaPublicKeyComponents,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------- clock

/// Seconds since the epoch, settable.
struct TestClock(AtomicI64);

const NOW: i64 = 1_800_000_000;

impl TestClock {
    fn new() -> Arc<TestClock> {
        Arc::new(TestClock(AtomicI64::new(NOW)))
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst) * 1_000_000_000)
    }
}

// ---------------------------------------------------------------- keys

/// rand_core 0.10 RNG over ring's system RNG, for the rsa crate.
struct RingRng(SystemRandom);

impl rsa::rand_core::TryRng for RingRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut b = [0; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut b = [0; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        self.0.fill(dst).expect("system RNG");
        Ok(())
    }
}

impl rsa::rand_core::TryCryptoRng for RingRng {}

/// One 2048-bit RSA key per test run (generation is the slow part), as PKCS#8.
static RSA_PKCS8: LazyLock<Vec<u8>> = LazyLock::new(|| {
    use rsa::pkcs8::EncodePrivateKey;
    let key = rsa::PrivateKey::new(&mut RingRng(SystemRandom::new()), 2048).expect("RSA keygen");
    key.to_pkcs8_der().expect("PKCS#8").as_bytes().to_vec()
});

enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

struct TestKey {
    kid: String,
    pair: Pair,
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl TestKey {
    fn rsa(kid: &str) -> TestKey {
        let pair = RsaKeyPair::from_pkcs8(&RSA_PKCS8).expect("ring reads the RSA key");
        TestKey {
            kid: kid.into(),
            pair: Pair::Rsa(pair),
        }
    }

    fn es256(kid: &str) -> TestKey {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
        TestKey {
            kid: kid.into(),
            pair: Pair::Ec(pair),
        }
    }

    fn ed25519(kid: &str) -> TestKey {
        let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        TestKey {
            kid: kid.into(),
            pair: Pair::Ed(Ed25519KeyPair::from_pkcs8(der.as_ref()).unwrap()),
        }
    }

    fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
            Pair::Ed(_) => "EdDSA",
        }
    }

    fn jwk(&self) -> Value {
        match &self.pair {
            Pair::Rsa(pair) => {
                let public = RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
                json!({"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                       "n": b64(&public.n), "e": b64(&public.e)})
            }
            Pair::Ec(pair) => {
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "kid": self.kid, "crv": "P-256",
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Pair::Ed(pair) => {
                json!({"kty": "OKP", "kid": self.kid, "crv": "Ed25519",
                       "x": b64(pair.public_key().as_ref())})
            }
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match &self.pair {
            Pair::Rsa(pair) => {
                let mut signature = vec![0; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .unwrap();
                signature
            }
            Pair::Ec(pair) => pair.sign(&rng, message).unwrap().as_ref().to_vec(),
            Pair::Ed(pair) => pair.sign(message).as_ref().to_vec(),
        }
    }

    fn header(&self) -> Value {
        json!({"alg": self.alg(), "kid": self.kid, "typ": "JWT"})
    }

    fn mint(&self, claims: &Value) -> String {
        self.mint_with_header(&self.header(), claims)
    }

    fn mint_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let signature = self.sign(input.as_bytes());
        format!("{input}.{}", b64(signature))
    }
}

fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

fn hs256(secret: &[u8], header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    format!("{input}.{}", b64(ring::hmac::sign(&key, input.as_bytes())))
}

// ---------------------------------------------------------------- identity provider

struct Idp {
    base: String,
    jwks: parking_lot::Mutex<Value>,
    jwks_fetches: AtomicUsize,
    discoveries: AtomicUsize,
}

impl Idp {
    async fn start(keys: &[&TestKey]) -> Arc<Idp> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let idp = Arc::new(Idp {
            base,
            jwks: parking_lot::Mutex::new(jwks(keys)),
            jwks_fetches: AtomicUsize::new(0),
            discoveries: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route(
                "/jwks",
                get(|State(idp): State<Arc<Idp>>| async move {
                    idp.jwks_fetches.fetch_add(1, Ordering::SeqCst);
                    Json(idp.jwks.lock().clone())
                }),
            )
            .route(
                "/.well-known/openid-configuration",
                get(|State(idp): State<Arc<Idp>>| async move {
                    idp.discoveries.fetch_add(1, Ordering::SeqCst);
                    Json(json!({"issuer": idp.base, "jwks_uri": format!("{}/jwks", idp.base)}))
                }),
            )
            .route(
                "/broken",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "down") }),
            )
            .route("/huge", get(|| async { "x".repeat(2 * 1024 * 1024) }))
            .route("/not-json", get(|| async { "<html></html>" }))
            .with_state(idp.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        idp
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn rotate(&self, keys: &[&TestKey]) {
        *self.jwks.lock() = jwks(keys);
    }

    fn fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }
}

// ---------------------------------------------------------------- helpers

const ISSUER: &str = "https://idp.test";
const AUDIENCE: &str = "agentwire";
const HS_SECRET: &str = "this-is-a-test-secret-of-32-bytes-or-more";

fn jwt_settings(keys: JwtKeys) -> JwtSettings {
    let mut settings = JwtSettings::new(ISSUER, AUDIENCE, keys);
    settings.session_claim = Some("sid".into());
    settings
}

fn with_jwt(settings: JwtSettings, clock: Arc<TestClock>) -> Arc<dyn Authenticator> {
    build(
        AuthSettings {
            api_keys: vec![],
            jwt: Some(settings),
        },
        clock,
    )
    .unwrap()
}

fn claims() -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW + 300, "iat": NOW, "sid": "conv-7"})
}

fn claims_with(key: &str, value: Value) -> Value {
    let mut c = claims();
    c[key] = value;
    c
}

const AGENT: AgentAuth<'static> = AgentAuth {
    name: "support",
    password_argon2: None,
};

fn bearer(token: &str) -> Credentials<'_> {
    Credentials {
        bearer: Some(token),
        ..Credentials::default()
    }
}

async fn admit(auth: &Arc<dyn Authenticator>, token: &str) -> Identity {
    auth.authenticate(&bearer(token), &AGENT)
        .await
        .unwrap_or_else(|e| panic!("refused: {e}"))
        .expect("an identity")
}

/// Refuses `credential`, and checks the error shows nothing of it.
async fn refuse(
    auth: &Arc<dyn Authenticator>,
    credentials: Credentials<'_>,
    agent: &AgentAuth<'_>,
) -> AuthError {
    let started = Instant::now();
    let err = auth
        .authenticate(&credentials, agent)
        .await
        .expect_err("should be refused");
    assert!(started.elapsed() < Duration::from_secs(2));
    for secret in [
        credentials.bearer,
        credentials.api_key,
        credentials.password,
    ]
    .into_iter()
    .flatten()
    {
        let shown = format!("{err} {err:?}");
        assert!(
            !shown.contains(secret),
            "error shows the credential: {shown}"
        );
        // Nor any of a JWT's segments.
        for segment in secret.split('.').filter(|s| s.len() > 8) {
            assert!(
                !shown.contains(segment),
                "error shows part of the credential: {shown}"
            );
        }
    }
    err
}

async fn refuse_token(auth: &Arc<dyn Authenticator>, token: &str) -> AuthError {
    refuse(auth, bearer(token), &AGENT).await
}

// ---------------------------------------------------------------- tests

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
    let auth = with_jwt(jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))), clock);
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
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
    let identity = admit(&auth, &key.mint(&claims())).await;
    assert_eq!(
        identity,
        Identity {
            subject: "alice".into(),
            origin: IdentityOrigin::Jwt,
            expires_at: Some(Timestamp((NOW + 300) * 1_000_000_000)),
            session_claim: Some("conv-7".into()),
            allowed_agents: None,
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
async fn jwks_file_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let settings = |path: &std::path::Path| AuthSettings {
        api_keys: vec![],
        jwt: Some(jwt_settings(JwtKeys::JwksFile(path.to_path_buf()))),
    };
    let err = build(settings(&missing), TestClock::new()).err().unwrap();
    assert!(err.contains("missing.json"), "{err}");
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "not json").unwrap();
    let err = build(settings(&garbage), TestClock::new()).err().unwrap();
    assert!(
        err.contains("garbage.json") && err.contains("not a JWKS"),
        "{err}"
    );
    let symmetric = dir.path().join("oct.json");
    std::fs::write(
        &symmetric,
        r#"{"keys":[{"kty":"oct","k":"c2VjcmV0LXNlY3JldA"}]}"#,
    )
    .unwrap();
    let err = build(settings(&symmetric), TestClock::new()).err().unwrap();
    assert!(
        err.contains("oct.json") && err.contains("no usable"),
        "{err}"
    );
    assert!(!err.contains("c2VjcmV0"), "{err}");
}

#[tokio::test]
async fn bad_signatures_are_refused() {
    let rsa = TestKey::rsa("rsa-1");
    let ec = TestKey::es256("ec-1");
    let idp = Idp::start(&[&rsa, &ec]).await;
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
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
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        clock.clone(),
    );
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
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
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
async fn unknown_kid_refetches_at_most_once_per_window() {
    let a = TestKey::es256("a");
    let b = TestKey::es256("b");
    let c = TestKey::es256("c");
    let idp = Idp::start(&[&a]).await;
    let mut settings = jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks")));
    settings.jwks_min_refresh = Duration::from_millis(1000);
    let auth = with_jwt(settings, TestClock::new());

    admit(&auth, &a.mint(&claims())).await;
    assert_eq!(idp.fetches(), 1);

    // The provider rotates to b. Right after the first fetch, inside the
    // window, an unknown kid does not refetch.
    idp.rotate(&[&b]);
    assert_eq!(
        refuse_token(&auth, &b.mint(&claims())).await,
        AuthError::Rejected("unknown key id")
    );
    assert_eq!(idp.fetches(), 1);

    // After the window, the first unknown kid refetches and finds b.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    admit(&auth, &b.mint(&claims())).await;
    assert_eq!(idp.fetches(), 2);

    // A second unknown kid within the window: no refetch.
    idp.rotate(&[&b, &c]);
    assert_eq!(
        refuse_token(&auth, &c.mint(&claims())).await,
        AuthError::Rejected("unknown key id")
    );
    // The rotated-out key is gone too (without a fetch).
    assert_eq!(
        refuse_token(&auth, &a.mint(&claims())).await,
        AuthError::Rejected("unknown key id")
    );
    assert_eq!(idp.fetches(), 2);
    // Known keys keep working without fetches.
    admit(&auth, &b.mint(&claims())).await;
    assert_eq!(idp.fetches(), 2);
}

#[tokio::test]
async fn concurrent_misses_fetch_once() {
    let key = TestKey::es256("k");
    let idp = Idp::start(&[&key]).await;
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
    let token = key.mint(&claims());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (auth, token) = (auth.clone(), token.clone());
            tokio::spawn(async move { auth.authenticate(&bearer(&token), &AGENT).await })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().unwrap().is_some());
    }
    assert_eq!(idp.fetches(), 1);
}

#[tokio::test]
async fn alg_none_is_refused() {
    let key = TestKey::rsa("rsa-1");
    let idp = Idp::start(&[&key]).await;
    let jwks_auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
    let hs_auth = with_jwt(
        jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into())),
        TestClock::new(),
    );
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
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
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
    let hs_auth = with_jwt(
        jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into())),
        TestClock::new(),
    );
    assert_eq!(
        refuse_token(&hs_auth, &rsa.mint(&claims())).await,
        AuthError::Rejected("algorithm not allowed")
    );
}

#[tokio::test]
async fn hs256_with_the_configured_secret() {
    let auth = with_jwt(
        jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into())),
        TestClock::new(),
    );
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

#[tokio::test]
async fn an_unreachable_or_broken_provider_is_unavailable() {
    let key = TestKey::es256("k");
    let idp = Idp::start(&[&key]).await;
    let token = key.mint(&claims());
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/jwks", listener.local_addr().unwrap())
    };
    for url in [
        closed,
        idp.url("/broken"),
        idp.url("/huge"),
        idp.url("/not-json"),
    ] {
        let mut settings = jwt_settings(JwtKeys::JwksUrl(url.clone()));
        settings.jwks_min_refresh = Duration::ZERO;
        let auth = with_jwt(settings, TestClock::new());
        assert_eq!(
            refuse_token(&auth, &token).await,
            AuthError::Unavailable,
            "{url}"
        );
    }
    // Discovery that points nowhere useful.
    let mut settings = jwt_settings(JwtKeys::OidcDiscovery(idp.url("/nowhere")));
    settings.jwks_min_refresh = Duration::ZERO;
    let auth = with_jwt(settings, TestClock::new());
    assert_eq!(refuse_token(&auth, &token).await, AuthError::Unavailable);
}

/// A server that answers one request with `body` as a chunked body (no
/// `Content-Length`), so only the streaming size cap can stop it.
async fn chunked_server(body: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for chunk in body.as_bytes().chunks(64 * 1024) {
            let size = format!("{:x}\r\n", chunk.len());
            let sent = async {
                socket.write_all(size.as_bytes()).await?;
                socket.write_all(chunk).await?;
                socket.write_all(b"\r\n").await
            };
            if sent.await.is_err() {
                return; // The client gave up.
            }
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
    });
    url
}

/// A valid JWKS padded with whitespace to `size` bytes.
fn padded_jwks(key: &TestKey, size: usize) -> String {
    let mut body = jwks(&[key]).to_string();
    body.push_str(&" ".repeat(size - body.len()));
    body
}

#[tokio::test]
async fn a_streamed_jwks_over_1_mib_is_refused() {
    let key = TestKey::es256("k");
    let token = key.mint(&claims());
    // Just under the cap: admitted, so the cap is what refuses the next one.
    let under = chunked_server(padded_jwks(&key, 1024 * 1024)).await;
    let auth = with_jwt(jwt_settings(JwtKeys::JwksUrl(under)), TestClock::new());
    admit(&auth, &token).await;
    let over = chunked_server(padded_jwks(&key, 1024 * 1024 + 1)).await;
    let auth = with_jwt(jwt_settings(JwtKeys::JwksUrl(over)), TestClock::new());
    assert_eq!(refuse_token(&auth, &token).await, AuthError::Unavailable);
}

#[test]
fn bad_urls_are_refused_at_build() {
    for keys in [
        JwtKeys::JwksUrl("ftp://idp.test/jwks".into()),
        JwtKeys::JwksUrl("not a url".into()),
        JwtKeys::OidcDiscovery("idp.test".into()),
    ] {
        let settings = AuthSettings {
            api_keys: vec![],
            jwt: Some(jwt_settings(keys)),
        };
        assert!(build(settings, TestClock::new()).is_err());
    }
}

// ---------------------------------------------------------------- API keys

fn api_key(id: &str, key: &str) -> ApiKeyEntry {
    ApiKeyEntry {
        id: id.into(),
        sha256: parse_sha256_hex(&sha256_hex(key)).unwrap(),
        subject: format!("service-{id}"),
        agents: None,
        expires_at: None,
    }
}

#[tokio::test]
async fn api_keys() {
    let clock = TestClock::new();
    let mut limited = api_key("limited", "sk-limited-0123456789");
    limited.agents = Some(vec!["support".into(), "sales".into()]);
    limited.expires_at = Some(Timestamp((NOW + 60) * 1_000_000_000));
    let mut expired = api_key("old", "sk-expired-0123456789");
    expired.expires_at = Some(Timestamp(NOW * 1_000_000_000));
    let auth = build(
        AuthSettings {
            api_keys: vec![api_key("ops", "sk-ops-0123456789"), limited, expired],
            jwt: Some(jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into()))),
        },
        clock.clone(),
    )
    .unwrap();

    // As a bearer and as an api_key.
    let identity = admit(&auth, "sk-limited-0123456789").await;
    assert_eq!(
        identity,
        Identity {
            subject: "service-limited".into(),
            origin: IdentityOrigin::ApiKey {
                key_id: "limited".into()
            },
            expires_at: Some(Timestamp((NOW + 60) * 1_000_000_000)),
            session_claim: None,
            allowed_agents: Some(vec!["support".into(), "sales".into()]),
        }
    );
    assert!(identity.may_use("sales"));
    assert!(!identity.may_use("billing"));
    let via_api_key = Credentials {
        api_key: Some("sk-ops-0123456789"),
        ..Credentials::default()
    };
    let ops = auth
        .authenticate(&via_api_key, &AGENT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ops.subject, "service-ops");
    assert_eq!(ops.allowed_agents, None);
    assert!(ops.may_use("anything"));

    // Unknown and expired keys are refused outright.
    assert_eq!(
        refuse_token(&auth, "sk-unknown-0123456789").await,
        AuthError::Rejected("unknown API key")
    );
    let unknown = Credentials {
        api_key: Some("sk-unknown-0123456789"),
        ..Credentials::default()
    };
    assert_eq!(
        refuse(&auth, unknown, &AGENT).await,
        AuthError::Rejected("unknown API key")
    );
    assert_eq!(
        refuse_token(&auth, "sk-expired-0123456789").await,
        AuthError::Expired
    );
    clock.0.store(NOW + 60, Ordering::SeqCst);
    assert_eq!(
        refuse_token(&auth, "sk-limited-0123456789").await,
        AuthError::Expired
    );

    // A refused bearer does not fall through to a good api_key.
    let both = Credentials {
        bearer: Some("sk-unknown-0123456789"),
        api_key: Some("sk-ops-0123456789"),
        password: None,
    };
    assert_eq!(
        refuse(&auth, both, &AGENT).await,
        AuthError::Rejected("unknown API key")
    );
    // API keys are not refreshable.
    assert_eq!(
        auth.authenticate_refresh("sk-ops-0123456789").await,
        Err(AuthError::Rejected("only a JWT can be refreshed"))
    );
}

// ---------------------------------------------------------------- passwords

#[tokio::test]
async fn passwords() {
    let started = Instant::now();
    let phc = hash_password("open sesame").unwrap();
    let hashing = started.elapsed();
    let auth = build(AuthSettings::default(), TestClock::new()).unwrap();
    let agent = AgentAuth {
        name: "support",
        password_argon2: Some(&phc),
    };
    let password = |p| Credentials {
        password: Some(p),
        ..Credentials::default()
    };
    let started = Instant::now();
    let identity = auth
        .authenticate(&password("open sesame"), &agent)
        .await
        .unwrap()
        .unwrap();
    let verifying = started.elapsed();
    assert_eq!(
        identity,
        Identity {
            subject: "password:support".into(),
            origin: IdentityOrigin::Password,
            expires_at: None,
            session_claim: None,
            allowed_agents: Some(vec!["support".into()]),
        }
    );
    assert!(identity.may_use("support") && !identity.may_use("sales"));
    assert_eq!(
        refuse(&auth, password("open sesame!"), &agent).await,
        AuthError::Rejected("wrong password")
    );
    assert_eq!(
        refuse(&auth, password("open sesame"), &AGENT).await,
        AuthError::Rejected("agent has no password")
    );
    let malformed = AgentAuth {
        name: "support",
        password_argon2: Some("not-a-phc-string"),
    };
    assert_eq!(
        refuse(&auth, password("not-a-phc-string"), &malformed).await,
        AuthError::Rejected("wrong password")
    );
    // Argon2id with the library defaults (19 MiB, t=2) in a debug build.
    eprintln!("argon2id: hash {hashing:?}, verify {verifying:?}");
    assert!(hashing < Duration::from_secs(2) && verifying < Duration::from_secs(2));
}

// ---------------------------------------------------------------- refresh

#[tokio::test]
async fn refresh_validates_a_jwt_the_same_way() {
    let key = TestKey::rsa("rsa-1");
    let idp = Idp::start(&[&key]).await;
    let auth = with_jwt(
        jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))),
        TestClock::new(),
    );
    let fresh = key.mint(&claims_with("exp", json!(NOW + 900)));
    let identity = auth.authenticate_refresh(&fresh).await.unwrap();
    assert_eq!(identity.subject, "alice");
    assert_eq!(
        identity.expires_at,
        Some(Timestamp((NOW + 900) * 1_000_000_000))
    );
    assert_eq!(identity.session_claim.as_deref(), Some("conv-7"));
    let expired = key.mint(&claims_with("exp", json!(NOW - 100)));
    let err = auth.authenticate_refresh(&expired).await.unwrap_err();
    assert_eq!(err, AuthError::Expired);
    assert!(!err.to_string().contains(&expired));
    let wrong_aud = key.mint(&claims_with("aud", json!("elsewhere")));
    assert_eq!(
        auth.authenticate_refresh(&wrong_aud).await,
        Err(AuthError::Rejected("wrong audience"))
    );
    let impostor = TestKey::es256("rsa-1");
    assert_eq!(
        auth.authenticate_refresh(&impostor.mint_with_header(&key.header(), &claims()))
            .await,
        Err(AuthError::BadSignature)
    );
}

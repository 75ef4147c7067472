//! What the test modules share: a settable clock, signing keys of each
//! algorithm that mint tokens and publish their JWKs, an in-process
//! identity provider serving a JWKS and OIDC discovery, and the helpers
//! that build an authenticator and admit or refuse a credential.

use std::convert::Infallible;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use agentwire_auth::{AuthSettings, JwtKeys, JwtSettings, build};
use agentwire_core::auth::{AgentAuth, AuthError, Authenticator, Credentials, Identity};
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
pub(crate) struct TestClock(pub(crate) AtomicI64);

pub(crate) const NOW: i64 = 1_800_000_000;

impl TestClock {
    pub(crate) fn new() -> Arc<TestClock> {
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

pub(crate) enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

pub(crate) struct TestKey {
    kid: String,
    pub(crate) pair: Pair,
}

pub(crate) fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl TestKey {
    pub(crate) fn rsa(kid: &str) -> TestKey {
        let pair = RsaKeyPair::from_pkcs8(&RSA_PKCS8).expect("ring reads the RSA key");
        TestKey {
            kid: kid.into(),
            pair: Pair::Rsa(pair),
        }
    }

    pub(crate) fn es256(kid: &str) -> TestKey {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
        TestKey {
            kid: kid.into(),
            pair: Pair::Ec(pair),
        }
    }

    pub(crate) fn ed25519(kid: &str) -> TestKey {
        let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        TestKey {
            kid: kid.into(),
            pair: Pair::Ed(Ed25519KeyPair::from_pkcs8(der.as_ref()).unwrap()),
        }
    }

    pub(crate) fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
            Pair::Ed(_) => "EdDSA",
        }
    }

    pub(crate) fn jwk(&self) -> Value {
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

    pub(crate) fn sign(&self, message: &[u8]) -> Vec<u8> {
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

    pub(crate) fn header(&self) -> Value {
        json!({"alg": self.alg(), "kid": self.kid, "typ": "JWT"})
    }

    pub(crate) fn mint(&self, claims: &Value) -> String {
        self.mint_with_header(&self.header(), claims)
    }

    pub(crate) fn mint_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let signature = self.sign(input.as_bytes());
        format!("{input}.{}", b64(signature))
    }
}

pub(crate) fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

pub(crate) fn hs256(secret: &[u8], header: &Value, claims: &Value) -> String {
    let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    format!("{input}.{}", b64(ring::hmac::sign(&key, input.as_bytes())))
}

// ---------------------------------------------------------------- identity provider

pub(crate) struct Idp {
    pub(crate) base: String,
    jwks: parking_lot::Mutex<Value>,
    jwks_fetches: AtomicUsize,
    pub(crate) discoveries: AtomicUsize,
}

impl Idp {
    pub(crate) async fn start(keys: &[&TestKey]) -> Arc<Idp> {
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

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn rotate(&self, keys: &[&TestKey]) {
        *self.jwks.lock() = jwks(keys);
    }

    pub(crate) fn fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }
}

// ---------------------------------------------------------------- helpers

pub(crate) const ISSUER: &str = "https://idp.test";
pub(crate) const AUDIENCE: &str = "agentwire";
pub(crate) const HS_SECRET: &str = "this-is-a-test-secret-of-32-bytes-or-more";

pub(crate) fn jwt_settings(keys: JwtKeys) -> JwtSettings {
    let mut settings = JwtSettings::new(ISSUER, AUDIENCE, keys);
    settings.session_claim = Some("sid".into());
    settings
}

/// An authenticator that reads `idp`'s JWKS URL, on `clock`.
pub(crate) fn jwks_url_auth(idp: &Idp, clock: Arc<TestClock>) -> Arc<dyn Authenticator> {
    with_jwt(jwt_settings(JwtKeys::JwksUrl(idp.url("/jwks"))), clock)
}

/// An authenticator with the HS256 test secret.
pub(crate) fn hs256_auth() -> Arc<dyn Authenticator> {
    with_jwt(
        jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into())),
        TestClock::new(),
    )
}

pub(crate) fn with_jwt(settings: JwtSettings, clock: Arc<TestClock>) -> Arc<dyn Authenticator> {
    // A JWKS URL gets its HTTP client here, which needs the rustls crypto
    // provider the binary's `main` installs (the library installs none).
    let _ = rustls::crypto::ring::default_provider().install_default();
    build(
        AuthSettings {
            api_keys: vec![],
            jwt: Some(settings),
        },
        clock,
    )
    .unwrap()
}

pub(crate) fn claims() -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": NOW + 300, "iat": NOW, "sid": "conv-7"})
}

pub(crate) fn claims_with(key: &str, value: Value) -> Value {
    let mut c = claims();
    c[key] = value;
    c
}

pub(crate) const AGENT: AgentAuth<'static> = AgentAuth {
    name: "support",
    password_argon2: None,
};

pub(crate) fn bearer(token: &str) -> Credentials<'_> {
    Credentials {
        bearer: Some(token),
        ..Credentials::default()
    }
}

pub(crate) async fn admit(auth: &Arc<dyn Authenticator>, token: &str) -> Identity {
    auth.authenticate(&bearer(token), &AGENT)
        .await
        .unwrap_or_else(|e| panic!("refused: {e}"))
        .expect("an identity")
}

/// Refuses `credential`, and checks the error shows nothing of it.
pub(crate) async fn refuse(
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

pub(crate) async fn refuse_token(auth: &Arc<dyn Authenticator>, token: &str) -> AuthError {
    refuse(auth, bearer(token), &AGENT).await
}

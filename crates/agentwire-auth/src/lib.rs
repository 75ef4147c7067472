//! The `Authenticator` port's adapter: a chain of validators for API keys,
//! agent passwords and JWTs.
//!
//! [`build`] turns [`AuthSettings`] into an `Arc<dyn Authenticator>`. The
//! first credential the request carries decides, in this order:
//!
//! 1. `bearer`: a JWT if it is shaped like one (three base64url segments whose
//!    header decodes to a JSON object), else an API key;
//! 2. `api_key`: an API key;
//! 3. `password`: the agent's password.
//!
//! A credential that is present is either admitted or refused outright
//! (malformed, expired, wrongly signed, unknown): nothing falls through to
//! the next validator. No credential at all is `Ok(None)`.
//!
//! **JWTs** are verified with `ring` directly: HS256 with a configured secret,
//! or RS256, ES256 (P-256) and EdDSA (Ed25519) with a JWKS read from a file,
//! fetched from a URL, or found through OIDC discovery. The algorithm must be
//! the key's: an RSA key only verifies RS256, an HS256 token is only checked
//! against the configured secret (never with a public key as the HMAC
//! secret), and `alg: none` is refused. `iss`, `aud` (a string or an array),
//! `exp` (required) and `nbf` are checked with the configured leeway. A token
//! naming an unknown `kid` refetches the JWKS, at most once per
//! `jwks_min_refresh`; fetches time out after 5 s and read at most 1 MiB.
//!
//! **API keys** are known by their SHA-256 digests, compared in constant time
//! with every configured digest.
//!
//! **Passwords** are Argon2id PHC strings, verified on tokio's blocking pool,
//! as many at once as there are CPUs.
//!
//! Nothing here logs or puts in an error a token, key, secret or password:
//! only reasons, key ids, `kid`s and the issuer.
//!
//! Why `ring` and not `jsonwebtoken`: jsonwebtoken (10 and later) must be
//! built with one of two crypto backends, `aws_lc_rs` (whose build wants
//! cmake, which this workspace avoids everywhere) or `rust_crypto` (a second
//! RustCrypto stack: `rsa` 0.9, which carries the unpatched RUSTSEC-2023-0071
//! timing advisory, `p256`, `ed25519-dalek`, `rand` 0.8). The workspace
//! already has `ring` through rustls, and what a verifier needs from JOSE is
//! small: split the compact form, decode base64url and JSON, read RSA, P-256
//! and Ed25519 JWKs, and call `ring`'s verifiers (`RSA_PKCS1_2048_8192_SHA256`,
//! `ECDSA_P256_SHA256_FIXED`, `ED25519`, HMAC-SHA256). The `rsa` crate (0.10)
//! is a dev-dependency only, to generate the RSA test key (ring cannot
//! generate RSA keys); it never signs or decrypts here.

mod api_key;
#[doc(hidden)]
pub mod fuzzing;
mod jwk;
mod jwks;
mod jwt;
mod password;
mod settings;

use std::sync::Arc;

use agentwire_core::auth::{
    AgentAuth, AuthError, Authenticator, Credentials, Identity, IdentityOrigin,
};
use agentwire_core::time::Clock;
use async_trait::async_trait;

pub use api_key::{parse_sha256_hex, sha256_hex};
pub use password::{check_password_hash, hash_password, verify_password};
pub use settings::{
    ApiKeyEntry, AuthSettings, DEFAULT_GRANTS_CLAIM, DEFAULT_JWKS_MIN_REFRESH, DEFAULT_LEEWAY,
    DEFAULT_SUBJECT_CLAIM, JwtKeys, JwtSettings, Secret,
};

use api_key::ApiKeys;
use jwt::JwtValidator;

/// Builds the authenticator. A JWKS file is read and parsed here (the error
/// names the file); URLs are validated here and fetched when first needed.
pub fn build(
    settings: AuthSettings,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Authenticator>, String> {
    let api_keys = ApiKeys::new(settings.api_keys)?;
    let jwt = settings
        .jwt
        .map(|jwt| JwtValidator::new(jwt, clock.clone()))
        .transpose()?;
    // Each verification holds ~19 MiB for ~0.1 s: bound how many run at once
    // so a burst of password attempts queues instead of exhausting memory.
    let password_slots = std::thread::available_parallelism().map_or(2, usize::from);
    Ok(Arc::new(Chain {
        api_keys,
        jwt,
        clock,
        password_slots: Arc::new(tokio::sync::Semaphore::new(password_slots)),
    }))
}

struct Chain {
    api_keys: ApiKeys,
    jwt: Option<JwtValidator>,
    clock: Arc<dyn Clock>,
    password_slots: Arc<tokio::sync::Semaphore>,
}

impl Chain {
    async fn jwt(&self, token: &str) -> Result<Identity, AuthError> {
        match &self.jwt {
            Some(jwt) => jwt.validate(token).await,
            None => Err(AuthError::Rejected("no JWT issuer configured")),
        }
    }

    async fn password(&self, agent: &AgentAuth<'_>, password: &str) -> Result<Identity, AuthError> {
        let Some(phc) = agent.password_argon2 else {
            tracing::debug!(agent = agent.name, "password refused: the agent has none");
            return Err(AuthError::Rejected("agent has no password"));
        };
        let slot = self
            .password_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| AuthError::Unavailable)?;
        let (phc, password) = (phc.to_owned(), password.to_owned());
        let matches = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            verify_password(&phc, &password)
        })
        .await
        .map_err(|_| AuthError::Unavailable)?;
        if !matches {
            tracing::debug!(agent = agent.name, "password refused: wrong password");
            return Err(AuthError::WrongPassword);
        }
        Ok(Identity {
            subject: format!("password:{}", agent.name),
            origin: IdentityOrigin::Password,
            expires_at: None,
            session_claim: None,
            allowed_agents: Some(vec![agent.name.to_owned()]),
            grants: Vec::new(),
        })
    }
}

#[async_trait]
impl Authenticator for Chain {
    async fn authenticate(
        &self,
        credentials: &Credentials<'_>,
        agent: &AgentAuth<'_>,
    ) -> Result<Option<Identity>, AuthError> {
        if let Some(bearer) = credentials.bearer {
            return if jwt::looks_like_jwt(bearer) {
                self.jwt(bearer).await.map(Some)
            } else {
                self.api_keys.check(bearer, self.clock.now()).map(Some)
            };
        }
        if let Some(key) = credentials.api_key {
            return self.api_keys.check(key, self.clock.now()).map(Some);
        }
        if let Some(password) = credentials.password {
            return self.password(agent, password).await.map(Some);
        }
        Ok(None)
    }

    async fn authenticate_refresh(&self, token: &str) -> Result<Identity, AuthError> {
        if !jwt::looks_like_jwt(token) {
            return Err(AuthError::Rejected("only a JWT can be refreshed"));
        }
        self.jwt(token).await
    }
}

//! The identity port: who is calling, established from the credential a
//! dialect extracted from the upgrade request.

use async_trait::async_trait;

use crate::time::Timestamp;

/// The credentials a request carried, as its dialect found them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// `Authorization: Bearer <token>` (or Gnosari's `?token=`): a JWT or an API key.
    pub bearer: Option<&'a str>,
    /// Gnosari's `?api_key=` / `X-AUTH-TOKEN`: an API key.
    pub api_key: Option<&'a str>,
    /// Gnosari's `?password=` / `X-Access-Password`: the agent's password.
    pub password: Option<&'a str>,
}

impl Credentials<'_> {
    pub fn is_empty(&self) -> bool {
        self.bearer.is_none() && self.api_key.is_none() && self.password.is_none()
    }
}

/// How an identity was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityOrigin {
    /// An API key; the key's configured id.
    ApiKey {
        key_id: String,
    },
    Jwt,
    /// The agent's password: admits the caller to that agent only.
    Password,
}

/// A caller the authenticator admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The subject as the credential names it. Never stored or logged: the
    /// server keeps only a keyed hash of it (the owner pseudonym).
    pub subject: String,
    pub origin: IdentityOrigin,
    /// When the credential stops being valid (JWT `exp`, API key expiry).
    pub expires_at: Option<Timestamp>,
    /// The JWT's session-binding claim value, when configured.
    pub session_claim: Option<String>,
    /// Agents this identity may use; `None` is every agent.
    pub allowed_agents: Option<Vec<String>>,
    /// The resource ids the credential grants (a JWT's grants claim, an API
    /// key's `grants`): what its holder may mount into a sandbox where the
    /// sandbox's role is authorised by grants.
    pub grants: Vec<String>,
}

impl Identity {
    pub fn may_use(&self, agent: &str) -> bool {
        self.allowed_agents
            .as_ref()
            .is_none_or(|agents| agents.iter().any(|a| a == agent))
    }
}

/// Why a credential was refused. Deliberately coarse: the reason is logged
/// (without the credential) but never sent to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("credential malformed")]
    Malformed,
    #[error("credential signature invalid")]
    BadSignature,
    #[error("credential expired")]
    Expired,
    #[error("credential not yet valid")]
    NotYetValid,
    /// Wrong issuer or audience, unknown key, refused algorithm.
    #[error("credential not accepted: {0}")]
    Rejected(&'static str),
    /// The agent has a password and this is not it: a valid request from
    /// someone not admitted, so 403 rather than 401 (Gnosari notes §5.1).
    #[error("wrong password")]
    WrongPassword,
    /// The key set could not be fetched; the caller may retry later.
    #[error("identity provider unavailable")]
    Unavailable,
}

/// Whether an agent takes callers without a credential: a rule of the
/// domain (config sets it, every dialect's upgrade enforces it), so it lives
/// here rather than in the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLevel {
    Public,
    Private,
}

/// What the agent being opened contributes to authentication.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentAuth<'a> {
    pub name: &'a str,
    /// The agent's Argon2id PHC string, when it has a password.
    pub password_argon2: Option<&'a str>,
}

/// Establishes identities. A chain of validators: the first to admit wins;
/// `Ok(None)` means no validator recognised the credentials (the caller then
/// decides whether anonymous access is allowed); `Err` refuses outright.
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    async fn authenticate(
        &self,
        credentials: &Credentials<'_>,
        agent: &AgentAuth<'_>,
    ) -> Result<Option<Identity>, AuthError>;

    /// Re-validates a refreshed JWT for `credential_refresh`.
    async fn authenticate_refresh(&self, token: &str) -> Result<Identity, AuthError>;
}

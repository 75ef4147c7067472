//! Who is calling: the credentials a request carries, the authenticator's
//! verdict, and the owner pseudonym sessions are recorded under.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentwire_core::{AccessLevel, AgentAuth, AuthError, Authenticator, Credentials, Identity};
use axum::http::{HeaderMap, StatusCode, header};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::upgrade::{ClientAddress, Refusal};
use crate::{AgentEntry, AppState};

/// Identity settings (`auth.*`).
#[derive(Default)]
pub struct IdentitySettings {
    /// `None`: no credential is recognised; only public agents can be used.
    pub authenticator: Option<Arc<dyn Authenticator>>,
    /// Keys the owner pseudonym (HMAC-SHA-256); without it a plain SHA-256.
    /// Keep it stable: a new key makes every owner a stranger to its sessions.
    pub pseudonym_key: Option<Vec<u8>>,
}

/// An admitted caller.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// The pseudonymous owner id: a keyed hash of the subject (and the
    /// session claim, so a token bound to another session is a stranger).
    /// `None` is anonymous.
    pub(crate) owner: Option<String>,
    pub(crate) identity: Option<Identity>,
    /// Where the caller connects from, when known.
    pub(crate) address: Option<IpAddr>,
}

/// The token of `Authorization: Bearer <token>`; the scheme is case-sensitive,
/// as in Omnia. Another scheme is no credential.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// What a caller asks to be admitted to: an agent, or a team, whose name
/// an identity's allow-list must hold and whose password the password
/// credential is checked against.
pub(crate) struct Gate<'a> {
    pub(crate) name: &'a str,
    pub(crate) access_level: AccessLevel,
    pub(crate) password_argon2: Option<&'a str>,
}

impl<'a> Gate<'a> {
    pub(crate) fn agent(agent: &'a AgentEntry) -> Gate<'a> {
        Gate {
            name: &agent.agent.name,
            access_level: agent.access_level,
            password_argon2: agent.password_argon2.as_deref(),
        }
    }
}

/// What a credential that does not validate costs its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadCredential {
    /// 401 wherever it is sent: on `/ws` a bad credential never falls back
    /// to anonymous access, public agent or not.
    Refused,
    /// On a public agent the credential is ignored and the caller is an
    /// anonymous visitor (Gnosari notes §5.2: the contract's own client
    /// always sends `?token=`); elsewhere 401, or 403 for a wrong password.
    IgnoredWhenPublic,
}

/// Authenticates `credentials` for `agent` on `/ws`: 401 for a refused
/// credential or a missing one on a private agent, 403 for an identity the
/// agent does not admit.
pub(crate) async fn identify(
    state: &AppState,
    credentials: &Credentials<'_>,
    agent: &AgentEntry,
    address: ClientAddress,
) -> Result<Caller, Refusal> {
    admit(
        state,
        credentials,
        &Gate::agent(agent),
        address,
        BadCredential::Refused,
    )
    .await
}

/// Authenticates `credentials` for `gate` on the Gnosari endpoints, as the
/// behaviour notes decide (§5.1, §5.2): 401 for a missing credential on a
/// private gate or a refused one; 403 for an identity the gate does not
/// admit and for a wrong password; on a public gate a credential that does
/// not validate is ignored (and logged), and the caller is anonymous. A
/// credential that could not be checked (the identity provider is down)
/// is refused, public or not: ignoring it would hand a signed-in user an
/// anonymous session.
pub(crate) async fn identify_at(
    state: &AppState,
    credentials: &Credentials<'_>,
    gate: &Gate<'_>,
    address: ClientAddress,
) -> Result<Caller, Refusal> {
    admit(
        state,
        credentials,
        gate,
        address,
        BadCredential::IgnoredWhenPublic,
    )
    .await
}

/// Whether `address` and `gate` may try a credential now (429 with
/// `Retry-After` while either has spent its failed attempts), then the
/// authenticator's verdict; a credential that does not validate is counted
/// against both, unless it is ignored on a public gate (nothing is won by
/// guessing there).
async fn admit(
    state: &AppState,
    credentials: &Credentials<'_>,
    gate: &Gate<'_>,
    ClientAddress(address): ClientAddress,
    bad_credential: BadCredential,
) -> Result<Caller, Refusal> {
    let unauthorized = Refusal::new(StatusCode::UNAUTHORIZED, "unauthorized");
    let forbidden = Refusal::new(StatusCode::FORBIDDEN, "forbidden");
    if !credentials.is_empty()
        && let Err(refused) = state.abuse().check_auth(address, gate.name).await
    {
        state.metrics().count_abuse_refusal(refused.limit);
        tracing::info!(agent = %gate.name, limit = refused.limit.as_str(), "authentication throttled");
        return Err(Refusal::throttled(refused));
    }
    let failed = || async {
        state
            .metrics()
            .auth_failures_total
            .fetch_add(1, Ordering::Relaxed);
        state.abuse().auth_failed(address, gate.name).await;
    };
    let verdict = match &state.identity().authenticator {
        Some(authenticator) => {
            let agent_auth = AgentAuth {
                name: gate.name,
                password_argon2: gate.password_argon2,
            };
            authenticator.authenticate(credentials, &agent_auth).await
        }
        None => Ok(None),
    };
    let public = gate.access_level == AccessLevel::Public;
    let anonymous = Caller {
        address,
        ..Caller::default()
    };
    match verdict {
        Err(reason)
            if public
                && bad_credential == BadCredential::IgnoredWhenPublic
                && reason != AuthError::Unavailable =>
        {
            tracing::info!(agent = %gate.name, %reason, "credential refused; admitted anonymously to a public agent");
            Ok(anonymous)
        }
        Err(AuthError::WrongPassword) => {
            tracing::info!(agent = %gate.name, "wrong password");
            failed().await;
            Err(forbidden)
        }
        Err(AuthError::Unavailable) => {
            tracing::info!(agent = %gate.name, "credential could not be checked");
            Err(unauthorized)
        }
        Err(reason) => {
            tracing::info!(agent = %gate.name, %reason, "credential refused");
            failed().await;
            Err(unauthorized)
        }
        Ok(None) if public => Ok(anonymous),
        Ok(None) => Err(unauthorized),
        Ok(Some(identity)) if !identity.may_use(gate.name) => Err(forbidden),
        Ok(Some(identity)) => Ok(Caller {
            owner: Some(pseudonym(state.identity(), &identity)),
            identity: Some(identity),
            address,
        }),
    }
}

/// 128 bits of a (keyed) hash of the subject and session claim, in hex.
pub(crate) fn pseudonym(settings: &IdentitySettings, identity: &Identity) -> String {
    let mut material = identity.subject.clone().into_bytes();
    if let Some(claim) = &identity.session_claim {
        material.push(0);
        material.extend_from_slice(claim.as_bytes());
    }
    let digest: [u8; 32] = match &settings.pseudonym_key {
        Some(key) => {
            let mut mac =
                Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
            mac.update(&material);
            mac.finalize().into_bytes().into()
        }
        None => Sha256::digest(&material).into(),
    };
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The owner a request that names no agent (the sessions and media APIs)
/// speaks for: `Ok(None)` is an anonymous caller, admitted only when
/// unauthenticated callers are allowed. 401 for a refused credential, for a
/// missing one otherwise, and for any credential when no authenticator is
/// configured; 429 with `Retry-After`, before the credential is checked,
/// while `address` has spent its failed attempts (a refused credential
/// counts against it, one that could not be checked does not). An
/// identity's agent allow-list does not apply: there is no agent.
pub(crate) async fn identify_owner(
    state: &AppState,
    credentials: &Credentials<'_>,
    ClientAddress(address): ClientAddress,
) -> Result<Option<String>, Refusal> {
    let unauthorized = Refusal::new(StatusCode::UNAUTHORIZED, "unauthorized");
    if credentials.is_empty() {
        return if state.settings().allow_unauthenticated {
            Ok(None)
        } else {
            Err(unauthorized)
        };
    }
    if let Err(refused) = state.abuse().check_address_auth(address).await {
        state.metrics().count_abuse_refusal(refused.limit);
        tracing::info!(limit = refused.limit.as_str(), "authentication throttled");
        return Err(Refusal::throttled(refused));
    }
    let Some(authenticator) = &state.identity().authenticator else {
        return Err(unauthorized);
    };
    match authenticator
        .authenticate(credentials, &AgentAuth::default())
        .await
    {
        Ok(Some(identity)) => Ok(Some(pseudonym(state.identity(), &identity))),
        Ok(None) => Err(unauthorized),
        Err(AuthError::Unavailable) => {
            tracing::info!("credential could not be checked");
            Err(unauthorized)
        }
        Err(reason) => {
            tracing::info!(%reason, "credential refused");
            state
                .metrics()
                .auth_failures_total
                .fetch_add(1, Ordering::Relaxed);
            state.abuse().address_auth_failed(address).await;
            Err(unauthorized)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::IdentityOrigin;

    fn identity(subject: &str, claim: Option<&str>) -> Identity {
        Identity {
            subject: subject.into(),
            origin: IdentityOrigin::Jwt,
            expires_at: None,
            session_claim: claim.map(str::to_owned),
            allowed_agents: None,
            grants: Vec::new(),
        }
    }

    #[test]
    fn pseudonyms_are_stable_keyed_and_claim_bound() {
        let plain = IdentitySettings::default();
        let keyed = IdentitySettings {
            pseudonym_key: Some(b"k".to_vec()),
            ..IdentitySettings::default()
        };
        let a = pseudonym(&plain, &identity("alice", None));
        assert_eq!(a.len(), 32);
        assert_eq!(a, pseudonym(&plain, &identity("alice", None)));
        assert_ne!(a, pseudonym(&keyed, &identity("alice", None)));
        assert_ne!(a, pseudonym(&plain, &identity("alice", Some("s1"))));
        assert!(!a.contains("alice"));
    }

    #[test]
    fn only_bearer_counts() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }
}

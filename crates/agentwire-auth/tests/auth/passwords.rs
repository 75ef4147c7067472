//! Agent passwords: Argon2id hashing and verification, wrong and malformed
//! passwords, an agent without one, and how long both take.

use std::time::{Duration, Instant};

use agentwire_auth::{AuthSettings, build, hash_password};
use agentwire_core::auth::{AgentAuth, AuthError, Credentials, Identity, IdentityOrigin};

use crate::support::{AGENT, TestClock, refuse};

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
            grants: Vec::new(),
        }
    );
    assert!(identity.may_use("support") && !identity.may_use("sales"));
    assert_eq!(
        refuse(&auth, password("open sesame!"), &agent).await,
        AuthError::WrongPassword
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
        AuthError::WrongPassword
    );
    // Argon2id with the library defaults (19 MiB, t=2) in a debug build.
    eprintln!("argon2id: hash {hashing:?}, verify {verifying:?}");
    assert!(hashing < Duration::from_secs(2) && verifying < Duration::from_secs(2));
}

//! API keys: as a bearer and as an `api_key`, limited to agents, expiring,
//! unknown, never falling through to another credential, not refreshable.

use std::sync::atomic::Ordering;

use agentwire_auth::{ApiKeyEntry, AuthSettings, JwtKeys, build, parse_sha256_hex, sha256_hex};
use agentwire_core::auth::{AuthError, Credentials, Identity, IdentityOrigin};
use agentwire_core::time::Timestamp;

use crate::support::{AGENT, HS_SECRET, NOW, TestClock, admit, jwt_settings, refuse, refuse_token};

fn api_key(id: &str, key: &str) -> ApiKeyEntry {
    ApiKeyEntry {
        id: id.into(),
        sha256: parse_sha256_hex(&sha256_hex(key)).unwrap(),
        subject: format!("service-{id}"),
        agents: None,
        expires_at: None,
        grants: Vec::new(),
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
            grants: Vec::new(),
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

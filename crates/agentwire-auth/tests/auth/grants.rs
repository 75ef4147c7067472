//! Grants: the resource ids a credential lets its holder mount into a
//! sandbox, from a JWT's grants claim (an array of strings, or one string
//! of ids separated by spaces; anything else grants nothing) and from an
//! API key's configured list.

use agentwire_auth::{ApiKeyEntry, AuthSettings, JwtKeys, build, parse_sha256_hex, sha256_hex};
use serde_json::{Value, json};

use crate::support::{
    HS_SECRET, TestClock, admit, claims, claims_with, hs256, hs256_auth, jwt_settings, with_jwt,
};

fn token(claims: &Value) -> String {
    hs256(
        HS_SECRET.as_bytes(),
        &json!({"alg": "HS256", "typ": "JWT"}),
        claims,
    )
}

async fn grants_of(claims: &Value) -> Vec<String> {
    admit(&hs256_auth(), &token(claims)).await.grants
}

#[tokio::test]
async fn the_projects_claim_lists_the_grants() {
    let listed = claims_with("projects", json!(["alpha", "beta-2"]));
    assert_eq!(grants_of(&listed).await, ["alpha", "beta-2"]);
    let spaced = claims_with("projects", json!("alpha  beta-2 "));
    assert_eq!(grants_of(&spaced).await, ["alpha", "beta-2"]);
    assert!(grants_of(&claims()).await.is_empty(), "no claim, no grants");
}

#[tokio::test]
async fn a_claim_of_another_shape_grants_nothing_and_still_admits() {
    for odd in [
        json!(["alpha", 7]),
        json!(42),
        json!(true),
        json!({"alpha": true}),
        Value::Null,
    ] {
        let identity = admit(&hs256_auth(), &token(&claims_with("projects", odd.clone()))).await;
        assert_eq!(identity.subject, "alice", "{odd}");
        assert!(
            identity.grants.is_empty(),
            "{odd} granted {:?}",
            identity.grants
        );
    }
}

#[tokio::test]
async fn the_grants_claim_is_configurable() {
    let mut settings = jwt_settings(JwtKeys::Hs256Secret(HS_SECRET.into()));
    settings.grants_claim = "workspaces".into();
    let auth = with_jwt(settings, TestClock::new());
    let mut both = claims_with("workspaces", json!(["w1"]));
    both["projects"] = json!(["p1"]);
    assert_eq!(admit(&auth, &token(&both)).await.grants, ["w1"]);
}

#[tokio::test]
async fn an_api_key_grants_its_configured_ids() {
    let entry = |id: &str, key: &str, grants: &[&str]| ApiKeyEntry {
        id: id.into(),
        sha256: parse_sha256_hex(&sha256_hex(key)).unwrap(),
        subject: format!("service-{id}"),
        agents: None,
        expires_at: None,
        grants: grants.iter().map(|g| g.to_string()).collect(),
    };
    let auth = build(
        AuthSettings {
            api_keys: vec![
                entry("builder", "sk-builder-0123456789", &["alpha", "beta"]),
                entry("reader", "sk-reader-0123456789", &[]),
            ],
            jwt: None,
        },
        TestClock::new(),
    )
    .unwrap();
    assert_eq!(
        admit(&auth, "sk-builder-0123456789").await.grants,
        ["alpha", "beta"]
    );
    assert!(admit(&auth, "sk-reader-0123456789").await.grants.is_empty());
}

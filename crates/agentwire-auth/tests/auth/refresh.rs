//! Refreshing a session: a JWT is validated the same way as on connect.

use agentwire_core::auth::AuthError;
use agentwire_core::time::Timestamp;
use serde_json::json;

use crate::support::{Idp, NOW, TestClock, TestKey, claims, claims_with, jwks_url_auth};

#[tokio::test]
async fn refresh_validates_a_jwt_the_same_way() {
    let key = TestKey::rsa("rsa-1");
    let idp = Idp::start(&[&key]).await;
    let auth = jwks_url_auth(&idp, TestClock::new());
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

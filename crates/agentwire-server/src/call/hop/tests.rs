//! The hop's signature, and where a resume is served (against routes in
//! memory).

use std::sync::Arc;

use agentwire_core::live::{CallRoute, CallRoutes, MemoryCallRoutes};

use super::*;
use crate::call::ReplicaLinks;
use crate::connection::testing::Harness;

const NOW: u64 = 1_750_000_000;
const QUERY: &str = "agent=voice&binary=true&resume=s-1";

fn secret() -> HopSecret {
    HopSecret::new("a shared secret of the replicas, 32+ bytes")
}

/// The headers a hop from `client` as Alice carries, signed at `at`.
fn hop_headers(secret: &HopSecret, at: u64, client: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer alice"),
    );
    let hop = sign(secret, at, client, QUERY, &headers);
    headers.insert(HOP_HEADER, HeaderValue::from_str(&hop).unwrap());
    headers.insert(HOP_CLIENT_HEADER, HeaderValue::from_str(client).unwrap());
    headers
}

#[test]
fn a_signed_hop_is_taken_with_the_clients_address() {
    let headers = hop_headers(&secret(), NOW, "203.0.113.7");
    let address = check(&secret(), NOW + 5, QUERY, &headers).expect("taken");
    assert_eq!(address.0, Some("203.0.113.7".parse().unwrap()));
    let headers = hop_headers(&secret(), NOW, "-");
    assert_eq!(check(&secret(), NOW, QUERY, &headers).unwrap().0, None);
}

#[test]
fn a_hop_changed_on_the_way_or_signed_with_another_secret_is_refused() {
    let headers = hop_headers(&secret(), NOW, "203.0.113.7");
    // Another session, or another credential.
    assert!(
        check(
            &secret(),
            NOW,
            "agent=voice&binary=true&resume=s-2",
            &headers
        )
        .is_none()
    );
    let mut other_credential = headers.clone();
    other_credential.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer bob"),
    );
    assert!(check(&secret(), NOW, QUERY, &other_credential).is_none());
    // Another client address.
    let mut other_client = headers.clone();
    other_client.insert(HOP_CLIENT_HEADER, HeaderValue::from_static("198.51.100.1"));
    assert!(check(&secret(), NOW, QUERY, &other_client).is_none());
    // No signature, a broken one, another deployment's.
    let mut unsigned = headers.clone();
    unsigned.remove(HOP_HEADER);
    assert!(check(&secret(), NOW, QUERY, &unsigned).is_none());
    let mut broken = headers.clone();
    broken.insert(HOP_HEADER, HeaderValue::from_static("1750000030.zz"));
    assert!(check(&secret(), NOW, QUERY, &broken).is_none());
    let theirs = HopSecret::new("another deployment's secret, 32+ bytes");
    assert!(check(&theirs, NOW, QUERY, &headers).is_none());
}

#[test]
fn a_signature_holds_for_a_hops_life_only() {
    let headers = hop_headers(&secret(), NOW, "203.0.113.7");
    let life = SIGNATURE_LIFE.as_secs();
    assert!(check(&secret(), NOW + life, QUERY, &headers).is_some());
    assert!(check(&secret(), NOW + life + 1, QUERY, &headers).is_none());
    // Signed by a clock far ahead: refused, or it would hold too long.
    let ahead = hop_headers(&secret(), NOW + 3 * life, "203.0.113.7");
    assert!(check(&secret(), NOW, QUERY, &ahead).is_none());
}

const HERE: &str = "127.0.0.1:7001";

/// A replica at [`HERE`] whose routes hold `session`'s call at `holder`,
/// owned by `owner`.
async fn replica_with_route(session: &SessionId, holder: &str, owner: &str) -> Harness {
    let routes = Arc::new(MemoryCallRoutes::new(Duration::from_secs(10)));
    let route = CallRoute {
        address: holder.to_owned(),
        owner: owner.to_owned(),
    };
    routes.claim(session, &route).await.unwrap();
    Harness::linked(ReplicaLinks {
        routes,
        advertise: HERE.to_owned(),
        secret: secret(),
    })
}

/// Whether a resume of `session` by `owner` hops.
async fn hops(harness: &Harness, session: &SessionId, owner: Option<&str>) -> bool {
    let query = format!("agent=test-agent&resume={}", session.as_str());
    let headers = HeaderMap::new();
    let address = ClientAddress(None);
    towards_holder(
        &harness.state,
        Some(session),
        owner,
        &query,
        &headers,
        address,
    )
    .await
    .is_some()
}

fn failed_hops(harness: &Harness) -> u64 {
    harness.state.metrics().call_hops(CallHop::Failed)
}

#[tokio::test]
async fn another_owners_call_anonymous_callers_and_calls_held_here_stay_here() {
    let session = SessionId::parse("s-1").unwrap();
    let elsewhere = replica_with_route(&session, "127.0.0.1:1", "alice").await;
    assert!(!hops(&elsewhere, &session, Some("bob")).await);
    assert!(!hops(&elsewhere, &session, None).await);
    let here = replica_with_route(&session, HERE, "alice").await;
    assert!(!hops(&here, &session, Some("alice")).await);
    // None of these tried a hop.
    assert_eq!(failed_hops(&elsewhere) + failed_hops(&here), 0);
}

#[tokio::test]
async fn a_holder_that_is_gone_leaves_the_resume_here_and_is_counted() {
    let session = SessionId::parse("s-2").unwrap();
    // Nothing listens on port 1.
    let replica = replica_with_route(&session, "127.0.0.1:1", "alice").await;
    let started = tokio::time::Instant::now();
    assert!(!hops(&replica, &session, Some("alice")).await);
    assert!(started.elapsed() <= HOP_TIMEOUT);
    assert_eq!(failed_hops(&replica), 1);
}

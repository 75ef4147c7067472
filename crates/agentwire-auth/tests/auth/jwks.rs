//! Fetching and caching the key set: JWKS file errors, refetching an
//! unknown kid at most once per window, concurrent misses, unreachable or
//! broken providers, the 1 MiB cap on a streamed JWKS, and bad URLs.

use std::time::Duration;

use agentwire_auth::{AuthSettings, JwtKeys, build};
use agentwire_core::auth::AuthError;

use crate::support::{
    AGENT, Idp, TestClock, TestKey, admit, bearer, claims, jwks, jwks_url_auth, jwt_settings,
    refuse_token, with_jwt,
};

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
    let auth = jwks_url_auth(&idp, TestClock::new());
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

//! The abuse limits over real sockets: a password-guessing loop is answered
//! 429 with `Retry-After` once its address has spent its failures, while a
//! client elsewhere gets in and its turns stay fast; guesses spread over
//! many addresses lock the agent they aim at; sockets per address are
//! capped; a caller's turns are counted across its connections. Clients
//! come from different loopback addresses (127.0.0.x) by binding their
//! sockets before connecting.

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::TcpSocket;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::credentials::{ALICE_KEY, BOB_KEY, auth_yaml};
use crate::support::{Client, Dialect, TestServer, http_request_from, metric};

const PASSWORD: &str = "correct horse battery staple";

fn vault_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| agentwire_auth::hash_password(PASSWORD).unwrap())
}

/// A server with API keys, a password agent `vault`, and `limits` in
/// `server.limits` (indented by four spaces).
async fn server(limits: &str) -> TestServer {
    let vault = format!(
        "  - name: vault\n    handler: echo\n    password_argon2: '{}'\n",
        vault_hash()
    );
    TestServer::with_server_and_runtime(&format!("  limits:\n{limits}"), &auth_yaml(), &vault).await
}

/// What a refused upgrade answered: status, `Retry-After`, body.
#[derive(Debug, PartialEq)]
struct Refused {
    status: u16,
    retry_after: Option<u64>,
    body: String,
}

/// Opens `path` from the loopback address `127.0.0.<host>`.
async fn upgrade_from(
    server: &TestServer,
    host: u8,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Client, Refused> {
    let socket = TcpSocket::new_v4().unwrap();
    let source: IpAddr = format!("127.0.0.{host}").parse().unwrap();
    socket.bind(SocketAddr::new(source, 0)).unwrap();
    let stream = socket.connect(server.addr).await.unwrap();
    let mut request = server.url(path).into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    match tokio_tungstenite::client_async_tls_with_config(request, stream, None, None).await {
        Ok((ws, _)) => Ok(Client::new(ws, Dialect::of_path(path))),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(Refused {
            status: response.status().as_u16(),
            retry_after: response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse().unwrap()),
            body: String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned(),
        }),
        Err(e) => panic!("connect failed: {e}"),
    }
}

fn vault_with(password: &str) -> String {
    format!("/ws/agent/vault?password={}", password.replace(' ', "%20"))
}

/// One echo turn on a Gnosari socket: how long it took.
async fn gnosari_turn(client: &mut Client) -> Duration {
    let started = Instant::now();
    client.send_json(json!({"message": "ping"})).await;
    let events = client.recv_gnosari_turn().await;
    assert_eq!(
        events.last().unwrap()["type"],
        "agent_completed",
        "{events:?}"
    );
    started.elapsed()
}

#[tokio::test]
async fn a_guessing_loop_is_answered_429_while_a_client_elsewhere_stays_fast() {
    let server = server("    auth_failures_per_address_per_minute: 5").await;
    let mut visitor = upgrade_from(&server, 2, &vault_with(PASSWORD), &[])
        .await
        .expect("the right password admits");

    for guess in 0..5 {
        let refused = upgrade_from(&server, 1, &vault_with(&format!("guess-{guess}")), &[])
            .await
            .err()
            .expect("a wrong password is refused");
        assert_eq!(
            (refused.status, refused.body.as_str()),
            (403, "forbidden\n")
        );
    }
    // The address has spent its failures: refused before the password is
    // checked, the right one too, with when to come back (a failure is
    // forgiven every 12 s at 5 per minute).
    for password in ["guess-5", PASSWORD] {
        let refused = upgrade_from(&server, 1, &vault_with(password), &[])
            .await
            .err()
            .expect("throttled");
        assert_eq!(refused.status, 429, "{refused:?}");
        assert_eq!(refused.body, "too many failed authentication attempts\n");
        let retry_after = refused.retry_after.expect("Retry-After");
        assert!((1..=12).contains(&retry_after), "{retry_after}");
    }
    // A flood of throttled guesses costs no Argon2 run: another address's
    // turns stay fast meanwhile, and it can still sign in.
    let flood = (0..50).map(|guess| {
        let server = &server;
        async move {
            upgrade_from(server, 1, &vault_with(&format!("flood-{guess}")), &[])
                .await
                .err()
                .expect("throttled")
                .status
        }
    });
    let (statuses, took) = tokio::join!(futures_util::future::join_all(flood), async {
        let mut slowest = Duration::ZERO;
        for _ in 0..5 {
            slowest = slowest.max(gnosari_turn(&mut visitor).await);
        }
        slowest
    });
    assert!(statuses.iter().all(|s| *s == 429), "{statuses:?}");
    assert!(
        took < Duration::from_millis(500),
        "a turn took {took:?} during the flood"
    );
    assert!(
        upgrade_from(&server, 3, &vault_with(PASSWORD), &[])
            .await
            .is_ok()
    );

    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(metric(&metrics, "agentwire_auth_failures_total"), 5.0);
    assert_eq!(
        metric(
            &metrics,
            "agentwire_abuse_refusals_total{limit=\"auth_per_address\"}"
        ),
        52.0
    );
    server.stop().await;
}

#[tokio::test]
async fn guesses_spread_over_addresses_lock_the_agent_they_aim_at() {
    let server = server("    auth_failures_per_agent_per_minute: 3").await;
    for host in 2..=4 {
        let refused = upgrade_from(&server, host, &vault_with("nope"), &[])
            .await
            .err();
        assert_eq!(refused.map(|r| r.status), Some(403));
    }
    let refused = upgrade_from(&server, 5, &vault_with(PASSWORD), &[])
        .await
        .err()
        .expect("the agent is locked");
    assert_eq!(refused.status, 429);
    assert!(refused.retry_after.unwrap() >= 1);
    // Other agents are not.
    let alice = format!("Bearer {ALICE_KEY}");
    assert!(
        upgrade_from(&server, 5, "/ws?agent=echo", &[("Authorization", &alice)])
            .await
            .is_ok()
    );
    server.stop().await;
}

#[tokio::test]
async fn sockets_per_address_are_capped_until_one_closes() {
    let server = server("    max_connections_per_address: 2").await;
    let alice = format!("Bearer {ALICE_KEY}");
    let headers = [("Authorization", alice.as_str())];
    let first = upgrade_from(&server, 1, "/ws?agent=echo", &headers)
        .await
        .unwrap();
    let _second = upgrade_from(&server, 1, "/ws/agent/echo", &[("X-Auth-Token", ALICE_KEY)])
        .await
        .unwrap();
    let refused = upgrade_from(&server, 1, "/ws?agent=echo", &headers)
        .await
        .err()
        .expect("a third socket from the address is refused");
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (429, "too many connections from this address\n")
    );
    assert!(
        upgrade_from(&server, 2, "/ws?agent=echo", &headers)
            .await
            .is_ok()
    );
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match upgrade_from(&server, 1, "/ws?agent=echo", &headers).await {
            Ok(_) => break,
            Err(refused) => assert!(Instant::now() < deadline, "{refused:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, metrics) = server.get("/metrics").await;
    assert!(
        metric(
            &metrics,
            "agentwire_abuse_refusals_total{limit=\"connections_per_address\"}"
        ) >= 1.0
    );
    server.stop().await;
}

#[tokio::test]
async fn a_callers_turns_are_counted_across_its_connections() {
    let server = server("    turns_per_minute_per_caller: 3").await;
    let alice = format!("Bearer {ALICE_KEY}");
    let mut omnia = upgrade_from(&server, 1, "/ws?agent=echo", &[("Authorization", &alice)])
        .await
        .unwrap();
    omnia.recv().await;
    let mut gnosari = upgrade_from(&server, 2, "/ws/agent/echo", &[("X-Auth-Token", ALICE_KEY)])
        .await
        .unwrap();
    for i in 0..2 {
        omnia
            .send_json(json!({"type": "message", "content": format!("hi {i}")}))
            .await;
        let turn = omnia.recv_turn().await;
        assert_eq!(turn.last().unwrap()["type"], "done", "{turn:?}");
    }
    gnosari_turn(&mut gnosari).await;
    // Alice's fourth turn this minute, on either socket.
    omnia
        .send_json(json!({"type": "message", "content": "one more"}))
        .await;
    let refused = omnia.recv().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"]["code"], "RATE_LIMITED");
    assert_eq!(refused["error"]["message"], "turn rate limit exceeded");
    gnosari.send_json(json!({"message": "one more"})).await;
    let refused = gnosari.recv_event().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"], "turn rate limit exceeded");
    // Bob is another caller.
    let bob = format!("Bearer {BOB_KEY}");
    let mut other = upgrade_from(&server, 1, "/ws?agent=echo", &[("Authorization", &bob)])
        .await
        .unwrap();
    other.recv().await;
    other
        .send_json(json!({"type": "message", "content": "hi"}))
        .await;
    assert_eq!(other.recv_turn().await.last().unwrap()["type"], "done");
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "agentwire_abuse_refusals_total{limit=\"turns_per_caller\"}"
        ),
        2.0
    );
    server.stop().await;
}

#[tokio::test]
async fn failed_keys_on_the_sessions_and_media_apis_are_throttled_by_address() {
    let dir = tempfile::tempdir().unwrap();
    let storage = format!(
        "  media:\n    backend: local\n    path: {}\n{}",
        dir.path().join("media").display(),
        auth_yaml()
    );
    let server = TestServer::with_storage_yaml(
        "  limits:\n    auth_failures_per_address_per_minute: 3",
        &storage,
    )
    .await;
    let from = |host: u8, path: &'static str, key: String| {
        let addr = server.addr;
        async move {
            let source: IpAddr = format!("127.0.0.{host}").parse().unwrap();
            let auth = format!("Bearer {key}");
            http_request_from(source, addr, "GET", path, &[("Authorization", &auth)]).await
        }
    };
    const SESSIONS: &str = "/api/v1/sessions";
    const MEDIA: &str = "/media/info/s/0123456789abcdef0123456789abcdef";

    for guess in 0..3 {
        let refused = from(1, SESSIONS, format!("guess-{guess}")).await;
        assert_eq!(
            (refused.status, refused.json()),
            (401, json!({"error": "unauthorized"}))
        );
    }
    // Spent: refused before the key is checked, the right one too, on the
    // sessions API (JSON) and the media routes (plain text, as theirs are).
    let throttled = from(1, SESSIONS, ALICE_KEY.to_owned()).await;
    assert_eq!(
        (throttled.status, throttled.json()),
        (
            429,
            json!({"error": "too many failed authentication attempts"})
        )
    );
    let wait: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=20).contains(&wait), "Retry-After {wait}");
    let media = from(1, MEDIA, ALICE_KEY.to_owned()).await;
    assert_eq!(
        (media.status, media.text()),
        (429, "too many failed authentication attempts\n".to_owned())
    );
    assert!(media.header("retry-after").is_some());

    // Another address is not held back, and a valid key counts nothing.
    let listed = from(2, SESSIONS, ALICE_KEY.to_owned()).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let unknown = from(2, MEDIA, ALICE_KEY.to_owned()).await;
    assert_eq!(unknown.status, 404, "{}", unknown.text());

    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(metric(&metrics, "agentwire_auth_failures_total"), 3.0);
    assert_eq!(
        metric(
            &metrics,
            "agentwire_abuse_refusals_total{limit=\"auth_per_address\"}"
        ),
        2.0
    );
    server.stop().await;
}

#[tokio::test]
async fn a_guesser_spreading_over_two_replicas_gets_the_failures_of_one() {
    let Some((postgres, redis)) = crate::replicas::servers() else {
        return;
    };
    let prefix = crate::replicas::unique_prefix("guess");
    let top_level = format!(
        "  limits:\n    auth_failures_per_address_per_minute: 4\n{}{}",
        crate::replicas::deployment(&postgres, &redis, &prefix, "3s"),
        auth_yaml()
    );
    let vault = format!(
        "  - name: vault\n    handler: echo\n    password_argon2: '{}'\n",
        vault_hash()
    );
    let one = TestServer::with_top_level_and_agents(&top_level, &vault).await;
    let two = TestServer::with_top_level_and_agents(&top_level, &vault).await;
    for (guess, replica) in [&one, &two, &one, &two].into_iter().enumerate() {
        let refused = upgrade_from(replica, 1, &vault_with(&format!("guess-{guess}")), &[])
            .await
            .err()
            .expect("a wrong password is refused");
        assert_eq!(refused.status, 403, "{refused:?}");
    }
    // Four failures in all: both replicas refuse the address now.
    for replica in [&one, &two] {
        let refused = upgrade_from(replica, 1, &vault_with(PASSWORD), &[])
            .await
            .err()
            .expect("throttled");
        assert_eq!(refused.status, 429, "{refused:?}");
        // A failure is forgiven every 15 s at 4 per minute.
        let wait = refused.retry_after.expect("Retry-After");
        assert!((12..=15).contains(&wait), "{refused:?}");
    }
    // Another address is not.
    let admitted = upgrade_from(&two, 2, &vault_with(PASSWORD), &[]).await;
    assert!(admitted.is_ok(), "{:?}", admitted.err());
    one.stop().await;
    two.stop().await;
}

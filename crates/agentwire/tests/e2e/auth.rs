//! Identity on the Omnia dialect: API keys and JWTs at the upgrade, agent
//! access levels, session ownership, media ownership, and credential
//! lifetime (4401, `CREDENTIAL_EXPIRED`, `credential_refresh`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::credentials::{
    ALICE_KEY, BOB_KEY, SECRET, auth_yaml, base64url, hs256, now_secs, token,
};
use crate::support::{Client, TestServer, assert_error, stored_messages};

const EXTRA_AGENTS: &str = "  - name: open
    handler: test
    access_level: public
  - name: disclosed
    handler: echo
    requires_ai_disclosure: true
    memory_facet: project-1
";

async fn server() -> TestServer {
    TestServer::with_runtime(&auth_yaml(), EXTRA_AGENTS).await
}

async fn connect_as(
    server: &TestServer,
    query: &str,
    bearer: &str,
) -> Result<Client, (u16, String)> {
    let auth = format!("Bearer {bearer}");
    server
        .try_connect_with(query, &[("Authorization", &auth)])
        .await
}

async fn connected(client: &mut Client) -> Value {
    let frame = client.recv().await;
    assert_eq!(frame["type"], "connected");
    frame
}

#[tokio::test]
async fn private_agents_need_a_credential_and_public_ones_do_not() {
    let server = server().await;
    let unauthorized = Some((401, "unauthorized\n".to_owned()));
    assert_eq!(
        server.try_connect("agent=test-agent").await.err(),
        unauthorized
    );
    let mut open = server
        .try_connect("agent=open")
        .await
        .expect("public agent");
    connected(&mut open).await;
    let wrong_scheme = server
        .try_connect_with(
            "agent=test-agent",
            &[("Authorization", &format!("Basic {ALICE_KEY}"))],
        )
        .await;
    assert_eq!(
        wrong_scheme.err(),
        unauthorized,
        "only Bearer carries a credential"
    );
}

#[tokio::test]
async fn api_keys_admit_their_subject_and_respect_the_allow_list() {
    let server = server().await;
    let mut alice = connect_as(&server, "agent=test-agent", ALICE_KEY)
        .await
        .expect("alice");
    connected(&mut alice).await;
    alice.say("hi").await;
    assert_eq!(alice.recv().await["content"], "echo: hi");
    let unknown = connect_as(&server, "agent=test-agent", "ak_nobody_0123456789")
        .await
        .err();
    assert_eq!(unknown, Some((401, "unauthorized\n".to_owned())));
    let bob_elsewhere = connect_as(&server, "agent=test-agent", BOB_KEY).await.err();
    assert_eq!(bob_elsewhere, Some((403, "forbidden\n".to_owned())));
    assert!(connect_as(&server, "agent=echo", BOB_KEY).await.is_ok());
}

#[tokio::test]
async fn jwts_are_checked_and_refused_outright_when_bad() {
    let server = server().await;
    assert!(
        connect_as(&server, "agent=test-agent", &token("carol", 600))
            .await
            .is_ok()
    );
    let claims = |iss: &str, aud: &str, exp: i64| json!({"iss": iss, "aud": aud, "sub": "carol", "exp": exp});
    let future = now_secs() + 600;
    let refused = [
        (
            "expired",
            hs256(
                &claims("https://issuer.test", "agentwire", now_secs() - 60),
                SECRET,
            ),
        ),
        (
            "wrong issuer",
            hs256(&claims("https://evil.test", "agentwire", future), SECRET),
        ),
        (
            "wrong audience",
            hs256(&claims("https://issuer.test", "other", future), SECRET),
        ),
        (
            "bad signature",
            hs256(
                &claims("https://issuer.test", "agentwire", future),
                "another-secret-of-at-least-32-bytes!!",
            ),
        ),
        ("alg none", {
            let header = base64url(br#"{"alg":"none","typ":"JWT"}"#);
            let payload = base64url(
                claims("https://issuer.test", "agentwire", future)
                    .to_string()
                    .as_bytes(),
            );
            format!("{header}.{payload}.")
        }),
        (
            "not yet valid",
            hs256(
                &json!({"iss": "https://issuer.test", "aud": "agentwire", "sub": "carol", "exp": future, "nbf": future - 60}),
                SECRET,
            ),
        ),
    ];
    for (why, bad) in refused {
        // The open agent would admit an anonymous caller: a bad credential
        // must not fall through to anonymous access.
        let result = connect_as(&server, "agent=open", &bad).await.err();
        assert_eq!(result, Some((401, "unauthorized\n".to_owned())), "{why}");
    }
}

#[tokio::test]
async fn another_user_cannot_resume_a_session() {
    let server = server().await;
    let mut alice = connect_as(&server, "agent=test-agent", ALICE_KEY)
        .await
        .unwrap();
    let session = connected(&mut alice).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    alice.say("secret plans").await;
    alice.recv().await;

    let mut carol = connect_as(&server, "agent=test-agent", &token("carol", 600))
        .await
        .unwrap();
    connected(&mut carol).await;
    carol
        .send_json(json!({"type": "message", "content": "x", "session_id": session}))
        .await;
    assert_error(
        &carol.recv().await,
        "SESSION_EXPIRED",
        "session context has expired; start a new session",
    );

    // Alice, on a new connection with a token this time, is the same owner
    // only if the subject matches: her API key's subject is "alice".
    let mut alice_again = connect_as(&server, "agent=test-agent", &token("alice", 600))
        .await
        .unwrap();
    connected(&mut alice_again).await;
    alice_again
        .send_json(json!({"type": "message", "content": "x", "session_id": session, "metadata": {"mock_scenario": "history"}}))
        .await;
    let done = alice_again.recv().await;
    assert_eq!(
        done["content"], "user: secret plans\nassistant: echo: secret plans\n",
        "{done}"
    );

    let mut anonymous = server.try_connect("agent=open").await.unwrap();
    let anon_session = connected(&mut anonymous).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    anonymous.say("anon").await;
    anonymous.recv().await;
    let mut signed_in = connect_as(&server, "agent=open", ALICE_KEY).await.unwrap();
    connected(&mut signed_in).await;
    signed_in
        .send_json(json!({"type": "message", "content": "x", "session_id": anon_session}))
        .await;
    assert_eq!(
        signed_in.recv().await["error"]["code"],
        "SESSION_EXPIRED",
        "anonymous sessions resume only anonymously"
    );
}

#[tokio::test]
async fn the_socket_closes_with_4401_at_the_credential_deadline() {
    let server = server().await;
    let started = Instant::now();
    // 4 s of life: the deadline is expiry less min(30 s, 2 s) = 2 s from now.
    let mut client = connect_as(&server, "agent=test-agent", &token("dave", 4))
        .await
        .unwrap();
    connected(&mut client).await;
    let close = client
        .expect_close(Duration::from_secs(5))
        .await
        .expect("a close frame");
    let waited = started.elapsed();
    assert_eq!(u16::from(close.code), 4401);
    assert_eq!(close.reason.as_str(), "credential expired");
    assert!(
        waited > Duration::from_millis(900) && waited < Duration::from_millis(3500),
        "{waited:?}"
    );
}

#[tokio::test]
async fn after_the_deadline_messages_are_refused_and_the_close_waits_for_the_turn() {
    let server = server().await;
    let mut client = connect_as(&server, "agent=test-agent", &token("erin", 2))
        .await
        .unwrap();
    connected(&mut client).await;
    client.script("slow", "long job").await; // 2 s; the deadline is 1 s away
    tokio::time::sleep(Duration::from_millis(1300)).await;
    client.say("one more").await;
    assert_error(
        &client.recv().await,
        "CREDENTIAL_EXPIRED",
        "credential expired",
    );
    assert_eq!(
        client.recv().await["content"],
        "done: long job",
        "the running turn finishes"
    );
    let close = client
        .expect_close(Duration::from_secs(2))
        .await
        .expect("close");
    assert_eq!(u16::from(close.code), 4401);
    let stored = stored_messages(&server.db_path);
    assert!(
        stored.iter().all(|m| m.3 != "one more"),
        "the late message was not processed"
    );
}

#[tokio::test]
async fn a_refresh_for_the_same_user_that_expires_later_extends_the_connection() {
    let server = server().await;
    let mut client = connect_as(&server, "agent=test-agent", &token("frank", 2))
        .await
        .unwrap();
    connected(&mut client).await;
    client
        .send_json(json!({"type": "credential_refresh", "token": token("frank", 600)}))
        .await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    client.say("still here").await;
    assert_eq!(client.recv().await["content"], "echo: still here");
}

#[tokio::test]
async fn refreshes_for_another_user_or_an_earlier_expiry_are_ignored() {
    let server = server().await;
    for refresh in [
        token("mallory", 600),
        token("grace", 1),
        "not-a-jwt".to_owned(),
    ] {
        let mut client = connect_as(&server, "agent=test-agent", &token("grace", 2))
            .await
            .unwrap();
        connected(&mut client).await;
        client
            .send_json(json!({"type": "credential_refresh", "token": refresh}))
            .await;
        let close = client
            .expect_close(Duration::from_secs(3))
            .await
            .expect("closes at the old deadline");
        assert_eq!(u16::from(close.code), 4401);
    }
}

#[tokio::test]
async fn disclosure_and_memory_facet_follow_the_agent() {
    let server = server().await;
    let mut client = connect_as(&server, "agent=disclosed", ALICE_KEY)
        .await
        .unwrap();
    let hello = connected(&mut client).await;
    assert_eq!(hello["connected"]["ai_disclosure"], true);
    assert_eq!(
        hello["connected"]["memory_facet"], "project-1",
        "the agent's facet when none is named"
    );
    let session = hello["session_id"].as_str().unwrap().to_owned();
    client.send_json(json!({"type": "disclosure_ack"})).await;
    client.say("ok").await;
    assert_eq!(
        client.recv().await["content"],
        "Echo: ok",
        "no reply to disclosure_ack"
    );
    let events: Vec<_> = stored_messages(&server.db_path)
        .into_iter()
        .filter(|m| m.0 == session && m.2 == "event")
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].3, "ai.disclosure.displayed");
    let other = connect_as(&server, "agent=disclosed&memory_facet=project-2", ALICE_KEY)
        .await
        .err();
    assert_eq!(other, Some((403, "memory_facet not allowed\n".to_owned())));
    let mut open = server.try_connect("agent=open").await.unwrap();
    assert!(
        connected(&mut open).await["connected"]
            .get("ai_disclosure")
            .is_none(),
        "absent when the agent says nothing"
    );
}

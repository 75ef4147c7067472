//! The `/ws` upgrade: refusals with their status and body, and `connected`.

use crate::support::TestServer;

#[tokio::test]
async fn missing_agent_is_400() {
    let server = TestServer::start().await;
    let refused = server.try_connect("namespace=x").await.err();
    assert_eq!(
        refused,
        Some((400, "agent parameter is required\n".to_owned()))
    );
    let refused = server.try_connect("agent=").await.err();
    assert_eq!(
        refused,
        Some((400, "agent parameter is required\n".to_owned()))
    );
}

#[tokio::test]
async fn unknown_agent_is_404() {
    let server = TestServer::start().await;
    let refused = server.try_connect("agent=nobody").await.err();
    assert_eq!(refused, Some((404, "agent not found\n".to_owned())));
}

#[tokio::test]
async fn connected_is_the_first_frame_with_capabilities() {
    let server = TestServer::start().await;
    let (_client, connected) = server.connect("agent=echo").await;
    let session_id = connected["session_id"].as_str().unwrap();
    assert_eq!(session_id.len(), 36, "a UUID: {session_id}");
    assert_eq!(session_id, session_id.to_lowercase());
    let caps = &connected["connected"]["capabilities"];
    assert_eq!(caps["binary_frames"], false);
    assert_eq!(caps["max_payload_size"], 16_777_216);
    assert_eq!(caps["protocol_version"], 1);
    assert!(
        connected["connected"].get("resumed").is_none(),
        "absent unless true"
    );
    assert!(connected["connected"].get("memory_facet").is_none());
}

/// `resume=` naming a session nothing can re-attach: "false when the facade
/// opened a new one", with or without log positions.
#[tokio::test]
async fn resume_of_an_unknown_session_says_resumed_false() {
    let server = TestServer::start().await;
    let unknown = "0b7f7a2e-3c1d-4f5e-9a8b-1c2d3e4f5a6b";
    for query in [
        format!("agent=echo&resume={unknown}"),
        "agent=echo&resume=not-a-session-id".to_owned(),
        format!("agent=echo&stream=2&resume={unknown}&after=3&epoch=00000000000000ab"),
    ] {
        let (_client, connected) = server.connect(&query).await;
        assert_ne!(connected["session_id"], unknown, "{query}");
        assert_eq!(
            connected["connected"]["resumed"], false,
            "{query}: {connected}"
        );
    }
}

#[tokio::test]
async fn binary_true_is_announced_and_only_the_exact_string_counts() {
    let server = TestServer::start().await;
    let (_c, connected) = server.connect("agent=echo&binary=true").await;
    assert_eq!(
        connected["connected"]["capabilities"]["binary_frames"],
        true
    );
    let (_c, connected) = server.connect("agent=echo&binary=TRUE").await;
    assert_eq!(
        connected["connected"]["capabilities"]["binary_frames"],
        false
    );
}

#[tokio::test]
async fn connected_is_sent_once_and_first_agent_value_wins() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=echo&agent=test-agent").await;
    client.say("hi").await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "no second connected: {done}");
    assert_eq!(done["content"], "Echo: hi");
    assert_eq!(done["session_id"], connected["session_id"]);
}

#[tokio::test]
async fn memory_facet_is_validated_and_echoed() {
    let server = TestServer::start().await;
    let (_c, connected) = server
        .connect("agent=echo&memory_facet=proj-1%2Fa.b%3Ac")
        .await;
    assert_eq!(connected["connected"]["memory_facet"], "proj-1/a.b:c");
    let bad = (400, "invalid memory_facet\n".to_owned());
    for query in [
        "agent=echo&memory_facet=",
        "agent=echo&memory_facet=-starts-with-dash",
        "agent=echo&memory_facet=has%20space",
        "agent=echo&memory_facet=a&memory_facet=b",
    ] {
        assert_eq!(
            server.try_connect(query).await.err(),
            Some(bad.clone()),
            "{query}"
        );
    }
    let long = format!("agent=echo&memory_facet={}", "a".repeat(129));
    assert_eq!(server.try_connect(&long).await.err(), Some(bad));
    let max = format!("agent=echo&memory_facet={}", "a".repeat(128));
    assert!(server.try_connect(&max).await.is_ok());
}

#[tokio::test]
async fn same_origin_is_required_without_an_allow_list() {
    let server = TestServer::start().await;
    let host = server.addr.to_string();
    let same = format!("http://{host}");
    assert!(
        server
            .try_connect_with("agent=echo", &[("Origin", &same)])
            .await
            .is_ok()
    );
    let refused = server
        .try_connect_with("agent=echo", &[("Origin", "http://evil.example")])
        .await
        .err();
    assert_eq!(refused, Some((403, "Forbidden\n".to_owned())));
}

#[tokio::test]
async fn allow_list_admits_listed_origins_only() {
    let server =
        TestServer::with_server_yaml("  allowed_origins: [\"https://App.example.com\"]").await;
    let ok = server
        .try_connect_with("agent=echo", &[("Origin", "https://app.example.com")])
        .await;
    assert!(ok.is_ok());
    let refused = server
        .try_connect_with("agent=echo", &[("Origin", "https://other.example.com")])
        .await
        .err();
    assert_eq!(refused, Some((403, "Forbidden\n".to_owned())));
    assert!(
        server.try_connect("agent=echo").await.is_ok(),
        "no Origin header is allowed"
    );
}

#[tokio::test]
async fn unauthenticated_callers_are_refused_when_not_allowed() {
    let server = TestServer::with_server_yaml("  allow_unauthenticated: false").await;
    let refused = server.try_connect("agent=echo").await.err();
    assert_eq!(refused, Some((401, "unauthorized\n".to_owned())));
}

#[tokio::test]
async fn a_plain_get_on_ws_is_400() {
    let server = TestServer::start().await;
    let (status, body) = server.get("/ws?agent=echo").await;
    assert_eq!((status, body.as_str()), (400, "Bad Request\n"));
}

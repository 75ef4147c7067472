//! The operational routes: `/healthz`, `/readyz`, `/metrics`.

use crate::support::{TestServer, metric};

#[tokio::test]
async fn healthz_and_readyz_answer_ok() {
    let server = TestServer::start().await;
    assert_eq!(server.get("/healthz").await, (200, "ok\n".to_owned()));
    assert_eq!(server.get("/readyz").await, (200, "ok\n".to_owned()));
    server.stop().await;
}

#[tokio::test]
async fn metrics_count_connections_turns_and_errors() {
    let server = TestServer::start().await;
    let (status, body) = server.get("/metrics").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&body, "agentwire_connections_active"), 0.0);
    assert_eq!(metric(&body, "agentwire_turns_total"), 0.0);
    assert_eq!(
        metric(&body, "agentwire_errors_total{code=\"INVALID_MESSAGE\"}"),
        0.0
    );

    let (mut client, _) = server.connect("agent=echo").await;
    client.say("count me").await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["content"], "Echo: count me", "{done}");
    client.send_invalid_text("this is not json").await;
    let error = client.recv().await;
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["error"]["code"], "INVALID_MESSAGE", "{error}");

    let (status, body) = server.get("/metrics").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&body, "agentwire_connections_active"), 1.0, "{body}");
    assert!(metric(&body, "agentwire_turns_total") >= 1.0, "{body}");
    assert_eq!(
        metric(&body, "agentwire_errors_total{code=\"INVALID_MESSAGE\"}"),
        1.0,
        "{body}"
    );
    server.stop().await;
}

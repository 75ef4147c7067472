//! Media belongs to the owner of its session: another user gets 404 for it,
//! and a caller without a credential gets 401 once authentication is on.

use std::path::Path;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::support::TestServer;

const ALICE: &str = "ak_media_alice_0123456789";
const BOB: &str = "ak_media_bob_0123456789";

fn digest(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server with local media storage in `media_dir` and the API keys of
/// alice and bob.
async fn server_for_alice_and_bob(media_dir: &Path) -> TestServer {
    // Continues the harness's `storage:` block, then adds `auth:`.
    let top_level = format!(
        "  media:\n    backend: local\n    path: {}\nauth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\n    - id: b\n      sha256: {}\n      subject: bob\n",
        media_dir.display(),
        digest(ALICE),
        digest(BOB)
    );
    TestServer::with_runtime(&top_level, "").await
}

fn json_headers(auth: &str) -> [(&'static str, &str); 2] {
    [
        ("Content-Type", "application/json"),
        ("Authorization", auth),
    ]
}

/// Bob cannot ask for an upload into alice's `session`; alice can, and
/// uploads `hello`: the media's id.
async fn upload_as_alice_not_bob(
    server: &TestServer,
    session: &str,
    as_alice: &str,
    as_bob: &str,
) -> String {
    let request = json!({"session_id": session, "filename": "a.txt", "mime_type": "text/plain", "size_bytes": 5}).to_string();
    let bob_request = server
        .http(
            "POST",
            "/media/request-upload",
            &json_headers(as_bob),
            request.as_bytes(),
        )
        .await;
    assert_eq!(
        bob_request.status,
        404,
        "bob cannot upload into alice's session: {}",
        bob_request.text()
    );
    let ready = server
        .http(
            "POST",
            "/media/request-upload",
            &json_headers(as_alice),
            request.as_bytes(),
        )
        .await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    let ready = ready.json();
    let upload_path = ready["upload_url"]
        .as_str()
        .unwrap()
        .split_once("/media/")
        .map(|(_, p)| format!("/media/{p}"))
        .unwrap();
    let put = server
        .http(
            "PUT",
            &upload_path,
            &[("Content-Type", "text/plain")],
            b"hello",
        )
        .await;
    assert_eq!(put.status, 204, "{}", put.text());

    ready["storage_ref"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned()
}

/// The media's info and download: alice's; not found for bob; unauthorized
/// without a credential or with a bad one.
async fn assert_only_alice_reads(
    server: &TestServer,
    session: &str,
    media_id: &str,
    as_alice: &str,
    as_bob: &str,
) {
    for kind in ["info", "download"] {
        let path = format!("/media/{kind}/{session}/{media_id}");
        assert_eq!(
            server
                .http("GET", &path, &[("Authorization", as_alice)], b"")
                .await
                .status,
            200,
            "{kind}"
        );
        let bob = server
            .http("GET", &path, &[("Authorization", as_bob)], b"")
            .await;
        assert_eq!(
            (bob.status, bob.text().as_str()),
            (404, "not found\n"),
            "{kind} as bob"
        );
        let nobody = server.http("GET", &path, &[], b"").await;
        assert_eq!(nobody.status, 401, "{kind} without a credential");
        let forged = server
            .http(
                "GET",
                &path,
                &[("Authorization", "Bearer ak_forged_0123456789")],
                b"",
            )
            .await;
        assert_eq!(forged.status, 401, "{kind} with a bad credential");
    }
}

#[tokio::test]
async fn another_users_media_is_not_found() {
    let media_dir = tempfile::tempdir().unwrap();
    let server = server_for_alice_and_bob(media_dir.path()).await;
    let as_alice = format!("Bearer {ALICE}");
    let as_bob = format!("Bearer {BOB}");

    // Alice's session exists once she has said something in it.
    let mut alice = server
        .try_connect_with("agent=test-agent", &[("Authorization", &as_alice)])
        .await
        .unwrap();
    let session = alice.recv().await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    alice.say("hello").await;
    alice.recv().await;

    let media_id = upload_as_alice_not_bob(&server, &session, &as_alice, &as_bob).await;
    assert_only_alice_reads(&server, &session, &media_id, &as_alice, &as_bob).await;
    let download = server
        .http(
            "GET",
            &format!("/media/download/{session}/{media_id}"),
            &[("Authorization", &as_alice)],
            b"",
        )
        .await;
    assert_eq!(download.body, b"hello");
}

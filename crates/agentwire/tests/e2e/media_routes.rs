//! The media HTTP routes (`/media/*`) on a real directory: `request-upload`
//! and its refusals, every route's documented statuses, URLs that expire,
//! bodies over their size, and paths that try to leave the media directory.

use std::time::Duration;

use serde_json::json;

use crate::functions::assert_matches;
use crate::media::{
    MID, MediaServer, assert_refused, files, path_of, put_upload, request_upload, sample,
};
use crate::support::{HttpResponse, TestServer, assert_error, chunked};

/// `POST /media/request-upload` with the JSON `body`.
async fn post_request_upload(server: &TestServer, body: &str) -> HttpResponse {
    server
        .http(
            "POST",
            "/media/request-upload",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .await
}

/// Each malformed or unacceptable request for an upload (the server takes
/// at most 1000 bytes) is refused with its status and text.
async fn assert_request_upload_refusals(server: &TestServer) {
    let post = |body: &'static str| post_request_upload(server, body);
    assert_refused(&post("{not json").await, 400, "invalid request body");
    assert_refused(
        &post(r#"{"session_id": 5}"#).await,
        400,
        "invalid request body",
    );
    assert_refused(
        &post(r#"{"session_id":"","filename":"a","mime_type":"text/plain","size_bytes":1}"#).await,
        400,
        "invalid storage reference",
    );
    assert_refused(
        &post(r#"{"session_id":"..","filename":"a","mime_type":"text/plain","size_bytes":1}"#)
            .await,
        400,
        "invalid storage reference",
    );
    assert_refused(
        &post(r#"{"session_id":"s","filename":"a","mime_type":"","size_bytes":1}"#).await,
        415,
        "unsupported media type",
    );
    assert_refused(
        &post(r#"{"session_id":"s","filename":"a","mime_type":"text plain","size_bytes":1}"#).await,
        415,
        "unsupported media type",
    );
    assert_refused(
        &post(r#"{"session_id":"s","filename":"a","mime_type":"text/plain","size_bytes":1001}"#)
            .await,
        413,
        "file too large",
    );
    assert_refused(
        &post(r#"{"session_id":"s","filename":"a","mime_type":"text/plain","size_bytes":0}"#).await,
        400,
        "invalid request body",
    );
}

#[tokio::test]
async fn request_upload_over_http_and_its_refusals() {
    let media = MediaServer::start("", "    max_bytes: 1000\n").await;
    let ok = post_request_upload(
        &media.server,
        r#"{"session_id":"sess-http","filename":"a.txt","mime_type":"text/plain","size_bytes":3}"#,
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.header("content-type"), Some("application/json"));
    let credentials = ok.json();
    let keys: Vec<_> = credentials.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "expires_at",
            "headers",
            "method",
            "storage_ref",
            "upload_id",
            "upload_url"
        ]
    );
    let id = credentials["upload_id"].as_str().unwrap();
    assert_eq!(
        credentials["storage_ref"],
        format!("omnia://sessions/sess-http/media/{id}")
    );
    let put = put_upload(&media.server, &credentials, b"abc").await;
    assert_eq!(put.status, 204);
    let info = media
        .server
        .http("GET", &format!("/media/info/sess-http/{id}"), &[], b"")
        .await;
    assert_eq!(info.json()["size_bytes"], 3);
    // The answers are the ones `/openapi.json` documents.
    let (_, document) = media.server.get("/openapi.json").await;
    let document: serde_json::Value = serde_json::from_str(&document).unwrap();
    assert_matches(&document, "/components/schemas/UploadTicket", &credentials);
    assert_matches(&document, "/components/schemas/MediaInfo", &info.json());
    let refusals = "/paths/~1media~1request-upload/post/responses";
    assert!(
        document
            .pointer(&format!("{refusals}/415/content/text~1plain"))
            .is_some()
    );

    assert_request_upload_refusals(&media.server).await;
}

#[tokio::test]
async fn every_route_answers_its_documented_statuses() {
    let media = MediaServer::start("", "").await;
    let server = &media.server;
    let get = |path: String| async move { server.http("GET", &path, &[], b"").await };

    assert_refused(
        &get(format!("/media/info/sess-1/{MID}")).await,
        404,
        "not found",
    );
    assert_refused(
        &get(format!("/media/download/sess-1/{MID}")).await,
        404,
        "not found",
    );
    assert_refused(
        &get("/media/info/sess-1/not-hex".into()).await,
        400,
        "invalid storage reference",
    );
    assert_refused(
        &get(format!("/media/info/sess-1/{}", MID.to_uppercase())).await,
        400,
        "invalid storage reference",
    );
    assert_refused(
        &get(format!("/media/info/a/b/{MID}")).await,
        400,
        "invalid path",
    );
    assert_refused(
        &get("/media/info/only-one".into()).await,
        400,
        "invalid path",
    );

    let response = server
        .http("GET", &format!("/media/upload/{MID}"), &[], b"")
        .await;
    assert_refused(&response, 405, "method not allowed");
    assert_eq!(response.header("allow"), Some("PUT"));
    let response = server
        .http("POST", &format!("/media/upload/{MID}"), &[], b"x")
        .await;
    assert_refused(&response, 405, "method not allowed");
    let response = server
        .http("DELETE", &format!("/media/info/s/{MID}"), &[], b"")
        .await;
    assert_refused(&response, 405, "method not allowed");
    assert_eq!(response.header("allow"), Some("GET"));
    let response = server.http("GET", "/media/request-upload", &[], b"").await;
    assert_refused(&response, 405, "method not allowed");

    // Unknown and malformed upload ids.
    let response = server
        .http("PUT", &format!("/media/upload/{MID}"), &[], b"x")
        .await;
    assert_refused(&response, 400, "upload failed");
    let response = server.http("PUT", "/media/upload/xyz", &[], b"x").await;
    assert_refused(&response, 400, "invalid storage reference");
    // Confirming is for direct (cloud) uploads; the local store has none.
    let response = server
        .http("POST", &format!("/media/confirm-upload/{MID}"), &[], b"")
        .await;
    assert_refused(&response, 404, "not found");
}

#[tokio::test]
async fn media_and_upload_urls_expire() {
    let media = MediaServer::start("", "    ttl: 500ms\n").await;
    let (mut client, connected) = media.server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let stale = request_upload(&mut client, "late.txt", "text/plain", 1).await;
    let ready = request_upload(&mut client, "a.txt", "text/plain", 2).await;
    let id = ready["upload_id"].as_str().unwrap();
    let put = put_upload(&media.server, &ready, b"hi").await;
    assert_eq!(put.status, 204, "{}", put.text());
    let info = media
        .server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 200);

    tokio::time::sleep(Duration::from_millis(600)).await;
    for route in ["info", "download"] {
        let response = media
            .server
            .http("GET", &format!("/media/{route}/{session}/{id}"), &[], b"")
            .await;
        assert_refused(&response, 410, "media expired");
    }
    // The upload URL expired too.
    let late = put_upload(&media.server, &stale, b"x").await;
    assert_refused(&late, 400, "upload failed");
    // An expired item cannot be named in a message either.
    client
        .send_json(json!({
            "type": "message",
            "parts": [{"type": "file", "media": {"storage_ref": ready["storage_ref"], "mime_type": "text/plain"}}]
        }))
        .await;
    assert_error(
        &client.recv().await,
        "INVALID_MESSAGE",
        "unknown storage_ref",
    );
    // Its bytes are gone from disk; only the metadata says it expired.
    assert_eq!(
        files(&media.media_dir()),
        [format!("sessions/{session}/{id}.meta")]
    );
}

#[tokio::test]
async fn bodies_over_the_declared_size_or_the_limit_store_nothing() {
    let media = MediaServer::start("", "    max_bytes: 1024\n").await;
    let (mut client, connected) = media.server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let ready = request_upload(&mut client, "a.bin", "application/octet-stream", 100).await;
    let id = ready["upload_id"].as_str().unwrap().to_owned();
    let path = format!("/media/upload/{id}");

    // Over the declared size, announced by Content-Length.
    let response = media.server.http("PUT", &path, &[], &sample(101)).await;
    assert_refused(&response, 413, "file too large");
    // Over the declared size, discovered while streaming a chunked body.
    let response = media
        .server
        .http(
            "PUT",
            &path,
            &[("Transfer-Encoding", "chunked")],
            &chunked(&sample(150), 40),
        )
        .await;
    assert_refused(&response, 413, "file too large");
    let info = media
        .server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_refused(&info, 404, "not found");

    // Declared at the limit, sent over it.
    let at_limit = request_upload(&mut client, "b.bin", "application/octet-stream", 1024).await;
    let response = media
        .server
        .http(
            "PUT",
            path_of(at_limit["upload_url"].as_str().unwrap()),
            &[("Transfer-Encoding", "chunked")],
            &chunked(&sample(1025), 256),
        )
        .await;
    assert_refused(&response, 413, "file too large");

    // Nothing but the two pending upload records is on disk.
    let mut expected = vec![
        format!("uploads/{id}.json"),
        format!("uploads/{}.json", at_limit["upload_id"].as_str().unwrap()),
    ];
    expected.sort();
    assert_eq!(files(&media.media_dir()), expected);

    // The right body still goes through, chunked.
    let response = media
        .server
        .http(
            "PUT",
            &path,
            &[("Transfer-Encoding", "chunked")],
            &chunked(&sample(100), 30),
        )
        .await;
    assert_eq!(response.status, 204, "{}", response.text());
}

#[tokio::test]
async fn path_traversal_never_leaves_the_media_directory() {
    let media = MediaServer::start("", "").await;
    // A file beside the media directory that no request may reach.
    std::fs::write(media.dir.path().join("secret"), b"top secret").unwrap();
    std::fs::write(media.dir.path().join(format!("{MID}.meta")), b"{}").unwrap();
    let attempts = [
        ("GET", format!("/media/info/../{MID}")),
        ("GET", format!("/media/info/%2e%2e/{MID}")),
        ("GET", format!("/media/download/%2e%2e/{MID}")),
        ("GET", format!("/media/download/%2E%2E/{MID}")),
        ("GET", "/media/download/%2e%2e/%2e%2e".to_owned()),
        (
            "GET",
            "/media/download/sessions/..%2f..%2fsecret".to_owned(),
        ),
        ("GET", "/media/download/..%2f..%2f/secret".to_owned()),
        ("GET", "/media/download/../../secret".to_owned()),
        ("GET", format!("/media/info/.%2e/{MID}")),
        ("PUT", "/media/upload/..%2f..%2fsecret".to_owned()),
        ("PUT", "/media/upload/%2e%2e".to_owned()),
        ("POST", "/media/confirm-upload/..%2fsecret".to_owned()),
    ];
    for (method, path) in attempts {
        let response = media.server.http(method, &path, &[], b"x").await;
        assert!(
            [400, 404].contains(&response.status),
            "{method} {path}: {} {}",
            response.status,
            response.text()
        );
        assert!(!response.text().contains("top secret"), "{method} {path}");
    }
    assert_eq!(
        std::fs::read(media.dir.path().join("secret")).unwrap(),
        b"top secret"
    );
    assert!(files(&media.media_dir()).is_empty());
}

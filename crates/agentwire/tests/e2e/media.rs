//! Media storage and upload: `upload_request` on the socket, the `/media/*`
//! HTTP routes on a real directory (and a real S3-compatible server when one
//! is given), and `storage_ref` parts in messages.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{
    Client, HttpResponse, TestServer, assert_error, http_url, s3_bucket, stored_messages,
};

/// A server with local media storage in its own directory.
pub(crate) struct MediaServer {
    pub(crate) server: TestServer,
    pub(crate) dir: tempfile::TempDir,
}

impl MediaServer {
    pub(crate) async fn start(server_yaml: &str, media_yaml: &str) -> MediaServer {
        let dir = tempfile::tempdir().unwrap();
        let storage = format!(
            "  media:\n    backend: local\n    path: {}\n{media_yaml}",
            media_dir(dir.path()).display()
        );
        let server = TestServer::with_storage_yaml(server_yaml, &storage).await;
        MediaServer { server, dir }
    }

    pub(crate) fn media_dir(&self) -> PathBuf {
        media_dir(self.dir.path())
    }
}

pub(crate) fn media_dir(root: &Path) -> PathBuf {
    root.join("media")
}

/// Every file under `dir`, relative, sorted.
pub(crate) fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

pub(crate) fn upload_request(filename: &str, mime_type: &str, size_bytes: i64) -> Value {
    json!({
        "type": "upload_request",
        "upload_request": {"filename": filename, "mime_type": mime_type, "size_bytes": size_bytes}
    })
}

/// Asks for an upload over the socket; the `upload_ready` object.
pub(crate) async fn request_upload(
    client: &mut Client,
    filename: &str,
    mime: &str,
    size: usize,
) -> Value {
    client
        .send_json(upload_request(filename, mime, size as i64))
        .await;
    let frame = client.recv().await;
    assert_eq!(frame["type"], "upload_ready", "{frame}");
    frame["upload_ready"].clone()
}

/// PUTs `body` to the upload URL an `upload_ready` (or `request-upload`)
/// answer gave.
pub(crate) async fn put_upload(server: &TestServer, ready: &Value, body: &[u8]) -> HttpResponse {
    let url = ready["upload_url"].as_str().unwrap();
    server.http("PUT", path_of(url), &[], body).await
}

/// The path and query of an absolute URL.
pub(crate) fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").unwrap().1;
    &rest[rest.find('/').unwrap()..]
}

pub(crate) fn assert_refused(response: &HttpResponse, status: u16, text: &str) {
    assert_eq!(response.status, status, "{response:?} {}", response.text());
    assert_eq!(response.text(), format!("{text}\n"), "{response:?}");
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
}

/// Bytes of every value, so a byte-for-byte comparison means something.
pub(crate) fn sample(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 256) as u8).collect()
}

pub(crate) const MID: &str = "0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn without_media_storage_uploads_are_not_enabled() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    // Storage is checked before the fields, so even a frame without them
    // gets MEDIA_NOT_ENABLED.
    client
        .send_json(upload_request("a.png", "image/png", 10))
        .await;
    client
        .send_invalid_json(json!({"type": "upload_request"}))
        .await;
    for _ in 0..2 {
        let reply = client.recv().await;
        assert_error(&reply, "MEDIA_NOT_ENABLED", "media storage is not enabled");
        assert_eq!(reply["session_id"], connected["session_id"]);
    }
    let response = server
        .http("GET", &format!("/media/info/s/{MID}"), &[], b"")
        .await;
    assert_refused(&response, 404, "media storage is not enabled");
    let response = server
        .http("POST", "/media/request-upload", &[], b"{}")
        .await;
    assert_refused(&response, 404, "media storage is not enabled");
}

#[tokio::test]
async fn upload_request_is_validated_in_the_reference_order() {
    let media = MediaServer::start("", "    max_bytes: 1000\n").await;
    let (mut client, connected) = media.server.connect("agent=test-agent").await;
    let session = connected["session_id"].clone();
    // Frames the contract does not allow, sent as they are.
    let malformed = [
        (
            json!({"type": "upload_request"}),
            "INVALID_MESSAGE",
            "upload_request field is required",
        ),
        (
            json!({"type": "upload_request", "upload_request": {}}),
            "INVALID_MESSAGE",
            "filename is required",
        ),
        (
            json!({"type": "upload_request", "upload_request": {"mime_type": "image/png", "size_bytes": 0}}),
            "INVALID_MESSAGE",
            "filename is required",
        ),
        (
            json!({"type": "upload_request", "upload_request": {"filename": "a.png", "size_bytes": 0}}),
            "INVALID_MESSAGE",
            "mime_type is required",
        ),
        (
            upload_request("a.png", "image/png", 0),
            "INVALID_MESSAGE",
            "size_bytes must be positive",
        ),
        (
            upload_request("a.png", "image/png", -5),
            "INVALID_MESSAGE",
            "size_bytes must be positive",
        ),
    ];
    for (frame, code, message) in malformed {
        client.send_invalid_json(frame.clone()).await;
        assert_upload_refused(&mut client, &frame, code, message, &session).await;
    }
    // Well-formed requests the media store refuses.
    let refused = [
        (
            upload_request("a.png", "image/png", 1001),
            "UPLOAD_FAILED",
            "failed to prepare upload",
        ),
        (
            upload_request("a.png", "not a type", 10),
            "UPLOAD_FAILED",
            "failed to prepare upload",
        ),
    ];
    for (frame, code, message) in refused {
        client.send_json(frame.clone()).await;
        assert_upload_refused(&mut client, &frame, code, message, &session).await;
    }
    // Exactly the limit is fine.
    request_upload(&mut client, "a.png", "image/png", 1000).await;
}

/// The next frame is the `error` refusing the upload request `frame`, on
/// the connection's `session`.
async fn assert_upload_refused(
    client: &mut Client,
    frame: &Value,
    code: &str,
    message: &str,
    session: &Value,
) {
    let reply = client.recv().await;
    assert_error(&reply, code, message);
    assert_eq!(reply["session_id"], *session, "{frame}");
}

#[tokio::test]
async fn upload_ready_has_the_documented_shape_and_public_url() {
    let media = MediaServer::start("  public_url: https://agents.example.com/base/\n", "").await;
    let (mut client, connected) = media.server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    client
        .send_json(upload_request("photo.jpg", "image/jpeg", 102_400))
        .await;
    let frame = client.recv().await;
    assert_eq!(frame["type"], "upload_ready", "{frame}");
    assert_eq!(frame["session_id"], session.as_str());
    let ready = &frame["upload_ready"];
    let id = ready["upload_id"].as_str().unwrap();
    assert_eq!(id.len(), 32, "{ready}");
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    assert_eq!(
        ready["upload_url"],
        format!("https://agents.example.com/base/media/upload/{id}")
    );
    assert_eq!(
        ready["storage_ref"],
        format!("omnia://sessions/{session}/media/{id}")
    );
    assert_eq!(ready["method"], "PUT");
    assert_eq!(ready["headers"], json!({"Content-Type": "image/jpeg"}));
    let expires_at = ready["expires_at"].as_str().unwrap();
    assert!(
        expires_at.ends_with('Z') && expires_at.contains('T'),
        "{expires_at}"
    );
    assert_eq!(
        ready.as_object().unwrap().len(),
        6,
        "exactly the six documented fields: {ready}"
    );
    // Key order is checked on the encoder's golden frame (agentwire-omnia).
}

#[tokio::test]
async fn without_public_url_uploads_go_to_the_bound_address_never_localhost() {
    let media = MediaServer::start("", "").await;
    let (mut client, _) = media.server.connect("agent=test-agent").await;
    let ready = request_upload(&mut client, "a.txt", "text/plain", 5).await;
    let url = ready["upload_url"].as_str().unwrap();
    assert_eq!(
        url,
        format!(
            "http://{}/media/upload/{}",
            media.server.addr,
            ready["upload_id"].as_str().unwrap()
        )
    );
    assert!(!url.contains("localhost"), "{url}");
}

#[tokio::test]
async fn put_then_info_then_download_returns_the_same_bytes() {
    let media = MediaServer::start("", "").await;
    let (mut client, connected) = media.server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let bytes = sample(200_000);
    let ready = request_upload(
        &mut client,
        "holiday \"best\".png",
        "image/png",
        bytes.len(),
    )
    .await;
    let id = ready["upload_id"].as_str().unwrap();

    let put = media
        .server
        .http(
            "PUT",
            path_of(ready["upload_url"].as_str().unwrap()),
            &[("Content-Type", "image/png")],
            &bytes,
        )
        .await;
    assert_eq!(put.status, 204, "{put:?}");
    assert!(put.body.is_empty());

    let info = media
        .server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 200, "{}", info.text());
    assert_eq!(info.header("content-type"), Some("application/json"));
    let info = info.json();
    assert_eq!(info["storage_ref"], ready["storage_ref"]);
    assert_eq!(info["filename"], "holiday \"best\".png");
    assert_eq!(info["mime_type"], "image/png");
    assert_eq!(info["size_bytes"], bytes.len());
    let keys: Vec<_> = info.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "created_at",
            "expires_at",
            "filename",
            "mime_type",
            "size_bytes",
            "storage_ref"
        ]
    );

    let download = media
        .server
        .http("GET", &format!("/media/download/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(download.status, 200, "{}", download.text());
    assert_eq!(download.header("content-type"), Some("image/png"));
    assert_eq!(
        download.header("content-disposition"),
        Some("inline; filename=\"holiday _best_.png\"")
    );
    assert_eq!(
        download.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );
    assert_eq!(download.header("x-content-type-options"), Some("nosniff"));
    assert!(download.body == bytes, "downloaded bytes differ");

    // An upload id is good for one upload.
    let again = media
        .server
        .http("PUT", &format!("/media/upload/{id}"), &[], b"xyz")
        .await;
    assert_refused(&again, 400, "upload failed");
}

#[tokio::test]
async fn messages_may_name_their_own_sessions_media_only() {
    let media = MediaServer::start("", "").await;
    let (mut client, connected) = media.server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let ready = request_upload(&mut client, "cat.jpg", "image/jpeg", 4).await;
    let put = put_upload(&media.server, &ready, b"meow").await;
    assert_eq!(put.status, 204);
    let storage_ref = ready["storage_ref"].as_str().unwrap().to_owned();
    let message = |storage_ref: &str| {
        json!({
            "type": "message",
            "metadata": {"mock_scenario": "parts"},
            "parts": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "media": {"storage_ref": storage_ref, "mime_type": "image/jpeg"}}
            ]
        })
    };

    client.send_json(message(&storage_ref)).await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["session_id"], session.as_str());
    assert_eq!(
        done["parts"],
        json!([{"type": "text", "text": "I see your image"}])
    );

    // Another connection is another session: the reference is refused.
    let (mut other, _) = media.server.connect("agent=test-agent").await;
    other.send_json(message(&storage_ref)).await;
    let reply = other.recv().await;
    assert_error(
        &reply,
        "INVALID_MESSAGE",
        "storage_ref belongs to another session",
    );

    // A well-formed reference to nothing, and a malformed one.
    for unknown in [
        format!("omnia://sessions/{session}/media/{MID}"),
        "omnia://sessions/../media/x".to_owned(),
        "s3://bucket/key".to_owned(),
    ] {
        client.send_json(message(&unknown)).await;
        assert_error(
            &client.recv().await,
            "INVALID_MESSAGE",
            "unknown storage_ref",
        );
    }

    // Refused messages were not stored: one user message and one reply.
    let stored = stored_messages(&media.server.db_path);
    assert_eq!(stored.len(), 2, "{stored:?}");
}

/// S3 against a real S3-compatible server (moto; see [`s3_bucket`]).
#[tokio::test]
async fn s3_upload_confirm_info_and_presigned_download() {
    let Some((endpoint, bucket)) = s3_bucket().await else {
        return;
    };

    let storage = format!(
        "  media:\n    backend: s3\n    endpoint: {endpoint}\n    bucket: {bucket}\n    region: us-east-1\n    max_bytes: 100000\n"
    );
    let server = TestServer::with_storage_yaml("", &storage).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let bytes = sample(50_000);
    let ready = request_upload(&mut client, "scan.pdf", "application/pdf", bytes.len()).await;
    let id = ready["upload_id"].as_str().unwrap().to_owned();
    let upload_url = ready["upload_url"].as_str().unwrap();
    assert!(
        upload_url.starts_with(&format!("{endpoint}/{bucket}/sessions/{session}/{id}?")),
        "{upload_url}"
    );
    assert!(upload_url.contains("X-Amz-Signature="), "{upload_url}");
    assert_eq!(ready["headers"], json!({"Content-Type": "application/pdf"}));

    // Nothing uploaded yet: confirming fails.
    let early = server
        .http("POST", &format!("/media/confirm-upload/{id}"), &[], b"")
        .await;
    assert_refused(&early, 400, "upload failed");
    // The server's own upload route is for the local backend only.
    let wrong = server
        .http("PUT", &format!("/media/upload/{id}"), &[], b"x")
        .await;
    assert_refused(&wrong, 404, "not found");

    let put = http_url(
        "PUT",
        upload_url,
        &[("Content-Type", "application/pdf")],
        &bytes,
    )
    .await;
    assert_eq!(put.status, 200, "presigned PUT: {}", put.text());

    let confirmed = server
        .http("POST", &format!("/media/confirm-upload/{id}"), &[], b"")
        .await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.text());
    let confirmed = confirmed.json();
    assert_eq!(confirmed["storage_ref"], ready["storage_ref"]);
    assert_eq!(confirmed["size_bytes"], bytes.len());
    assert_eq!(confirmed["filename"], "scan.pdf");

    let info = server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 200, "{}", info.text());
    assert_eq!(info.json(), confirmed);

    let download = server
        .http("GET", &format!("/media/download/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(download.status, 307, "{}", download.text());
    let location = download.header("location").unwrap();
    assert!(
        location.starts_with(&format!("{endpoint}/{bucket}/")),
        "{location}"
    );
    let fetched = http_url("GET", location, &[], b"").await;
    assert_eq!(fetched.status, 200, "{}", fetched.text());
    assert!(fetched.body == bytes, "presigned download differs");

    // Confirmed once; the id is spent.
    let again = server
        .http("POST", &format!("/media/confirm-upload/{id}"), &[], b"")
        .await;
    assert_refused(&again, 400, "upload failed");

    // The item is usable in a message.
    client
        .send_json(json!({
            "type": "message",
            "metadata": {"mock_scenario": "parts"},
            "parts": [{"type": "file", "media": {"storage_ref": ready["storage_ref"], "mime_type": "application/pdf"}}]
        }))
        .await;
    let done = client.recv().await;
    assert_eq!(done["type"], "done", "{done}");
}

//! Faults of the media store and of S3.

use super::*;

// ---------------------------------------------------------------------------
// The media store
// ---------------------------------------------------------------------------

fn upload_request(filename: &str, mime_type: &str, size_bytes: usize) -> Value {
    json!({
        "type": "upload_request",
        "upload_request": {"filename": filename, "mime_type": mime_type, "size_bytes": size_bytes}
    })
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
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

/// The path and query of an absolute URL.
fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").unwrap().1;
    &rest[rest.find('/').unwrap()..]
}

#[tokio::test]
async fn the_media_store_failing_during_an_upload_is_upload_failed_and_it_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let media = dir.path().join("media");
    let storage = format!(
        "  media:\n    backend: local\n    path: {}\n",
        media.display()
    );
    let switch = FaultSwitch::new();
    let server =
        TestServer::with_wrappers(&db, &yaml(&db, &storage, "", ""), failing_media(&switch)).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let bytes = vec![7u8; 20_000];

    // Unreachable when asked: the documented error, with the session.
    switch.fail();
    client
        .send_json(upload_request("a.png", "image/png", bytes.len()))
        .await;
    let frame = client.recv().await;
    assert_error(&frame, "UPLOAD_FAILED", "failed to prepare upload");
    assert_eq!(frame["session_id"], session.as_str(), "{frame}");
    assert!(files(&media).is_empty(), "{:?}", files(&media));

    // Reachable when asked, unreachable when the bytes come.
    switch.recover();
    client
        .send_json(upload_request("a.png", "image/png", bytes.len()))
        .await;
    let ready = client.recv().await;
    assert_eq!(ready["type"], "upload_ready", "{ready}");
    let ready = &ready["upload_ready"];
    let id = ready["upload_id"].as_str().unwrap();
    let put_path = path_of(ready["upload_url"].as_str().unwrap()).to_owned();
    switch.fail();
    let put = server
        .http("PUT", &put_path, &[("Content-Type", "image/png")], &bytes)
        .await;
    assert_eq!(put.status, 500, "{put:?}");
    assert_eq!(put.text(), "internal server error\n");
    let info = server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 500, "{info:?}");
    let stored_files = files(&media);
    assert!(
        stored_files
            .iter()
            .all(|f| !f.contains(id) || f.starts_with("uploads")),
        "no bytes and no item for the failed upload: {stored_files:?}"
    );
    // The conversation does not depend on media storage.
    client.say("still here").await;
    assert_done(&client.recv_turn().await, &session, "echo: still here");

    // Back: the pending upload is still good, and the item is usable.
    switch.recover();
    let put = server
        .http("PUT", &put_path, &[("Content-Type", "image/png")], &bytes)
        .await;
    assert_eq!(put.status, 204, "{put:?}");
    let info = server
        .http("GET", &format!("/media/info/{session}/{id}"), &[], b"")
        .await;
    assert_eq!(info.status, 200, "{}", info.text());
    assert_eq!(info.json()["size_bytes"], bytes.len());
    client
        .send_json(json!({
            "type": "message",
            "metadata": {"mock_scenario": "parts"},
            "parts": [{"type": "image", "media": {"storage_ref": ready["storage_ref"], "mime_type": "image/png"}}]
        }))
        .await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let stored = rows(&db, &session);
    assert_eq!(
        texts(&stored)[..2],
        [("user", "still here"), ("assistant", "echo: still here")]
    );
    assert_eq!(stored.len(), 4, "{stored:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_media_store_that_does_not_answer_holds_the_upload_not_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let storage = format!(
        "  media:\n    backend: local\n    path: {}\n",
        dir.path().join("media").display()
    );
    let switch = FaultSwitch::new();
    let server =
        TestServer::with_wrappers(&db, &yaml(&db, &storage, "", ""), failing_media(&switch)).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    switch.stall();
    client
        .send_json(upload_request("first.png", "image/png", 10))
        .await;
    client
        .send_json(upload_request("second.png", "image/png", 20))
        .await;
    // The store hangs: the turns go on meanwhile.
    for text in ["while it hangs", "and again"] {
        client.say(text).await;
        assert_done(
            &client.recv_turn().await,
            &session,
            &format!("echo: {text}"),
        );
    }
    // Eight may wait; one more is refused at once.
    for i in 0..6 {
        client
            .send_json(upload_request(&format!("more-{i}.png"), "image/png", 5))
            .await;
    }
    client
        .send_json(upload_request("one-too-many.png", "image/png", 5))
        .await;
    let refused = recv_within(&mut client, Duration::from_secs(2)).await;
    assert_error(&refused, "RATE_LIMITED", "too many upload requests pending");
    // Back: the answers come in the order asked.
    switch.recover();
    let mut answered = Vec::new();
    for _ in 0..8 {
        let ready = recv_within(&mut client, Duration::from_secs(5)).await;
        assert_eq!(ready["type"], "upload_ready", "{ready}");
        assert_eq!(ready["session_id"], session.as_str());
        let url = ready["upload_ready"]["upload_url"].as_str().unwrap();
        answered.push(path_of(url).to_owned());
    }
    // The first answer is first.png's (10 bytes declared: 20 are refused),
    // the second second.png's (20 taken).
    let put = |path: String| {
        let server = &server;
        async move {
            let twenty = [1u8; 20];
            server
                .http("PUT", &path, &[("Content-Type", "image/png")], &twenty)
                .await
                .status
        }
    };
    assert_eq!(put(answered[1].clone()).await, 204);
    assert_ne!(put(answered[0].clone()).await, 204);
    server.stop().await;
}

/// The next JSON text frame, waiting up to `wait`.
async fn recv_within(client: &mut Client, wait: Duration) -> Value {
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(wait, client.next_message()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                return serde_json::from_str(text.as_str()).unwrap();
            }
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            other => panic!("no frame within {wait:?}: {other:?}"),
        }
    }
}

/// The status and body of `request_line` (`METHOD path`, no body) to
/// `addr`, waiting up to `wait` for the answer.
async fn status_of(addr: SocketAddr, request_line: &str, wait: Duration) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{request_line} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(wait, stream.read_to_end(&mut response))
        .await
        .unwrap_or_else(|_| panic!("{request_line}: no answer within {wait:?}"))
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The moto server to start a private instance of: the one
/// `scripts/moto.sh` installs, else one on `PATH`.
fn moto_binary() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/moto-venv/bin/moto_server");
    if venv.is_file() {
        return Some(venv);
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join("moto_server"))
        .find(|path| path.is_file())
}

/// A private S3-compatible server (moto) on its own port, in its own
/// process group; killed when dropped. Never the shared instance.
struct Moto {
    binary: PathBuf,
    port: u16,
    child: Option<std::process::Child>,
}

impl Moto {
    async fn start(binary: PathBuf) -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut moto = Moto {
            binary,
            port,
            child: None,
        };
        moto.restart().await;
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts it (again, on the same port: empty) and waits until it answers.
    async fn restart(&mut self) {
        use std::os::unix::process::CommandExt as _;
        let child = std::process::Command::new(&self.binary)
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .expect("moto_server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                let answer =
                    http_url("GET", &format!("{}/moto-api/", self.endpoint()), &[], b"").await;
                if answer.status == 200 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "moto did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills its whole process group at once, as a crash would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The moto server for the S3 fault test, if it and the AWS variables it
/// needs are there; else why not, through [`missing`].
fn moto_for_the_s3_test() -> Option<PathBuf> {
    let Some(binary) = moto_binary() else {
        missing("no moto_server (scripts/moto.sh install puts one in target/moto-venv)");
        return None;
    };
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
        || std::env::var_os("AWS_SECRET_ACCESS_KEY").is_none()
    {
        missing(
            "the S3 fault test needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (scripts/test sets dummies)",
        );
        return None;
    }
    Some(binary)
}

/// Creates `bucket` on the S3 server at `endpoint`.
async fn create_bucket(endpoint: &str, bucket: &str) {
    let created = http_url("PUT", &format!("{endpoint}/{bucket}"), &[], b"").await;
    assert_eq!(created.status, 200, "create bucket: {}", created.text());
}

/// Asks for the upload of a `size`-byte `scan.pdf`; its id and URL.
async fn request_scan_upload(client: &mut Client, size: usize) -> (String, String) {
    client
        .send_json(upload_request("scan.pdf", "application/pdf", size))
        .await;
    let ready = client.recv().await;
    assert_eq!(ready["type"], "upload_ready", "{ready}");
    let id = ready["upload_ready"]["upload_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = ready["upload_ready"]["upload_url"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, url)
}

/// Half of `bytes` goes to S3 at `url`; then S3 stops, and the transfer
/// does not complete.
async fn put_half_then_stop_s3(moto: &mut Moto, url: &str, bytes: &[u8]) {
    let mut put = TcpStream::connect(("127.0.0.1", moto.port)).await.unwrap();
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        path_of(url),
        moto.port,
        bytes.len()
    );
    put.write_all(head.as_bytes()).await.unwrap();
    put.write_all(&bytes[..bytes.len() / 2]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    moto.kill();
    let _ = put.write_all(&bytes[bytes.len() / 2..]).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), put.read_to_end(&mut answer)).await;
    assert!(
        !String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "the transfer did not complete"
    );
}

/// With S3 down, the server can neither confirm upload `id` nor prepare
/// another of `size` bytes: its documented answers, once the S3 client's
/// retries (object_store's: ten, with backoff, a few seconds against a
/// refused port) have run out. Both at once, to keep the test short.
async fn assert_confirm_and_request_fail(
    server: &TestServer,
    client: &mut Client,
    session: &str,
    id: &str,
    size: usize,
) {
    let started = Instant::now();
    let confirm_line = format!("POST /media/confirm-upload/{id}");
    let confirm = status_of(server.addr, &confirm_line, Duration::from_secs(30));
    let request = async {
        client
            .send_json(upload_request("scan.pdf", "application/pdf", size))
            .await;
        recv_within(client, Duration::from_secs(30)).await
    };
    let (confirm, frame) = tokio::join!(confirm, request);
    assert_eq!(confirm, (500, "internal server error\n".to_owned()));
    eprintln!("S3 down: answered in {:?}", started.elapsed());
    assert_error(&frame, "UPLOAD_FAILED", "failed to prepare upload");
    assert_eq!(frame["session_id"], session);
}

#[tokio::test]
async fn the_s3_server_stopped_mid_transfer_fails_the_upload_and_the_next_one_works() {
    let Some(binary) = moto_for_the_s3_test() else {
        return;
    };
    let mut moto = Moto::start(binary).await;
    let bucket = "agentwire-faults";
    create_bucket(&moto.endpoint(), bucket).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let storage = format!(
        "  media:\n    backend: s3\n    endpoint: {}\n    bucket: {bucket}\n    region: us-east-1\n",
        moto.endpoint()
    );
    let server =
        TestServer::with_wrappers(&db, &yaml(&db, &storage, "", ""), Wrappers::default()).await;
    let (mut client, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let bytes = vec![3u8; 400_000];

    let (id, url) = request_scan_upload(&mut client, bytes.len()).await;
    // Half the body goes to S3; then S3 stops.
    put_half_then_stop_s3(&mut moto, &url, &bytes).await;
    assert_confirm_and_request_fail(&server, &mut client, &session, &id, bytes.len()).await;
    // The conversation goes on, and nothing of the upload is in it.
    client.say("still here").await;
    assert_done(&client.recv_turn().await, &session, "echo: still here");
    assert_eq!(
        texts(&rows(&db, &session)),
        [("user", "still here"), ("assistant", "echo: still here")]
    );

    // S3 back (empty, as moto keeps nothing): the next upload works end to end.
    moto.restart().await;
    create_bucket(&moto.endpoint(), bucket).await;
    let (id, url) = request_scan_upload(&mut client, bytes.len()).await;
    let put = http_url("PUT", &url, &[("Content-Type", "application/pdf")], &bytes).await;
    assert_eq!(put.status, 200, "{}", put.text());
    let confirm = server
        .http("POST", &format!("/media/confirm-upload/{id}"), &[], b"")
        .await;
    assert_eq!(confirm.status, 200, "{}", confirm.text());
    assert_eq!(confirm.json()["size_bytes"], bytes.len());
    server.stop().await;
}

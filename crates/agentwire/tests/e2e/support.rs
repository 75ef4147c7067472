//! The test harness: a server per test, a WebSocket client, a raw HTTP GET.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// What the binary's `main` does before loading a config: the HTTP clients
/// (providers, tools, S3) need a rustls crypto provider, and the library
/// installs none.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

mod child;
mod client;
mod contract;
mod cut;
pub use child::{agentwire_serve, start_child};
pub use client::Client;
pub use contract::{Dialect, Direction};
pub use cut::CutLink;

/// How long a test waits for any one frame before failing.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// The repository's root, for its scripts, docs and examples.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The agents every test server has, after the `server:` block.
pub const AGENTS: &str = r#"
agents:
  - name: test-agent
    handler: test
  - name: echo
    handler: echo
  - name: demo
    handler: demo
  - name: short-lived
    handler: test
    context_ttl: 300ms
  - name: quick-tools
    handler: test
    ack_timeout: 300ms
    client_tool_timeout: 600ms
"#;

pub struct TestServer {
    pub addr: SocketAddr,
    pub db_path: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
}

impl TestServer {
    /// A server with default settings on a fresh SQLite file.
    pub async fn start() -> TestServer {
        TestServer::with_server_yaml("").await
    }

    /// A server whose `server:` block is `server_yaml` (indented by the caller).
    pub async fn with_server_yaml(server_yaml: &str) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agentwire.db");
        let mut server = TestServer::on_database(&db, server_yaml).await;
        server._dir = Some(dir);
        server
    }

    /// A server on the SQLite file `db`, which outlives it.
    pub async fn on_database(db: &Path, server_yaml: &str) -> TestServer {
        TestServer::on_database_with_storage(db, server_yaml, "").await
    }

    /// A server whose `server:` block is `server_yaml` and whose `storage:`
    /// block has `storage_yaml` after `sessions:` (both indented by the caller),
    /// on a fresh SQLite file.
    pub async fn with_storage_yaml(server_yaml: &str, storage_yaml: &str) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agentwire.db");
        let mut server = TestServer::on_database_with_storage(&db, server_yaml, storage_yaml).await;
        server._dir = Some(dir);
        server
    }

    async fn on_database_with_storage(
        db: &Path,
        server_yaml: &str,
        storage_yaml: &str,
    ) -> TestServer {
        let yaml = format!(
            "server:\n  listen: 127.0.0.1:0\n{server_yaml}\nstorage:\n  sessions: sqlite://{}\n{storage_yaml}\n{AGENTS}",
            db.display()
        );
        TestServer::spawn_yaml(db, &yaml).await
    }

    /// A server whose `storage.sessions` is `sessions` (a store of its
    /// own, such as a `postgres://` URL); `db_path` names no file.
    pub async fn with_sessions(sessions: &str) -> TestServer {
        let yaml = format!(
            "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: \"{sessions}\"\n{AGENTS}"
        );
        TestServer::spawn_yaml(Path::new(""), &yaml).await
    }

    /// A server from `top_level` (its whole config but `agents:`) and the
    /// standard agents; `db_path` names no file.
    pub async fn with_top_level(top_level: &str) -> TestServer {
        let yaml = format!("server:\n  listen: 127.0.0.1:0\n{top_level}\n{AGENTS}");
        TestServer::spawn_yaml(Path::new(""), &yaml).await
    }

    /// [`TestServer::with_top_level`] with `extra_agents` (list items)
    /// after the standard agents.
    pub async fn with_top_level_and_agents(top_level: &str, extra_agents: &str) -> TestServer {
        let yaml = format!("server:\n  listen: 127.0.0.1:0\n{top_level}\n{AGENTS}{extra_agents}");
        TestServer::spawn_yaml(Path::new(""), &yaml).await
    }

    /// A server with the standard agents plus `extra_agents` (list items),
    /// and `top_level` (such as `providers:` and `tools:`) beside them.
    pub async fn with_runtime(top_level: &str, extra_agents: &str) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agentwire.db");
        let yaml = format!(
            "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: sqlite://{}\n{top_level}\n{AGENTS}{extra_agents}",
            db.display()
        );
        let mut server = TestServer::spawn_yaml(&db, &yaml).await;
        server._dir = Some(dir);
        server
    }

    /// Like [`TestServer::with_runtime`], with `server_yaml` in the
    /// `server:` block (indented by the caller).
    pub async fn with_server_and_runtime(
        server_yaml: &str,
        top_level: &str,
        extra_agents: &str,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agentwire.db");
        let yaml = format!(
            "server:\n  listen: 127.0.0.1:0\n{server_yaml}\nstorage:\n  sessions: sqlite://{}\n{top_level}\n{AGENTS}{extra_agents}",
            db.display()
        );
        let mut server = TestServer::spawn_yaml(&db, &yaml).await;
        server._dir = Some(dir);
        server
    }

    /// Like [`TestServer::with_runtime`], on the SQLite file `db`, which
    /// outlives the server (to restart on it).
    pub async fn on_database_with_runtime(
        db: &Path,
        top_level: &str,
        extra_agents: &str,
    ) -> TestServer {
        let yaml = format!(
            "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: sqlite://{}\n{top_level}\n{AGENTS}{extra_agents}",
            db.display()
        );
        TestServer::spawn_yaml(db, &yaml).await
    }

    /// A server from the whole config `yaml`, whose session store is the
    /// SQLite file `db` (which the caller keeps), with its opened stores
    /// passed through `wrappers` (such as `agentwire_core::testing`'s
    /// failing ones).
    pub async fn with_wrappers(
        db: &Path,
        yaml: &str,
        wrappers: agentwire::app::Wrappers,
    ) -> TestServer {
        install_tls_provider();
        let config = agentwire::config::parse(yaml, |_| None).expect("test config is valid");
        let app = agentwire::app::build_with(config, wrappers)
            .await
            .expect("the server builds");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(agentwire::serve(app, listener, async move {
            let _ = rx.await;
        }));
        TestServer {
            addr,
            db_path: db.to_owned(),
            shutdown: Some(tx),
            task: Some(task),
            _dir: None,
        }
    }

    async fn spawn_yaml(db: &Path, yaml: &str) -> TestServer {
        install_tls_provider();
        let config = agentwire::config::parse(yaml, |_| None).expect("test config is valid");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(agentwire::run(listener, config, async move {
            let _ = rx.await;
        }));
        TestServer {
            addr,
            db_path: db.to_owned(),
            shutdown: Some(tx),
            task: Some(task),
            _dir: None,
        }
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("ws://{}{path_and_query}", self.addr)
    }

    /// Connects to `/ws?<query>` and returns the client and the `connected` frame.
    pub async fn connect(&self, query: &str) -> (Client, Value) {
        let mut client = self.try_connect(query).await.expect("upgrade accepted");
        let connected = client.recv().await;
        assert_eq!(connected["type"], "connected", "first frame: {connected}");
        (client, connected)
    }

    pub async fn try_connect(&self, query: &str) -> Result<Client, (u16, String)> {
        self.try_connect_with(query, &[]).await
    }

    /// Connects with extra request headers; a refused upgrade gives its status and body.
    pub async fn try_connect_with(
        &self,
        query: &str,
        headers: &[(&str, &str)],
    ) -> Result<Client, (u16, String)> {
        self.try_connect_path(&format!("/ws?{query}"), headers)
            .await
    }

    /// Connects to the Gnosari endpoint `/ws/agent/<agent_and_query>` with
    /// extra request headers; a refused upgrade gives its status and body.
    pub async fn try_connect_gnosari(
        &self,
        agent_and_query: &str,
        headers: &[(&str, &str)],
    ) -> Result<Client, (u16, String)> {
        self.try_connect_path(&format!("/ws/agent/{agent_and_query}"), headers)
            .await
    }

    /// Connects to the Gnosari endpoint; the upgrade must be accepted.
    pub async fn connect_gnosari(&self, agent_and_query: &str) -> Client {
        self.try_connect_gnosari(agent_and_query, &[])
            .await
            .expect("upgrade accepted")
    }

    /// Opens a WebSocket on `path_and_query` with extra request headers.
    async fn try_connect_path(
        &self,
        path_and_query: &str,
        headers: &[(&str, &str)],
    ) -> Result<Client, (u16, String)> {
        let mut request = self.url(path_and_query).into_client_request().unwrap();
        for (name, value) in headers {
            request.headers_mut().insert(
                tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes())
                    .unwrap(),
                value.parse().unwrap(),
            );
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((ws, _)) => Ok(Client::new(ws, Dialect::of_path(path_and_query))),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let status = response.status().as_u16();
                let body = response
                    .body()
                    .as_deref()
                    .map(|b| String::from_utf8_lossy(b).into_owned());
                Err((status, body.unwrap_or_default()))
            }
            Err(e) => panic!("connect failed: {e}"),
        }
    }

    /// `GET path` over a raw socket: status and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        http_get(self.addr, path).await
    }

    /// An HTTP request to this server: see [`http_request`].
    pub async fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpResponse {
        http_request(self.addr, method, path, headers, body).await
    }

    /// Triggers the drain without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Shuts down and waits until the server has returned.
    pub async fn stop(mut self) {
        self.begin_shutdown();
        self.wait_stopped().await;
    }

    pub async fn wait_stopped(&mut self) {
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(40), task)
                .await
                .expect("server stopped in time")
                .expect("server task did not panic")
                .expect("server returned Ok");
        }
    }
}

/// The value of the sample line `<series> <value>` in a Prometheus text body.
pub fn metric(body: &str, series: &str) -> f64 {
    let value = body
        .lines()
        .find_map(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .unwrap_or_else(|| panic!("no sample {series:?} in:\n{body}"));
    value
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{series}: bad value {value:?}: {e}"))
}

/// Asserts `frame` is an error with `code` and `message`.
pub fn assert_error(frame: &Value, code: &str, message: &str) {
    assert_eq!(frame["type"], "error", "{frame}");
    assert_eq!(frame["error"]["code"], code, "{frame}");
    assert_eq!(frame["error"]["message"], message, "{frame}");
}

/// `GET path` with `Connection: close`; status and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(FRAME_TIMEOUT, stream.read_to_end(&mut response))
        .await
        .expect("response in time")
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Rows in the `messages` table of the SQLite file, read directly.
pub fn stored_messages(db: &Path) -> Vec<(String, i64, String, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT s.id, m.seq, m.role, m.content FROM messages m
             JOIN sessions s ON s.key = m.session_key ORDER BY s.id, m.seq",
        )
        .unwrap();
    stmt.query_map([], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// An HTTP response read off a raw socket.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// De-chunked when the response was chunked.
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }
}

/// `METHOD path` to `addr` with `Connection: close`, the given headers and
/// body (`Content-Length` is added unless the caller sets it or
/// `Transfer-Encoding`). The request is written whole, ignoring a server
/// that stops reading early, then the response is read to the end.
fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    let sets = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !sets("content-length") && !sets("transfer-encoding") {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    http_raw(addr, &request_bytes(addr, method, path, headers, body)).await
}

/// Like [`http_request`], from the local address `source` (any 127.0.0.x
/// works on loopback): for the limits kept per client address.
pub async fn http_request_from(
    source: std::net::IpAddr,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> HttpResponse {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(source, 0)).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    exchange(stream, &request_bytes(addr, method, path, headers, b"")).await
}

/// A request to an absolute `http://host:port/path?query` URL, such as a
/// presigned storage URL.
pub async fn http_url(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// URL: {url}"));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr: SocketAddr = tokio::net::lookup_host(authority)
        .await
        .unwrap()
        .next()
        .unwrap();
    let path = if path.is_empty() { "/" } else { path };
    http_request(addr, method, path, headers, body).await
}

/// The S3-compatible test server (moto) that `scripts/test` and CI start,
/// named by `AGENTWIRE_TEST_S3_ENDPOINT` (with the AWS credentials set),
/// and a fresh bucket on it: `(endpoint, bucket)`. `None` skips the test,
/// except under CI, where a missing server is a failure.
pub async fn s3_bucket() -> Option<(String, String)> {
    let Ok(endpoint) = std::env::var("AGENTWIRE_TEST_S3_ENDPOINT") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the S3 tests: set AGENTWIRE_TEST_S3_ENDPOINT (scripts/test does)"
        );
        eprintln!("skipped: no S3 endpoint (set AGENTWIRE_TEST_S3_ENDPOINT)");
        return None;
    };
    assert!(
        std::env::var_os("AWS_ACCESS_KEY_ID").is_some()
            && std::env::var_os("AWS_SECRET_ACCESS_KEY").is_some(),
        "the S3 tests need AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (scripts/test sets dummies)"
    );
    let bucket = format!("agentwire-test-{}", uuid::Uuid::new_v4().simple());
    let created = http_url("PUT", &format!("{endpoint}/{bucket}"), &[], b"").await;
    assert_eq!(created.status, 200, "create bucket: {}", created.text());
    Some((endpoint, bucket))
}

/// Writes `request` as is and reads the response until the server closes.
pub async fn http_raw(addr: SocketAddr, request: &[u8]) -> HttpResponse {
    exchange(TcpStream::connect(addr).await.unwrap(), request).await
}

/// Writes `request` on `stream` and reads the response to its end.
async fn exchange(mut stream: TcpStream, request: &[u8]) -> HttpResponse {
    // The server may answer (413) and close before reading everything.
    let _ = stream.write_all(request).await;
    let mut response = Vec::new();
    let read = tokio::time::timeout(FRAME_TIMEOUT, stream.read_to_end(&mut response))
        .await
        .expect("response in time");
    if let Err(e) = read {
        assert!(!response.is_empty(), "no response: {e}");
    }
    parse_response(&response)
}

fn parse_response(raw: &[u8]) -> HttpResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_text = String::from_utf8_lossy(&raw[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// `body` in the chunked transfer coding, in pieces of `piece` bytes.
pub fn chunked(body: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in body.chunks(piece) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

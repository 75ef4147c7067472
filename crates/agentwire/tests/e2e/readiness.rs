//! `/readyz` when a dependency stops answering rather than refusing: the
//! network path to PostgreSQL drops packets (a partition), so a pooled
//! connection's query waits for TCP to give up. Found by the partition
//! harness (`scripts/partition.sh`, a replica cut off from PostgreSQL:
//! `/readyz` did not answer for minutes); the probe must say 503 within a
//! balancer's probe timeout instead. The database is
//! `AGENTWIRE_TEST_POSTGRES` (`scripts/test`), reached through a relay in
//! this test that can stop passing bytes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, UnixStream};

use crate::replicas::required;
use crate::support::TestServer;

/// Relays TCP on 127.0.0.1 to PostgreSQL's Unix socket in `socket_dir`;
/// while `frozen`, the bytes read are held back (both ways), as a network
/// that drops packets would.
async fn relay(socket_dir: String, frozen: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let path = format!("{socket_dir}/.s.PGSQL.5432");
            let Ok(unix) = UnixStream::connect(path).await else {
                continue;
            };
            let (tcp_read, tcp_write) = tcp.into_split();
            let (unix_read, unix_write) = unix.into_split();
            tokio::spawn(pass_on(tcp_read, unix_write, frozen.clone()));
            tokio::spawn(pass_on(unix_read, tcp_write, frozen.clone()));
        }
    });
    port
}

async fn pass_on(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    frozen: Arc<AtomicBool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(read) = from.read(&mut buffer).await {
        if read == 0 {
            return;
        }
        while frozen.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn readyz_says_503_within_seconds_when_postgres_stops_answering() {
    let Some(url) = required("AGENTWIRE_TEST_POSTGRES", "PostgreSQL server") else {
        return;
    };
    let socket_dir = url
        .split(['?', '&'])
        .find_map(|part| part.strip_prefix("host="))
        .expect("scripts/postgres.sh's URL names its socket directory")
        .to_owned();
    let frozen = Arc::new(AtomicBool::new(false));
    let port = relay(socket_dir, frozen.clone()).await;
    let server = TestServer::with_sessions(&format!(
        "postgres://agentwire@127.0.0.1:{port}/postgres?sslmode=disable"
    ))
    .await;
    let (mut client, _) = server.connect("agent=test-agent").await;
    client
        .send_json(json!({"type": "message", "content": "hello"}))
        .await;
    assert_eq!(client.recv_turn().await.pop().unwrap()["type"], "done");
    assert_eq!(server.get("/readyz").await, (200, "ok\n".to_owned()));

    frozen.store(true, Ordering::Release);
    let asked = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(10), server.get("/readyz"))
        .await
        .expect("/readyz answers while PostgreSQL is silent");
    assert_eq!(answer, (503, "session store unavailable\n".to_owned()));
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "answered after {:?}",
        asked.elapsed()
    );

    frozen.store(false, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.get("/readyz").await.0 != 200 {
        assert!(
            Instant::now() < deadline,
            "/readyz not 200 again within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.stop().await;
}

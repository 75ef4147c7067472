//! The bare baseline: a WebSocket server on the same runtime and library as
//! agentwire (tokio, axum 0.8 `ws`, the same socket settings) that answers
//! every text message with the frames agentwire sends for the same script,
//! encoded by the same Omnia encoders, and nothing else: no engine, no
//! sessions, no persistence, no frame validation, no limits.

use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_core::{Reply, Timestamp};
use agentwire_omnia as omnia;
use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;
use axum::serve::ListenerExt;
use tokio::net::{TcpListener, TcpStream};

use crate::options::{CHUNK_AGENT, CHUNK_CHARS, chunk_reply};

/// agentwire's defaults: `server.limits.max_payload_bytes` and the upgrade's
/// read buffer.
const MAX_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;
const READ_BUFFER_BYTES: usize = 1024;

/// The reply of each agent, pre-split into its chunks.
struct Scripts {
    /// The test handler's `stream` script.
    stream: Vec<String>,
    /// The `bench` agent's K-chunk reply.
    bench: Vec<String>,
}

/// Serves `/ws` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    chunks: u32,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let reply = chunk_reply(chunks);
    let scripts = Arc::new(Scripts {
        stream: ["Hello", " ", "world"].map(str::to_owned).to_vec(),
        bench: reply
            .as_bytes()
            .chunks(CHUNK_CHARS)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect(),
    });
    let router = Router::new().route("/ws", get(upgrade)).with_state(scripts);
    // TCP_NODELAY, as agentwire sets it: otherwise a turn's last frames
    // wait for the client's delayed ACK and the comparison measures Nagle.
    let listener = listener.tap_io(|stream: &mut TcpStream| {
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!("baseline: setting TCP_NODELAY failed: {error}");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn upgrade(
    State(scripts): State<Arc<Scripts>>,
    RawQuery(query): RawQuery,
    upgrade: WebSocketUpgrade,
) -> Response {
    let bench = query.as_deref().is_some_and(|q| {
        q.split('&')
            .any(|kv| kv.strip_prefix("agent=") == Some(CHUNK_AGENT))
    });
    upgrade
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(MAX_PAYLOAD_BYTES)
        .max_frame_size(MAX_PAYLOAD_BYTES)
        .on_upgrade(move |socket| connection(socket, scripts, bench))
}

async fn connection(mut socket: WebSocket, scripts: Arc<Scripts>, bench: bool) {
    let session_id = uuid::Uuid::new_v4().to_string();
    let connected = omnia::encode_connected(
        &omnia::Connected {
            session_id: &session_id,
            capabilities: omnia::Capabilities {
                binary_frames: false,
                max_payload_size: MAX_PAYLOAD_BYTES as u64,
                protocol_version: u32::from(omnia::PROTOCOL_VERSION),
            },
            resumed: None,
            memory_facet: None,
            ai_disclosure: None,
            event_log: None,
        },
        now(),
    );
    if socket.send(Message::text(connected)).await.is_err() {
        return;
    }
    let chunks = if bench {
        &scripts.bench
    } else {
        &scripts.stream
    };
    while let Some(Ok(message)) = socket.recv().await {
        match message {
            Message::Text(_) if answer(&mut socket, &session_id, chunks).await.is_err() => return,
            Message::Close(_) => return,
            _ => {}
        }
    }
}

async fn answer(socket: &mut WebSocket, session_id: &str, chunks: &[String]) -> Result<(), ()> {
    for chunk in chunks {
        let frame = omnia::encode_chunk(session_id, chunk, now());
        socket.send(Message::text(frame)).await.map_err(drop)?;
    }
    let done = omnia::encode_done(session_id, &Reply::text(chunks.concat()), now());
    socket.send(Message::text(done)).await.map_err(drop)
}

fn now() -> Timestamp {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp(i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX))
}

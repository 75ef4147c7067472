//! A link a test can cut: a proxy on a Unix socket of its own in front of
//! a server's Unix socket (Redis, in the replica tests), so one replica can
//! be cut off from it while the others still reach it.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the link does with the bytes it carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Up,
    /// Holds every byte (a partition that drops packets: nothing is closed,
    /// and what was sent arrives once it heals, as TCP retransmits it).
    Stalled,
    /// Closes every connection and refuses new ones (a server that went
    /// away: the client gets an error at once).
    Down,
}

/// A proxy between one client process and a server that can stall: a
/// partition, not a reset (a reset closes the connections, which Redis
/// takes for the replica's death).
pub struct CutLink {
    socket: PathBuf,
    state: watch::Sender<State>,
    accept: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl CutLink {
    /// A proxy to the server listening on `upstream`, up.
    pub async fn to(upstream: &Path) -> CutLink {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("link.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let (state, _) = watch::channel(State::Up);
        let link = state.clone();
        let upstream = upstream.to_owned();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = link.subscribe();
                tokio::spawn(carry(client, upstream.clone(), state));
            }
        });
        CutLink {
            socket,
            state,
            accept,
            _dir: dir,
        }
    }

    /// The proxy's Unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A partition: bytes stop both ways, connections stay open.
    pub fn stall(&self) {
        self.state.send_replace(State::Stalled);
    }

    pub fn heal(&self) {
        self.state.send_replace(State::Up);
    }

    /// The server gone: connections closed, new ones refused, until
    /// [`CutLink::heal`].
    pub fn take_down(&self) {
        self.state.send_replace(State::Down);
    }
}

impl Drop for CutLink {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Carries one connection both ways until either side closes it.
async fn carry(client: UnixStream, upstream: PathBuf, state: watch::Receiver<State>) {
    if *state.borrow() == State::Down {
        return;
    }
    let Ok(server) = UnixStream::connect(&upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        () = pump(client_read, server_write, state.clone()) => {}
        () = pump(server_read, client_write, state) => {}
    }
}

/// Copies `from` to `to` while the link is up, holding what it reads while
/// it is stalled; ends when `from` closes, stalled or not (a process that
/// dies behind a partition still closes its side).
async fn pump(
    mut from: impl AsyncReadExt + Unpin,
    mut to: impl AsyncWriteExt + Unpin,
    mut state: watch::Receiver<State>,
) {
    let mut chunk = vec![0; 16 * 1024];
    let mut held = Vec::new();
    loop {
        let now = *state.borrow_and_update();
        if now == State::Down {
            return;
        }
        let up = now == State::Up;
        if up && !held.is_empty() {
            if to.write_all(&held).await.is_err() {
                return;
            }
            held.clear();
        }
        tokio::select! {
            read = from.read(&mut chunk) => match read {
                Ok(0) | Err(_) => return,
                Ok(read) => held.extend_from_slice(&chunk[..read]),
            },
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

//! A link a test can cut: a proxy on a Unix socket of its own in front of
//! a server's Unix socket (Redis, in the replica tests), so one replica can
//! be cut off from it while the others still reach it.

use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A proxy between one client process and a server. Cut, it closes every
/// connection it carries and closes new ones at once, as a partition that
/// outlasts the client's patience looks to it; healed, it carries new
/// connections again.
pub struct CutLink {
    socket: PathBuf,
    up: watch::Sender<bool>,
    accept: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl CutLink {
    /// A proxy to the server listening on `upstream`, up.
    pub async fn to(upstream: &Path) -> CutLink {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("link.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let (up, _) = watch::channel(true);
        let state = up.clone();
        let upstream = upstream.to_owned();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let link = state.subscribe();
                if !*link.borrow() {
                    continue;
                }
                tokio::spawn(carry(client, upstream.clone(), link));
            }
        });
        CutLink {
            socket,
            up,
            accept,
            _dir: dir,
        }
    }

    /// The proxy's Unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn cut(&self) {
        self.up.send_replace(false);
    }

    pub fn heal(&self) {
        self.up.send_replace(true);
    }
}

impl Drop for CutLink {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Carries one connection both ways until either side closes it or the
/// link is cut.
async fn carry(mut client: UnixStream, upstream: PathBuf, mut link: watch::Receiver<bool>) {
    let Ok(mut server) = UnixStream::connect(&upstream).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = link.wait_for(|up| !*up) => {}
    }
}

//! The frames a connection sends between two flushes, gathered below
//! tungstenite into one write, in a buffer let go once it is written.
//!
//! tungstenite can gather queued frames itself (`write_buffer_size`), but
//! it keeps its buffer's capacity for the socket's life: the largest batch
//! a connection ever sent (3.5 KiB for a 20-chunk turn's frames) stays
//! with every connection that ever streamed, idle ones too. So the server
//! has tungstenite write each frame through at once (its buffer then holds
//! one frame at a time) and [`BatchedWrites`] gathers them until the
//! flush, as tungstenite did: the frames one wake-up of a connection
//! produces still share one system call.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::socket::WRITE_BUFFER_BYTES;

/// The connection: reads pass through; writes gather until a flush, or
/// until [`WRITE_BUFFER_BYTES`] wait, and are then written out in one go.
pub(crate) struct BatchedWrites<Io> {
    io: Io,
    /// What waits to be written; `None` once written. Boxed, so that the
    /// field costs every connection, idle ones too, one pointer: a
    /// connection's task is rounded up to 128 bytes and then to the
    /// allocator's size class, and a few bytes more cost it 512.
    batch: Option<Box<Batch>>,
}

struct Batch {
    bytes: Vec<u8>,
    /// How much of `bytes` the connection has taken so far.
    written: usize,
}

/// Room a batch starts with: a turn's batch of text chunks (about 100
/// bytes a frame) fits without growing. It lives from a wake-up's first
/// frame to its flush, so its size costs no connection anything.
const FIRST_ROOM: usize = 4096;

impl<Io> BatchedWrites<Io> {
    pub(crate) fn new(io: Io) -> BatchedWrites<Io> {
        BatchedWrites { io, batch: None }
    }

    fn waiting(&self) -> usize {
        self.batch
            .as_ref()
            .map_or(0, |batch| batch.bytes.len() - batch.written)
    }
}

impl<Io: AsyncWrite + Unpin> BatchedWrites<Io> {
    /// Writes the batch out; then lets it go.
    fn poll_write_batch(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(batch) = &mut self.batch {
            while batch.written < batch.bytes.len() {
                let rest = &batch.bytes[batch.written..];
                match ready!(Pin::new(&mut self.io).poll_write(cx, rest))? {
                    0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    n => batch.written += n,
                }
            }
        }
        self.batch = None;
        Poll::Ready(Ok(()))
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for BatchedWrites<Io> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for BatchedWrites<Io> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.waiting() + buf.len() > WRITE_BUFFER_BYTES {
            ready!(this.poll_write_batch(cx))?;
            // Large enough to be a write of its own: not copied.
            if buf.len() >= WRITE_BUFFER_BYTES {
                return Pin::new(&mut this.io).poll_write(cx, buf);
            }
        }
        let batch = this.batch.get_or_insert_with(|| {
            Box::new(Batch {
                bytes: Vec::with_capacity(buf.len().max(FIRST_ROOM)),
                written: 0,
            })
        });
        batch.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_batch(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_batch(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection that counts the writes it is given.
    struct Counting {
        written: Vec<u8>,
        writes: usize,
        /// Takes nothing until this is set.
        open: bool,
    }

    impl AsyncWrite for Counting {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if !this.open {
                return Poll::Pending;
            }
            this.writes += 1;
            this.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn counting() -> BatchedWrites<Counting> {
        let io = Counting {
            written: Vec::new(),
            writes: 0,
            open: true,
        };
        BatchedWrites::new(io)
    }

    #[tokio::test]
    async fn the_frames_between_two_flushes_are_one_write_and_the_buffer_goes_after() {
        let mut batched = counting();
        for frame in [&b"one"[..], b"two", b"three"] {
            batched.write_all(frame).await.unwrap();
        }
        assert_eq!(batched.io.writes, 0, "nothing written before the flush");
        batched.flush().await.unwrap();
        assert_eq!(batched.io.writes, 1);
        assert_eq!(batched.io.written, b"onetwothree");
        assert!(batched.batch.is_none(), "the written batch is let go");
        batched.write_all(b"four").await.unwrap();
        batched.shutdown().await.unwrap();
        assert_eq!(batched.io.written, b"onetwothreefour");
    }

    #[tokio::test]
    async fn a_batch_at_its_limit_is_written_before_more_is_taken() {
        let mut batched = counting();
        let frame = [7u8; 6 * 1024];
        for _ in 0..3 {
            batched.write_all(&frame).await.unwrap();
        }
        // 18 KiB do not fit the 16: the first two frames went out first.
        assert_eq!(batched.io.writes, 1);
        assert_eq!(batched.io.written.len(), 12 * 1024);
        assert_eq!(batched.waiting(), 6 * 1024);
        // A frame as large as the limit goes out as it is, after the batch.
        batched.write_all(&[8u8; WRITE_BUFFER_BYTES]).await.unwrap();
        assert_eq!(batched.io.writes, 3);
        assert_eq!(batched.io.written.len(), 18 * 1024 + WRITE_BUFFER_BYTES);
        assert!(batched.batch.is_none());
    }

    #[tokio::test]
    async fn a_connection_that_takes_nothing_holds_the_writer_at_the_limit() {
        let mut batched = counting();
        batched.io.open = false;
        let frame = [1u8; 10 * 1024];
        batched.write_all(&frame).await.unwrap();
        let blocked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            batched.write_all(&frame),
        )
        .await;
        assert!(blocked.is_err(), "a second frame waits for room");
        assert_eq!(batched.waiting(), 10 * 1024);
    }

    #[tokio::test]
    async fn reads_pass_through() {
        let (client, server) = tokio::io::duplex(64);
        let mut batched = BatchedWrites::new(server);
        let mut client = client;
        client.write_all(b"hello").await.unwrap();
        let mut read = [0u8; 5];
        batched.read_exact(&mut read).await.unwrap();
        assert_eq!(&read, b"hello");
    }
}

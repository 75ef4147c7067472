//! The inflating side of permessage-deflate, below tungstenite.
//!
//! tungstenite 0.29 has no extension hook and fails a connection on any
//! frame with RSV1 set. So the bytes it reads pass through [`InflatingIo`]
//! first, which rewrites each compressed message into plain frames as it
//! reads: the message's first frame becomes an empty non-final frame of
//! the message's type, its payload is inflated into continuation frames of
//! at most [`InflatingIo::chunk`] bytes each, and an empty final
//! continuation ends it. Everything else (control frames, uncompressed
//! messages, and any frame the extension does not allow, such as RSV1 on a
//! continuation or a control frame) passes through unchanged, so
//! tungstenite still applies every rule of RFC 6455 to what it gets:
//! fragmentation, UTF-8 (1007), and the message size limit (1009), which
//! it checks on every frame it adds to a message. A compressed message
//! over the limit therefore ends the connection after at most one chunk
//! past the limit has been inflated: a zip bomb is never inflated whole.
//!
//! Rewritten frames keep a mask (all zeros: unmasking is a no-op), since
//! the server requires client frames to be masked.

use std::io::{self, Cursor};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};

use super::codec::{InflateFailed, Inflater, SYNC_TAIL};

/// Bytes asked of the socket per read while inflating.
const READ_CHUNK: usize = 8 * 1024;

/// The largest plain frame made from a compressed message.
const MAX_CHUNK: usize = 16 * 1024;

/// The upgraded connection, inflating what the client compressed when the
/// extension was agreed, and a plain pass-through when it was not.
pub(crate) struct InflatingIo<Io> {
    io: Io,
    /// `None` without the extension: reads go straight to `io`.
    side: Option<Box<Rewriter>>,
}

impl<Io> InflatingIo<Io> {
    /// A pass-through: no extension was agreed.
    pub(crate) fn plain(io: Io) -> InflatingIo<Io> {
        InflatingIo { io, side: None }
    }

    /// Inflates compressed messages with `inflater`; no frame made from
    /// one is larger than `max_frame_size` (tungstenite's frame limit).
    pub(crate) fn inflating(io: Io, inflater: Inflater, max_frame_size: usize) -> InflatingIo<Io> {
        let rewriter = Rewriter {
            inflater,
            raw: BytesMut::new(),
            out: BytesMut::new(),
            scratch: Vec::new(),
            frame: FrameState::Header,
            message: MessageState::Idle,
            chunk: MAX_CHUNK.min(max_frame_size).max(1),
            max_frame_size,
            inflated: 0,
        };
        InflatingIo {
            io,
            side: Some(Box::new(rewriter)),
        }
    }

    /// The connection itself, below any rewriting: what the closing
    /// handshake reads off after a broken frame.
    pub(crate) fn get_mut(&mut self) -> &mut Io {
        &mut self.io
    }

    /// Bytes inflated so far.
    #[cfg(test)]
    pub(crate) fn inflated(&self) -> u64 {
        self.side.as_ref().map_or(0, |side| side.inflated)
    }
}

/// Where the reader is in the client's frame stream.
enum FrameState {
    /// Expecting a frame header.
    Header,
    /// Copying `remaining` payload bytes unchanged.
    Copy { remaining: u64 },
    /// Inflating a compressed message's frame.
    Inflate(Inflating),
    /// Feeding the message's [`SYNC_TAIL`] (`fed` bytes of it so far).
    Tail { fed: usize },
    /// A header tungstenite will refuse: the rest passes unchanged.
    Verbatim,
}

/// A compressed frame's payload being read.
struct Inflating {
    remaining: u64,
    mask: [u8; 4],
    /// Payload bytes unmasked so far (the mask's phase).
    position: u64,
    /// Bytes at the front of `raw` unmasked but not yet inflated.
    unmasked: usize,
    is_final: bool,
}

/// Whether a fragmented message is under way, and which kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MessageState {
    Idle,
    Plain,
    Compressed,
}

/// Whether a step moved anything.
enum Step {
    Progress,
    NeedInput,
}

struct Rewriter {
    inflater: Inflater,
    /// Read from the socket, not yet handled.
    raw: BytesMut,
    /// Ready for tungstenite.
    out: BytesMut,
    /// One chunk of inflated bytes, before its frame header is known.
    scratch: Vec<u8>,
    frame: FrameState,
    message: MessageState,
    chunk: usize,
    max_frame_size: usize,
    /// Bytes inflated over the connection's life (what the tests read to
    /// see that a bomb stopped early).
    inflated: u64,
}

impl Rewriter {
    /// Moves what `raw` holds towards `out`, one frame part at a time.
    fn step(&mut self) -> Result<Step, InflateFailed> {
        match &mut self.frame {
            FrameState::Header => Ok(self.header()),
            FrameState::Copy { remaining } => {
                if *remaining == 0 {
                    self.frame = FrameState::Header;
                    return Ok(Step::Progress);
                }
                if self.raw.is_empty() {
                    return Ok(Step::NeedInput);
                }
                let n = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(self.raw.len());
                *remaining -= n as u64;
                self.out.extend_from_slice(&self.raw[..n]);
                self.raw.advance(n);
                Ok(Step::Progress)
            }
            FrameState::Inflate(_) => self.inflate_payload(),
            FrameState::Tail { .. } => self.inflate_tail(),
            FrameState::Verbatim => {
                if self.raw.is_empty() {
                    return Ok(Step::NeedInput);
                }
                let rest = self.raw.split();
                self.out.extend_from_slice(&rest);
                Ok(Step::Progress)
            }
        }
    }

    /// Reads a frame header, and decides whether the frame is inflated or
    /// passed on.
    fn header(&mut self) -> Step {
        let mut cursor = Cursor::new(&self.raw[..]);
        let (header, length) = match FrameHeader::parse(&mut cursor) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return Step::NeedInput,
            Err(_) => {
                self.frame = FrameState::Verbatim;
                return Step::Progress;
            }
        };
        let header_len = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
        match (self.inflates(&header, length), header.mask) {
            (true, Some(mask)) => {
                self.raw.advance(header_len);
                if self.message == MessageState::Idle {
                    self.message = MessageState::Compressed;
                    self.emit(header.opcode, &[]);
                }
                self.frame = FrameState::Inflate(Inflating {
                    remaining: length,
                    mask,
                    position: 0,
                    unmasked: 0,
                    is_final: header.is_final,
                });
            }
            _ => {
                self.follow_plain(&header);
                self.out.extend_from_slice(&self.raw[..header_len]);
                self.raw.advance(header_len);
                self.frame = FrameState::Copy { remaining: length };
            }
        }
        Step::Progress
    }

    /// Whether a frame is part of a compressed message this reader
    /// inflates. A frame the extension or RFC 6455 forbids is passed on
    /// for tungstenite to refuse: RSV2 or RSV3, no mask, over the frame
    /// limit, RSV1 on a control frame or a continuation.
    fn inflates(&self, header: &FrameHeader, length: u64) -> bool {
        if header.rsv2
            || header.rsv3
            || header.mask.is_none()
            || length > self.max_frame_size as u64
        {
            return false;
        }
        match (header.opcode, self.message) {
            (OpCode::Data(Data::Text | Data::Binary), MessageState::Idle) => header.rsv1,
            (OpCode::Data(Data::Continue), MessageState::Compressed) => !header.rsv1,
            _ => false,
        }
    }

    /// Follows an uncompressed message's fragments, so that the next
    /// compressed one is recognised.
    fn follow_plain(&mut self, header: &FrameHeader) {
        self.message = match (header.opcode, self.message, header.is_final) {
            (OpCode::Data(Data::Text | Data::Binary), MessageState::Idle, false) => {
                MessageState::Plain
            }
            (OpCode::Data(Data::Continue), MessageState::Plain, true) => MessageState::Idle,
            (_, message, _) => message,
        };
    }

    /// Inflates what has arrived of a compressed frame's payload.
    fn inflate_payload(&mut self) -> Result<Step, InflateFailed> {
        let FrameState::Inflate(frame) = &mut self.frame else {
            return Ok(Step::Progress);
        };
        // Unmask what arrived of this frame, once.
        let available = usize::try_from(frame.remaining)
            .unwrap_or(usize::MAX)
            .min(self.raw.len());
        for byte in &mut self.raw[frame.unmasked..available] {
            *byte ^= frame.mask[(frame.position % 4) as usize];
            frame.position += 1;
        }
        frame.unmasked = available;
        let unmasked = frame.unmasked;
        self.scratch.resize(self.chunk, 0);
        let progress = self
            .inflater
            .inflate(&self.raw[..unmasked], &mut self.scratch)?;
        self.raw.advance(progress.consumed);
        let FrameState::Inflate(frame) = &mut self.frame else {
            return Ok(Step::Progress);
        };
        frame.unmasked -= progress.consumed;
        frame.remaining -= progress.consumed as u64;
        if progress.produced > 0 {
            self.emit_chunk(progress.produced);
            return Ok(Step::Progress);
        }
        if frame.remaining > 0 {
            return Ok(match progress.consumed {
                0 => Step::NeedInput,
                _ => Step::Progress,
            });
        }
        self.frame = match frame.is_final {
            true => FrameState::Tail { fed: 0 },
            false => FrameState::Header,
        };
        Ok(Step::Progress)
    }

    /// Inflates the message's restored tail, then ends the message with an
    /// empty final frame.
    fn inflate_tail(&mut self) -> Result<Step, InflateFailed> {
        let FrameState::Tail { fed } = self.frame else {
            return Ok(Step::Progress);
        };
        self.scratch.resize(self.chunk, 0);
        let progress = self
            .inflater
            .inflate(&SYNC_TAIL[fed..], &mut self.scratch)?;
        self.frame = FrameState::Tail {
            fed: fed + progress.consumed,
        };
        if progress.produced > 0 {
            self.emit_chunk(progress.produced);
            return Ok(Step::Progress);
        }
        if progress.consumed > 0 {
            return Ok(Step::Progress);
        }
        // Nothing more comes out: the message is whole.
        self.inflater.end_message();
        self.emit_final();
        self.message = MessageState::Idle;
        self.frame = FrameState::Header;
        self.scratch = Vec::new();
        Ok(Step::Progress)
    }

    /// `produced` bytes of `scratch` as a continuation frame.
    fn emit_chunk(&mut self, produced: usize) {
        self.inflated += produced as u64;
        let chunk = std::mem::take(&mut self.scratch);
        self.emit(OpCode::Data(Data::Continue), &chunk[..produced]);
        self.scratch = chunk;
    }

    /// The empty final continuation that ends a rewritten message.
    fn emit_final(&mut self) {
        let header = FrameHeader {
            is_final: true,
            opcode: OpCode::Data(Data::Continue),
            mask: Some([0; 4]),
            ..FrameHeader::default()
        };
        let _ = header.format(0, &mut (&mut self.out).writer());
    }

    /// A non-final frame of `opcode` carrying `payload`.
    fn emit(&mut self, opcode: OpCode, payload: &[u8]) {
        let header = FrameHeader {
            is_final: false,
            opcode,
            mask: Some([0; 4]),
            ..FrameHeader::default()
        };
        // Writing into memory cannot fail.
        let _ = header.format(payload.len() as u64, &mut (&mut self.out).writer());
        self.out.extend_from_slice(payload);
    }

    /// Hands over what is ready, releasing the buffers once both are empty
    /// so an idle connection holds none.
    fn drain_into(&mut self, buf: &mut ReadBuf<'_>) {
        let n = self.out.len().min(buf.remaining());
        buf.put_slice(&self.out[..n]);
        self.out.advance(n);
        if self.out.is_empty() && self.raw.is_empty() && matches!(self.frame, FrameState::Header) {
            self.out = BytesMut::new();
            self.raw = BytesMut::new();
        }
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for InflatingIo<Io> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(side) = this.side.as_deref_mut() else {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        };
        loop {
            if !side.out.is_empty() {
                side.drain_into(buf);
                return Poll::Ready(Ok(()));
            }
            match side
                .step()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            {
                Step::Progress => continue,
                Step::NeedInput => {}
            }
            if let FrameState::Copy { remaining } = &mut side.frame {
                // An uncompressed payload goes straight into tungstenite's
                // buffer: one copy, as without the extension.
                let limit = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(buf.remaining());
                let mut direct = ReadBuf::new(buf.initialize_unfilled_to(limit));
                ready!(Pin::new(&mut this.io).poll_read(cx, &mut direct))?;
                let n = direct.filled().len();
                *remaining -= n as u64;
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            let start = side.raw.len();
            side.raw.resize(start + READ_CHUNK, 0);
            let mut read = ReadBuf::new(&mut side.raw[start..]);
            let polled = Pin::new(&mut this.io).poll_read(cx, &mut read);
            let n = read.filled().len();
            side.raw.truncate(start + n);
            ready!(polled)?;
            if n == 0 {
                // EOF: tungstenite sees the stream end where the socket did.
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for InflatingIo<Io> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;

//! The compressor and decompressor of one connection (RFC 7692 §7.2), on
//! zlib-rs: pure Rust, the raw deflate format with a chosen window and
//! memory level, which flate2's default backend (miniz_oxide) cannot keep
//! below 32 KiB and flate2 itself does not let choose (its memory level is
//! fixed at 8).
//!
//! Each direction's state is made when its first message needs it and,
//! without context takeover, dropped when that message is done: an idle
//! connection holds none, and one that never sends a compressed message
//! never pays for a decompressor.

use zlib_rs::{Deflate, DeflateConfig, DeflateFlush, Inflate, InflateFlush, Status};

use super::{MAX_WINDOW_BITS, Takeover};

/// What a sync flush ends with (an empty stored block), removed from every
/// compressed message and put back before inflating it (§7.2.1, §7.2.2).
pub(crate) const SYNC_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// The fastest level (zlib-rs's "quick" strategy): with a context kept,
/// a streamed turn's frames shrink to about 9% of their size at about
/// 0.2 µs each, where level 6 takes 10 to 100 times as long for 7%
/// (measured on JSON chunk frames; see docs/src/internals.md).
const LEVEL: i32 = 1;

/// Without context takeover, the smallest message compressed: a fresh
/// compressor costs tens of microseconds (its tables are allocated and
/// cleared) and shrinks a small frame by next to nothing, so smaller
/// messages go uncompressed, as RFC 7692 allows (§6.1: RSV1 unset).
const RESET_MIN_BYTES: usize = 1024;

/// A message compressed, before its frame is made.
#[derive(Debug, thiserror::Error)]
#[error("compression failed")]
pub(crate) struct CompressFailed;

/// A compressed message that is not a deflate stream: the client broke
/// the extension (§8: _Fail the WebSocket Connection_).
#[derive(Debug, thiserror::Error)]
#[error("invalid compressed data")]
pub(crate) struct InflateFailed;

/// The server's compressor (server-to-client direction).
pub(crate) struct Deflater {
    window_bits: u8,
    takeover: Takeover,
    state: Option<Deflate>,
}

impl Deflater {
    pub(crate) fn new(window_bits: u8, takeover: Takeover) -> Deflater {
        Deflater {
            window_bits,
            takeover,
            state: None,
        }
    }

    /// Whether a message of `len` bytes is worth compressing (see
    /// [`RESET_MIN_BYTES`]); with a context kept, every message is, since
    /// the next one may refer back to it.
    pub(crate) fn compresses(&self, len: usize) -> bool {
        self.takeover == Takeover::Keep || len >= RESET_MIN_BYTES
    }

    /// `message` compressed as one message's payload, the sync flush's
    /// tail removed.
    pub(crate) fn compress(&mut self, message: &[u8]) -> Result<Vec<u8>, CompressFailed> {
        let window_bits = self.window_bits;
        let state = self
            .state
            .get_or_insert_with(|| Deflate::new_with_config(deflate_config(window_bits)));
        let compressed = sync_flush(state, message);
        if self.takeover == Takeover::Reset {
            self.state = None;
        }
        let mut compressed = compressed?;
        if compressed.ends_with(&SYNC_TAIL) {
            compressed.truncate(compressed.len() - SYNC_TAIL.len());
        }
        if compressed.is_empty() {
            // An empty message right after another flush: zlib writes
            // nothing for a second flush in a row, but the peer appends
            // the tail and needs a whole empty block; one 0x00 octet is
            // that block's start (§7.2.3.6).
            compressed.push(0x00);
        }
        Ok(compressed)
    }
}

/// Raw deflate within `window_bits`, with the memory level that goes with
/// it (8 at 15 bits, one less per bit below, as zlib's own defaults pair
/// them): the hash chains shrink with the window.
fn deflate_config(window_bits: u8) -> DeflateConfig {
    DeflateConfig {
        level: LEVEL,
        // Negative: a raw stream, no zlib header.
        window_bits: -i32::from(window_bits),
        mem_level: i32::from(window_bits.saturating_sub(7)).clamp(1, 8),
        ..DeflateConfig::default()
    }
}

/// Compresses all of `input` with a sync flush: everything so far is in
/// the output, which ends on a byte boundary with [`SYNC_TAIL`].
fn sync_flush(state: &mut Deflate, input: &[u8]) -> Result<Vec<u8>, CompressFailed> {
    let mut output = Vec::with_capacity(input.len() / 2 + 64);
    let mut consumed = 0;
    loop {
        let room = (input.len() - consumed).max(64);
        let start = output.len();
        output.resize(start + room, 0);
        let (total_in, total_out) = (state.total_in(), state.total_out());
        let status = state.compress(
            &input[consumed..],
            &mut output[start..],
            DeflateFlush::SyncFlush,
        );
        let produced =
            usize::try_from(state.total_out() - total_out).map_err(|_| CompressFailed)?;
        consumed += usize::try_from(state.total_in() - total_in).map_err(|_| CompressFailed)?;
        output.truncate(start + produced);
        match status {
            Err(_) => return Err(CompressFailed),
            // The flush is complete once it left room to spare.
            Ok(_) if consumed == input.len() && produced < room => return Ok(output),
            Ok(_) => {}
        }
    }
}

/// The server's decompressor (client-to-server direction), fed a message's
/// payload frame by frame.
pub(crate) struct Inflater {
    takeover: Takeover,
    state: Option<Inflate>,
    /// The client ended its stream (a block with BFINAL set): the rest of
    /// the message is ignored and the next one starts a new stream.
    ended: bool,
}

/// What one [`Inflater::inflate`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    pub(crate) consumed: usize,
    pub(crate) produced: usize,
}

impl Inflater {
    pub(crate) fn new(takeover: Takeover) -> Inflater {
        Inflater {
            takeover,
            state: None,
            ended: false,
        }
    }

    /// Inflates from `input` into `output`, as far as either goes. Zero
    /// progress means it needs more input.
    pub(crate) fn inflate(
        &mut self,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<Progress, InflateFailed> {
        if self.ended {
            return Ok(Progress {
                consumed: input.len(),
                produced: 0,
            });
        }
        // Any window the client may use (it can be up to 15 bits whatever
        // it offered); zlib-rs allocates 32 KiB whatever this says.
        let state = self
            .state
            .get_or_insert_with(|| Inflate::new(false, MAX_WINDOW_BITS));
        let (total_in, total_out) = (state.total_in(), state.total_out());
        let status = state.decompress(input, output, InflateFlush::SyncFlush);
        let progress = Progress {
            consumed: usize::try_from(state.total_in() - total_in).map_err(|_| InflateFailed)?,
            produced: usize::try_from(state.total_out() - total_out).map_err(|_| InflateFailed)?,
        };
        match status {
            Ok(Status::StreamEnd) => {
                self.ended = true;
                Ok(Progress {
                    consumed: input.len(),
                    ..progress
                })
            }
            Ok(Status::Ok | Status::BufError) => Ok(progress),
            Err(_) => Err(InflateFailed),
        }
    }

    /// The message is complete: without context takeover (or after the
    /// client ended its stream) the state goes, and the next message gets
    /// a fresh one.
    pub(crate) fn end_message(&mut self) {
        if self.takeover == Takeover::Reset || self.ended {
            self.state = None;
            self.ended = false;
        }
    }
}

#[cfg(test)]
mod tests;

//! What the fuzz targets share: cutting an input into the pieces a network
//! would deliver, a Tokio runtime for the async decoders, and a text sink.

use std::sync::{Mutex, OnceLock};

use agentwire_core::TextSink;

/// Splits `data` into pieces as a network might deliver it. The first byte
/// seeds the cut lengths (1 to 64 bytes); the rest is the stream. Returns
/// the stream whole and in pieces.
pub fn cut(data: &[u8]) -> (&[u8], Vec<&[u8]>) {
    let Some((&seed, stream)) = data.split_first() else {
        return (&[], Vec::new());
    };
    let mut state = u32::from(seed) | 0x100;
    let mut pieces = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        // A small LCG: deterministic for a given input, so crashes replay.
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let len = ((state >> 16) as usize % 64 + 1).min(rest.len());
        let (piece, tail) = rest.split_at(len);
        pieces.push(piece);
        rest = tail;
    }
    (stream, pieces)
}

/// One current-thread runtime with its timer, reused by every run.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("a current-thread runtime")
        })
        .block_on(future)
}

/// Collects the text a provider streams.
#[derive(Default)]
pub struct Collect(Mutex<String>);

impl Collect {
    pub fn collected(&self) -> String {
        self.0.lock().expect("sink lock").clone()
    }
}

#[async_trait::async_trait]
impl TextSink for Collect {
    async fn text(&self, delta: &str) {
        self.0.lock().expect("sink lock").push_str(delta);
    }
}

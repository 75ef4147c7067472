//! The shared log's JSON: a batch of turn log entries and a control, as
//! Redis stores and carries them.

pub(crate) use agentwire_core::live::{decode_batch, decode_control, encode_batch, encode_control};

#[cfg(test)]
mod tests;

//! Standard base64 (RFC 4648 alphabet, padded) for JSON `media_chunk.data`.
//! Written here to keep the crate's dependencies to serde alone.

use std::fmt;

use serde::{Serialize, Serializer};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Output is staged in a small stack buffer so a multi-megabyte payload goes
/// straight into the frame without a second heap copy.
const BUFFER_LEN: usize = 1024;

/// Encodes lazily: `Display` and `Serialize` both stream the text.
pub(crate) struct Base64<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Base64<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buffer = [0u8; BUFFER_LEN];
        let mut filled = 0;
        for group in self.0.chunks(3) {
            buffer[filled..filled + 4].copy_from_slice(&encode_group(group));
            filled += 4;
            if filled == BUFFER_LEN {
                f.write_str(ascii(&buffer))?;
                filled = 0;
            }
        }
        f.write_str(ascii(&buffer[..filled]))
    }
}

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Four output characters for one to three input bytes, padded with `=`.
fn encode_group(group: &[u8]) -> [u8; 4] {
    let byte = |i: usize| u32::from(group.get(i).copied().unwrap_or(0));
    let bits = (byte(0) << 16) | (byte(1) << 8) | byte(2);
    let sextet = |shift: u32| ALPHABET[((bits >> shift) & 0x3f) as usize];
    [
        sextet(18),
        sextet(12),
        if group.len() > 1 { sextet(6) } else { b'=' },
        if group.len() > 2 { sextet(0) } else { b'=' },
    ]
}

/// The buffer only ever holds alphabet characters and `=`, all ASCII.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(bytes: &[u8]) -> String {
        Base64(bytes).to_string()
    }

    fn decode(text: &str) -> Vec<u8> {
        let value = |c: u8| ALPHABET.iter().position(|&a| a == c).unwrap() as u32;
        let mut out = Vec::new();
        for quad in text.as_bytes().chunks(4) {
            let pad = quad.iter().filter(|&&c| c == b'=').count();
            let bits = quad
                .iter()
                .map(|&c| if c == b'=' { 0 } else { value(c) })
                .fold(0u32, |acc, v| (acc << 6) | v);
            let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        out
    }

    #[test]
    fn rfc_4648_vectors() {
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"f"), "Zg==");
        assert_eq!(encode(b"fo"), "Zm8=");
        assert_eq!(encode(b"foo"), "Zm9v");
        assert_eq!(encode(b"foob"), "Zm9vYg==");
        assert_eq!(encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(encode(b"test audio data"), "dGVzdCBhdWRpbyBkYXRh");
    }

    #[test]
    fn every_byte_value_encodes_with_the_standard_alphabet() {
        let all: Vec<u8> = (0..=255).collect();
        let text = encode(&all);
        assert!(text.starts_with("AAECAwQFBgcICQoLDA0ODxAREhMU"));
        assert!(text.ends_with("8/T19vf4+fr7/P3+/w=="));
        assert_eq!(decode(&text), all);
    }

    #[test]
    fn output_spanning_several_buffers_round_trips() {
        for len in [767usize, 768, 769, 3000, 10_001] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            let text = encode(&bytes);
            assert_eq!(text.len(), len.div_ceil(3) * 4);
            assert_eq!(decode(&text), bytes);
        }
    }
}

//! The binary OMNI frame: `header (32 bytes) | metadata JSON | payload`, all
//! integers big-endian. Used for duplex audio in both directions, so that
//! media skips base64's third again in size.

use serde::{Deserialize, Serialize};

use crate::json::Object;

pub const HEADER_LEN: usize = 32;
pub const MAGIC: [u8; 4] = *b"OMNI";
pub const PROTOCOL_VERSION: u8 = 1;

/// Reserved: never set or read.
pub const FLAG_COMPRESSED: u8 = 0x01;
pub const FLAG_CHUNKED: u8 = 0x02;
/// Outbound: the last frame of one media stream. Inbound: the last frame of
/// the whole audio call.
pub const FLAG_IS_LAST: u8 = 0x04;

pub const MESSAGE_TYPE_MEDIA_CHUNK: u16 = 1;

/// Outbound payloads above this are split into [`CHUNK_SIZE`] frames.
pub const CHUNKING_THRESHOLD: usize = 1_048_576;
pub const CHUNK_SIZE: usize = 65_536;

const MEDIA_ID_LEN: usize = 12;
const MAGIC_RANGE: std::ops::Range<usize> = 0..4;
const VERSION_OFFSET: usize = 4;
const FLAGS_OFFSET: usize = 5;
const MESSAGE_TYPE_OFFSET: usize = 6;
const METADATA_LEN_OFFSET: usize = 8;
const PAYLOAD_LEN_OFFSET: usize = 12;
const SEQUENCE_OFFSET: usize = 16;
const MEDIA_ID_OFFSET: usize = 20;
/// Room for the server's own metadata object, so encoding rarely regrows.
const METADATA_CAPACITY_HINT: usize = 128;

/// The frame's JSON metadata. The audio fields are sent by a client on its
/// first frame; the server only ever writes the session, MIME type and, when
/// chunking, the chunk count.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BinaryMetadata {
    pub session_id: String,
    pub mime_type: String,
    pub total_chunks: Option<u32>,
    pub sample_rate: Option<u32>,
    pub channels: Option<u32>,
    pub codec: Option<String>,
}

/// One frame, borrowing its payload from the buffer it was decoded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryFrame<'a> {
    pub flags: u8,
    pub message_type: u16,
    pub sequence: u32,
    /// NUL-padded bytes; see [`media_id_str`].
    pub media_id: [u8; MEDIA_ID_LEN],
    pub metadata: BinaryMetadata,
    pub payload: &'a [u8],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinaryDecodeError {
    #[error("invalid header size")]
    InvalidHeaderSize,
    #[error("invalid magic bytes")]
    InvalidMagic,
    #[error("unsupported binary protocol version: got {0}, expected {PROTOCOL_VERSION}")]
    UnsupportedVersion(u8),
    #[error("metadata length exceeds frame size")]
    MetadataTooLong,
    #[error("payload length exceeds frame size")]
    PayloadTooLong,
    #[error("unknown binary message type")]
    UnknownMessageType(u16),
}

impl BinaryDecodeError {
    /// The full client-facing INVALID_MESSAGE text:
    /// `invalid binary frame: <err>` for header errors, and exactly
    /// `unknown binary message type` for the type error, as the reference
    /// words them.
    pub fn client_message(&self) -> String {
        match self {
            BinaryDecodeError::UnknownMessageType(_) => self.to_string(),
            _ => format!("invalid binary frame: {self}"),
        }
    }
}

/// Checks run in the reference's order: size, magic, version, metadata
/// length, payload length, then message type. Bytes after the payload are
/// ignored, and metadata that is not a JSON object reads as the default.
pub fn decode_binary(frame: &[u8]) -> Result<BinaryFrame<'_>, BinaryDecodeError> {
    let header: &[u8; HEADER_LEN] = frame
        .first_chunk()
        .ok_or(BinaryDecodeError::InvalidHeaderSize)?;
    if header[MAGIC_RANGE] != MAGIC {
        return Err(BinaryDecodeError::InvalidMagic);
    }
    let version = header[VERSION_OFFSET];
    if version != PROTOCOL_VERSION {
        return Err(BinaryDecodeError::UnsupportedVersion(version));
    }
    let body = &frame[HEADER_LEN..];
    let (metadata, rest) = split_prefix(body, read_u32(header, METADATA_LEN_OFFSET))
        .ok_or(BinaryDecodeError::MetadataTooLong)?;
    let (payload, _trailing) = split_prefix(rest, read_u32(header, PAYLOAD_LEN_OFFSET))
        .ok_or(BinaryDecodeError::PayloadTooLong)?;
    let message_type =
        u16::from_be_bytes([header[MESSAGE_TYPE_OFFSET], header[MESSAGE_TYPE_OFFSET + 1]]);
    if message_type != MESSAGE_TYPE_MEDIA_CHUNK {
        return Err(BinaryDecodeError::UnknownMessageType(message_type));
    }
    let mut media_id = [0; MEDIA_ID_LEN];
    media_id.copy_from_slice(&header[MEDIA_ID_OFFSET..]);
    Ok(BinaryFrame {
        flags: header[FLAGS_OFFSET],
        message_type,
        sequence: read_u32(header, SEQUENCE_OFFSET),
        media_id,
        metadata: parse_metadata(metadata),
        payload,
    })
}

/// Encodes one frame exactly as given.
///
/// # Panics
///
/// If the metadata JSON or the payload exceeds 4 GiB, which the 32-bit
/// length fields cannot describe.
pub fn encode_binary(frame: &BinaryFrame<'_>) -> Vec<u8> {
    let payload_len = u32::try_from(frame.payload.len()).expect("payload fits a u32 length");
    let mut out = Vec::with_capacity(HEADER_LEN + METADATA_CAPACITY_HINT + frame.payload.len());
    out.extend_from_slice(&MAGIC);
    out.push(PROTOCOL_VERSION);
    out.push(frame.flags);
    out.extend_from_slice(&frame.message_type.to_be_bytes());
    out.extend_from_slice(&[0; 4]); // metadata length, known once written
    out.extend_from_slice(&payload_len.to_be_bytes());
    out.extend_from_slice(&frame.sequence.to_be_bytes());
    out.extend_from_slice(&frame.media_id);
    serde_json::to_writer(&mut out, &MetadataOut::new(&frame.metadata))
        .expect("metadata serialization into a Vec is infallible");
    let metadata_len = u32::try_from(out.len() - HEADER_LEN).expect("metadata fits a u32 length");
    out[METADATA_LEN_OFFSET..METADATA_LEN_OFFSET + 4].copy_from_slice(&metadata_len.to_be_bytes());
    out.extend_from_slice(frame.payload);
    out
}

/// Outbound media: payload <= 1 MiB → one frame keeping `sequence` and
/// IsLast when `is_last`; larger → ceil(len/65536) frames, Chunked flag,
/// sequence = chunk index, metadata.total_chunks = N on every frame, IsLast
/// only on the final chunk and only if `is_last`. Metadata carries only
/// session_id, mime_type and (chunked) total_chunks. media_id: the id's bytes
/// truncated/NUL-padded to 12.
///
/// A chunked transfer loses the caller's `sequence`, as in the reference:
/// the header has one sequence field and it holds the chunk index.
pub fn encode_media_frames(
    session_id: &str,
    media_id: &str,
    mime_type: &str,
    sequence: u32,
    is_last: bool,
    payload: &[u8],
) -> Vec<Vec<u8>> {
    let mut frame = BinaryFrame {
        flags: is_last_flag(is_last),
        message_type: MESSAGE_TYPE_MEDIA_CHUNK,
        sequence,
        media_id: media_id_bytes(media_id),
        metadata: BinaryMetadata {
            session_id: session_id.to_owned(),
            mime_type: mime_type.to_owned(),
            ..BinaryMetadata::default()
        },
        payload,
    };
    if payload.len() <= CHUNKING_THRESHOLD {
        return vec![encode_binary(&frame)];
    }
    let total = payload.len().div_ceil(CHUNK_SIZE);
    frame.metadata.total_chunks = Some(saturating_u32(total));
    payload
        .chunks(CHUNK_SIZE)
        .enumerate()
        .map(|(index, chunk)| {
            frame.flags = FLAG_CHUNKED | is_last_flag(is_last && index + 1 == total);
            frame.sequence = saturating_u32(index);
            frame.payload = chunk;
            encode_binary(&frame)
        })
        .collect()
}

/// The media id as text: up to the first NUL, or `""` if that is not UTF-8.
pub fn media_id_str(id: &[u8; MEDIA_ID_LEN]) -> &str {
    let end = id.iter().position(|&b| b == 0).unwrap_or(id.len());
    std::str::from_utf8(&id[..end]).unwrap_or_default()
}

/// Byte-wise, as the reference copies it: an id cut inside a multi-byte
/// character reads back as `""`.
fn media_id_bytes(id: &str) -> [u8; MEDIA_ID_LEN] {
    let mut bytes = [0; MEDIA_ID_LEN];
    let len = id.len().min(MEDIA_ID_LEN);
    bytes[..len].copy_from_slice(&id.as_bytes()[..len]);
    bytes
}

fn is_last_flag(is_last: bool) -> u8 {
    if is_last { FLAG_IS_LAST } else { 0 }
}

/// Chunk counts only overflow for payloads far beyond any frame limit.
fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn read_u32(header: &[u8; HEADER_LEN], offset: usize) -> u32 {
    u32::from_be_bytes([
        header[offset],
        header[offset + 1],
        header[offset + 2],
        header[offset + 3],
    ])
}

/// Splits off the first `len` bytes, or `None` when there are fewer.
fn split_prefix(bytes: &[u8], len: u32) -> Option<(&[u8], &[u8])> {
    bytes.split_at_checked(usize::try_from(len).ok()?)
}

fn parse_metadata(json: &[u8]) -> BinaryMetadata {
    let Ok(Object(raw)) = serde_json::from_slice::<Object<MetadataIn>>(json) else {
        return BinaryMetadata::default();
    };
    BinaryMetadata {
        session_id: raw.session_id.unwrap_or_default(),
        mime_type: raw.mime_type.unwrap_or_default(),
        total_chunks: raw.total_chunks,
        sample_rate: raw.sample_rate,
        channels: raw.channels,
        codec: raw.codec,
    }
}

#[derive(Deserialize)]
struct MetadataIn {
    session_id: Option<String>,
    mime_type: Option<String>,
    total_chunks: Option<u32>,
    sample_rate: Option<u32>,
    channels: Option<u32>,
    codec: Option<String>,
}

#[derive(Serialize)]
struct MetadataOut<'a> {
    session_id: &'a str,
    mime_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_chunks: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_rate: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    codec: Option<&'a str>,
}

impl<'a> MetadataOut<'a> {
    fn new(metadata: &'a BinaryMetadata) -> MetadataOut<'a> {
        MetadataOut {
            session_id: &metadata.session_id,
            mime_type: &metadata.mime_type,
            total_chunks: metadata.total_chunks,
            sample_rate: metadata.sample_rate,
            channels: metadata.channels,
            codec: metadata.codec.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn header(version: u8, message_type: u16, metadata_len: u32, payload_len: u32) -> Vec<u8> {
        let mut h = Vec::with_capacity(HEADER_LEN);
        h.extend_from_slice(&MAGIC);
        h.push(version);
        h.push(0);
        h.extend_from_slice(&message_type.to_be_bytes());
        h.extend_from_slice(&metadata_len.to_be_bytes());
        h.extend_from_slice(&payload_len.to_be_bytes());
        h.extend_from_slice(&7u32.to_be_bytes());
        h.extend_from_slice(b"media-1\0\0\0\0\0");
        h
    }

    fn client_error(frame: &[u8]) -> String {
        decode_binary(frame).unwrap_err().client_message()
    }

    fn metadata_of(frame: &[u8]) -> serde_json::Value {
        let len = u32::from_be_bytes(frame[8..12].try_into().unwrap()) as usize;
        serde_json::from_slice(&frame[HEADER_LEN..HEADER_LEN + len]).unwrap()
    }

    #[test]
    fn header_layout_matches_the_contract() {
        let frame = encode_binary(&BinaryFrame {
            flags: FLAG_IS_LAST,
            message_type: MESSAGE_TYPE_MEDIA_CHUNK,
            sequence: 0x0102_0304,
            media_id: media_id_bytes("test-media"),
            metadata: BinaryMetadata {
                session_id: "s1".into(),
                mime_type: "audio/mp3".into(),
                ..BinaryMetadata::default()
            },
            payload: b"test audio data",
        });
        let metadata = br#"{"session_id":"s1","mime_type":"audio/mp3"}"#;
        assert_eq!(&frame[0..4], b"OMNI");
        assert_eq!(frame[4], 1);
        assert_eq!(frame[5], 0x04);
        assert_eq!(&frame[6..8], &[0, 1]);
        assert_eq!(&frame[8..12], &(metadata.len() as u32).to_be_bytes());
        assert_eq!(&frame[12..16], &15u32.to_be_bytes());
        assert_eq!(&frame[16..20], &[1, 2, 3, 4]);
        assert_eq!(&frame[20..32], b"test-media\0\0");
        assert_eq!(&frame[32..32 + metadata.len()], metadata);
        assert_eq!(&frame[32 + metadata.len()..], b"test audio data");
    }

    #[test]
    fn decode_errors_have_the_reference_texts() {
        assert_eq!(
            client_error(&[]),
            "invalid binary frame: invalid header size"
        );
        assert_eq!(
            client_error(&header(1, 1, 0, 0)[..31]),
            "invalid binary frame: invalid header size"
        );
        let mut bad_magic = header(1, 1, 0, 0);
        bad_magic[0] = b'X';
        assert_eq!(
            client_error(&bad_magic),
            "invalid binary frame: invalid magic bytes"
        );
        assert_eq!(
            client_error(&header(2, 1, 0, 0)),
            "invalid binary frame: unsupported binary protocol version: got 2, expected 1"
        );
        assert_eq!(
            client_error(&header(1, 1, 1, 0)),
            "invalid binary frame: metadata length exceeds frame size"
        );
        let mut short_payload = header(1, 1, 2, 4);
        short_payload.extend_from_slice(b"{}abc");
        assert_eq!(
            client_error(&short_payload),
            "invalid binary frame: payload length exceeds frame size"
        );
        for message_type in [0, 2, 0xffff] {
            assert_eq!(
                client_error(&header(1, message_type, 0, 0)),
                "unknown binary message type"
            );
        }
    }

    #[test]
    fn checks_run_in_the_reference_order() {
        // A bad version wins over bad lengths and type; bad lengths win over type.
        assert_eq!(
            decode_binary(&header(9, 2, 99, 99)),
            Err(BinaryDecodeError::UnsupportedVersion(9))
        );
        assert_eq!(
            decode_binary(&header(1, 2, 99, 0)),
            Err(BinaryDecodeError::MetadataTooLong)
        );
        assert_eq!(
            decode_binary(&header(1, 2, 0, 99)),
            Err(BinaryDecodeError::PayloadTooLong)
        );
        assert_eq!(
            decode_binary(&header(1, 2, 0, 0)),
            Err(BinaryDecodeError::UnknownMessageType(2))
        );
    }

    #[test]
    fn maximal_lengths_do_not_overflow() {
        assert_eq!(
            decode_binary(&header(1, 1, u32::MAX, u32::MAX)),
            Err(BinaryDecodeError::MetadataTooLong)
        );
        let mut frame = header(1, 1, 2, u32::MAX);
        frame.extend_from_slice(b"{}");
        assert_eq!(
            decode_binary(&frame),
            Err(BinaryDecodeError::PayloadTooLong)
        );
    }

    #[test]
    fn trailing_bytes_are_ignored() {
        let mut frame = encode_media_frames("s1", "m", "audio/pcm", 3, false, b"abc").remove(0);
        frame.extend_from_slice(b"trailing garbage");
        let decoded = decode_binary(&frame).unwrap();
        assert_eq!(decoded.payload, b"abc");
        assert_eq!(decoded.sequence, 3);
        assert_eq!(media_id_str(&decoded.media_id), "m");
    }

    #[test]
    fn client_metadata_is_read() {
        let metadata = br#"{"session_id":"s","mime_type":"audio/pcm","sample_rate":16000,"channels":1,"codec":"pcm","extra":true}"#;
        let mut frame = header(1, 1, metadata.len() as u32, 2);
        frame.extend_from_slice(metadata);
        frame.extend_from_slice(&[1, 2]);
        let decoded = decode_binary(&frame).unwrap();
        assert_eq!(
            decoded.metadata,
            BinaryMetadata {
                session_id: "s".into(),
                mime_type: "audio/pcm".into(),
                total_chunks: None,
                sample_rate: Some(16_000),
                channels: Some(1),
                codec: Some("pcm".into()),
            }
        );
        assert_eq!(decoded.sequence, 7);
        assert_eq!(media_id_str(&decoded.media_id), "media-1");
    }

    #[test]
    fn unreadable_metadata_reads_as_default() {
        for metadata in [
            &b"not json"[..],
            b"[\"s\",\"m\"]",
            b"{\"sample_rate\":-1}",
            b"",
            b"\xff\xfe",
        ] {
            let mut frame = header(1, 1, metadata.len() as u32, 0);
            frame.extend_from_slice(metadata);
            assert_eq!(
                decode_binary(&frame).unwrap().metadata,
                BinaryMetadata::default()
            );
        }
    }

    #[test]
    fn media_ids_are_truncated_and_padded() {
        assert_eq!(&media_id_bytes("test-media"), b"test-media\0\0");
        assert_eq!(&media_id_bytes("abcdefghijklmnop"), b"abcdefghijkl");
        assert_eq!(media_id_bytes(""), [0; 12]);
        assert_eq!(media_id_str(&[0; 12]), "");
        assert_eq!(media_id_str(b"abcdefghijkl"), "abcdefghijkl");
        // Six two-byte characters fill the id exactly; a leading ASCII byte pushes
        // the cut into the sixth character, which then reads back as "".
        assert_eq!(media_id_str(&media_id_bytes("éééééé")), "éééééé");
        assert_eq!(media_id_str(&media_id_bytes("aéééééé")), "");
        assert_eq!(media_id_str(b"ab\0cdefghijk"), "ab");
    }

    #[test]
    fn small_media_is_one_frame_keeping_the_sequence() {
        let payload = vec![7u8; 1_048_575];
        let frames = encode_media_frames("s1", "test-media", "image/png", 42, true, &payload);
        assert_eq!(frames.len(), 1);
        let frame = decode_binary(&frames[0]).unwrap();
        assert_eq!(frame.flags, FLAG_IS_LAST);
        assert_eq!(frame.sequence, 42);
        assert_eq!(frame.payload, &payload[..]);
        assert_eq!(
            metadata_of(&frames[0]),
            serde_json::json!({"session_id":"s1","mime_type":"image/png"})
        );
    }

    #[test]
    fn threshold_media_stays_one_frame() {
        let payload = vec![1u8; CHUNKING_THRESHOLD];
        let frames = encode_media_frames("s1", "m", "image/png", 0, true, &payload);
        assert_eq!(frames.len(), 1);
        let frame = decode_binary(&frames[0]).unwrap();
        assert_eq!(frame.flags, FLAG_IS_LAST);
        assert_eq!(frame.payload.len(), CHUNKING_THRESHOLD);
        assert_eq!(frame.metadata.total_chunks, None);
    }

    #[test]
    fn not_last_single_frame_has_no_flags() {
        let frames = encode_media_frames("s1", "", "audio/pcm", 5, false, b"");
        let frame = decode_binary(&frames[0]).unwrap();
        assert_eq!(
            (frame.flags, frame.sequence, frame.payload),
            (0, 5, &b""[..])
        );
    }

    #[test]
    fn big_media_is_chunked() {
        let payload: Vec<u8> = (0..1_081_344usize).map(|i| (i % 256) as u8).collect();
        let frames = encode_media_frames("s1", "test-media", "video/mp4", 0, true, &payload);
        assert_eq!(frames.len(), 17);
        let mut reassembled = Vec::new();
        for (index, bytes) in frames.iter().enumerate() {
            let frame = decode_binary(bytes).unwrap();
            let expected_flags = if index == 16 {
                FLAG_CHUNKED | FLAG_IS_LAST
            } else {
                FLAG_CHUNKED
            };
            assert_eq!(frame.flags, expected_flags, "frame {index}");
            assert_eq!(frame.sequence, index as u32);
            assert_eq!(frame.metadata.total_chunks, Some(17));
            assert_eq!(media_id_str(&frame.media_id), "test-media");
            assert_eq!(
                frame.payload.len(),
                if index == 16 { 32_768 } else { CHUNK_SIZE }
            );
            reassembled.extend_from_slice(frame.payload);
        }
        assert_eq!(reassembled, payload);
        assert_eq!(
            metadata_of(&frames[0]),
            serde_json::json!({"session_id":"s1","mime_type":"video/mp4","total_chunks":17})
        );
    }

    #[test]
    fn chunked_media_not_last_never_sets_is_last() {
        let payload = vec![0u8; CHUNKING_THRESHOLD + 1];
        let frames = encode_media_frames("s1", "m", "video/mp4", 9, false, &payload);
        assert_eq!(frames.len(), 17);
        for bytes in &frames {
            assert_eq!(decode_binary(bytes).unwrap().flags, FLAG_CHUNKED);
        }
        assert_eq!(decode_binary(&frames[16]).unwrap().payload.len(), 1);
    }

    fn metadata_strategy() -> impl Strategy<Value = BinaryMetadata> {
        (
            any::<String>(),
            any::<String>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            any::<Option<String>>(),
        )
            .prop_map(
                |(session_id, mime_type, total_chunks, sample_rate, channels, codec)| {
                    BinaryMetadata {
                        session_id,
                        mime_type,
                        total_chunks,
                        sample_rate,
                        channels,
                        codec,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn encode_then_decode_round_trips(
            flags in any::<u8>(),
            sequence in any::<u32>(),
            media_id in any::<[u8; 12]>(),
            metadata in metadata_strategy(),
            payload in prop::collection::vec(any::<u8>(), 0..4096),
        ) {
            let frame = BinaryFrame { flags, message_type: MESSAGE_TYPE_MEDIA_CHUNK, sequence, media_id, metadata, payload: &payload };
            let bytes = encode_binary(&frame);
            prop_assert_eq!(decode_binary(&bytes), Ok(frame));
        }

        #[test]
        fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_binary(&bytes);
        }

        #[test]
        fn decode_never_panics_on_valid_headers_with_random_lengths(
            message_type in prop_oneof![Just(1u16), any::<u16>()],
            metadata_len in prop_oneof![0u32..64, any::<u32>()],
            payload_len in prop_oneof![0u32..64, any::<u32>()],
            body in prop::collection::vec(any::<u8>(), 0..128),
        ) {
            let mut frame = header(1, message_type, metadata_len, payload_len);
            frame.extend_from_slice(&body);
            if let Ok(decoded) = decode_binary(&frame) {
                prop_assert!(decoded.payload.len() <= body.len());
            }
        }

    }

    proptest! {
        // Each case moves over a megabyte through a debug build; a few dozen
        // cases cover the chunk-boundary arithmetic without slowing the suite.
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn chunked_frames_reassemble(extra in prop_oneof![1usize..200_000, (1usize..4).prop_map(|n| n * CHUNK_SIZE)], is_last in any::<bool>(), seed in any::<u8>()) {
            let payload: Vec<u8> = (0..CHUNKING_THRESHOLD + extra).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
            let frames = encode_media_frames("s", "id", "audio/pcm", 0, is_last, &payload);
            let total = payload.len().div_ceil(CHUNK_SIZE);
            prop_assert_eq!(frames.len(), total);
            let mut reassembled = Vec::with_capacity(payload.len());
            for (index, bytes) in frames.iter().enumerate() {
                let frame = decode_binary(bytes).unwrap();
                prop_assert_eq!(frame.sequence as usize, index);
                prop_assert_eq!(frame.metadata.total_chunks, Some(total as u32));
                prop_assert_eq!(frame.flags & FLAG_IS_LAST != 0, is_last && index + 1 == total);
                reassembled.extend_from_slice(frame.payload);
            }
            prop_assert_eq!(reassembled, payload);
        }
    }
}

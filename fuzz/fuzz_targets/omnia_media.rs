//! The chunked media OMNI frames carry (`encode_media_frames`, reassembled
//! as a client does): a media payload, stretched past the 1 MiB chunking
//! threshold when the second byte is 0; its frames decode and reassemble to
//! the payload, with the chunk flags and counts the contract gives. The
//! first byte gives the IsLast flag (bit 1) and the sequence (bits 2-7).
//!
//! Slow by nature (a stretched input is a megabyte and more): its budget is
//! counted in time, not executions.
#![no_main]

use agentwire_omnia::{
    CHUNK_SIZE, CHUNKING_THRESHOLD, FLAG_CHUNKED, FLAG_IS_LAST, decode_binary,
    encode_media_frames, media_id_str,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    reassemble(mode, rest);
});

fn reassemble(mode: u8, rest: &[u8]) {
    let (big, payload) = match rest.split_first() {
        Some((&0, tail)) if !tail.is_empty() => (true, tail),
        Some((_, tail)) => (false, tail),
        None => (false, rest),
    };
    let is_last = mode & 2 != 0;
    let sequence = u32::from(mode >> 2);
    let payload: Vec<u8> = if big {
        // Past the threshold by up to three chunks, from the input's bytes.
        let extra = usize::from(payload[0]) * 771 % (3 * CHUNK_SIZE) + 1;
        payload
            .iter()
            .copied()
            .cycle()
            .take(CHUNKING_THRESHOLD + extra)
            .collect()
    } else {
        payload.to_vec()
    };
    let media_id = "media-id-0123456789";
    let frames = encode_media_frames("s1", media_id, "audio/pcm", sequence, is_last, &payload);
    let chunked = payload.len() > CHUNKING_THRESHOLD;
    let total = if chunked {
        payload.len().div_ceil(CHUNK_SIZE)
    } else {
        1
    };
    assert_eq!(frames.len(), total);
    let mut reassembled = Vec::with_capacity(payload.len());
    for (index, bytes) in frames.iter().enumerate() {
        let frame = decode_binary(bytes).expect("an encoded frame decodes");
        let last = index + 1 == total;
        assert_eq!(frame.flags & FLAG_IS_LAST != 0, is_last && last);
        assert_eq!(frame.flags & FLAG_CHUNKED != 0, chunked);
        if chunked {
            assert_eq!(frame.sequence as usize, index);
            assert_eq!(frame.metadata.total_chunks, Some(total as u32));
        } else {
            assert_eq!(frame.sequence, sequence);
            assert_eq!(frame.metadata.total_chunks, None);
        }
        assert_eq!(frame.metadata.session_id, "s1");
        // The id's first 12 bytes.
        assert_eq!(media_id_str(&frame.media_id), "media-id-012");
        reassembled.extend_from_slice(frame.payload);
    }
    assert_eq!(reassembled, payload);
}

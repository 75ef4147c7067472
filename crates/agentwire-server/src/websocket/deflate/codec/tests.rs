use super::*;
use crate::websocket::deflate::MIN_WINDOW_BITS;

/// Inflates one message's payload whole, the way a peer does (§7.2.2).
fn inflate_message(inflater: &mut Inflater, payload: &[u8]) -> Vec<u8> {
    let mut input = payload.to_vec();
    input.extend_from_slice(&SYNC_TAIL);
    let mut output = Vec::new();
    let mut consumed = 0;
    loop {
        let mut chunk = [0u8; 1024];
        let progress = inflater
            .inflate(&input[consumed..], &mut chunk)
            .unwrap_or_else(|_| panic!("inflating {} bytes at {consumed}", input.len()));
        consumed += progress.consumed;
        output.extend_from_slice(&chunk[..progress.produced]);
        if progress.consumed == 0 && progress.produced == 0 {
            break;
        }
    }
    inflater.end_message();
    output
}

/// A JSON chunk frame of the kind a streamed turn sends.
fn chunk(n: usize) -> Vec<u8> {
    format!(r#"{{"type":"chunk","session_id":"s-1","content":"word {n} "}}"#).into_bytes()
}

#[test]
fn messages_round_trip_with_and_without_context_takeover() {
    for takeover in [Takeover::Keep, Takeover::Reset] {
        for bits in MIN_WINDOW_BITS..=MAX_WINDOW_BITS {
            let mut deflater = Deflater::new(bits, takeover);
            let mut inflater = Inflater::new(takeover);
            // An empty message after another is the case zlib writes
            // nothing for.
            for message in [
                chunk(1),
                chunk(2),
                Vec::new(),
                vec![7u8; 100_000],
                chunk(3),
                Vec::new(),
            ] {
                let compressed = deflater.compress(&message).unwrap();
                assert!(!compressed.ends_with(&SYNC_TAIL));
                assert_eq!(inflate_message(&mut inflater, &compressed), message);
            }
        }
    }
}

#[test]
fn context_takeover_makes_repeated_chunks_small() {
    let mut keep = Deflater::new(MAX_WINDOW_BITS, Takeover::Keep);
    let mut reset = Deflater::new(MAX_WINDOW_BITS, Takeover::Reset);
    let first_kept = keep.compress(&chunk(1)).unwrap().len();
    let second_kept = keep.compress(&chunk(2)).unwrap().len();
    let first_reset = reset.compress(&chunk(1)).unwrap().len();
    let second_reset = reset.compress(&chunk(2)).unwrap().len();
    assert!(
        second_kept * 3 < first_kept,
        "{second_kept} vs {first_kept}"
    );
    assert_eq!(second_reset, first_reset);
}

#[test]
fn the_state_is_dropped_between_messages_without_takeover() {
    let mut deflater = Deflater::new(MAX_WINDOW_BITS, Takeover::Reset);
    deflater.compress(&chunk(1)).unwrap();
    assert!(deflater.state.is_none());
    let mut inflater = Inflater::new(Takeover::Reset);
    inflate_message(&mut inflater, &[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]);
    assert!(inflater.state.is_none());
    let mut kept = Inflater::new(Takeover::Keep);
    inflate_message(&mut kept, &[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]);
    assert!(kept.state.is_some());
}

#[test]
fn the_rfcs_examples_inflate() {
    // RFC 7692 §7.2.3.1: "Hello" compressed, no context.
    let mut inflater = Inflater::new(Takeover::Keep);
    let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
    assert_eq!(inflate_message(&mut inflater, &hello), b"Hello");
    // §7.2.3.2: the second "Hello" refers back to the first.
    let again = [0xf2, 0x00, 0x11, 0x00, 0x00];
    assert_eq!(inflate_message(&mut inflater, &again), b"Hello");
    // §7.2.3.3: an uncompressed (stored) block.
    let mut fresh = Inflater::new(Takeover::Keep);
    let stored = [
        0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
    ];
    assert_eq!(inflate_message(&mut fresh, &stored), b"Hello");
    // §7.2.3.5: two deflate blocks in one message.
    let two_blocks = [
        0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
    ];
    let mut fresh = Inflater::new(Takeover::Keep);
    assert_eq!(inflate_message(&mut fresh, &two_blocks), b"Hello");
}

#[test]
fn a_stream_ended_with_bfinal_starts_over_at_the_next_message() {
    // §7.2.3.4: "Hello" in a block with BFINAL set.
    let mut inflater = Inflater::new(Takeover::Keep);
    let final_block = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
    assert_eq!(inflate_message(&mut inflater, &final_block), b"Hello");
    let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
    assert_eq!(inflate_message(&mut inflater, &hello), b"Hello");
}

#[test]
fn the_servers_window_bits_bound_how_far_back_it_refers() {
    // 600 pseudo-random bytes twice: the repeat is 600 bytes back, past
    // what a 9-bit (512-byte) window holds, within a 15-bit one.
    let block = crate::websocket::deflate::incompressible(0x2545_f491, 600);
    let message = [block.clone(), block].concat();
    let narrow = Deflater::new(9, Takeover::Keep).compress(&message).unwrap();
    let wide = Deflater::new(15, Takeover::Keep)
        .compress(&message)
        .unwrap();
    assert!(wide.len() < 700, "{}", wide.len());
    assert!(narrow.len() > 1_100, "{}", narrow.len());
    let mut inflater = Inflater::new(Takeover::Keep);
    assert_eq!(inflate_message(&mut inflater, &narrow), message);
}

#[test]
fn data_that_is_not_deflate_is_refused() {
    let mut inflater = Inflater::new(Takeover::Keep);
    let mut output = [0u8; 64];
    // BTYPE 11 is reserved (RFC 1951 §3.2.3).
    assert!(inflater.inflate(&[0xff, 0xff, 0xff], &mut output).is_err());
}

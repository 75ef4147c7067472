//! The cascade's speech answer (`agentwire_providers::fuzzing::cascade_speech`:
//! raw 24 kHz PCM16 or a WAV file from a text-to-speech server, resampled
//! to the call's rate). No input panics, the PCM is whole samples, and the
//! audio grows at most by the ratio of the call's rate to the lowest rate
//! a WAV file may have (so an answer cannot claim a rate that blows it up).
#![no_main]

use agentwire_providers::fuzzing::cascade_speech;
use libfuzzer_sys::fuzz_target;

/// The call rates a client may propose.
const RATES: [u32; 6] = [8_000, 16_000, 22_050, 24_000, 44_100, 48_000];
/// The lowest WAV rate accepted.
const LOWEST_WAV_RATE: usize = 8_000;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, answer)) = data.split_first() else {
        return;
    };
    let rate = RATES[usize::from(pick) % RATES.len()];
    if let Ok(pcm) = cascade_speech(answer, rate) {
        assert_eq!(pcm.len() % 2, 0, "whole samples");
        let growth = (rate as usize).div_ceil(LOWEST_WAV_RATE);
        assert!(
            pcm.len() <= answer.len() * growth + 2,
            "{} bytes of answer became {} at {rate} Hz",
            answer.len(),
            pcm.len()
        );
    }
});

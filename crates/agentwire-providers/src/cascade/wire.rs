//! The cascade's wire formats: the transcription request (a WAV file in
//! `multipart/form-data`), the speech request (JSON) and its answer (raw
//! 24 kHz PCM16 or a WAV file), resampled to the call's rate.

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde::Deserialize;

use super::{CallError, CallFailure, Endpoint, Shared};

/// The rate of OpenAI's `pcm` speech format.
const SPEECH_PCM_RATE: u32 = 24_000;
/// Largest transcription answer read.
const MAX_TRANSCRIPTION_BYTES: usize = 1 << 20;
/// Largest speech answer read: minutes of 24 kHz audio.
const MAX_SPEECH_BYTES: usize = 32 << 20;
/// The WAV rates a speech answer may have. The bound matters: resampling
/// a file that claims 1 Hz to the call's rate would multiply its samples
/// by tens of thousands (32 MiB of answer into hundreds of gigabytes).
const SPEECH_WAV_RATES: std::ops::RangeInclusive<u32> = 8_000..=192_000;

/// One utterance to text.
pub(super) async fn transcribe(shared: &Shared, audio: Vec<u8>) -> Result<String, CallError> {
    #[derive(Deserialize)]
    struct Transcript {
        text: Option<String>,
    }
    let wav = wav(&audio, shared.format.sample_rate);
    let boundary = boundary(&wav);
    let body = multipart(&boundary, &wav, &shared.transcription.model);
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let step = "transcription";
    let answer = post(shared, &shared.transcription, step, &content_type, body).await?;
    let transcript: Transcript = serde_json::from_slice(&answer).map_err(|_| {
        CallError::new(
            CallFailure::Unreadable,
            "cascade transcription: unreadable response",
        )
    })?;
    Ok(transcript.text.unwrap_or_default())
}

/// One sentence to speech at the call's rate.
pub(super) async fn synthesize(shared: &Shared, text: &str) -> Result<Vec<u8>, CallError> {
    let body = serde_json::json!({
        "model": shared.speech.model,
        "voice": shared.voice,
        "input": text,
        "response_format": "pcm",
    });
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let answer = post(shared, &shared.speech, "speech", "application/json", body).await?;
    speech_pcm(answer, shared.format.sample_rate)
        .map_err(|what| CallError::new(CallFailure::Unreadable, format!("cascade speech: {what}")))
}

/// A speech answer (raw 24 kHz PCM16 or a WAV file) as PCM16 at `rate`.
pub(crate) fn speech_pcm(answer: Vec<u8>, rate: u32) -> Result<Vec<u8>, &'static str> {
    match read_wav(&answer) {
        Some(Ok((from, samples))) => Ok(to_pcm(&resample(&samples, from, rate))),
        Some(Err(what)) => Err(what),
        None if rate == SPEECH_PCM_RATE => {
            let mut pcm = answer;
            pcm.truncate(pcm.len() / 2 * 2);
            Ok(pcm)
        }
        None => Ok(to_pcm(&resample(&samples(&answer), SPEECH_PCM_RATE, rate))),
    }
}

/// POSTs `body` to `endpoint`; the answer's body, whole, within the
/// timeout. Errors name `step` and the status only.
async fn post(
    shared: &Shared,
    endpoint: &Endpoint,
    step: &'static str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<Vec<u8>, CallError> {
    let failed = |failure, what: &str| CallError::new(failure, format!("cascade {step}: {what}"));
    let limit = match step {
        "speech" => MAX_SPEECH_BYTES,
        _ => MAX_TRANSCRIPTION_BYTES,
    };
    let mut request = shared
        .client
        .post(&endpoint.url)
        .header(CONTENT_TYPE, content_type)
        .body(body);
    if let Some(auth) = &endpoint.auth {
        request = request.header(AUTHORIZATION, auth.clone());
    }
    let exchange = async {
        let mut response = request.send().await.map_err(|e| {
            tracing::debug!(step, error = %e.without_url(), "cascade request not sent");
            failed(CallFailure::Unreachable, "unreachable")
        })?;
        let status = response.status();
        if !status.is_success() {
            // The body is never read: it could carry anything.
            return Err(failed(
                CallFailure::ProviderError,
                &format!("HTTP {}", status.as_u16()),
            ));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|_| failed(CallFailure::Closed, "response broke off"))?
        {
            if bytes.len() + chunk.len() > limit {
                return Err(failed(CallFailure::Unreadable, "response too large"));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    };
    tokio::time::timeout(shared.timeout, exchange)
        .await
        .map_err(|_| {
            failed(
                CallFailure::Timeout,
                &format!("no response within {:?}", shared.timeout),
            )
        })?
}

/// `pcm` (PCM16LE mono at `rate`) as a WAV file.
pub(super) fn wav(pcm: &[u8], rate: u32) -> Vec<u8> {
    let pcm = &pcm[..pcm.len() / 2 * 2];
    let data = u32::try_from(pcm.len()).unwrap_or(u32::MAX - 36);
    let mut wav = Vec::with_capacity(44 + pcm.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&rate.to_le_bytes());
    wav.extend_from_slice(&(rate * 2).to_le_bytes()); // bytes a second
    wav.extend_from_slice(&2u16.to_le_bytes()); // bytes a frame
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits a sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data.to_le_bytes());
    wav.extend_from_slice(pcm);
    wav
}

/// A multipart boundary that does not occur in `content`.
pub(super) fn boundary(content: &[u8]) -> String {
    (0u64..)
        .map(|n| format!("agentwire-cascade-{n:016x}"))
        .find(|b| !content.windows(b.len()).any(|w| w == b.as_bytes()))
        .unwrap_or_default()
}

/// The transcription request's body: `file`, `model`, `response_format`.
pub(super) fn multipart(boundary: &str, wav: &[u8], model: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(wav.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"speech.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(wav);
    for (name, value) in [("model", model), ("response_format", "json")] {
        body.extend_from_slice(
            format!(
                "\r\n--{boundary}\r\nContent-Disposition: form-data; \
                 name=\"{name}\"\r\n\r\n{value}"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

/// A WAV file's rate and samples (channels averaged to mono); `None` when
/// `bytes` is not a RIFF WAVE file.
pub(super) fn read_wav(bytes: &[u8]) -> Option<Result<(u32, Vec<i16>), &'static str>> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return None;
    }
    let mut rest = &bytes[12..];
    let mut format = None;
    while rest.len() >= 8 {
        let size = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let available = rest.len() - 8;
        let body = &rest[8..8 + size.min(available)];
        match &rest[..4] {
            b"fmt " if body.len() >= 16 => {
                let u16_at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
                let rate = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
                format = Some((u16_at(0), u16_at(2), rate, u16_at(14)));
            }
            b"data" => {
                // A streamed file may not know its length: to the end.
                let body = if size == 0 { &rest[8..] } else { body };
                return Some(match format {
                    Some((1 | 0xFFFE, _, rate, 16)) if !SPEECH_WAV_RATES.contains(&rate) => {
                        Err("unsupported WAV sample rate")
                    }
                    Some((1 | 0xFFFE, channels @ 1.., rate, 16)) => {
                        let frame = 2 * usize::from(channels);
                        let mono = body
                            .chunks_exact(frame)
                            .map(|f| {
                                let sum: i32 = samples(f).into_iter().map(i32::from).sum();
                                (sum / i32::from(channels)) as i16
                            })
                            .collect();
                        Ok((rate, mono))
                    }
                    Some(_) => Err("audio is not 16-bit PCM"),
                    None => Err("unreadable WAV header"),
                });
            }
            _ => {}
        }
        let skip = 8 + size.min(available) + (size & 1);
        rest = &rest[skip.min(rest.len())..];
    }
    Some(Err("unreadable WAV header"))
}

/// PCM16LE bytes as samples (an odd last byte dropped).
pub(super) fn samples(pcm: &[u8]) -> Vec<i16> {
    pcm.chunks_exact(2)
        .map(|s| i16::from_le_bytes([s[0], s[1]]))
        .collect()
}

pub(super) fn to_pcm(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// `samples` at `from` Hz as samples at `to` Hz, by linear interpolation.
pub(super) fn resample(samples: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || samples.is_empty() || from == 0 || to == 0 {
        return samples.to_vec();
    }
    let (from, to) = (u64::from(from), u64::from(to));
    let len = samples.len() as u64 * to / from;
    (0..len)
        .map(|i| {
            let position = i * from;
            let index = (position / to) as usize;
            let fraction = (position % to) as f64 / to as f64;
            let a = f64::from(samples[index]);
            let b = f64::from(samples.get(index + 1).copied().unwrap_or(samples[index]));
            (a + (b - a) * fraction).round() as i16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_is_linear_and_keeps_the_duration() {
        let samples = [0, 300, 600, 900, 1200, 1500];
        assert_eq!(resample(&samples, 24_000, 16_000), [0, 450, 900, 1350]);
        assert_eq!(resample(&[0, 300], 16_000, 24_000), [0, 200, 300]);
        assert_eq!(resample(&samples, 16_000, 16_000), samples);
        assert_eq!(resample(&vec![7; 2_400], 24_000, 8_000).len(), 800);
    }

    #[test]
    fn wav_files_are_read_from_their_header() {
        let pcm = to_pcm(&[1, -2, 3]);
        assert_eq!(
            read_wav(&wav(&pcm, 22_050)),
            Some(Ok((22_050, vec![1, -2, 3])))
        );
        assert_eq!(read_wav(&pcm), None, "raw PCM");
        // Stereo, with a chunk before the data, and a data length of 0 (a
        // streamed file): averaged to mono, read to the end.
        let mut stereo = wav(&[], 8_000);
        stereo[22] = 2;
        stereo.truncate(36);
        stereo.extend_from_slice(b"LIST\x02\x00\x00\x00ab");
        stereo.extend_from_slice(b"data\x00\x00\x00\x00");
        stereo.extend_from_slice(&to_pcm(&[10, 20, -4, -8]));
        assert_eq!(read_wav(&stereo), Some(Ok((8_000, vec![15, -6]))));
        let mut eight_bit = wav(&pcm, 8_000);
        eight_bit[34] = 8;
        assert_eq!(read_wav(&eight_bit), Some(Err("audio is not 16-bit PCM")));
        // A rate that would blow the audio up when resampled is refused.
        for rate in [0, 1, 7_999, 192_001] {
            assert_eq!(
                read_wav(&wav(&pcm, rate)),
                Some(Err("unsupported WAV sample rate")),
                "{rate} Hz"
            );
        }
        assert_eq!(
            read_wav(b"RIFF\x04\x00\x00\x00WAVE"),
            Some(Err("unreadable WAV header"))
        );
    }

    #[test]
    fn multipart_boundaries_never_occur_in_the_file() {
        let first = boundary(b"");
        let clash = [b"xx".as_slice(), first.as_bytes()].concat();
        let other = boundary(&clash);
        assert_ne!(first, other);
        let body = multipart(&other, &clash, "whisper-1");
        let opening = format!("--{other}\r\n");
        assert!(body.starts_with(opening.as_bytes()));
        assert!(body.ends_with(format!("\r\n--{other}--\r\n").as_bytes()));
        let delimiters = body.windows(other.len()).filter(|w| *w == other.as_bytes());
        assert_eq!(delimiters.count(), 4, "three parts and the closing");
    }
}

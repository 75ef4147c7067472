//! What the voice providers that listen and speak themselves share (the
//! scripted mock and the cascade): an energy voice-activity detector over
//! 20 ms windows, and a speaker that paces a response's audio out in 20 ms
//! frames in real time, so that speech during a reply can stop it.

use std::collections::VecDeque;
use std::time::Duration;

use agentwire_core::AudioFormat;
use agentwire_core::realtime::{CallEvent, ResponseId, pcm_bytes};

/// The analysis window and the output frame.
pub(crate) const FRAME: Duration = Duration::from_millis(20);

/// Bytes of one 20 ms window at `format`: whole samples of every channel,
/// at least one.
pub(crate) fn window_bytes(format: &AudioFormat) -> usize {
    let frame_bytes = 2 * format.channels.max(1) as usize;
    (pcm_bytes(format, FRAME.as_millis() as u64) / frame_bytes).max(1) * frame_bytes
}

/// The RMS of a window of PCM16LE samples (all channels alike).
pub(crate) fn rms(window: &[u8]) -> f64 {
    let samples = window.len() / 2;
    if samples == 0 {
        return 0.0;
    }
    let sum: f64 = window
        .chunks_exact(2)
        .map(|s| f64::from(i16::from_le_bytes([s[0], s[1]])).powi(2))
        .sum();
    (sum / samples as f64).sqrt()
}

/// The pacing clock of a call's output: one tick a frame; a late tick
/// delays the next rather than bursting.
pub(crate) fn pace() -> tokio::time::Interval {
    let mut pace = tokio::time::interval(FRAME);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    pace
}

/// What a [`Vad`] heard in some input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VadEvent {
    /// A voiced window after silence.
    Started,
    /// The utterance is over: its audio up to its last voiced window.
    Ended(Vec<u8>),
}

/// Where the caller's speech stands.
enum Speech {
    Silent,
    /// An utterance: its audio so far, how much of it ends on a voiced
    /// window, and the silent windows since.
    Speaking {
        audio: Vec<u8>,
        voiced: usize,
        silent_windows: u32,
    },
}

/// Energy voice-activity detection: a 20 ms window whose RMS is above the
/// threshold is speech; an utterance ends after `hangover` of silence.
pub(crate) struct Vad {
    window: usize,
    threshold: f64,
    hangover: Duration,
    /// Input not yet a whole window.
    partial: Vec<u8>,
    speech: Speech,
}

impl Vad {
    pub fn new(format: &AudioFormat, threshold: f64, hangover: Duration) -> Vad {
        Vad {
            window: window_bytes(format),
            threshold,
            hangover,
            partial: Vec::new(),
            speech: Speech::Silent,
        }
    }

    /// Bytes of a window (and of an output frame).
    pub fn window(&self) -> usize {
        self.window
    }

    /// Whether an utterance is in progress.
    pub fn speaking(&self) -> bool {
        matches!(self.speech, Speech::Speaking { .. })
    }

    /// Hears `pcm`; what started and ended in it, in order.
    pub fn push(&mut self, pcm: &[u8]) -> Vec<VadEvent> {
        self.partial.extend_from_slice(pcm);
        let whole = self.partial.len() / self.window * self.window;
        let windows: Vec<u8> = self.partial.drain(..whole).collect();
        let mut heard = Vec::new();
        for window in windows.chunks(self.window) {
            self.window_heard(window, &mut heard);
        }
        heard
    }

    fn window_heard(&mut self, window: &[u8], heard: &mut Vec<VadEvent>) {
        let voiced = rms(window) > self.threshold;
        match &mut self.speech {
            Speech::Silent if voiced => {
                heard.push(VadEvent::Started);
                self.speech = Speech::Speaking {
                    audio: window.to_vec(),
                    voiced: window.len(),
                    silent_windows: 0,
                };
            }
            Speech::Silent => {}
            Speech::Speaking {
                audio,
                voiced: end,
                silent_windows,
            } => {
                audio.extend_from_slice(window);
                if voiced {
                    *end = audio.len();
                    *silent_windows = 0;
                } else {
                    *silent_windows += 1;
                    if FRAME * *silent_windows >= self.hangover
                        && let Some(audio) = self.finish()
                    {
                        heard.push(VadEvent::Ended(audio));
                    }
                }
            }
        }
    }

    /// Ends the utterance in progress, if any: its audio up to its last
    /// voiced window.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let Speech::Speaking {
            mut audio, voiced, ..
        } = std::mem::replace(&mut self.speech, Speech::Silent)
        else {
            return None;
        };
        audio.truncate(voiced);
        Some(audio)
    }
}

/// The audio of the response being spoken, paced out a frame a tick.
pub(crate) struct Speaker {
    frame: usize,
    /// The response being spoken.
    response: Option<ResponseId>,
    pending: VecDeque<u8>,
    /// No more audio comes for the response.
    finished: bool,
}

impl Speaker {
    pub fn new(frame: usize) -> Speaker {
        Speaker {
            frame: frame.max(2),
            response: None,
            pending: VecDeque::new(),
            finished: false,
        }
    }

    /// Starts speaking `response`, dropping whatever was pending.
    pub fn start(&mut self, response: ResponseId) {
        self.response = Some(response);
        self.pending.clear();
        self.finished = false;
    }

    /// More audio of the response, after what is pending.
    pub fn push(&mut self, pcm: &[u8]) {
        if self.response.is_some() {
            self.pending.extend(pcm);
        }
    }

    /// The response has all its audio: once it is out, it is done.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// Whether a response is being spoken (or waits for its audio).
    pub fn active(&self) -> bool {
        self.response.is_some()
    }

    /// Whether the next tick has something to send.
    pub fn ready(&self) -> bool {
        self.response.is_some() && (self.finished || self.pending.len() >= self.frame)
    }

    /// Stops the response being spoken (barge-in): its id, if there was one.
    pub fn interrupt(&mut self) -> Option<ResponseId> {
        self.pending.clear();
        self.finished = false;
        self.response.take()
    }

    /// What a tick sends: the next frame, else (finished) the response's
    /// end; `None` when not [`ready`](Self::ready).
    pub fn tick(&mut self) -> Option<CallEvent> {
        if !self.ready() {
            return None;
        }
        let response = self.response?;
        if self.pending.is_empty() {
            self.response = None;
            self.finished = false;
            return Some(CallEvent::ResponseDone {
                response,
                interrupted: false,
            });
        }
        let take = self.frame.min(self.pending.len());
        let pcm = self.pending.drain(..take).collect();
        Some(CallEvent::AudioOut { response, pcm })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Mono PCM16 at `rate`.
    pub(crate) fn format(rate: u32) -> AudioFormat {
        AudioFormat {
            codec: "pcm".into(),
            sample_rate: rate,
            channels: 1,
        }
    }

    #[test]
    fn an_utterance_ends_after_the_hangover_cut_at_its_last_voiced_window() {
        let mut vad = Vad::new(&format(16_000), 500.0, Duration::from_millis(100));
        assert_eq!(vad.window(), 640);
        let loud: Vec<u8> = (0..16 * 60)
            .flat_map(|n| if n % 20 < 10 { 6000i16 } else { -6000 }.to_le_bytes())
            .collect();
        // Split mid-window: windows are whole across pushes.
        assert_eq!(vad.push(&loud[..1000]), vec![VadEvent::Started]);
        assert!(vad.push(&loud[1000..]).is_empty());
        assert!(vad.speaking());
        let heard = vad.push(&[0; 640 * 5]);
        assert_eq!(heard, vec![VadEvent::Ended(loud.clone())]);
        assert!(!vad.speaking() && vad.finish().is_none());
    }

    #[test]
    fn the_speaker_frames_then_finishes_and_stops_on_interrupt() {
        let mut speaker = Speaker::new(4);
        assert!(!speaker.ready() && speaker.tick().is_none());
        speaker.start(3);
        speaker.push(&[1, 2, 3, 4, 5, 6]);
        let audio = |pcm: &[u8]| CallEvent::AudioOut {
            response: 3,
            pcm: pcm.to_vec(),
        };
        assert_eq!(speaker.tick(), Some(audio(&[1, 2, 3, 4])));
        // A partial frame waits for more, unless the response is finished.
        assert!(!speaker.ready());
        speaker.push(&[7, 8]);
        assert_eq!(speaker.tick(), Some(audio(&[5, 6, 7, 8])));
        speaker.push(&[9]);
        speaker.finish();
        assert_eq!(speaker.tick(), Some(audio(&[9])));
        assert_eq!(
            speaker.tick(),
            Some(CallEvent::ResponseDone {
                response: 3,
                interrupted: false
            })
        );
        assert!(!speaker.active());
        speaker.start(4);
        speaker.push(&[0; 16]);
        assert_eq!(speaker.interrupt(), Some(4));
        assert_eq!(speaker.interrupt(), None);
        assert!(speaker.tick().is_none());
    }
}

//! A scripted realtime voice provider: deterministic, offline, driven by the
//! audio it is sent, so tests and the `voice-demo` agent behave as with a
//! real one without a network.
//!
//! - **Format**: answers the client's proposal, or the configured counter-offer.
//! - **Voice activity**: the RMS energy of each 20 ms window against a
//!   threshold; an utterance ends after [`MockVoice::hangover`] of silence,
//!   so recorded speech and silence behave as they would with a provider's
//!   server-side VAD.
//! - **Transcripts**: per utterance the next scripted user transcript, else
//!   `utterance <n> (<ms> ms)` (its voiced length, so tests can check the
//!   cut); then the reply text, word by word.
//! - **Audio out**: `echo` sends the utterance's exact PCM back (tests
//!   compare bytes and order); `tone` a 440 Hz sine as long as the reply
//!   takes to "say" (80 ms a character), so a client playing at the wrong
//!   rate hears the wrong pitch. Paced in 20 ms frames in real time, which
//!   is what makes barge-in possible: speech while a reply is still being
//!   spoken stops it (`SpeechStarted`, then `ResponseDone{interrupted}`).
//! - **Faults**: a fatal error after N input frames.

use std::sync::Arc;
use std::time::Duration;

use agentwire_core::AudioFormat;
use agentwire_core::realtime::{
    CallError, CallEvent, CallFailure, CallInput, CallLink, CallSpec, RealtimeProvider, ResponseId,
    pcm_millis,
};
use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::vad::{Speaker, Vad, VadEvent};

/// Input frames a call buffers towards the mock: 2 s of 20 ms frames.
const INPUT_CAPACITY: usize = 100;
/// Events buffered towards the server.
const EVENT_CAPACITY: usize = 64;
/// How long a character of the reply takes to say in `tone` mode.
const TONE_MS_PER_CHAR: u64 = 80;
const TONE_HZ: f64 = 440.0;
const TONE_AMPLITUDE: f64 = 8000.0;

/// What the mock speaks back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockVoiceOutput {
    /// The caller's utterance, byte for byte.
    Echo,
    /// A 440 Hz sine.
    Tone,
}

/// A mock voice provider's script.
#[derive(Debug, Clone, PartialEq)]
pub struct MockVoice {
    pub output: MockVoiceOutput,
    /// The assistant transcript of every response.
    pub reply: String,
    /// The user transcripts of the first utterances, in order; later ones
    /// are described by their length.
    pub user_transcripts: Vec<String>,
    /// The format the mock insists on; `None` takes the client's proposal.
    pub counter_offer: Option<AudioFormat>,
    /// Fail the call after this many input frames.
    pub fail_after_frames: Option<u64>,
    /// RMS (of 16-bit samples) above which a window is speech.
    pub speech_threshold: f64,
    /// Silence that ends an utterance.
    pub hangover: Duration,
    /// A tool the model calls after every utterance; the reply waits for
    /// its output and ends with it.
    pub tool: Option<MockVoiceTool>,
}

/// The tool call of a [`MockVoice`] script.
#[derive(Debug, Clone, PartialEq)]
pub struct MockVoiceTool {
    pub name: String,
    pub arguments: serde_json::Value,
}

impl Default for MockVoice {
    fn default() -> MockVoice {
        MockVoice {
            output: MockVoiceOutput::Tone,
            reply: "I heard you.".into(),
            user_transcripts: Vec::new(),
            counter_offer: None,
            fail_after_frames: None,
            speech_threshold: 500.0,
            hangover: Duration::from_millis(300),
            tool: None,
        }
    }
}

/// The mock as a [`RealtimeProvider`].
#[derive(Debug, Clone)]
pub struct MockRealtime {
    script: Arc<MockVoice>,
}

impl MockRealtime {
    pub fn new(script: MockVoice) -> MockRealtime {
        MockRealtime {
            script: Arc::new(script),
        }
    }
}

#[async_trait]
impl RealtimeProvider for MockRealtime {
    async fn open(&self, spec: CallSpec) -> Result<CallLink, CallError> {
        let (input, input_rx) = mpsc::channel(INPUT_CAPACITY);
        let (events_tx, events) = mpsc::channel(EVENT_CAPACITY);
        let format = self.script.counter_offer.clone().unwrap_or(spec.proposed);
        let call = MockCall::new(self.script.clone(), format, events_tx);
        tokio::spawn(call.run(input_rx));
        Ok(CallLink { input, events })
    }
}

struct MockCall {
    script: Arc<MockVoice>,
    format: AudioFormat,
    events: mpsc::Sender<CallEvent>,
    vad: Vad,
    utterances: usize,
    frames_in: u64,
    next_response: ResponseId,
    /// The response being spoken.
    speaker: Speaker,
    /// The tool call a reply waits for, and the utterance it answers.
    awaiting_tool: Option<(String, Vec<u8>)>,
}

/// The events channel closed: the server is gone, so is the call.
struct Gone;

impl MockCall {
    fn new(script: Arc<MockVoice>, format: AudioFormat, events: mpsc::Sender<CallEvent>) -> Self {
        let vad = Vad::new(&format, script.speech_threshold, script.hangover);
        let speaker = Speaker::new(vad.window());
        MockCall {
            script,
            format,
            events,
            vad,
            utterances: 0,
            frames_in: 0,
            next_response: 0,
            speaker,
            awaiting_tool: None,
        }
    }

    async fn run(mut self, mut input: mpsc::Receiver<CallInput>) {
        let _ = self.serve(&mut input).await;
    }

    async fn serve(&mut self, input: &mut mpsc::Receiver<CallInput>) -> Result<(), Gone> {
        let effective = self.format.clone();
        self.emit(CallEvent::Ready { effective }).await?;
        let mut pace = crate::vad::pace();
        let mut ending = false;
        loop {
            tokio::select! {
                biased;
                next = input.recv(), if !ending => match next {
                    Some(CallInput::Audio(pcm)) => {
                        self.frames_in += 1;
                        if self.script.fail_after_frames.is_some_and(|n| self.frames_in > n) {
                            let failure = CallError::new(CallFailure::ProviderError, "scripted failure");
                            return self.emit(CallEvent::Failed(failure)).await;
                        }
                        self.hear(&pcm).await?;
                    }
                    Some(CallInput::ToolOutput { call_id, output }) => {
                        self.tool_output(&call_id, &output).await?;
                    }
                    Some(CallInput::End) | None => {
                        ending = true;
                        if let Some(audio) = self.vad.finish() {
                            self.end_utterance(audio).await?;
                        }
                    }
                },
                _ = pace.tick(), if self.speaker.ready() => {
                    if let Some(event) = self.speaker.tick() {
                        self.emit(event).await?;
                    }
                }
            }
            if ending && !self.speaker.active() && self.awaiting_tool.is_none() {
                return Ok(());
            }
        }
    }

    async fn emit(&self, event: CallEvent) -> Result<(), Gone> {
        self.events.send(event).await.map_err(|_| Gone)
    }

    async fn hear(&mut self, pcm: &[u8]) -> Result<(), Gone> {
        for heard in self.vad.push(pcm) {
            match heard {
                VadEvent::Started => {
                    self.emit(CallEvent::SpeechStarted).await?;
                    if let Some(response) = self.speaker.interrupt() {
                        let done = CallEvent::ResponseDone {
                            response,
                            interrupted: true,
                        };
                        self.emit(done).await?;
                    }
                }
                VadEvent::Ended(audio) => self.end_utterance(audio).await?,
            }
        }
        Ok(())
    }

    /// An utterance is over: transcribe and answer it.
    async fn end_utterance(&mut self, audio: Vec<u8>) -> Result<(), Gone> {
        let index = self.utterances;
        self.utterances += 1;
        let text = match self.script.user_transcripts.get(index) {
            Some(scripted) => scripted.clone(),
            None => format!(
                "utterance {} ({} ms)",
                index + 1,
                pcm_millis(&self.format, audio.len())
            ),
        };
        self.emit(CallEvent::UserTranscript { text }).await?;
        if let Some(tool) = &self.script.tool {
            // The reply waits for the tool's output.
            let call_id = format!("call_{}", index + 1);
            let call = CallEvent::ToolCall {
                call_id: call_id.clone(),
                name: tool.name.clone(),
                arguments: tool.arguments.clone(),
            };
            self.awaiting_tool = Some((call_id, audio));
            return self.emit(call).await;
        }
        let reply = self.script.reply.clone();
        self.respond(&reply, audio).await
    }

    /// A response: `reply` in word deltas, then its audio, paced.
    async fn respond(&mut self, reply: &str, utterance: Vec<u8>) -> Result<(), Gone> {
        let response = self.next_response;
        self.next_response += 1;
        for delta in reply.split_inclusive(' ') {
            let delta = delta.to_owned();
            self.emit(CallEvent::AssistantText { response, delta })
                .await?;
        }
        let pcm = match self.script.output {
            MockVoiceOutput::Echo => utterance,
            MockVoiceOutput::Tone => tone(&self.format, reply_millis(reply)),
        };
        self.speaker.start(response);
        self.speaker.push(&pcm);
        self.speaker.finish();
        Ok(())
    }

    /// The output of the tool call the reply waits for: the reply is the
    /// script's, then the output.
    async fn tool_output(&mut self, call_id: &str, output: &str) -> Result<(), Gone> {
        match self.awaiting_tool.take() {
            Some((awaited, utterance)) if awaited == call_id => {
                let reply = format!("{} {output}", self.script.reply);
                self.respond(&reply, utterance).await
            }
            other => {
                self.awaiting_tool = other;
                Ok(())
            }
        }
    }
}

/// How long `reply` takes to say in `tone` mode.
fn reply_millis(reply: &str) -> u64 {
    (reply.chars().count() as u64 * TONE_MS_PER_CHAR).max(200)
}

/// `millis` of a 440 Hz sine at `format`, every channel alike.
fn tone(format: &AudioFormat, millis: u64) -> Vec<u8> {
    let rate = f64::from(format.sample_rate.max(1));
    let samples = u64::from(format.sample_rate) * millis / 1000;
    let channels = format.channels.max(1) as usize;
    let mut pcm = Vec::with_capacity(samples as usize * channels * 2);
    for n in 0..samples {
        let t = n as f64 / rate;
        let value = (std::f64::consts::TAU * TONE_HZ * t).sin() * TONE_AMPLITUDE;
        let bytes = (value as i16).to_le_bytes();
        for _ in 0..channels {
            pcm.extend_from_slice(&bytes);
        }
    }
    pcm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vad::tests::format;

    /// `millis` of a loud square wave (speech, for the energy VAD).
    fn loud(millis: u64) -> Vec<u8> {
        let samples = 16 * millis as usize;
        (0..samples)
            .flat_map(|n| if n % 20 < 10 { 6000i16 } else { -6000 }.to_le_bytes())
            .collect()
    }

    fn silence(millis: u64) -> Vec<u8> {
        vec![0; 32 * millis as usize]
    }

    async fn open(script: MockVoice) -> CallLink {
        let spec = CallSpec {
            instructions: String::new(),
            proposed: format(16_000),
            tools: Vec::new(),
        };
        MockRealtime::new(script).open(spec).await.unwrap()
    }

    async fn send_in_frames(link: &CallLink, pcm: &[u8]) {
        for frame in pcm.chunks(640) {
            link.input
                .send(CallInput::Audio(frame.to_vec()))
                .await
                .unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn echo_answers_an_utterance_with_its_own_bytes_then_closes_on_end() {
        let mut link = open(MockVoice {
            output: MockVoiceOutput::Echo,
            ..MockVoice::default()
        })
        .await;
        let speech = loud(400);
        send_in_frames(&link, &speech).await;
        send_in_frames(&link, &silence(400)).await;
        link.input.send(CallInput::End).await.unwrap();
        let mut events = Vec::new();
        while let Some(event) = link.events.recv().await {
            events.push(event);
        }
        assert_eq!(
            events[0],
            CallEvent::Ready {
                effective: format(16_000)
            }
        );
        assert_eq!(events[1], CallEvent::SpeechStarted);
        assert_eq!(
            events[2],
            CallEvent::UserTranscript {
                text: "utterance 1 (400 ms)".into()
            }
        );
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                CallEvent::AssistantText { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "I heard you.");
        let audio: Vec<u8> = events
            .iter()
            .filter_map(|e| match e {
                CallEvent::AudioOut { pcm, .. } => Some(pcm.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(audio, speech, "the utterance, byte for byte");
        assert_eq!(
            events.last(),
            Some(&CallEvent::ResponseDone {
                response: 0,
                interrupted: false
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn speech_during_a_reply_interrupts_it() {
        let mut link = open(MockVoice::default()).await;
        send_in_frames(&link, &loud(200)).await;
        send_in_frames(&link, &silence(320)).await;
        // Let some of the tone out, then speak over it.
        let mut seen_audio = 0;
        loop {
            match link.events.recv().await.unwrap() {
                CallEvent::AudioOut { .. } => {
                    seen_audio += 1;
                    if seen_audio == 3 {
                        break;
                    }
                }
                _ => continue,
            }
        }
        send_in_frames(&link, &loud(40)).await;
        let mut after = Vec::new();
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(100), link.events.recv()).await
        {
            after.push(event);
        }
        let interrupt = after
            .iter()
            .position(|e| *e == CallEvent::SpeechStarted)
            .expect("speech started");
        assert_eq!(
            after[interrupt + 1],
            CallEvent::ResponseDone {
                response: 0,
                interrupted: true
            }
        );
        assert!(
            !after[interrupt..]
                .iter()
                .any(|e| matches!(e, CallEvent::AudioOut { .. })),
            "no audio of the interrupted reply after the barge-in: {after:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_counter_offer_sets_the_format_and_the_tone_follows_it() {
        let mut link = open(MockVoice {
            counter_offer: Some(format(24_000)),
            reply: "abc".into(),
            ..MockVoice::default()
        })
        .await;
        assert_eq!(
            link.events.recv().await,
            Some(CallEvent::Ready {
                effective: format(24_000)
            })
        );
        // 24 kHz input now: 960 bytes a window.
        let loud24: Vec<u8> = (0..24 * 200)
            .flat_map(|n: usize| if n % 30 < 15 { 6000i16 } else { -6000 }.to_le_bytes())
            .collect();
        link.input.send(CallInput::Audio(loud24)).await.unwrap();
        link.input
            .send(CallInput::Audio(vec![0; 48 * 400]))
            .await
            .unwrap();
        link.input.send(CallInput::End).await.unwrap();
        let mut bytes = 0;
        while let Some(event) = link.events.recv().await {
            if let CallEvent::AudioOut { pcm, .. } = event {
                bytes += pcm.len();
            }
        }
        // "abc" takes 240 ms to say: 240 ms at 24 kHz.
        assert_eq!(bytes, 24_000 * 2 * 240 / 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_scripted_failure_ends_the_call() {
        let mut link = open(MockVoice {
            fail_after_frames: Some(2),
            ..MockVoice::default()
        })
        .await;
        send_in_frames(&link, &silence(60)).await;
        let mut last = None;
        while let Some(event) = link.events.recv().await {
            last = Some(event);
        }
        assert_eq!(
            last,
            Some(CallEvent::Failed(CallError::new(
                CallFailure::ProviderError,
                "scripted failure"
            )))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_scripted_tool_call_holds_the_reply_until_its_output() {
        let mut link = open(MockVoice {
            tool: Some(MockVoiceTool {
                name: "lookup".into(),
                arguments: serde_json::json!({"q": 1}),
            }),
            ..MockVoice::default()
        })
        .await;
        send_in_frames(&link, &loud(200)).await;
        send_in_frames(&link, &silence(400)).await;
        let call_id = loop {
            match link.events.recv().await.unwrap() {
                CallEvent::AssistantText { .. } => panic!("the reply waits for the tool"),
                CallEvent::ToolCall {
                    call_id,
                    name,
                    arguments,
                } => {
                    assert_eq!(
                        (name.as_str(), arguments),
                        ("lookup", serde_json::json!({"q": 1}))
                    );
                    break call_id;
                }
                _ => {}
            }
        };
        let output = r#"{"answer":42}"#.to_owned();
        link.input
            .send(CallInput::ToolOutput { call_id, output })
            .await
            .unwrap();
        link.input.send(CallInput::End).await.unwrap();
        let mut text = String::new();
        while let Some(event) = link.events.recv().await {
            if let CallEvent::AssistantText { delta, .. } = event {
                text.push_str(&delta);
            }
        }
        assert_eq!(text, r#"I heard you. {"answer":42}"#);
    }

    #[test]
    fn the_tone_is_440_hz() {
        let pcm = tone(&format(16_000), 100);
        let samples: Vec<i16> = pcm
            .chunks_exact(2)
            .map(|s| i16::from_le_bytes([s[0], s[1]]))
            .collect();
        let crossings = samples.windows(2).filter(|w| w[0] < 0 && w[1] >= 0).count();
        assert!(
            (43..=45).contains(&crossings),
            "{crossings} rising zero crossings in 100 ms"
        );
    }
}

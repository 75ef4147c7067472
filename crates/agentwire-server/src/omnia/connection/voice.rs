//! The Omnia connection's side of a voice call (`omnia-behaviour.md` §7):
//! audio frames in (the first opens the call, IsLast ends it), the call's
//! output out, and `resume=` of a parked call. The call itself is
//! [`crate::call`]'s task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentwire_core::realtime::CallInput;
use agentwire_core::{AudioFormat, ErrorCode, Reply};
use agentwire_omnia as omnia;
use tokio::sync::mpsc;

use super::{Omnia, send_error};
use crate::call::{self, CallOutput, CallOwner};
use crate::connection::Link;
use crate::socket::SendFailed;
use crate::websocket::{Message, Transport};

/// The MIME type of a call's audio frames.
const AUDIO_PCM: &str = "audio/pcm";

/// The connection's side of its voice call's input.
pub(super) struct AttachedCall {
    input: mpsc::Sender<CallInput>,
    /// The caller ended the call: its close parks nothing.
    ended: Arc<AtomicBool>,
    /// What `session_config` relayed; `None` until then.
    effective: Option<AudioFormat>,
    /// A frame at another rate was answered once already.
    told_mismatch: bool,
}

impl Omnia {
    /// `hangup`: the call ends now, and the close that follows parks
    /// nothing.
    pub(super) fn hang_up(&mut self) {
        if let Some(call) = self.call.take() {
            call.ended.store(true, Ordering::Release);
            self.call_output = None;
            self.call_tools = None;
        }
    }

    /// `resume=S` of a call parked on S by this caller: the connection is
    /// on S, and the call's output comes here now (`session_config` and
    /// the transcripts missed first). Never for anonymous callers.
    pub(super) fn resume_call<T: Transport>(&mut self, link: &mut Link<T>) -> bool {
        let (Some(session), Some(owner)) = (
            self.params.resume_call.take(),
            self.params.caller.owner.as_deref(),
        ) else {
            return false;
        };
        let Some(handle) = link.state.calls().resume(&session, owner) else {
            return false;
        };
        self.current = session;
        self.attach_call(handle);
        true
    }

    /// The call's output goes to this connection from now on.
    fn attach_call(&mut self, handle: call::CallHandle) {
        // A call that ended with IsLast may still be finishing; the new
        // one replaces it.
        self.call_output = Some(handle.output);
        self.call_tools = Some(handle.client_tools);
        self.call = Some(AttachedCall {
            input: handle.input,
            ended: handle.ended,
            effective: None,
            told_mismatch: false,
        });
    }

    /// Inbound OMNI frames carry a voice call's audio: the first opens the
    /// call (its metadata proposes the format), IsLast ends it.
    pub(super) async fn on_binary<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        bytes: &[u8],
    ) -> Result<(), SendFailed> {
        let frame = match omnia::decode_binary(bytes) {
            Ok(frame) => frame,
            Err(e) => {
                return send_error(link, None, ErrorCode::InvalidMessage, &e.client_message())
                    .await;
            }
        };
        let current = self.current.clone();
        if self.call.is_none()
            && let Err((code, text)) = self.open_call(link, &frame.metadata).await
        {
            return send_error(link, Some(&current), code, text).await;
        }
        let Some(call) = self.call.as_mut() else {
            return Ok(());
        };
        if let (Some(effective), Some(rate)) = (&call.effective, frame.metadata.sample_rate)
            && rate != effective.sample_rate
        {
            // Audio at another rate would be heard at the wrong pitch: it
            // is dropped, and the client told once.
            if std::mem::replace(&mut call.told_mismatch, true) {
                return Ok(());
            }
            let text = format!(
                "audio at {rate} Hz; this call's audio is {} Hz (session_config)",
                effective.sample_rate
            );
            return send_error(link, Some(&current), ErrorCode::InvalidMessage, &text).await;
        }
        let fed = self.feed_call(link, &frame);
        self.after_feed(link, fed, &current).await
    }

    /// Opens a call for the connection's session on its agent's voice
    /// provider, in the format the first frame's metadata proposes.
    async fn open_call<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        metadata: &omnia::BinaryMetadata,
    ) -> Result<(), (ErrorCode, &'static str)> {
        let agent = self.params.agent.clone();
        let voice = agent
            .voice
            .as_ref()
            .ok_or((ErrorCode::MediaNotEnabled, "audio not supported"))?;
        let proposed = call::proposed_format(
            metadata.codec.as_deref(),
            metadata.sample_rate,
            metadata.channels,
        );
        let owner = CallOwner {
            agent: agent.agent.clone(),
            namespace: self.params.namespace.clone(),
            owner: self.params.caller.owner.clone(),
            memory_facet: self.params.memory_facet.clone(),
            session: self.current.clone(),
        };
        let handle = call::open(&link.state, voice, owner, proposed).await?;
        self.attach_call(handle);
        Ok(())
    }

    /// Hands a frame's audio (and its IsLast) to the call, without waiting.
    fn feed_call<T: Transport>(
        &mut self,
        link: &Link<T>,
        frame: &omnia::BinaryFrame<'_>,
    ) -> Result<(), mpsc::error::TrySendError<CallInput>> {
        let Some(call) = self.call.as_mut() else {
            return Ok(());
        };
        if !frame.payload.is_empty() {
            let bytes = frame.payload.len() as u64;
            call.input
                .try_send(CallInput::Audio(frame.payload.to_vec()))?;
            let metrics = &link.state.metrics();
            metrics
                .call_audio_in_bytes
                .fetch_add(bytes, Ordering::Relaxed);
        }
        if frame.flags & omnia::FLAG_IS_LAST != 0 {
            call.ended.store(true, Ordering::Release);
            let ended = call.input.try_send(CallInput::End);
            // Ended: its last response still comes out; a later frame
            // opens a new call.
            self.call = None;
            ended?;
        }
        Ok(())
    }

    /// A call whose provider fell behind the caller's audio ends, told as
    /// `DUPLEX_ERROR`; one that ended meanwhile says how in its output.
    async fn after_feed<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        fed: Result<(), mpsc::error::TrySendError<CallInput>>,
        current: &agentwire_core::SessionId,
    ) -> Result<(), SendFailed> {
        match fed {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    "a voice call's provider fell 2 s behind the caller's audio; the call ended"
                );
                self.call = None;
                self.call_output = None;
                self.call_tools = None;
                link.state.metrics().count_call_input_overflow();
                send_error(
                    link,
                    Some(current),
                    ErrorCode::DuplexError,
                    call::INPUT_OVERFLOW,
                )
                .await
            }
            // The provider ended the call meanwhile; its output says how.
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.call = None;
                Ok(())
            }
        }
    }

    /// A call's audio, unless it waited too long: late audio is worse than
    /// none.
    async fn send_call_audio<T: Transport>(
        &self,
        link: &mut Link<T>,
        sequence: u32,
        pcm: &[u8],
        queued: tokio::time::Instant,
    ) -> Result<(), SendFailed> {
        if queued.elapsed() > call::LATE_AUDIO {
            let metrics = &link.state.metrics();
            metrics.call_audio_dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let session = self.current.as_str();
        if !self.params.binary {
            let now = link.state.engine().clock().now();
            let frame =
                omnia::encode_media_chunk(session, "", sequence, false, pcm, AUDIO_PCM, now);
            return link.send(frame).await;
        }
        for frame in omnia::encode_media_frames(session, "", AUDIO_PCM, sequence, false, pcm) {
            link.send_message(Message::Binary(frame.into())).await?;
        }
        Ok(())
    }

    /// A frame of the call's output: its format, transcripts, audio,
    /// interrupt, `done`, or the error that ended it.
    pub(super) async fn send_call_output<T: Transport>(
        &mut self,
        link: &mut Link<T>,
        output: CallOutput,
    ) -> Result<(), SendFailed> {
        let now = link.state.engine().clock().now();
        let session = self.current.as_str();
        let frame = match output {
            CallOutput::Config(format) => {
                let frame = omnia::encode_session_config(session, &format, now);
                if let Some(call) = &mut self.call {
                    call.effective = Some(format);
                }
                frame
            }
            CallOutput::UserText(text) => omnia::encode_user_chunk(session, &text, now),
            CallOutput::AssistantText(text) => omnia::encode_chunk(session, &text, now),
            CallOutput::Interrupt => omnia::encode_interrupt(session, now),
            // A bare `done{}` seals the response's streamed transcript.
            CallOutput::Done => omnia::encode_done(session, &Reply::default(), now),
            CallOutput::ToolCall(call) => omnia::encode_tool_call(session, &call, now),
            CallOutput::ToolResult { id, outcome } => {
                omnia::encode_tool_result(session, &id, &outcome, now)
            }
            CallOutput::Audio {
                sequence,
                pcm,
                queued,
            } => return self.send_call_audio(link, sequence, &pcm, queued).await,
            CallOutput::Failed { code, message } => {
                // The call is over; the next audio frame opens another.
                self.call = None;
                let current = self.current.clone();
                return send_error(link, Some(&current), code, &message).await;
            }
        };
        link.send(frame).await
    }
}

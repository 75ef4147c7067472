//! One connection's turn events as Omnia frames.
//!
//! The engine emits the same [`LogEntry`]s for every dialect; this maps
//! each one, as it arrives, to at most one frame:
//!
//! | engine event | Omnia frame |
//! |---|---|
//! | `TurnStarted` | `turn_started` with `stream=2`, else nothing |
//! | `TextDelta` | `chunk` (nothing inside a delegation) |
//! | `ToolCall`, `ToolResult` | `tool_call`, `tool_result`: client side always, server side when the agent shows them |
//! | `Media` | `media_chunk`, or binary OMNI frames on a `binary=true` connection |
//! | `Interrupt`, `AudioFormat` | `interrupt`, `session_config` |
//! | `Completed` | `done` |
//! | `Cancelled` | `done` with `cancelled: true` under `stream=2`; else an `INTERNAL_ERROR` (such a client cannot cancel: the drain gave up on its turn) |
//! | `Failed` | `error` |
//! | `AgentSwitched` | nothing: Omnia has no agent identities; a delegate's text is not part of the reply |
//!
//! Under `stream=2` every frame carries its entry's `seq`. The encoder's
//! only state is whether a delegation is answering, so a rejoin warms it up
//! by encoding the entries the client already has and dropping the frames
//! ([`TurnEncoder::observe`]): it is then exactly where it was.

use agentwire_core::{
    ErrorCode, INTERNAL_ERROR_TEXT, LogEntry, MediaChunk, Timestamp, ToolSide, TurnEvent,
};

use crate::outbound::{
    encode_cancelled, encode_chunk, encode_done, encode_error, encode_interrupt,
    encode_media_chunk, encode_session_config, encode_tool_call, encode_tool_result,
    encode_turn_started, with_seq,
};

/// What a connection asked for, fixed for its life.
#[derive(Debug, Clone, Copy)]
pub struct EncoderOptions {
    /// `stream=2`: `seq` on every frame, `turn_started`, cancellable turns.
    pub positions: bool,
    /// The agent shows its server tools' calls and results.
    pub shows_server_tools: bool,
    /// `binary=true`: media leaves as binary OMNI frames.
    pub binary_media: bool,
}

/// What one entry becomes.
#[derive(Debug, PartialEq)]
pub enum Encoded<'e> {
    /// Nothing is sent for this entry.
    Nothing,
    Text(String),
    /// Media for a `binary=true` connection: the caller frames it
    /// ([`crate::encode_media_frames`]), since binary frames are not text.
    BinaryMedia(&'e MediaChunk),
}

/// Encodes the log entries a connection reads, turn after turn.
#[derive(Debug, Clone)]
pub struct TurnEncoder {
    options: EncoderOptions,
    /// A delegate is answering: its text is not the reply's.
    in_delegation: bool,
}

impl TurnEncoder {
    pub fn new(options: EncoderOptions) -> TurnEncoder {
        TurnEncoder {
            options,
            in_delegation: false,
        }
    }

    /// `entry` on `session_id` as the client sees it; `epoch` is the log's,
    /// named by `turn_started`.
    pub fn encode<'e>(
        &mut self,
        session_id: &str,
        entry: &'e LogEntry,
        epoch: &str,
        now: Timestamp,
    ) -> Encoded<'e> {
        let event = &*entry.event;
        self.observe(entry);
        let (options, in_delegation) = (self.options, self.in_delegation);
        let shows = |side: ToolSide| side == ToolSide::Client || options.shows_server_tools;
        let frame = match event {
            TurnEvent::TurnStarted { agent, .. } if options.positions => {
                encode_turn_started(session_id, entry.turn.0, epoch, agent, now)
            }
            TurnEvent::TurnStarted { .. } | TurnEvent::AgentSwitched { .. } => {
                return Encoded::Nothing;
            }
            TurnEvent::TextDelta(_) if in_delegation => return Encoded::Nothing,
            TurnEvent::TextDelta(delta) => encode_chunk(session_id, delta, now),
            TurnEvent::ToolCall(call) if shows(call.side) => {
                encode_tool_call(session_id, call, now)
            }
            // Client-side results reach the stream only when the client did
            // not answer in time: it is told the call is over.
            TurnEvent::ToolResult { id, outcome, side } if shows(*side) => {
                encode_tool_result(session_id, id, outcome, now)
            }
            TurnEvent::ToolCall(_) | TurnEvent::ToolResult { .. } => return Encoded::Nothing,
            TurnEvent::Media(chunk) if options.binary_media => return Encoded::BinaryMedia(chunk),
            TurnEvent::Media(chunk) => encode_media_chunk(
                session_id,
                &chunk.media_id,
                chunk.sequence,
                chunk.is_last,
                &chunk.data,
                &chunk.mime_type,
                now,
            ),
            TurnEvent::Interrupt => encode_interrupt(session_id, now),
            TurnEvent::AudioFormat(format) => encode_session_config(session_id, format, now),
            TurnEvent::Completed(reply) => encode_done(session_id, reply, now),
            TurnEvent::Cancelled(partial) if options.positions => {
                encode_cancelled(session_id, partial, now)
            }
            TurnEvent::Cancelled(_) => encode_error(
                Some(session_id),
                ErrorCode::Internal,
                INTERNAL_ERROR_TEXT,
                now,
            ),
            TurnEvent::Failed(failure) => {
                encode_error(Some(session_id), failure.code, &failure.message, now)
            }
        };
        Encoded::Text(match options.positions {
            true => with_seq(frame, entry.seq),
            false => frame,
        })
    }

    /// The error code the client is told for `event`, when it ends the turn
    /// in an `error` frame: what the server counts.
    pub fn error_code(&self, event: &TurnEvent) -> Option<ErrorCode> {
        match event {
            TurnEvent::Failed(failure) => Some(failure.code),
            TurnEvent::Cancelled(_) if !self.options.positions => Some(ErrorCode::Internal),
            _ => None,
        }
    }

    /// Takes in `entry` without encoding it: the entries a rejoined client
    /// already has.
    pub fn observe(&mut self, entry: &LogEntry) {
        match &*entry.event {
            TurnEvent::AgentSwitched { delegated, .. } => self.in_delegation = *delegated,
            TurnEvent::TurnStarted { .. } => self.in_delegation = false,
            event if event.is_terminal() => self.in_delegation = false,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;

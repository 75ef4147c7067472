//! The shared log's JSON: a batch of turn log entries and a control, as
//! Redis stores and carries them. Public for the fuzz target
//! (`fuzz/fuzz_targets/shared_log.rs`).
//!
//! The core's types know no wire format, so the JSON is written here from
//! mirror structs, one per core type, that borrow what they encode and own
//! what they decode. They write what serde's derives on the core types
//! once wrote (externally tagged enums, every field, `null` for `None`;
//! media bytes as base64, error codes by name), so replicas of either
//! version read each other's entries (pinned in `codec/tests.rs`).

use std::borrow::Cow;
use std::sync::Arc;

use agentwire_core::live::Control;
use agentwire_core::{
    AudioFormat, ClientAnswer, ContentPart, ErrorCode, LogEntry, MediaChunk, MediaContent,
    PartKind, Reply, SessionId, ToolCall, ToolOutcome, ToolSide, TurnEvent, TurnFailure, TurnId,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A batch or control that does not decode: another version's, or damaged.
/// Readers treat it as a gap.
#[derive(Debug, thiserror::Error)]
#[error("undecodable shared log data: {0}")]
pub struct DecodeError(String);

/// A batch as the shared log stores it (JSON: the entries' seq, turn and
/// event).
pub fn encode_batch(entries: &[LogEntry]) -> String {
    let out: Vec<EntryWire<'_>> = entries
        .iter()
        .map(|entry| EntryWire {
            s: entry.seq,
            t: entry.turn.0,
            e: EventWire::from(&*entry.event),
        })
        .collect();
    serde_json::to_string(&out).expect("log entries serialise")
}

pub fn decode_batch(batch: &[u8]) -> Result<Vec<LogEntry>, DecodeError> {
    let entries: Vec<EntryWire<'_>> =
        serde_json::from_slice(batch).map_err(|e| DecodeError(e.to_string()))?;
    Ok(entries
        .into_iter()
        .map(|entry| LogEntry {
            seq: entry.s,
            turn: TurnId(entry.t),
            event: Arc::new(entry.e.into()),
        })
        .collect())
}

/// A control addressed to a session, as the bus carries it.
pub fn encode_control(session: &SessionId, control: &Control) -> String {
    serde_json::to_string(&ControlWire {
        s: session.as_str().into(),
        c: control.into(),
    })
    .expect("controls serialise")
}

pub fn decode_control(data: &[u8]) -> Result<(SessionId, Control), DecodeError> {
    let wire: ControlWire<'_> =
        serde_json::from_slice(data).map_err(|e| DecodeError(e.to_string()))?;
    let session = SessionId::parse(&wire.s).map_err(|e| DecodeError(e.to_string()))?;
    Ok((session, wire.c.into()))
}

#[derive(Serialize, Deserialize)]
struct EntryWire<'a> {
    s: u64,
    t: u64,
    e: EventWire<'a>,
}

/// [`TurnEvent`].
#[derive(Serialize, Deserialize)]
enum EventWire<'a> {
    TurnStarted {
        agent: Cow<'a, str>,
        /// The question's store seq; absent in entries written before it
        /// was added, and for a turn without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        q: Option<u64>,
    },
    TextDelta(Cow<'a, str>),
    ToolCall(ToolCallWire<'a>),
    ToolResult {
        id: Cow<'a, str>,
        outcome: OutcomeWire<'a>,
        side: SideWire,
    },
    Media(MediaChunkWire<'a>),
    Interrupt,
    AudioFormat(AudioFormatWire<'a>),
    AgentSwitched {
        name: Cow<'a, str>,
        delegated: bool,
    },
    Completed(ReplyWire<'a>),
    Failed(FailureWire<'a>),
    Cancelled(ReplyWire<'a>),
}

impl<'a> From<&'a TurnEvent> for EventWire<'a> {
    fn from(event: &'a TurnEvent) -> EventWire<'a> {
        match event {
            TurnEvent::TurnStarted { agent, question } => EventWire::TurnStarted {
                agent: agent.into(),
                q: *question,
            },
            TurnEvent::TextDelta(text) => EventWire::TextDelta(text.into()),
            TurnEvent::ToolCall(call) => EventWire::ToolCall(call.into()),
            TurnEvent::ToolResult { id, outcome, side } => EventWire::ToolResult {
                id: id.into(),
                outcome: outcome.into(),
                side: (*side).into(),
            },
            TurnEvent::Media(chunk) => EventWire::Media(chunk.into()),
            TurnEvent::Interrupt => EventWire::Interrupt,
            TurnEvent::AudioFormat(format) => EventWire::AudioFormat(format.into()),
            TurnEvent::AgentSwitched { name, delegated } => EventWire::AgentSwitched {
                name: name.into(),
                delegated: *delegated,
            },
            TurnEvent::Completed(reply) => EventWire::Completed(reply.into()),
            TurnEvent::Failed(failure) => EventWire::Failed(failure.into()),
            TurnEvent::Cancelled(reply) => EventWire::Cancelled(reply.into()),
        }
    }
}

impl From<EventWire<'_>> for TurnEvent {
    fn from(event: EventWire<'_>) -> TurnEvent {
        match event {
            EventWire::TurnStarted { agent, q } => TurnEvent::TurnStarted {
                agent: agent.into_owned(),
                question: q,
            },
            EventWire::TextDelta(text) => TurnEvent::TextDelta(text.into_owned()),
            EventWire::ToolCall(call) => TurnEvent::ToolCall(call.into()),
            EventWire::ToolResult { id, outcome, side } => TurnEvent::ToolResult {
                id: id.into_owned(),
                outcome: outcome.into(),
                side: side.into(),
            },
            EventWire::Media(chunk) => TurnEvent::Media(chunk.into()),
            EventWire::Interrupt => TurnEvent::Interrupt,
            EventWire::AudioFormat(format) => TurnEvent::AudioFormat(format.into()),
            EventWire::AgentSwitched { name, delegated } => TurnEvent::AgentSwitched {
                name: name.into_owned(),
                delegated,
            },
            EventWire::Completed(reply) => TurnEvent::Completed(reply.into()),
            EventWire::Failed(failure) => TurnEvent::Failed(failure.into()),
            EventWire::Cancelled(reply) => TurnEvent::Cancelled(reply.into()),
        }
    }
}

/// [`ToolSide`].
#[derive(Clone, Copy, Serialize, Deserialize)]
enum SideWire {
    Server,
    Client,
}

impl From<ToolSide> for SideWire {
    fn from(side: ToolSide) -> SideWire {
        match side {
            ToolSide::Server => SideWire::Server,
            ToolSide::Client => SideWire::Client,
        }
    }
}

impl From<SideWire> for ToolSide {
    fn from(side: SideWire) -> ToolSide {
        match side {
            SideWire::Server => ToolSide::Server,
            SideWire::Client => ToolSide::Client,
        }
    }
}

/// [`ToolCall`].
#[derive(Serialize, Deserialize)]
struct ToolCallWire<'a> {
    id: Cow<'a, str>,
    name: Cow<'a, str>,
    arguments: Cow<'a, Value>,
    side: SideWire,
    consent_message: Option<Cow<'a, str>>,
    categories: Cow<'a, [String]>,
}

impl<'a> From<&'a ToolCall> for ToolCallWire<'a> {
    fn from(call: &'a ToolCall) -> ToolCallWire<'a> {
        ToolCallWire {
            id: call.id.as_str().into(),
            name: call.name.as_str().into(),
            arguments: Cow::Borrowed(&call.arguments),
            side: call.side.into(),
            consent_message: call.consent_message.as_deref().map(Cow::Borrowed),
            categories: call.categories.as_slice().into(),
        }
    }
}

impl From<ToolCallWire<'_>> for ToolCall {
    fn from(call: ToolCallWire<'_>) -> ToolCall {
        ToolCall {
            id: call.id.into_owned(),
            name: call.name.into_owned(),
            arguments: call.arguments.into_owned(),
            side: call.side.into(),
            consent_message: call.consent_message.map(Cow::into_owned),
            categories: call.categories.into_owned(),
        }
    }
}

/// [`ToolOutcome`].
#[derive(Serialize, Deserialize)]
enum OutcomeWire<'a> {
    Ok(Cow<'a, Value>),
    Error(Cow<'a, str>),
    Denied(Cow<'a, str>),
}

impl<'a> From<&'a ToolOutcome> for OutcomeWire<'a> {
    fn from(outcome: &'a ToolOutcome) -> OutcomeWire<'a> {
        match outcome {
            ToolOutcome::Ok(value) => OutcomeWire::Ok(Cow::Borrowed(value)),
            ToolOutcome::Error(error) => OutcomeWire::Error(error.into()),
            ToolOutcome::Denied(reason) => OutcomeWire::Denied(reason.into()),
        }
    }
}

impl From<OutcomeWire<'_>> for ToolOutcome {
    fn from(outcome: OutcomeWire<'_>) -> ToolOutcome {
        match outcome {
            OutcomeWire::Ok(value) => ToolOutcome::Ok(value.into_owned()),
            OutcomeWire::Error(error) => ToolOutcome::Error(error.into_owned()),
            OutcomeWire::Denied(reason) => ToolOutcome::Denied(reason.into_owned()),
        }
    }
}

/// [`MediaChunk`].
#[derive(Serialize, Deserialize)]
struct MediaChunkWire<'a> {
    media_id: Cow<'a, str>,
    mime_type: Cow<'a, str>,
    sequence: u32,
    is_last: bool,
    #[serde(with = "base64_bytes")]
    data: Cow<'a, [u8]>,
}

impl<'a> From<&'a MediaChunk> for MediaChunkWire<'a> {
    fn from(chunk: &'a MediaChunk) -> MediaChunkWire<'a> {
        MediaChunkWire {
            media_id: chunk.media_id.as_str().into(),
            mime_type: chunk.mime_type.as_str().into(),
            sequence: chunk.sequence,
            is_last: chunk.is_last,
            data: chunk.data.as_slice().into(),
        }
    }
}

impl From<MediaChunkWire<'_>> for MediaChunk {
    fn from(chunk: MediaChunkWire<'_>) -> MediaChunk {
        MediaChunk {
            media_id: chunk.media_id.into_owned(),
            mime_type: chunk.mime_type.into_owned(),
            sequence: chunk.sequence,
            is_last: chunk.is_last,
            data: chunk.data.into_owned(),
        }
    }
}

/// [`AudioFormat`].
#[derive(Serialize, Deserialize)]
struct AudioFormatWire<'a> {
    codec: Cow<'a, str>,
    sample_rate: u32,
    channels: u32,
}

impl<'a> From<&'a AudioFormat> for AudioFormatWire<'a> {
    fn from(format: &'a AudioFormat) -> AudioFormatWire<'a> {
        AudioFormatWire {
            codec: format.codec.as_str().into(),
            sample_rate: format.sample_rate,
            channels: format.channels,
        }
    }
}

impl From<AudioFormatWire<'_>> for AudioFormat {
    fn from(format: AudioFormatWire<'_>) -> AudioFormat {
        AudioFormat {
            codec: format.codec.into_owned(),
            sample_rate: format.sample_rate,
            channels: format.channels,
        }
    }
}

/// [`Reply`].
#[derive(Serialize, Deserialize)]
struct ReplyWire<'a> {
    text: Cow<'a, str>,
    parts: Vec<PartWire<'a>>,
}

impl<'a> From<&'a Reply> for ReplyWire<'a> {
    fn from(reply: &'a Reply) -> ReplyWire<'a> {
        ReplyWire {
            text: reply.text.as_str().into(),
            parts: reply.parts.iter().map(PartWire::from).collect(),
        }
    }
}

impl From<ReplyWire<'_>> for Reply {
    fn from(reply: ReplyWire<'_>) -> Reply {
        Reply {
            text: reply.text.into_owned(),
            parts: reply.parts.into_iter().map(ContentPart::from).collect(),
        }
    }
}

/// [`TurnFailure`]: the code by name ([`ErrorCode::as_str`]); a custom
/// code another replica names is learnt, up to a bound
/// ([`ErrorCode::named`]).
#[derive(Serialize, Deserialize)]
struct FailureWire<'a> {
    code: Cow<'a, str>,
    message: Cow<'a, str>,
}

impl<'a> From<&'a TurnFailure> for FailureWire<'a> {
    fn from(failure: &'a TurnFailure) -> FailureWire<'a> {
        FailureWire {
            code: failure.code.as_str().into(),
            message: failure.message.as_str().into(),
        }
    }
}

impl From<FailureWire<'_>> for TurnFailure {
    fn from(failure: FailureWire<'_>) -> TurnFailure {
        TurnFailure::new(ErrorCode::named(&failure.code), failure.message)
    }
}

/// [`PartKind`].
#[derive(Clone, Copy, Serialize, Deserialize)]
enum PartKindWire {
    Text,
    Image,
    Audio,
    Video,
    File,
}

impl From<PartKind> for PartKindWire {
    fn from(kind: PartKind) -> PartKindWire {
        match kind {
            PartKind::Text => PartKindWire::Text,
            PartKind::Image => PartKindWire::Image,
            PartKind::Audio => PartKindWire::Audio,
            PartKind::Video => PartKindWire::Video,
            PartKind::File => PartKindWire::File,
        }
    }
}

impl From<PartKindWire> for PartKind {
    fn from(kind: PartKindWire) -> PartKind {
        match kind {
            PartKindWire::Text => PartKind::Text,
            PartKindWire::Image => PartKind::Image,
            PartKindWire::Audio => PartKind::Audio,
            PartKindWire::Video => PartKind::Video,
            PartKindWire::File => PartKind::File,
        }
    }
}

/// [`ContentPart`].
#[derive(Serialize, Deserialize)]
struct PartWire<'a> {
    kind: Option<PartKindWire>,
    text: Option<Cow<'a, str>>,
    media: Option<MediaWire<'a>>,
}

impl<'a> From<&'a ContentPart> for PartWire<'a> {
    fn from(part: &'a ContentPart) -> PartWire<'a> {
        PartWire {
            kind: part.kind.map(PartKindWire::from),
            text: borrowed(&part.text),
            media: part.media.as_ref().map(MediaWire::from),
        }
    }
}

impl From<PartWire<'_>> for ContentPart {
    fn from(part: PartWire<'_>) -> ContentPart {
        ContentPart {
            kind: part.kind.map(PartKind::from),
            text: owned(part.text),
            media: part.media.map(MediaContent::from),
        }
    }
}

/// [`MediaContent`].
#[derive(Serialize, Deserialize)]
struct MediaWire<'a> {
    data: Option<Cow<'a, str>>,
    url: Option<Cow<'a, str>>,
    storage_ref: Option<Cow<'a, str>>,
    mime_type: Cow<'a, str>,
    filename: Option<Cow<'a, str>>,
    size_bytes: Option<u64>,
    width: Option<u32>,
    height: Option<u32>,
    detail: Option<Cow<'a, str>>,
    duration_ms: Option<u64>,
    sample_rate: Option<u32>,
    channels: Option<u32>,
}

impl<'a> From<&'a MediaContent> for MediaWire<'a> {
    fn from(media: &'a MediaContent) -> MediaWire<'a> {
        MediaWire {
            data: borrowed(&media.data),
            url: borrowed(&media.url),
            storage_ref: borrowed(&media.storage_ref),
            mime_type: media.mime_type.as_str().into(),
            filename: borrowed(&media.filename),
            size_bytes: media.size_bytes,
            width: media.width,
            height: media.height,
            detail: borrowed(&media.detail),
            duration_ms: media.duration_ms,
            sample_rate: media.sample_rate,
            channels: media.channels,
        }
    }
}

impl From<MediaWire<'_>> for MediaContent {
    fn from(media: MediaWire<'_>) -> MediaContent {
        MediaContent {
            data: owned(media.data),
            url: owned(media.url),
            storage_ref: owned(media.storage_ref),
            mime_type: media.mime_type.into_owned(),
            filename: owned(media.filename),
            size_bytes: media.size_bytes,
            width: media.width,
            height: media.height,
            detail: owned(media.detail),
            duration_ms: media.duration_ms,
            sample_rate: media.sample_rate,
            channels: media.channels,
        }
    }
}

fn borrowed(text: &Option<String>) -> Option<Cow<'_, str>> {
    text.as_deref().map(Cow::Borrowed)
}

fn owned(text: Option<Cow<'_, str>>) -> Option<String> {
    text.map(Cow::into_owned)
}

/// A control as the bus carries it: the session it is about, and the
/// control ([`Control`]).
#[derive(Serialize, Deserialize)]
struct ControlWire<'a> {
    #[serde(borrow)]
    s: Cow<'a, str>,
    c: ControlBody<'a>,
}

/// [`Control`]; a turn by its number.
#[derive(Serialize, Deserialize)]
enum ControlBody<'a> {
    Cancel {
        turn: u64,
    },
    Answer {
        call_id: Cow<'a, str>,
        answer: AnswerWire<'a>,
    },
}

impl<'a> From<&'a Control> for ControlBody<'a> {
    fn from(control: &'a Control) -> ControlBody<'a> {
        match control {
            Control::Cancel { turn } => ControlBody::Cancel { turn: turn.0 },
            Control::Answer { call_id, answer } => ControlBody::Answer {
                call_id: call_id.into(),
                answer: answer.into(),
            },
        }
    }
}

impl From<ControlBody<'_>> for Control {
    fn from(control: ControlBody<'_>) -> Control {
        match control {
            ControlBody::Cancel { turn } => Control::Cancel { turn: TurnId(turn) },
            ControlBody::Answer { call_id, answer } => Control::Answer {
                call_id: call_id.into_owned(),
                answer: answer.into(),
            },
        }
    }
}

/// [`ClientAnswer`]: a result as serde writes a `Result` (`Ok`/`Err`).
#[derive(Serialize, Deserialize)]
enum AnswerWire<'a> {
    Ack,
    Nack(Cow<'a, str>),
    Result(Result<Cow<'a, Value>, Cow<'a, str>>),
}

impl<'a> From<&'a ClientAnswer> for AnswerWire<'a> {
    fn from(answer: &'a ClientAnswer) -> AnswerWire<'a> {
        match answer {
            ClientAnswer::Ack => AnswerWire::Ack,
            ClientAnswer::Nack(reason) => AnswerWire::Nack(reason.into()),
            ClientAnswer::Result(Ok(value)) => AnswerWire::Result(Ok(Cow::Borrowed(value))),
            ClientAnswer::Result(Err(error)) => AnswerWire::Result(Err(error.into())),
        }
    }
}

impl From<AnswerWire<'_>> for ClientAnswer {
    fn from(answer: AnswerWire<'_>) -> ClientAnswer {
        match answer {
            AnswerWire::Ack => ClientAnswer::Ack,
            AnswerWire::Nack(reason) => ClientAnswer::Nack(reason.into_owned()),
            AnswerWire::Result(result) => {
                ClientAnswer::Result(result.map(Cow::into_owned).map_err(Cow::into_owned))
            }
        }
    }
}

/// Media bytes as base64 in a batch, not as a JSON array of numbers.
mod base64_bytes {
    use std::borrow::Cow;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, 'a, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Cow<'a, [u8]>, D::Error> {
        let text = <Cow<'de, str>>::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .map(Cow::Owned)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;

//! How a message is stored: the row's role and content for each kind of
//! [`MessageBody`], and the JSON of parts, metadata and tool steps.
//!
//! The row layout is the one every earlier build wrote: interim text is an
//! `assistant` row with `step: "interim"` in its metadata, a failure an
//! `error` row with its `code` there, a tool step a `tool` row whose content
//! is `{"call": {id, name, arguments, side}}` or `{"result": {id, status,
//! value}}`. A message's typed flags are keys of the metadata too: a
//! spoken message has `via: "voice"`, a reply cut short `cancelled: "true"`
//! or `interrupted: "true"`, a user message's attachment its id in UUID
//! form under `gnosari_asset_id`. Those keys exist only in this file;
//! readers get typed messages. A key is read as a flag only with the value
//! written for it; any other value stays the metadata's, so a row reads
//! back into what it was written from.
//!
//! The core types are deliberately not `Serialize` (the core knows no wire or
//! storage format), so the shapes live here as private mirror structs. Fields
//! that are `None` are left out; unknown fields are ignored on the way back so
//! a newer build's rows stay readable.
//!
//! Error messages never quote the stored JSON: parts carry user data, and
//! store errors end up in logs.

use std::borrow::Cow;

use agentwire_core::{
    ContentPart, ErrorCode, MediaContent, MediaId, MessageBody, MessageRole, Metadata, PartKind,
    ReplyEnd, SessionId, StoreError, StoredMessage, Timestamp, ToolOutcome, ToolSide, Via,
};
use serde::{Deserialize, Serialize};

/// A body as its row stores it.
pub(crate) struct BodyRow<'a> {
    pub(crate) role: &'static str,
    pub(crate) content: Cow<'a, str>,
    pub(crate) parts: &'a [ContentPart],
    /// The body's own key added to the message's metadata (`step`, `code`,
    /// `cancelled`, `interrupted`, `gnosari_asset_id`).
    pub(crate) marker: Option<(&'static str, Cow<'a, str>)>,
}

const STEP_KEY: &str = "step";
const INTERIM: &str = "interim";
const CODE_KEY: &str = "code";
const VIA_KEY: &str = "via";
const VOICE: &str = "voice";
const CANCELLED_KEY: &str = "cancelled";
const INTERRUPTED_KEY: &str = "interrupted";
const TRUE: &str = "true";
/// A user message's attachment, in UUID form (the Gnosari asset id).
const ATTACHMENT_KEY: &str = "gnosari_asset_id";

#[derive(Serialize, Deserialize)]
enum ToolStepJson<'a> {
    #[serde(rename = "call")]
    Call {
        #[serde(borrow)]
        id: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(default)]
        arguments: serde_json::Value,
        side: SideJson,
    },
    #[serde(rename = "result")]
    Result {
        #[serde(borrow)]
        id: Cow<'a, str>,
        status: StatusJson,
        #[serde(default)]
        value: serde_json::Value,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum SideJson {
    Server,
    Client,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StatusJson {
    Ok,
    Error,
    Denied,
}

fn text_row<'a>(role: MessageRole, text: &'a str, parts: &'a [ContentPart]) -> BodyRow<'a> {
    BodyRow {
        role: role.as_str(),
        content: Cow::Borrowed(text),
        parts,
        marker: None,
    }
}

fn tool_row(step: &ToolStepJson<'_>) -> Result<BodyRow<'static>, StoreError> {
    let content = serde_json::to_string(step).map_err(|e| {
        StoreError::Rejected(format!("cannot encode a tool step: {}", describe(&e)))
    })?;
    Ok(BodyRow {
        role: MessageRole::Tool.as_str(),
        content: Cow::Owned(content),
        parts: &[],
        marker: None,
    })
}

pub(crate) fn encode_body(body: &MessageBody) -> Result<BodyRow<'_>, StoreError> {
    Ok(match body {
        MessageBody::User {
            text,
            parts,
            attachment,
        } => BodyRow {
            marker: attachment
                .as_ref()
                .map(|id| (ATTACHMENT_KEY, Cow::Owned(id.to_uuid()))),
            ..text_row(MessageRole::User, text, parts)
        },
        MessageBody::Reply { text, parts, end } => BodyRow {
            marker: match end {
                ReplyEnd::Complete => None,
                ReplyEnd::Cancelled => Some((CANCELLED_KEY, Cow::Borrowed(TRUE))),
                ReplyEnd::Interrupted => Some((INTERRUPTED_KEY, Cow::Borrowed(TRUE))),
            },
            ..text_row(MessageRole::Assistant, text, parts)
        },
        MessageBody::Interim { text } => BodyRow {
            marker: Some((STEP_KEY, Cow::Borrowed(INTERIM))),
            ..text_row(MessageRole::Assistant, text, &[])
        },
        MessageBody::Failure { code, message } => BodyRow {
            marker: Some((CODE_KEY, Cow::Borrowed(code.as_str()))),
            ..text_row(MessageRole::Error, message, &[])
        },
        MessageBody::Event { name } => text_row(MessageRole::Event, name, &[]),
        MessageBody::ToolCall {
            id,
            name,
            arguments,
            side,
        } => tool_row(&ToolStepJson::Call {
            id: Cow::Borrowed(id),
            name: Cow::Borrowed(name),
            arguments: arguments.clone(),
            side: match side {
                ToolSide::Server => SideJson::Server,
                ToolSide::Client => SideJson::Client,
            },
        })?,
        MessageBody::ToolResult { id, outcome } => {
            let (status, value) = match outcome {
                ToolOutcome::Ok(value) => (StatusJson::Ok, value.clone()),
                ToolOutcome::Error(e) => (StatusJson::Error, e.as_str().into()),
                ToolOutcome::Denied(r) => (StatusJson::Denied, r.as_str().into()),
            };
            tool_row(&ToolStepJson::Result {
                id: Cow::Borrowed(id),
                status,
                value,
            })?
        }
    })
}

/// The row's metadata column: the message's metadata, the body's marker
/// and, for a spoken message, `via`.
pub(crate) fn encode_row_metadata(
    metadata: &Metadata,
    marker: Option<(&str, &str)>,
    via: Via,
) -> Result<Option<String>, StoreError> {
    let via = match via {
        Via::Text => None,
        Via::Voice => Some((VIA_KEY, VOICE)),
    };
    if marker.is_none() && via.is_none() {
        return encode_metadata(metadata);
    }
    let mut with_flags = metadata.clone();
    for (key, value) in marker.into_iter().chain(via) {
        with_flags.insert(key.to_owned(), value.to_owned());
    }
    encode_metadata(&with_flags)
}

/// Takes `key` out of `metadata` when it holds `value`, the value written
/// for the flag; any other value stays the metadata's.
fn take_flag(metadata: &mut Metadata, key: &str, value: &str) -> bool {
    let flagged = metadata.get(key).is_some_and(|v| v == value);
    if flagged {
        metadata.remove(key);
    }
    flagged
}

/// How a row's message came: taken out of `metadata`.
pub(crate) fn decode_via(metadata: &mut Metadata) -> Via {
    match take_flag(metadata, VIA_KEY, VOICE) {
        true => Via::Voice,
        false => Via::Text,
    }
}

/// A user row's attachment, taken out of `metadata` when it is an id as
/// written (lowercase UUID form).
fn decode_attachment(metadata: &mut Metadata) -> Option<MediaId> {
    let written = metadata.get(ATTACHMENT_KEY)?;
    let id = MediaId::from_uuid(written)
        .ok()
        .filter(|id| id.to_uuid() == *written)?;
    metadata.remove(ATTACHMENT_KEY);
    Some(id)
}

/// How a reply row ended, taken out of `metadata`.
fn decode_reply_end(metadata: &mut Metadata) -> ReplyEnd {
    if take_flag(metadata, CANCELLED_KEY, TRUE) {
        ReplyEnd::Cancelled
    } else if take_flag(metadata, INTERRUPTED_KEY, TRUE) {
        ReplyEnd::Interrupted
    } else {
        ReplyEnd::Complete
    }
}

/// The body of a row, taking the body's marker out of `metadata`.
pub(crate) fn decode_body(
    role: &str,
    content: String,
    parts: Vec<ContentPart>,
    metadata: &mut Metadata,
) -> Result<MessageBody, String> {
    let role = MessageRole::parse(role).ok_or("unknown role")?;
    Ok(match role {
        MessageRole::User => MessageBody::User {
            text: content,
            parts,
            attachment: decode_attachment(metadata),
        },
        MessageRole::Assistant if take_flag(metadata, STEP_KEY, INTERIM) => {
            MessageBody::Interim { text: content }
        }
        MessageRole::Assistant => MessageBody::Reply {
            text: content,
            parts,
            end: decode_reply_end(metadata),
        },
        MessageRole::Error => MessageBody::Failure {
            code: ErrorCode::named(&metadata.remove(CODE_KEY).unwrap_or_default()),
            message: content,
        },
        MessageRole::Event => MessageBody::Event { name: content },
        MessageRole::Tool => {
            let step: ToolStepJson<'_> = serde_json::from_str(&content)
                .map_err(|e| format!("invalid tool step JSON: {}", describe(&e)))?;
            match step {
                ToolStepJson::Call {
                    id,
                    name,
                    arguments,
                    side,
                } => MessageBody::ToolCall {
                    id: id.into_owned(),
                    name: name.into_owned(),
                    arguments,
                    side: match side {
                        SideJson::Server => ToolSide::Server,
                        SideJson::Client => ToolSide::Client,
                    },
                },
                ToolStepJson::Result { id, status, value } => {
                    let text = |value: serde_json::Value| match value {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    let outcome = match status {
                        StatusJson::Ok => ToolOutcome::Ok(value),
                        StatusJson::Error => ToolOutcome::Error(text(value)),
                        StatusJson::Denied => ToolOutcome::Denied(text(value)),
                    };
                    MessageBody::ToolResult {
                        id: id.into_owned(),
                        outcome,
                    }
                }
            }
        }
    })
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum KindJson {
    Text,
    Image,
    Audio,
    Video,
    File,
}

impl From<PartKind> for KindJson {
    fn from(kind: PartKind) -> KindJson {
        match kind {
            PartKind::Text => KindJson::Text,
            PartKind::Image => KindJson::Image,
            PartKind::Audio => KindJson::Audio,
            PartKind::Video => KindJson::Video,
            PartKind::File => KindJson::File,
        }
    }
}

impl From<KindJson> for PartKind {
    fn from(kind: KindJson) -> PartKind {
        match kind {
            KindJson::Text => PartKind::Text,
            KindJson::Image => PartKind::Image,
            KindJson::Audio => PartKind::Audio,
            KindJson::Video => PartKind::Video,
            KindJson::File => PartKind::File,
        }
    }
}

/// Borrows when encoding, owns when decoding.
#[derive(Serialize, Deserialize)]
struct PartJson<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<KindJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media: Option<MediaJson<'a>>,
}

#[derive(Serialize, Deserialize)]
struct MediaJson<'a> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    storage_ref: Option<Cow<'a, str>>,
    mime_type: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    filename: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    detail: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sample_rate: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    channels: Option<u32>,
}

fn borrowed(s: &Option<String>) -> Option<Cow<'_, str>> {
    s.as_deref().map(Cow::Borrowed)
}

fn owned(s: Option<Cow<'_, str>>) -> Option<String> {
    s.map(Cow::into_owned)
}

impl<'a> From<&'a ContentPart> for PartJson<'a> {
    fn from(part: &'a ContentPart) -> PartJson<'a> {
        PartJson {
            kind: part.kind.map(KindJson::from),
            text: borrowed(&part.text),
            media: part.media.as_ref().map(|m| MediaJson {
                data: borrowed(&m.data),
                url: borrowed(&m.url),
                storage_ref: borrowed(&m.storage_ref),
                mime_type: Cow::Borrowed(&m.mime_type),
                filename: borrowed(&m.filename),
                size_bytes: m.size_bytes,
                width: m.width,
                height: m.height,
                detail: borrowed(&m.detail),
                duration_ms: m.duration_ms,
                sample_rate: m.sample_rate,
                channels: m.channels,
            }),
        }
    }
}

impl From<PartJson<'_>> for ContentPart {
    fn from(part: PartJson<'_>) -> ContentPart {
        ContentPart {
            kind: part.kind.map(PartKind::from),
            text: owned(part.text),
            media: part.media.map(|m| MediaContent {
                data: owned(m.data),
                url: owned(m.url),
                storage_ref: owned(m.storage_ref),
                mime_type: m.mime_type.into_owned(),
                filename: owned(m.filename),
                size_bytes: m.size_bytes,
                width: m.width,
                height: m.height,
                detail: owned(m.detail),
                duration_ms: m.duration_ms,
                sample_rate: m.sample_rate,
                channels: m.channels,
            }),
        }
    }
}

/// Describes a JSON error by category and position only, never by content.
fn describe(e: &serde_json::Error) -> String {
    format!(
        "{:?} error at line {} column {}",
        e.classify(),
        e.line(),
        e.column()
    )
}

/// `None` when there are no parts (stored as NULL).
pub(crate) fn encode_parts(parts: &[ContentPart]) -> Result<Option<String>, StoreError> {
    if parts.is_empty() {
        return Ok(None);
    }
    let mirror: Vec<PartJson<'_>> = parts.iter().map(PartJson::from).collect();
    serde_json::to_string(&mirror)
        .map(Some)
        .map_err(|e| StoreError::Rejected(format!("cannot encode parts: {}", describe(&e))))
}

pub(crate) fn decode_parts(json: Option<&str>) -> Result<Vec<ContentPart>, String> {
    let Some(json) = json else {
        return Ok(Vec::new());
    };
    let mirror: Vec<PartJson<'static>> =
        serde_json::from_str(json).map_err(|e| format!("invalid parts JSON: {}", describe(&e)))?;
    Ok(mirror.into_iter().map(ContentPart::from).collect())
}

/// `None` when there is no metadata (stored as NULL).
pub(crate) fn encode_metadata(metadata: &Metadata) -> Result<Option<String>, StoreError> {
    if metadata.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(metadata)
        .map(Some)
        .map_err(|e| StoreError::Rejected(format!("cannot encode metadata: {}", describe(&e))))
}

pub(crate) fn decode_metadata(json: Option<&str>) -> Result<Metadata, String> {
    let Some(json) = json else {
        return Ok(Metadata::new());
    };
    serde_json::from_str(json).map_err(|e| format!("invalid metadata JSON: {}", describe(&e)))
}

/// A session's declaration as both databases keep it: JSON text, `None`
/// (NULL) when it declared nothing.
pub(crate) fn encode_declaration(
    declaration: Option<&serde_json::Value>,
) -> Result<Option<String>, StoreError> {
    declaration
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Rejected(format!("cannot encode declaration: {}", describe(&e))))
}

pub(crate) fn decode_declaration(
    json: Option<String>,
    session: &SessionId,
) -> Result<Option<serde_json::Value>, StoreError> {
    json.map(|json| serde_json::from_str(&json))
        .transpose()
        .map_err(|e| {
            StoreError::Corrupt(format!(
                "session {session}: invalid declaration JSON: {}",
                describe(&e)
            ))
        })
}

/// A message as both databases write it: its row's columns, parts and
/// metadata as JSON text. Encoded on the caller's side of a store.
pub(crate) struct NewRow {
    pub(crate) seq: i64,
    pub(crate) role: &'static str,
    pub(crate) content: String,
    pub(crate) parts: Option<String>,
    pub(crate) metadata: Option<String>,
    pub(crate) created_at: i64,
}

impl NewRow {
    pub(crate) fn encode(message: &StoredMessage) -> Result<NewRow, StoreError> {
        let seq = i64::try_from(message.seq).map_err(|_| {
            StoreError::Rejected(format!(
                "message {} of session {}: seq out of range",
                message.seq, message.session_id
            ))
        })?;
        let row = encode_body(&message.body)?;
        let marker = row
            .marker
            .as_ref()
            .map(|(key, value)| (*key, value.as_ref()));
        Ok(NewRow {
            seq,
            role: row.role,
            parts: encode_parts(row.parts)?,
            metadata: encode_row_metadata(&message.metadata, marker, message.via)?,
            content: row.content.into_owned(),
            created_at: message.created_at.0,
        })
    }
}

/// A message row as both databases read it back.
pub(crate) struct StoredRow {
    pub(crate) seq: i64,
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) parts: Option<String>,
    pub(crate) metadata: Option<String>,
    pub(crate) created_at: i64,
}

impl StoredRow {
    /// The typed message; a row no build writes is [`StoreError::Corrupt`],
    /// named by its seq and session, never by its content.
    pub(crate) fn decode(self, session_id: &SessionId) -> Result<StoredMessage, StoreError> {
        let corrupt = |why: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!(
                "message {} of session {session_id}: {why}",
                self.seq
            ))
        };
        let seq = u64::try_from(self.seq).map_err(|_| corrupt(&"negative seq"))?;
        let parts = decode_parts(self.parts.as_deref()).map_err(|e| corrupt(&e))?;
        let mut metadata = decode_metadata(self.metadata.as_deref()).map_err(|e| corrupt(&e))?;
        let body =
            decode_body(&self.role, self.content, parts, &mut metadata).map_err(|e| corrupt(&e))?;
        Ok(StoredMessage {
            session_id: session_id.clone(),
            seq,
            body,
            via: decode_via(&mut metadata),
            metadata,
            created_at: Timestamp(self.created_at),
        })
    }
}

/// The columns of an owner's listing, a session's record and summary, in
/// the order both databases read them.
pub(crate) const OVERVIEW_COLUMNS: &str =
    "SELECT id, agent, namespace, owner, created_at, last_active_at,
            summary, summary_created_at
     FROM sessions";

/// The one session `messages` belong to (`None` when there are none): one
/// append writes to one session.
pub(crate) fn session_of(messages: &[StoredMessage]) -> Result<Option<&SessionId>, StoreError> {
    let Some(first) = messages.first() else {
        return Ok(None);
    };
    match messages.iter().find(|m| m.session_id != first.session_id) {
        Some(stray) => Err(StoreError::Rejected(format!(
            "message {} of session {}: one call appends to one session",
            stray.seq, stray.session_id
        ))),
        None => Ok(Some(&first.session_id)),
    }
}

/// The `seq` a page's rows are above, as the databases store it (`-1`
/// from the start); `None` when no stored `seq` can be above `after`.
pub(crate) fn page_start(after: Option<u64>) -> Option<i64> {
    match after {
        None => Some(-1),
        Some(after) => i64::try_from(after).ok(),
    }
}

#[cfg(test)]
mod tests;

//! How a message is stored: the row's role and content for each kind of
//! [`MessageBody`], and the JSON of parts, metadata and tool steps.
//!
//! The row layout is the one every earlier build wrote: interim text is an
//! `assistant` row with `step: "interim"` in its metadata, a failure an
//! `error` row with its `code` there, a tool step a `tool` row whose content
//! is `{"call": {id, name, arguments, side}}` or `{"result": {id, status,
//! value}}`. Those keys exist only in this file; readers get typed bodies.
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
    ContentPart, MediaContent, MessageBody, MessageRole, Metadata, PartKind, SessionId, StoreError,
    StoredMessage, Timestamp, ToolOutcome, ToolSide,
};
use serde::{Deserialize, Serialize};

/// A body as its row stores it.
pub(crate) struct BodyRow<'a> {
    pub(crate) role: &'static str,
    pub(crate) content: Cow<'a, str>,
    pub(crate) parts: &'a [ContentPart],
    /// The body's own key added to the message's metadata (`step`, `code`).
    pub(crate) marker: Option<(&'static str, &'a str)>,
}

const STEP_KEY: &str = "step";
const INTERIM: &str = "interim";
const CODE_KEY: &str = "code";

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
        MessageBody::User { text, parts } => text_row(MessageRole::User, text, parts),
        MessageBody::Reply { text, parts } => text_row(MessageRole::Assistant, text, parts),
        MessageBody::Interim { text } => BodyRow {
            marker: Some((STEP_KEY, INTERIM)),
            ..text_row(MessageRole::Assistant, text, &[])
        },
        MessageBody::Failure { code, message } => BodyRow {
            marker: Some((CODE_KEY, code)),
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

/// The row's metadata column: the message's metadata and the body's marker.
pub(crate) fn encode_row_metadata(
    metadata: &Metadata,
    marker: Option<(&str, &str)>,
) -> Result<Option<String>, StoreError> {
    match marker {
        None => encode_metadata(metadata),
        Some((key, value)) => {
            let mut with_marker = metadata.clone();
            with_marker.insert(key.to_owned(), value.to_owned());
            encode_metadata(&with_marker)
        }
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
        },
        MessageRole::Assistant if metadata.get(STEP_KEY).is_some_and(|s| s == INTERIM) => {
            metadata.remove(STEP_KEY);
            MessageBody::Interim { text: content }
        }
        MessageRole::Assistant => MessageBody::Reply {
            text: content,
            parts,
        },
        MessageRole::Error => MessageBody::Failure {
            code: metadata.remove(CODE_KEY).unwrap_or_default(),
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
        Ok(NewRow {
            seq,
            role: row.role,
            parts: encode_parts(row.parts)?,
            metadata: encode_row_metadata(&message.metadata, row.marker)?,
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
mod tests {
    use super::*;

    fn full_media() -> MediaContent {
        MediaContent {
            data: Some("aGVsbG8=".into()),
            url: Some("https://example.com/a.png".into()),
            storage_ref: Some("s3://bucket/key".into()),
            mime_type: "image/png".into(),
            filename: Some("a.png".into()),
            size_bytes: Some(u64::MAX),
            width: Some(640),
            height: Some(480),
            detail: Some("high".into()),
            duration_ms: Some(1234),
            sample_rate: Some(48_000),
            channels: Some(2),
        }
    }

    #[test]
    fn every_field_and_kind_round_trips() {
        let parts = vec![
            ContentPart::text("hi"),
            ContentPart::media(PartKind::Image, full_media()),
            ContentPart::media(PartKind::Audio, MediaContent::default()),
            ContentPart::media(PartKind::Video, full_media()),
            ContentPart::media(PartKind::File, full_media()),
            ContentPart::default(),
        ];
        let json = encode_parts(&parts).unwrap().unwrap();
        assert!(json.contains(r#""kind":"image""#));
        assert_eq!(decode_parts(Some(&json)).unwrap(), parts);
    }

    #[test]
    fn empty_values_are_stored_as_null() {
        assert_eq!(encode_parts(&[]).unwrap(), None);
        assert_eq!(encode_metadata(&Metadata::new()).unwrap(), None);
        assert!(decode_parts(None).unwrap().is_empty());
        assert!(decode_metadata(None).unwrap().is_empty());
    }

    #[test]
    fn decode_errors_do_not_quote_the_data() {
        let err = decode_parts(Some(r#"[{"kind":"secret-kind"}]"#)).unwrap_err();
        assert!(!err.contains("secret"), "{err}");
        let err = decode_metadata(Some(r#"{"k":"secret-value","n":1}"#)).unwrap_err();
        assert!(!err.contains("secret"), "{err}");
    }
}

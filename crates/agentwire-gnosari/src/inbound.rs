//! Client → server frames: one JSON object per text frame,
//! `{message, session_id?, client_message_id?, metadata?, attachments?}`.
//!
//! The frame is parsed once into `RawFrame`, whose fields are all optional
//! and borrowed from the text as raw JSON; each field is then read into its
//! type, so an error names the field that is wrong. `null` is the same as
//! absent everywhere, and unknown fields are ignored (the behaviour notes,
//! §5.6), so newer clients keep working.

use std::borrow::Cow;
use std::collections::BTreeMap;

use agentwire_core::{MediaId, Metadata};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A message frame that passed every check of this crate. The session id is
/// not validated here: the engine owns the rules for session ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundMessage {
    /// The visitor's text: never empty or only whitespace.
    pub message: String,
    /// Absent (or `null`, or `""`): open a new session. Present: continue it.
    pub session_id: Option<String>,
    /// Echoed on `message_rejected` (and on `error` events) so the client
    /// can mark the message it rendered.
    pub client_message_id: Option<String>,
    /// Strings as sent; other JSON values as their compact JSON text.
    pub metadata: Metadata,
    /// Asset ids, as sent. `[]` and `null` are no attachments.
    pub attachments: Vec<String>,
}

impl InboundMessage {
    /// The frame's one attachment (behaviour notes §2.5, §5.13): `None`
    /// without any; refused when there is more than one, when `session_id`
    /// is missing, or when the id is not a UUID. Whether the asset exists
    /// and belongs to this caller and session is the server's check. The
    /// server calls this after screening.
    pub fn check_attachments(&self) -> Result<Option<MediaId>, FrameError> {
        let fail = |message: &'static str| FrameError {
            message: Cow::Borrowed(message),
            client_message_id: self.client_message_id.clone(),
        };
        match self.attachments.as_slice() {
            [] => Ok(None),
            _ if self.session_id.is_none() => Err(fail(ATTACHMENTS_NEED_SESSION)),
            [id] => MediaId::from_uuid(id)
                .map(Some)
                .map_err(|_| fail(ATTACHMENT_INVALID_ID)),
            _ => Err(fail(ATTACHMENTS_TOO_MANY)),
        }
    }
}

/// A frame that cannot be accepted. The server answers it with an `error`
/// event and keeps the socket open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// Shown to the client as the event's `error`.
    pub message: Cow<'static, str>,
    /// The frame's `client_message_id`, when it could be read.
    pub client_message_id: Option<String>,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FrameError {}

pub const NOT_AN_OBJECT: &str = "invalid frame: expected a JSON object";
pub const INVALID_JSON: &str = "invalid frame: not valid JSON";
pub const DUPLICATE_FIELD: &str = "invalid frame: a field appears twice";
pub const MESSAGE_REQUIRED: &str = "message is required";
pub const MESSAGE_NOT_STRING: &str = "message must be a string";
pub const MESSAGE_EMPTY: &str = "message must not be empty";
pub const SESSION_ID_NOT_STRING: &str = "session_id must be a string";
pub const CLIENT_MESSAGE_ID_NOT_STRING: &str = "client_message_id must be a string";
pub const CLIENT_MESSAGE_ID_TOO_LONG: &str = "client_message_id must be at most 256 characters";
pub const METADATA_NOT_OBJECT: &str = "metadata must be an object";
pub const METADATA_TOO_MANY_KEYS: &str = "metadata has more than 32 keys";
pub const METADATA_BAD_KEY: &str = "metadata keys must be 1 to 64 characters";
pub const METADATA_TOO_LONG: &str = "metadata exceeds 32 KiB";
pub const ATTACHMENTS_NOT_ARRAY: &str = "attachments must be an array of asset ids";
pub const ATTACHMENTS_NEED_SESSION: &str = "attachments require a session_id";
pub const ATTACHMENTS_TOO_MANY: &str = "only one attachment per message is supported";
pub const ATTACHMENT_INVALID_ID: &str = "attachment is not a valid asset id";

const MAX_CLIENT_MESSAGE_ID_LEN: usize = 256;
const MAX_METADATA_KEYS: usize = 32;
const MAX_METADATA_KEY_CHARS: usize = 64;
const MAX_METADATA_BYTES: usize = 32 * 1024;

/// `{"type":"cancel","session_id":S}`, the frame that stops a running turn
/// on a connection that asked for positions (`stream=2`): `Some` with the
/// session it names (if any) when `text` is one, `None` for anything else
/// (decoded as a message, as before).
pub fn decode_cancel(text: &str) -> Option<Option<String>> {
    #[derive(serde::Deserialize)]
    struct Control {
        #[serde(rename = "type")]
        kind: Option<String>,
        session_id: Option<String>,
    }
    let control: Control = serde_json::from_str(text).ok()?;
    (control.kind.as_deref() == Some("cancel")).then_some(control.session_id)
}

/// Decodes one text frame. `client_message_id` is read first, so every later
/// error can carry it.
pub fn decode_inbound(text: &str) -> Result<InboundMessage, FrameError> {
    // A derived struct would also take a JSON array, filling fields by
    // position; frames are objects.
    let first = text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .chars()
        .next();
    if first != Some('{') {
        return Err(bare(NOT_AN_OBJECT));
    }
    let raw: RawFrame<'_> = serde_json::from_str(text).map_err(|e| {
        bare(if e.is_syntax() || e.is_eof() {
            INVALID_JSON
        } else {
            DUPLICATE_FIELD
        })
    })?;
    let client_message_id = optional_string(raw.client_message_id)
        .map_err(|()| bare(CLIENT_MESSAGE_ID_NOT_STRING))?
        .filter(|id| !id.is_empty());
    if client_message_id
        .as_ref()
        .is_some_and(|id| id.chars().count() > MAX_CLIENT_MESSAGE_ID_LEN)
    {
        return Err(bare(CLIENT_MESSAGE_ID_TOO_LONG));
    }
    let fail = |message: &'static str| FrameError {
        message: Cow::Borrowed(message),
        client_message_id: client_message_id.clone(),
    };
    let message = optional_string(raw.message)
        .map_err(|()| fail(MESSAGE_NOT_STRING))?
        .ok_or_else(|| fail(MESSAGE_REQUIRED))?;
    if message.trim().is_empty() {
        return Err(fail(MESSAGE_EMPTY));
    }
    let session_id = optional_string(raw.session_id)
        .map_err(|()| fail(SESSION_ID_NOT_STRING))?
        .filter(|id| !id.is_empty());
    let metadata = match raw.metadata {
        None => Metadata::new(),
        Some(raw) => decode_metadata(raw).map_err(fail)?,
    };
    let attachments = match raw.attachments {
        None => Vec::new(),
        Some(raw) => serde_json::from_str::<Vec<String>>(raw.get())
            .map_err(|_| fail(ATTACHMENTS_NOT_ARRAY))?,
    };
    Ok(InboundMessage {
        message,
        session_id,
        client_message_id,
        metadata,
        attachments,
    })
}

fn bare(message: &'static str) -> FrameError {
    FrameError {
        message: Cow::Borrowed(message),
        client_message_id: None,
    }
}

/// A string field: `Ok(None)` when absent or `null`, `Err` for another type.
fn optional_string(raw: Option<&RawValue>) -> Result<Option<String>, ()> {
    raw.map(|raw| serde_json::from_str::<String>(raw.get()).map_err(|_| ()))
        .transpose()
}

/// An object of any JSON values: strings are kept, the rest become their
/// compact JSON text, and the size limits bound what is stored.
fn decode_metadata(raw: &RawValue) -> Result<Metadata, &'static str> {
    if !raw.get().starts_with('{') {
        return Err(METADATA_NOT_OBJECT);
    }
    let fields: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(raw.get()).map_err(|_| METADATA_NOT_OBJECT)?;
    if fields.len() > MAX_METADATA_KEYS {
        return Err(METADATA_TOO_MANY_KEYS);
    }
    let mut metadata = Metadata::new();
    let mut total = 0;
    for (key, value) in fields {
        if !(1..=MAX_METADATA_KEY_CHARS).contains(&key.chars().count()) {
            return Err(METADATA_BAD_KEY);
        }
        let value = match value {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        total += key.len() + value.len();
        if total > MAX_METADATA_BYTES {
            return Err(METADATA_TOO_LONG);
        }
        metadata.insert(key, value);
    }
    Ok(metadata)
}

/// Every field a frame can carry, as raw JSON borrowed from the text.
/// Unknown keys are skipped by serde without being kept.
#[derive(Deserialize)]
struct RawFrame<'a> {
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(borrow)]
    session_id: Option<&'a RawValue>,
    #[serde(borrow)]
    client_message_id: Option<&'a RawValue>,
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow)]
    attachments: Option<&'a RawValue>,
}

#[cfg(test)]
mod tests;

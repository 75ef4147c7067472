//! What a client sends: a message and the parameters of each method,
//! decoded from either version into one shape.

use agentwire_core::{ContentPart, MediaContent, Metadata, PartKind};
use serde_json::{Map, Value};

use crate::Version;
use crate::rpc::RpcError;

/// The most parts one message may carry.
pub const MAX_PARTS: usize = 64;

/// A client's message (`Message`, role user).
#[derive(Debug, Clone, PartialEq)]
pub struct InboundMessage {
    pub message_id: String,
    /// The session to continue; `None` opens a new one.
    pub context_id: Option<String>,
    /// The task this message answers (input required).
    pub task_id: Option<String>,
    pub parts: Vec<InboundPart>,
    /// String values as they are, others as their JSON text.
    pub metadata: Metadata,
}

/// One part of a client's message.
#[derive(Debug, Clone, PartialEq)]
pub enum InboundPart {
    Text(String),
    /// A file by URL, or its bytes in base64.
    File {
        url: Option<String>,
        bytes: Option<String>,
        media_type: Option<String>,
        filename: Option<String>,
    },
    /// Structured data.
    Data(Value),
}

/// `SendMessage` / `message/send` parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SendParams {
    pub message: InboundMessage,
    /// Answer at once with the task as it is, rather than when it ends or
    /// needs input (v1.0 `returnImmediately`, v0.3 `blocking: false`).
    pub return_immediately: bool,
    pub history_length: Option<u32>,
}

fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object.get(name).filter(|v| !v.is_null())
}

fn string(object: &Map<String, Value>, name: &str) -> Result<Option<String>, RpcError> {
    match field(object, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RpcError::invalid_params(
            "a field that must be a string is not",
        )),
    }
}

fn object<'a>(value: &'a Value, what: &'static str) -> Result<&'a Map<String, Value>, RpcError> {
    value.as_object().ok_or(RpcError::invalid_params(what))
}

/// The parameters of a send, in `version`.
pub fn send_params(params: &Value, version: Version) -> Result<SendParams, RpcError> {
    let params = object(params, "params must be an object")?;
    let message =
        field(params, "message").ok_or(RpcError::invalid_params("message is required"))?;
    let message = inbound_message(message, version)?;
    let configuration = field(params, "configuration").and_then(Value::as_object);
    let config_bool = |name: &str| {
        configuration
            .and_then(|c| c.get(name))
            .and_then(Value::as_bool)
    };
    let return_immediately = match version {
        Version::V1_0 => config_bool("returnImmediately").unwrap_or(false),
        Version::V0_3 => !config_bool("blocking").unwrap_or(true),
    };
    let history_length = configuration
        .and_then(|c| field(c, "historyLength"))
        .map(history_length)
        .transpose()?;
    Ok(SendParams {
        message,
        return_immediately,
        history_length,
    })
}

fn history_length(value: &Value) -> Result<u32, RpcError> {
    value
        .as_i64()
        .filter(|n| *n >= 0)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or(RpcError::invalid_params(
            "historyLength must be a non-negative integer",
        ))
}

fn inbound_message(value: &Value, version: Version) -> Result<InboundMessage, RpcError> {
    let message = object(value, "message must be an object")?;
    let role = string(message, "role")?;
    let user = match version {
        Version::V1_0 => role.as_deref() == Some("ROLE_USER"),
        Version::V0_3 => role.as_deref() == Some("user"),
    };
    if !user {
        return Err(RpcError::invalid_params("message.role must be the user's"));
    }
    let message_id = string(message, "messageId")?
        .filter(|id| !id.is_empty())
        .ok_or(RpcError::invalid_params("message.messageId is required"))?;
    let parts = match field(message, "parts") {
        Some(Value::Array(parts)) if !parts.is_empty() && parts.len() <= MAX_PARTS => parts,
        _ => return Err(RpcError::invalid_params("message.parts: 1 to 64 parts")),
    };
    let parts = parts
        .iter()
        .map(|p| inbound_part(p, version))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(InboundMessage {
        message_id,
        context_id: string(message, "contextId")?.filter(|s| !s.is_empty()),
        task_id: string(message, "taskId")?.filter(|s| !s.is_empty()),
        parts,
        metadata: metadata(field(message, "metadata"))?,
    })
}

/// A `Struct` of metadata as string pairs.
fn metadata(value: Option<&Value>) -> Result<Metadata, RpcError> {
    let Some(value) = value else {
        return Ok(Metadata::new());
    };
    let object = object(value, "metadata must be an object")?;
    Ok(object
        .iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect())
}

fn inbound_part(value: &Value, version: Version) -> Result<InboundPart, RpcError> {
    let part = object(value, "a part must be an object")?;
    match version {
        Version::V1_0 => part_v1(part),
        Version::V0_3 => part_v0_3(part),
    }
}

/// v1.0: exactly one of `text`, `raw`, `url`, `data`, with `mediaType`
/// and `filename` beside it.
fn part_v1(part: &Map<String, Value>) -> Result<InboundPart, RpcError> {
    let present = ["text", "raw", "url", "data"]
        .iter()
        .filter(|k| field(part, k).is_some())
        .count();
    if present != 1 {
        return Err(RpcError::invalid_params(
            "a part holds exactly one of text, raw, url and data",
        ));
    }
    if let Some(text) = string(part, "text")? {
        return Ok(InboundPart::Text(text));
    }
    if let Some(data) = field(part, "data") {
        return Ok(InboundPart::Data(data.clone()));
    }
    Ok(InboundPart::File {
        url: string(part, "url")?,
        bytes: string(part, "raw")?,
        media_type: string(part, "mediaType")?,
        filename: string(part, "filename")?,
    })
}

/// v0.3: `kind` says which: `text`, `file` (`file.uri` or `file.bytes`)
/// or `data`.
fn part_v0_3(part: &Map<String, Value>) -> Result<InboundPart, RpcError> {
    match string(part, "kind")?.as_deref() {
        Some("text") => string(part, "text")?
            .map(InboundPart::Text)
            .ok_or(RpcError::invalid_params("a text part needs text")),
        Some("data") => field(part, "data")
            .cloned()
            .map(InboundPart::Data)
            .ok_or(RpcError::invalid_params("a data part needs data")),
        Some("file") => {
            let file =
                field(part, "file").ok_or(RpcError::invalid_params("a file part needs file"))?;
            let file = object(file, "file must be an object")?;
            let (url, bytes) = (string(file, "uri")?, string(file, "bytes")?);
            if url.is_some() == bytes.is_some() {
                return Err(RpcError::invalid_params(
                    "a file holds one of uri and bytes",
                ));
            }
            Ok(InboundPart::File {
                url,
                bytes,
                media_type: string(file, "mimeType")?,
                filename: string(file, "name")?,
            })
        }
        _ => Err(RpcError::invalid_params(
            "a part's kind is text, file or data",
        )),
    }
}

impl InboundMessage {
    /// The message as a turn's parts: text as text, files as media (by
    /// URL or inline bytes), data as its JSON text.
    pub fn content_parts(&self) -> Vec<ContentPart> {
        self.parts
            .iter()
            .map(|part| match part {
                InboundPart::Text(text) => ContentPart::text(text.clone()),
                InboundPart::Data(data) => ContentPart::text(data.to_string()),
                InboundPart::File {
                    url,
                    bytes,
                    media_type,
                    filename,
                } => {
                    let mime_type = media_type
                        .clone()
                        .unwrap_or_else(|| "application/octet-stream".to_owned());
                    let kind = match mime_type.starts_with("image/") {
                        true => PartKind::Image,
                        false => PartKind::File,
                    };
                    ContentPart::media(
                        kind,
                        MediaContent {
                            url: url.clone(),
                            data: bytes.clone(),
                            mime_type,
                            filename: filename.clone(),
                            ..MediaContent::default()
                        },
                    )
                }
            })
            .collect()
    }

    /// The data parts, for answers to a client tool call.
    pub fn data(&self) -> impl Iterator<Item = &Value> {
        self.parts.iter().filter_map(|p| match p {
            InboundPart::Data(data) => Some(data),
            _ => None,
        })
    }
}

/// The `id` of `GetTask`, `CancelTask`, `SubscribeToTask`, with
/// `historyLength` where given.
pub fn task_id(params: &Value) -> Result<(String, Option<u32>), RpcError> {
    let params = object(params, "params must be an object")?;
    let id = string(params, "id")?
        .filter(|id| !id.is_empty())
        .ok_or(RpcError::invalid_params("id is required"))?;
    let history = field(params, "historyLength")
        .map(history_length)
        .transpose()?;
    Ok((id, history))
}

/// `ListTasks` parameters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListParams {
    pub context_id: Option<String>,
    /// A ProtoJSON state name (`TASK_STATE_WORKING`).
    pub status: Option<String>,
    /// 1 to 100; default 50.
    pub page_size: u32,
    pub page_token: Option<String>,
    pub history_length: Option<u32>,
    pub include_artifacts: bool,
}

/// The default and the largest `pageSize`.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 100;

pub fn list_params(params: &Value) -> Result<ListParams, RpcError> {
    let params = object(params, "params must be an object")?;
    let page_size = match field(params, "pageSize") {
        None => DEFAULT_PAGE_SIZE,
        Some(v) => v
            .as_i64()
            .filter(|n| (1..=i64::from(MAX_PAGE_SIZE)).contains(n))
            .map(|n| n as u32)
            .ok_or(RpcError::invalid_params("pageSize must be 1 to 100"))?,
    };
    Ok(ListParams {
        context_id: string(params, "contextId")?.filter(|s| !s.is_empty()),
        status: string(params, "status")?.filter(|s| !s.is_empty()),
        page_size,
        page_token: string(params, "pageToken")?.filter(|s| !s.is_empty()),
        history_length: field(params, "historyLength")
            .map(history_length)
            .transpose()?,
        include_artifacts: field(params, "includeArtifacts")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_versions_decode_to_one_message() {
        let v1 = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c",
            "parts": [{"text": "hi"}, {"url": "https://x/a.png", "mediaType": "image/png"}]}});
        let v03 = json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
            "contextId": "c", "parts": [{"kind": "text", "text": "hi"},
            {"kind": "file", "file": {"uri": "https://x/a.png", "mimeType": "image/png"}}]}});
        let a = send_params(&v1, Version::V1_0).unwrap();
        let b = send_params(&v03, Version::V0_3).unwrap();
        assert_eq!(a, b);
        assert!(!a.return_immediately);
        assert_eq!(a.message.content_parts()[1].kind, Some(PartKind::Image));
    }

    #[test]
    fn a_message_of_the_wrong_shape_is_invalid_params() {
        let agent =
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}});
        assert!(send_params(&agent, Version::V1_0).is_err());
        let v03_role = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "x"}]}});
        assert!(send_params(&v03_role, Version::V0_3).is_err());
        let two = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "url": "u"}]}});
        assert!(send_params(&two, Version::V1_0).is_err());
        let none = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}});
        assert!(send_params(&none, Version::V1_0).is_err());
    }

    #[test]
    fn list_params_default_and_bounds() {
        assert_eq!(list_params(&json!({})).unwrap().page_size, 50);
        assert!(list_params(&json!({"pageSize": 0})).is_err());
        assert!(list_params(&json!({"pageSize": 101})).is_err());
        assert!(list_params(&json!({"historyLength": -1})).is_err());
    }
}

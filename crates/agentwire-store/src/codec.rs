//! The JSON this crate stores for message parts and metadata.
//!
//! The core types are deliberately not `Serialize` (the core knows no wire or
//! storage format), so the shapes live here as private mirror structs. Fields
//! that are `None` are left out; unknown fields are ignored on the way back so
//! a newer build's rows stay readable.
//!
//! Error messages never quote the stored JSON: parts carry user data, and
//! store errors end up in logs.

use std::borrow::Cow;

use agentwire_core::{ContentPart, MediaContent, Metadata, PartKind, StoreError};
use serde::{Deserialize, Serialize};

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

//! What a message carries: text, media parts and string metadata.

use std::collections::BTreeMap;

/// String key-value pairs a client attaches to a message. Ordered so that
/// records and templates see the keys in a stable order.
pub type Metadata = BTreeMap<String, String>;

/// The kind of a content part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    Text,
    Image,
    Audio,
    Video,
    File,
}

/// One part of a multi-modal message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContentPart {
    pub kind: Option<PartKind>,
    /// Set on text parts.
    pub text: Option<String>,
    /// Set on media parts.
    pub media: Option<MediaContent>,
}

impl ContentPart {
    pub fn text(text: impl Into<String>) -> ContentPart {
        ContentPart {
            kind: Some(PartKind::Text),
            text: Some(text.into()),
            media: None,
        }
    }

    pub fn media(kind: PartKind, media: MediaContent) -> ContentPart {
        ContentPart {
            kind: Some(kind),
            text: None,
            media: Some(media),
        }
    }
}

/// A media item: exactly one of `data`, `url` or `storage_ref` names its bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MediaContent {
    /// Base64-encoded bytes.
    pub data: Option<String>,
    pub url: Option<String>,
    pub storage_ref: Option<String>,
    pub mime_type: String,
    pub filename: Option<String>,
    pub size_bytes: Option<u64>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub detail: Option<String>,
    pub duration_ms: Option<u64>,
    pub sample_rate: Option<u32>,
    pub channels: Option<u32>,
}

/// The text a turn works on: the text parts joined in order by a blank line
/// when any part carries text, otherwise `content`.
pub fn effective_text(content: Option<&str>, parts: &[ContentPart]) -> String {
    let mut texts = parts
        .iter()
        .filter_map(|p| p.text.as_deref())
        .filter(|t| !t.is_empty())
        .peekable();
    if texts.peek().is_none() {
        return content.unwrap_or_default().to_owned();
    }
    let mut joined = String::new();
    for (i, t) in texts.enumerate() {
        if i > 0 {
            joined.push_str("\n\n");
        }
        joined.push_str(t);
    }
    joined
}

/// [`effective_text`] for a message the caller owns: without text parts the
/// content itself is the text, moved rather than copied (it can be as
/// large as a frame).
pub fn into_effective_text(content: Option<String>, parts: &[ContentPart]) -> String {
    if parts
        .iter()
        .any(|p| p.text.as_deref().is_some_and(|t| !t.is_empty()))
    {
        return effective_text(None, parts);
    }
    content.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parts_win_over_content_and_join_with_a_blank_line() {
        let parts = [
            ContentPart::text("one"),
            ContentPart::media(PartKind::Image, MediaContent::default()),
            ContentPart::text("two"),
        ];
        assert_eq!(effective_text(Some("ignored"), &parts), "one\n\ntwo");
    }

    #[test]
    fn owned_content_is_moved_unless_text_parts_win() {
        let content = "a".repeat(64);
        let at = content.as_ptr();
        let text = into_effective_text(Some(content), &[]);
        assert_eq!(text.as_ptr(), at, "moved, not copied");
        let parts = [ContentPart::text("one"), ContentPart::text("")];
        assert_eq!(into_effective_text(Some("ignored".into()), &parts), "one");
        assert_eq!(into_effective_text(None, &[]), "");
    }

    #[test]
    fn content_is_used_without_text_parts() {
        let parts = [ContentPart::media(PartKind::Image, MediaContent::default())];
        assert_eq!(effective_text(Some("hello"), &parts), "hello");
        assert_eq!(effective_text(None, &[]), "");
    }
}

//! Small, valid media files the demo handler sends, base64-encoded.

use agentwire_core::{ContentPart, MediaContent, PartKind};

/// A 4×4 red PNG.
const PNG_4X4: &str = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAYAAACp8Z5+AAAAEklEQVR42mP4z8DwHxkzkC4AADxAH+Ea86VIAAAAAElFTkSuQmCC";
/// An MPEG-1 layer III frame header (128 kbit/s, 44.1 kHz, stereo) and silence.
const MP3_FRAME: &str = "//uQZAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
/// An MP4 `ftyp` box and a `free` box.
const MP4_HEADER: &str = "AAAAGGZ0eXBpc29tAAACAGlzb21tcDQxAAAAGGZyZWUAAAAAAAAAAAAAAAAAAAAA";
/// A one-object PDF.
const PDF_MINIMAL: &str =
    "JVBERi0xLjQKMSAwIG9iajw8L1R5cGUvQ2F0YWxvZz4+ZW5kb2JqCnRyYWlsZXI8PC9Sb290IDEgMCBSPj4KJSVFT0YK";

pub(crate) fn image() -> ContentPart {
    ContentPart::media(
        PartKind::Image,
        MediaContent {
            data: Some(PNG_4X4.to_owned()),
            mime_type: "image/png".to_owned(),
            width: Some(4),
            height: Some(4),
            size_bytes: Some(75),
            ..MediaContent::default()
        },
    )
}

pub(crate) fn audio() -> ContentPart {
    ContentPart::media(
        PartKind::Audio,
        MediaContent {
            data: Some(MP3_FRAME.to_owned()),
            mime_type: "audio/mpeg".to_owned(),
            duration_ms: Some(1000),
            sample_rate: Some(44_100),
            channels: Some(2),
            size_bytes: Some(156),
            ..MediaContent::default()
        },
    )
}

pub(crate) fn video() -> ContentPart {
    ContentPart::media(
        PartKind::Video,
        MediaContent {
            data: Some(MP4_HEADER.to_owned()),
            mime_type: "video/mp4".to_owned(),
            duration_ms: Some(2000),
            width: Some(320),
            height: Some(240),
            size_bytes: Some(48),
            ..MediaContent::default()
        },
    )
}

pub(crate) fn document() -> ContentPart {
    ContentPart::media(
        PartKind::File,
        MediaContent {
            data: Some(PDF_MINIMAL.to_owned()),
            mime_type: "application/pdf".to_owned(),
            filename: Some("test-document.pdf".to_owned()),
            size_bytes: Some(69),
            ..MediaContent::default()
        },
    )
}

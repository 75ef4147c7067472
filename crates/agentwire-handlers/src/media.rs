//! Small, valid media files the demo handler sends, base64-encoded with the
//! standard alphabet and padding, so strict decoders (a browser's `atob`)
//! take them; the unit test below decodes each one strictly.

use agentwire_core::{ContentPart, MediaContent, PartKind};

/// A 4×4 red PNG.
const PNG_4X4: &str = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAYAAACp8Z5+AAAAEklEQVR42mP4z8DwHxkzkC4AADxAH+Ea86VIAAAAAElFTkSuQmCC";
/// One silent MPEG-1 layer III frame: 48 kbit/s at 44.1 kHz, stereo, so
/// exactly 156 bytes (the size the Omnia reference gives its clip): the
/// header, then side information and main data all zero. The duration and
/// channel figures of [`audio`] are the reference's.
const MP3_FRAME: &str = "//swAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
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

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    /// Each part's bytes, decoded as strictly as a browser's `atob` (the
    /// standard alphabet, canonical padding, no stray trailing bits).
    fn decoded(part: &ContentPart) -> Vec<u8> {
        let media = part.media.as_ref().expect("a media part");
        let data = media.data.as_deref().expect("inline data");
        STANDARD
            .decode(data)
            .unwrap_or_else(|e| panic!("{} does not decode strictly: {e}", media.mime_type))
    }

    #[test]
    fn every_part_decodes_strictly_to_a_file_of_its_type_and_declared_size() {
        let magic: [(ContentPart, &[u8]); 4] = [
            (image(), b"\x89PNG\r\n\x1a\n"),
            // Frame sync, MPEG-1, layer III, no CRC.
            (audio(), b"\xff\xfb"),
            (video(), b"\0\0\0\x18ftyp"),
            (document(), b"%PDF-"),
        ];
        for (part, magic) in magic {
            let bytes = decoded(&part);
            let media = part.media.as_ref().unwrap();
            assert!(bytes.starts_with(magic), "{}", media.mime_type);
            assert_eq!(
                media.size_bytes,
                Some(bytes.len() as u64),
                "{}",
                media.mime_type
            );
        }
    }
}

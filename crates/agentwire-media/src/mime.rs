//! MIME type syntax: what may stand in a `Content-Type` header.

/// `type/subtype` made of RFC 9110 token characters, optionally followed by
/// `;` parameters of visible ASCII and spaces; at most 255 bytes.
pub fn is_valid_mime_type(mime: &str) -> bool {
    if mime.is_empty() || mime.len() > 255 {
        return false;
    }
    let (essence, params) = mime.split_once(';').unwrap_or((mime, ""));
    let Some((kind, subtype)) = essence.trim_end().split_once('/') else {
        return false;
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(is_token_byte);
    token(kind)
        && token(subtype)
        && params
            .bytes()
            .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_types_with_parameters() {
        for ok in [
            "image/jpeg",
            "application/vnd.ms-excel",
            "text/plain; charset=utf-8",
            "audio/mp3",
        ] {
            assert!(is_valid_mime_type(ok), "{ok}");
        }
    }

    #[test]
    fn refuses_what_cannot_be_a_content_type() {
        for bad in [
            "",
            "image",
            "/jpeg",
            "image/",
            "image/jp eg",
            "image/jpeg\r\nX-Evil: 1",
            "imäge/png",
            "a/b/c",
        ] {
            assert!(!is_valid_mime_type(bad), "{bad:?}");
        }
        assert!(!is_valid_mime_type(&format!("a/{}", "b".repeat(300))));
    }
}

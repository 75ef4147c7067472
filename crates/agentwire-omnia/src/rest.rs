//! JSON bodies of the facade's HTTP media routes (`/media/*`), with the
//! snake_case keys of DOC (D9), not the reference code's PascalCase.

use agentwire_core::MediaInfo;
use serde::Serialize;

use crate::outbound::{UploadReady, UploadReadyOut};
use crate::timestamp::Rfc3339;

/// `POST /media/request-upload`: the same object as `upload_ready`.
pub fn encode_upload_credentials(ready: &UploadReady<'_>) -> String {
    to_json(&UploadReadyOut::new(ready))
}

/// `GET /media/info/...` and `POST /media/confirm-upload/...`.
pub fn encode_media_info(info: &MediaInfo) -> String {
    to_json(&MediaInfoOut {
        storage_ref: info.storage_ref.to_string(),
        filename: &info.filename,
        mime_type: &info.mime_type,
        size_bytes: info.size_bytes,
        created_at: Rfc3339(info.created_at),
        expires_at: info.expires_at.map(Rfc3339),
    })
}

fn to_json<T: Serialize>(value: &T) -> String {
    // String keys and infallible values only.
    serde_json::to_string(value).expect("body serialization is infallible")
}

#[derive(Serialize)]
struct MediaInfoOut<'a> {
    storage_ref: String,
    filename: &'a str,
    mime_type: &'a str,
    size_bytes: u64,
    created_at: Rfc3339,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<Rfc3339>,
}

#[cfg(test)]
mod tests {
    use agentwire_core::{MediaId, SessionId, StorageRef, Timestamp};

    use super::*;

    const MID: &str = "0123456789abcdef0123456789abcdef";
    /// 2026-07-24T16:47:30.5Z
    const TS: Timestamp = Timestamp(1_784_911_650_500_000_000);

    #[test]
    fn media_info_golden() {
        let info = MediaInfo {
            storage_ref: StorageRef::new(
                SessionId::parse("s1").unwrap(),
                MediaId::parse(MID).unwrap(),
            ),
            filename: "photo.jpg".into(),
            mime_type: "image/jpeg".into(),
            size_bytes: 102_400,
            created_at: TS,
            expires_at: Some(TS.plus(std::time::Duration::from_secs(86_400))),
            owner: None,
        };
        assert_eq!(
            encode_media_info(&info),
            format!(
                r#"{{"storage_ref":"omnia://sessions/s1/media/{MID}","filename":"photo.jpg","mime_type":"image/jpeg","size_bytes":102400,"created_at":"2026-07-24T16:47:30.5Z","expires_at":"2026-07-25T16:47:30.5Z"}}"#
            )
        );
        let forever = MediaInfo {
            expires_at: None,
            ..info
        };
        assert!(!encode_media_info(&forever).contains("expires_at"));
    }

    #[test]
    fn upload_credentials_match_upload_ready() {
        let headers = [("Content-Type".to_owned(), "image/png".to_owned())];
        let body = encode_upload_credentials(&UploadReady {
            upload_id: MID,
            upload_url: "http://127.0.0.1:8080/media/upload/x",
            storage_ref: "omnia://sessions/s1/media/x",
            expires_at: TS,
            method: Some("PUT"),
            headers: &headers,
        });
        assert_eq!(
            body,
            format!(
                r#"{{"upload_id":"{MID}","upload_url":"http://127.0.0.1:8080/media/upload/x","storage_ref":"omnia://sessions/s1/media/x","expires_at":"2026-07-24T16:47:30.5Z","method":"PUT","headers":{{"Content-Type":"image/png"}}}}"#
            )
        );
    }
}

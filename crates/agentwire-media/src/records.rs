//! The JSON kept beside the bytes, and where each object lives.

use agentwire_core::{MediaError, MediaId, MediaInfo, StorageRef, Timestamp};
use object_store::path::Path;
use serde::{Deserialize, Serialize};

/// `uploads/<upload-id>.json`: an upload that was prepared and has not
/// completed. Times are Unix nanoseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct UploadRecord {
    pub(crate) session: String,
    pub(crate) media: String,
    pub(crate) filename: String,
    pub(crate) mime_type: String,
    /// The declared size: the upload may not be larger.
    pub(crate) size_bytes: u64,
    /// The upload's deadline.
    pub(crate) expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<String>,
}

impl UploadRecord {
    /// Re-validated on the way out, so a tampered record names no path
    /// outside the store.
    pub(crate) fn storage_ref(&self) -> Result<StorageRef, MediaError> {
        StorageRef::from_parts(&self.session, &self.media)
            .map_err(|_| MediaError::Unavailable("corrupt upload record".to_owned()))
    }
}

/// `sessions/<session-id>/<media-id>.meta`: a stored item's metadata.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct MetaRecord {
    pub(crate) filename: String,
    pub(crate) mime_type: String,
    pub(crate) size_bytes: u64,
    pub(crate) created_at: i64,
    /// `None`: the item does not expire.
    pub(crate) expires_at: Option<i64>,
    /// The uploader's owner pseudonym, when the upload bound one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<String>,
}

impl MetaRecord {
    pub(crate) fn into_info(self, storage_ref: StorageRef) -> MediaInfo {
        MediaInfo {
            storage_ref,
            filename: self.filename,
            mime_type: self.mime_type,
            size_bytes: self.size_bytes,
            created_at: Timestamp(self.created_at),
            expires_at: self.expires_at.map(Timestamp),
            owner: self.owner,
        }
    }
}

pub(crate) fn upload_path(id: &MediaId) -> Path {
    Path::from_iter(["uploads", &format!("{id}.json")])
}

pub(crate) fn data_path(r: &StorageRef) -> Path {
    Path::from_iter(["sessions", r.session.as_str(), r.media.as_str()])
}

pub(crate) fn meta_path(r: &StorageRef) -> Path {
    Path::from_iter(["sessions", r.session.as_str(), &format!("{}.meta", r.media)])
}

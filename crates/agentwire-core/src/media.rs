//! The media storage port: files a client uploads out of band and then names
//! in a message part by `storage_ref`.
//!
//! Types and the [`MediaStore`] trait only; the adapters (local directory, S3)
//! live in `agentwire-media`, and the HTTP routes and their JSON in the server.
//!
//! # Identifiers
//!
//! A media id is 32 lowercase hex characters (128 random bits). An upload id
//! names the pending upload of one media item and has the same form; the
//! adapters use the media id as the upload id. A storage reference is
//! `omnia://sessions/<session-id>/media/<media-id>`, and every part of it is
//! validated before it reaches a store, so no id can name a path outside it.

use std::fmt;

use async_trait::async_trait;
use futures_util::stream::BoxStream;

use crate::ids::SessionId;
use crate::time::Timestamp;

/// The scheme and fixed segments of a storage reference.
const REF_PREFIX: &str = "omnia://sessions/";
const REF_MEDIA: &str = "/media/";

/// A media or upload id: exactly 32 lowercase hex characters.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MediaId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid media id: 32 lowercase hex characters")]
pub struct InvalidMediaId;

impl MediaId {
    pub const LEN: usize = 32;

    pub fn parse(id: &str) -> Result<MediaId, InvalidMediaId> {
        let valid = id.len() == MediaId::LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if valid {
            Ok(MediaId(id.to_owned()))
        } else {
            Err(InvalidMediaId)
        }
    }

    /// The id of 16 random bytes, as lowercase hex.
    pub fn from_random_bytes(bytes: [u8; 16]) -> MediaId {
        let mut id = String::with_capacity(MediaId::LEN);
        for b in bytes {
            id.push(char::from(HEX[usize::from(b >> 4)]));
            id.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
        MediaId(id)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id in UUID form (8-4-4-4-12), as Gnosari's `asset_id`.
    pub fn to_uuid(&self) -> String {
        let s = &self.0;
        format!(
            "{}-{}-{}-{}-{}",
            &s[..8],
            &s[8..12],
            &s[12..16],
            &s[16..20],
            &s[20..]
        )
    }

    /// Parses the UUID form of [`MediaId::to_uuid`] (either case).
    pub fn from_uuid(uuid: &str) -> Result<MediaId, InvalidMediaId> {
        let bytes = uuid.as_bytes();
        let dashes_ok = bytes.len() == 36
            && [8, 13, 18, 23].iter().all(|&i| bytes[i] == b'-')
            && bytes
                .iter()
                .enumerate()
                .all(|(i, b)| [8, 13, 18, 23].contains(&i) || b.is_ascii_hexdigit());
        if !dashes_ok {
            return Err(InvalidMediaId);
        }
        MediaId::parse(&uuid.replace('-', "").to_ascii_lowercase())
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for MediaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for MediaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MediaId({})", self.0)
    }
}

/// Parses a session id named in a media path or reference: a valid
/// [`SessionId`] that is not `.` or `..`, so it is safe as a path segment.
pub fn media_session_id(id: &str) -> Result<SessionId, InvalidStorageRef> {
    if id == "." || id == ".." {
        return Err(InvalidStorageRef);
    }
    SessionId::parse(id).map_err(|_| InvalidStorageRef)
}

/// `omnia://sessions/<session-id>/media/<media-id>`: which session a media
/// item belongs to, and which item it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StorageRef {
    pub session: SessionId,
    pub media: MediaId,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid storage reference")]
pub struct InvalidStorageRef;

impl StorageRef {
    pub fn new(session: SessionId, media: MediaId) -> StorageRef {
        StorageRef { session, media }
    }

    /// Parses the reference form; both ids are validated.
    pub fn parse(text: &str) -> Result<StorageRef, InvalidStorageRef> {
        let rest = text.strip_prefix(REF_PREFIX).ok_or(InvalidStorageRef)?;
        let (session, media) = rest.split_once(REF_MEDIA).ok_or(InvalidStorageRef)?;
        StorageRef::from_parts(session, media)
    }

    /// From the two path segments of `/media/info/{session}/{media}`.
    pub fn from_parts(session: &str, media: &str) -> Result<StorageRef, InvalidStorageRef> {
        Ok(StorageRef {
            session: media_session_id(session)?,
            media: MediaId::parse(media).map_err(|_| InvalidStorageRef)?,
        })
    }
}

impl fmt::Display for StorageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{REF_PREFIX}{}{REF_MEDIA}{}", self.session, self.media)
    }
}

/// A filename safe to quote in `Content-Disposition: inline; filename="..."`:
/// printable ASCII only, with quotes, backslashes, path separators and
/// anything else replaced by `_`, at most 255 characters; `download` when
/// nothing is left.
pub fn sanitized_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let clean: String = base
        .chars()
        .take(255)
        .map(|c| match c {
            '"' | '\\' | '/' | ';' => '_',
            c if c.is_ascii_graphic() || c == ' ' => c,
            _ => '_',
        })
        .collect();
    let clean = clean.trim();
    if clean.is_empty() || clean.chars().all(|c| c == '.') {
        "download".to_owned()
    } else {
        clean.to_owned()
    }
}

/// What a client asks to upload. The store validates it (size against its
/// limit, the MIME type's syntax); the caller has checked presence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadSpec {
    pub session: SessionId,
    pub filename: String,
    pub mime_type: String,
    /// The declared size: the upload may not be larger.
    pub size_bytes: u64,
    /// The uploader's owner pseudonym, kept with the item; `None` when the
    /// upload was anonymous or the route does not bind an owner.
    pub owner: Option<String>,
}

/// Where the client sends the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadTarget {
    /// To this server's upload route (`PUT /media/upload/{upload_id}`), which
    /// hands the body to [`MediaStore::write_upload`]. The server knows its
    /// public URL; the store does not.
    Server,
    /// Straight to the object store at this presigned URL; the client then
    /// confirms with [`MediaStore::confirm_upload`].
    Direct { url: String },
}

/// A prepared upload: what the client needs to send the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadTicket {
    pub upload_id: MediaId,
    pub target: UploadTarget,
    pub storage_ref: StorageRef,
    /// When the upload must have happened by.
    pub expires_at: Timestamp,
    /// The HTTP method of the upload: `PUT` for every backend.
    pub method: &'static str,
    /// Headers the upload request must carry, in order.
    pub headers: Vec<(String, String)>,
}

/// What is known about a stored media item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaInfo {
    pub storage_ref: StorageRef,
    pub filename: String,
    pub mime_type: String,
    pub size_bytes: u64,
    pub created_at: Timestamp,
    /// When the item is deleted; `None` when it does not expire.
    pub expires_at: Option<Timestamp>,
    /// The uploader's owner pseudonym, as given in [`UploadSpec::owner`].
    pub owner: Option<String>,
}

/// A piece of a media body. It owns its buffer opaquely, so an adapter and
/// the server can pass their own buffer types through without copying.
pub struct MediaBytes(Box<dyn AsRef<[u8]> + Send + Sync>);

impl MediaBytes {
    pub fn new(owner: impl AsRef<[u8]> + Send + Sync + 'static) -> MediaBytes {
        MediaBytes(Box::new(owner))
    }
}

impl AsRef<[u8]> for MediaBytes {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl fmt::Debug for MediaBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MediaBytes({} bytes)", self.as_ref().len())
    }
}

/// A media body as it arrives or leaves: chunks, or the transport's error.
pub type MediaBody = BoxStream<'static, Result<MediaBytes, std::io::Error>>;

/// How the client gets a media item's bytes.
pub enum Download {
    /// The server streams them.
    Body { info: MediaInfo, body: MediaBody },
    /// The client fetches them from this presigned URL.
    Redirect { info: MediaInfo, url: String },
}

impl fmt::Debug for Download {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Download::Body { info, .. } => f.debug_struct("Body").field("info", info).finish(),
            Download::Redirect { info, url } => f
                .debug_struct("Redirect")
                .field("info", info)
                .field("url", url)
                .finish(),
        }
    }
}

/// Why a media operation failed. Each variant is one client-visible answer
/// (the HTTP routes map them to 404, 410, 400, 413, 415 and 500).
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// No such media item, or the backend does not serve this operation.
    #[error("not found")]
    NotFound,
    /// The item existed and its TTL has passed.
    #[error("media expired")]
    Expired,
    #[error("invalid storage reference")]
    InvalidRef,
    /// No pending upload with that id: unknown, already used, or expired.
    #[error("upload failed")]
    UploadFailed,
    /// Over the declared size or the store's limit.
    #[error("file too large")]
    TooLarge,
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// The backend failed; the detail is for logs, never for clients.
    #[error("media storage unavailable: {0}")]
    Unavailable(String),
}

/// Stores media out of band of the conversation. Implementations keep each
/// item's metadata with it, so it survives a restart, and treat an item
/// whose TTL has passed as [`MediaError::Expired`] (deleting it when they
/// like).
#[async_trait]
pub trait MediaStore: Send + Sync + 'static {
    /// Reserves a media id for `spec` and says where to send the bytes.
    /// A size over the store's limit is [`MediaError::TooLarge`]; a MIME type
    /// that cannot be a `Content-Type` is [`MediaError::UnsupportedMediaType`].
    async fn prepare_upload(&self, spec: &UploadSpec) -> Result<UploadTicket, MediaError>;

    /// Stores the body of a pending [`UploadTarget::Server`] upload, streaming
    /// it. `content_length` is the declared body length, when the transport
    /// has one, so an oversized body is refused before it is read. A body
    /// over the declared size or the limit is [`MediaError::TooLarge`] and
    /// leaves nothing stored. A backend with direct uploads answers
    /// [`MediaError::NotFound`].
    async fn write_upload(
        &self,
        upload: &MediaId,
        content_length: Option<u64>,
        body: MediaBody,
    ) -> Result<MediaInfo, MediaError>;

    /// Stores a body the server received itself (Gnosari's `POST /assets`)
    /// as a new item for `spec`, on every backend, with no pending upload
    /// between: `spec` is checked as by [`MediaStore::prepare_upload`], and
    /// the body as by [`MediaStore::write_upload`] (over `spec.size_bytes`
    /// or the limit: [`MediaError::TooLarge`]; empty:
    /// [`MediaError::UploadFailed`]; either way nothing is stored).
    async fn put(&self, spec: &UploadSpec, body: MediaBody) -> Result<MediaInfo, MediaError>;

    /// Records an [`UploadTarget::Direct`] upload the client has finished.
    async fn confirm_upload(&self, upload: &MediaId) -> Result<MediaInfo, MediaError>;

    async fn info(&self, storage_ref: &StorageRef) -> Result<MediaInfo, MediaError>;

    async fn download(&self, storage_ref: &StorageRef) -> Result<Download, MediaError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn media_ids_are_32_lowercase_hex() {
        assert!(MediaId::parse(MID).is_ok());
        assert!(MediaId::parse(&MID.to_uppercase()).is_err());
        assert!(MediaId::parse(&MID[1..]).is_err());
        assert!(MediaId::parse(&format!("{MID}0")).is_err());
        assert!(MediaId::parse("../../../../etc/passwd0000000000").is_err());
        assert_eq!(
            MediaId::from_random_bytes([0xab; 16]).as_str(),
            "ab".repeat(16)
        );
    }

    #[test]
    fn media_ids_round_trip_through_uuid_form() {
        let id = MediaId::parse(MID).unwrap();
        let uuid = id.to_uuid();
        assert_eq!(uuid, "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(MediaId::from_uuid(&uuid).unwrap(), id);
        assert_eq!(MediaId::from_uuid(&uuid.to_uppercase()).unwrap(), id);
        for bad in [
            "",
            MID,
            "01234567-89ab-cdef-0123-456789abcdeg",
            "0123456-789ab-cdef-0123-456789abcdef",
        ] {
            assert!(MediaId::from_uuid(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn storage_refs_round_trip_and_validate_both_ids() {
        let text = format!("omnia://sessions/sess-1/media/{MID}");
        let r = StorageRef::parse(&text).unwrap();
        assert_eq!(r.session.as_str(), "sess-1");
        assert_eq!(r.media.as_str(), MID);
        assert_eq!(r.to_string(), text);
        for bad in [
            String::new(),
            format!("omnia://sessions//media/{MID}"),
            format!("omnia://sessions/../media/{MID}"),
            format!("omnia://sessions/./media/{MID}"),
            format!("omnia://sessions/a/b/media/{MID}"),
            format!("s3://sessions/s/media/{MID}"),
            "omnia://sessions/s/media/..".to_owned(),
            format!("omnia://sessions/s/media/{MID}/x"),
        ] {
            assert_eq!(StorageRef::parse(&bad), Err(InvalidStorageRef), "{bad}");
        }
    }

    #[test]
    fn filenames_are_sanitised_for_content_disposition() {
        assert_eq!(sanitized_filename("photo.jpg"), "photo.jpg");
        assert_eq!(sanitized_filename("../../etc/passwd"), "passwd");
        assert_eq!(sanitized_filename("C:\\x\\a\"b;c.png"), "a_b_c.png");
        assert_eq!(sanitized_filename("caf\u{e9}\r\n.txt"), "caf___.txt");
        assert_eq!(sanitized_filename(".."), "download");
        assert_eq!(sanitized_filename(""), "download");
        assert_eq!(sanitized_filename(&"a".repeat(300)).len(), 255);
    }

    #[test]
    fn media_bytes_expose_their_owner() {
        let chunk = MediaBytes::new(vec![1u8, 2, 3]);
        assert_eq!(chunk.as_ref(), &[1, 2, 3]);
    }
}

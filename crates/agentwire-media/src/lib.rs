//! Adapters for the core's [`MediaStore`] port, on the `object_store` crate.
//!
//! One implementation, [`ObjectMediaStore`], over two backends:
//!
//! - **local** ([`ObjectMediaStore::local`]): a directory through
//!   `LocalFileSystem`. Clients upload through the server
//!   (`PUT /media/upload/{id}`), which streams the body here.
//! - **s3** ([`ObjectMediaStore::s3`], cargo feature `s3`): any S3-compatible
//!   service through `AmazonS3`. Clients upload straight to a presigned URL,
//!   confirm, and download through a presigned redirect.
//!
//! On both, a body the server received itself (Gnosari's `POST /assets`)
//! is stored at once by [`MediaStore::put`], through the same streaming
//! write as a server upload (a multipart upload on S3).
//!
//! # Layout of the store
//!
//! - `uploads/<upload-id>.json`: a pending upload (session, media id, declared
//!   name, type and size, deadline). Deleted once the upload completes.
//! - `sessions/<session-id>/<media-id>`: the bytes.
//! - `sessions/<session-id>/<media-id>.meta`: the item's metadata as JSON
//!   (filename, MIME type, size, created and expiry times), so an item
//!   survives a restart without a database.
//!
//! Every id reaching a path has been validated ([`MediaId`], and session ids
//! by the core), and `object_store` percent-encodes path parts and refuses
//! `.`/`..`, so no request can name a file outside the store.
//!
//! # Expiry
//!
//! An item expires `ttl` after its upload completes. An expired item answers
//! [`MediaError::Expired`]; its bytes are deleted when it is next touched,
//! and its small metadata object is kept so later requests still learn that
//! it expired rather than that it never existed.

mod mime;
mod records;
#[cfg(feature = "s3")]
mod s3;

use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{
    Clock, Download, MediaBody, MediaBytes, MediaError, MediaId, MediaInfo, MediaStore, StorageRef,
    Timestamp, UploadSpec, UploadTarget, UploadTicket,
};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMultipartOptions, PutPayload, WriteMultipart};

pub use mime::is_valid_mime_type;
#[cfg(feature = "s3")]
pub use s3::S3Settings;

use records::{MetaRecord, UploadRecord};

/// How long an upload URL stays valid, at most: the reference's 15 minutes,
/// or the media TTL when that is shorter.
pub const UPLOAD_URL_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a presigned download URL stays valid (the reference's 1 hour).
pub const DOWNLOAD_URL_TTL: Duration = Duration::from_secs(3600);
/// The longest filename kept; a longer one fails the upload request.
pub const MAX_FILENAME_BYTES: usize = 1024;
/// Parts of a streamed upload in flight at once.
const WRITE_CONCURRENCY: usize = 4;

/// The limits every backend applies (`storage.media.max_bytes`, `.ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaLimits {
    /// The largest item; larger uploads are refused.
    pub max_bytes: u64,
    /// How long an item lives after its upload completes.
    pub ttl: Duration,
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create media directory {path}: {source}")]
    Directory {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open object store: {0}")]
    Store(#[from] object_store::Error),
}

enum Backend {
    /// Uploads go through the server.
    Local,
    /// Uploads go to presigned URLs.
    #[cfg(feature = "s3")]
    S3(Arc<object_store::aws::AmazonS3>),
}

/// A [`MediaStore`] on an `object_store` backend.
pub struct ObjectMediaStore {
    objects: Arc<dyn ObjectStore>,
    backend: Backend,
    limits: MediaLimits,
    clock: Arc<dyn Clock>,
}

impl ObjectMediaStore {
    /// A store in the directory `dir`, created if missing.
    pub fn local(
        dir: &std::path::Path,
        limits: MediaLimits,
        clock: Arc<dyn Clock>,
    ) -> Result<ObjectMediaStore, OpenError> {
        std::fs::create_dir_all(dir).map_err(|source| OpenError::Directory {
            path: dir.display().to_string(),
            source,
        })?;
        let objects = LocalFileSystem::new_with_prefix(dir)?.with_automatic_cleanup(true);
        Ok(ObjectMediaStore {
            objects: Arc::new(objects),
            backend: Backend::Local,
            limits,
            clock,
        })
    }

    /// A store in an S3-compatible bucket.
    #[cfg(feature = "s3")]
    pub fn s3(
        settings: &S3Settings,
        limits: MediaLimits,
        clock: Arc<dyn Clock>,
    ) -> Result<ObjectMediaStore, OpenError> {
        let s3 = Arc::new(s3::build(settings)?);
        Ok(ObjectMediaStore {
            objects: s3.clone(),
            backend: Backend::S3(s3),
            limits,
            clock,
        })
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The upload URL's lifetime: 15 minutes, or the TTL when shorter.
    fn upload_ttl(&self) -> Duration {
        UPLOAD_URL_TTL.min(self.limits.ttl)
    }

    async fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &Path,
    ) -> Result<Option<T>, MediaError> {
        match self.objects.get(path).await {
            Ok(result) => {
                let bytes = result.bytes().await.map_err(unavailable)?;
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| MediaError::Unavailable(format!("corrupt record {path}: {e}")))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn write_json<T: serde::Serialize>(
        &self,
        path: &Path,
        value: &T,
    ) -> Result<(), MediaError> {
        let json = serde_json::to_vec(value).map_err(|e| MediaError::Unavailable(e.to_string()))?;
        self.objects
            .put(path, PutPayload::from(json))
            .await
            .map(drop)
            .map_err(unavailable)
    }

    /// Deletes `path`, ignoring a missing object.
    async fn delete_quietly(&self, path: &Path) {
        match self.objects.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!(%path, error = %e, "cannot delete media object"),
        }
    }

    /// The pending upload `id`, if it exists and its deadline has not passed.
    /// An expired record is deleted.
    async fn pending_upload(&self, id: &MediaId) -> Result<UploadRecord, MediaError> {
        let path = records::upload_path(id);
        let record: UploadRecord = self
            .read_json(&path)
            .await?
            .ok_or(MediaError::UploadFailed)?;
        if self.now() >= Timestamp(record.expires_at) {
            self.delete_quietly(&path).await;
            return Err(MediaError::UploadFailed);
        }
        Ok(record)
    }

    /// Checks what `spec` asks for and names a new item for it.
    fn new_item(&self, spec: &UploadSpec) -> Result<StorageRef, MediaError> {
        // A session id the core accepts may still be `.` or `..`, which
        // could not be named in a storage reference.
        agentwire_core::media::media_session_id(spec.session.as_str())
            .map_err(|_| MediaError::InvalidRef)?;
        if spec.size_bytes > self.limits.max_bytes {
            return Err(MediaError::TooLarge);
        }
        if !is_valid_mime_type(&spec.mime_type) {
            return Err(MediaError::UnsupportedMediaType);
        }
        if spec.filename.is_empty() || spec.filename.len() > MAX_FILENAME_BYTES {
            return Err(MediaError::UploadFailed);
        }
        let id = MediaId::from_random_bytes(*uuid::Uuid::new_v4().as_bytes());
        Ok(StorageRef::new(spec.session.clone(), id))
    }

    /// Makes an item whose bytes are stored live: writes its metadata, with
    /// the TTL starting now.
    async fn record_item(
        &self,
        storage_ref: StorageRef,
        filename: String,
        mime_type: String,
        owner: Option<String>,
        size: u64,
    ) -> Result<MediaInfo, MediaError> {
        let created_at = self.now();
        let meta = MetaRecord {
            filename,
            mime_type,
            size_bytes: size,
            created_at: created_at.unix_nanos(),
            expires_at: Some(created_at.plus(self.limits.ttl).unix_nanos()),
            owner,
        };
        self.write_json(&records::meta_path(&storage_ref), &meta)
            .await?;
        Ok(meta.into_info(storage_ref))
    }

    /// Records the finished upload: writes its metadata and drops the
    /// pending record.
    async fn complete(
        &self,
        id: &MediaId,
        record: UploadRecord,
        size: u64,
    ) -> Result<MediaInfo, MediaError> {
        let storage_ref = record.storage_ref()?;
        let info = self
            .record_item(
                storage_ref,
                record.filename,
                record.mime_type,
                record.owner,
                size,
            )
            .await?;
        self.delete_quietly(&records::upload_path(id)).await;
        Ok(info)
    }

    /// How an object of type `mime_type` is written: S3 keeps the type on
    /// the object, as a direct upload's bound `Content-Type` does; the local
    /// file system keeps no attributes (and refuses them).
    #[cfg_attr(
        not(feature = "s3"),
        expect(unused_variables, reason = "only S3 objects keep a type")
    )]
    fn write_options(&self, mime_type: &str) -> PutMultipartOptions {
        match &self.backend {
            Backend::Local => PutMultipartOptions::default(),
            #[cfg(feature = "s3")]
            Backend::S3(_) => s3::typed(mime_type),
        }
    }

    /// The metadata of a live item. Expired items answer `Expired` and lose
    /// their bytes.
    async fn live_meta(&self, storage_ref: &StorageRef) -> Result<MetaRecord, MediaError> {
        let meta: MetaRecord = self
            .read_json(&records::meta_path(storage_ref))
            .await?
            .ok_or(MediaError::NotFound)?;
        if let Some(expires_at) = meta.expires_at
            && self.now() >= Timestamp(expires_at)
        {
            self.delete_quietly(&records::data_path(storage_ref)).await;
            return Err(MediaError::Expired);
        }
        Ok(meta)
    }

    /// Streams `body` into `path`, refusing more than `limit` bytes. On any
    /// failure the partial object is removed.
    async fn stream_into(
        &self,
        path: &Path,
        limit: u64,
        options: PutMultipartOptions,
        mut body: MediaBody,
    ) -> Result<u64, MediaError> {
        let upload = self
            .objects
            .put_multipart_opts(path, options)
            .await
            .map_err(unavailable)?;
        let mut writer = WriteMultipart::new(upload);
        let mut written: u64 = 0;
        let failure = loop {
            let chunk = match body.next().await {
                None => break None,
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "upload body ended early");
                    break Some(MediaError::UploadFailed);
                }
            };
            written = written.saturating_add(chunk.as_ref().len() as u64);
            if written > limit {
                break Some(MediaError::TooLarge);
            }
            if let Err(e) = writer.wait_for_capacity(WRITE_CONCURRENCY).await {
                break Some(unavailable(e));
            }
            writer.put(Bytes::from_owner(chunk));
        };
        if written == 0 && failure.is_none() {
            let _ = writer.abort().await;
            return Err(MediaError::UploadFailed);
        }
        match failure {
            Some(error) => {
                if let Err(e) = writer.abort().await {
                    tracing::warn!(%path, error = %e, "cannot abort a failed upload");
                }
                Err(error)
            }
            None => {
                writer.finish().await.map_err(unavailable)?;
                Ok(written)
            }
        }
    }
}

#[async_trait]
impl MediaStore for ObjectMediaStore {
    async fn prepare_upload(&self, spec: &UploadSpec) -> Result<UploadTicket, MediaError> {
        let storage_ref = self.new_item(spec)?;
        let id = storage_ref.media.clone();
        let ttl = self.upload_ttl();
        let expires_at = self.now().plus(ttl);
        let record = UploadRecord {
            session: spec.session.as_str().to_owned(),
            media: id.as_str().to_owned(),
            filename: spec.filename.clone(),
            mime_type: spec.mime_type.clone(),
            size_bytes: spec.size_bytes,
            expires_at: expires_at.unix_nanos(),
            owner: spec.owner.clone(),
        };
        self.write_json(&records::upload_path(&id), &record).await?;
        let target = match &self.backend {
            Backend::Local => UploadTarget::Server,
            #[cfg(feature = "s3")]
            Backend::S3(s3) => UploadTarget::Direct {
                url: s3::presign_put(s3, &records::data_path(&storage_ref), ttl, &spec.mime_type)
                    .await?,
            },
        };
        Ok(UploadTicket {
            upload_id: id,
            target,
            storage_ref,
            expires_at,
            method: "PUT",
            headers: vec![("Content-Type".to_owned(), spec.mime_type.clone())],
        })
    }

    async fn write_upload(
        &self,
        upload: &MediaId,
        content_length: Option<u64>,
        body: MediaBody,
    ) -> Result<MediaInfo, MediaError> {
        if !matches!(self.backend, Backend::Local) {
            return Err(MediaError::NotFound);
        }
        let record = self.pending_upload(upload).await?;
        let limit = record.size_bytes.min(self.limits.max_bytes);
        if content_length.is_some_and(|length| length > limit) {
            return Err(MediaError::TooLarge);
        }
        let storage_ref = record.storage_ref()?;
        let options = self.write_options(&record.mime_type);
        let size = self
            .stream_into(&records::data_path(&storage_ref), limit, options, body)
            .await?;
        self.complete(upload, record, size).await
    }

    async fn put(&self, spec: &UploadSpec, body: MediaBody) -> Result<MediaInfo, MediaError> {
        let storage_ref = self.new_item(spec)?;
        let data = records::data_path(&storage_ref);
        let limit = spec.size_bytes.min(self.limits.max_bytes);
        let options = self.write_options(&spec.mime_type);
        let size = self.stream_into(&data, limit, options, body).await?;
        let recorded = self
            .record_item(
                storage_ref,
                spec.filename.clone(),
                spec.mime_type.clone(),
                spec.owner.clone(),
                size,
            )
            .await;
        if recorded.is_err() {
            // Bytes without metadata would never be served: drop them.
            self.delete_quietly(&data).await;
        }
        recorded
    }

    async fn confirm_upload(&self, upload: &MediaId) -> Result<MediaInfo, MediaError> {
        if matches!(self.backend, Backend::Local) {
            return Err(MediaError::NotFound);
        }
        let record = self.pending_upload(upload).await?;
        let storage_ref = record.storage_ref()?;
        let data = records::data_path(&storage_ref);
        let size = match self.objects.head(&data).await {
            Ok(meta) => meta.size,
            Err(object_store::Error::NotFound { .. }) => return Err(MediaError::UploadFailed),
            Err(e) => return Err(unavailable(e)),
        };
        if size > record.size_bytes.min(self.limits.max_bytes) {
            self.delete_quietly(&data).await;
            return Err(MediaError::TooLarge);
        }
        if size == 0 {
            self.delete_quietly(&data).await;
            return Err(MediaError::UploadFailed);
        }
        self.complete(upload, record, size).await
    }

    async fn info(&self, storage_ref: &StorageRef) -> Result<MediaInfo, MediaError> {
        Ok(self
            .live_meta(storage_ref)
            .await?
            .into_info(storage_ref.clone()))
    }

    async fn download(&self, storage_ref: &StorageRef) -> Result<Download, MediaError> {
        let info = self
            .live_meta(storage_ref)
            .await?
            .into_info(storage_ref.clone());
        let data = records::data_path(storage_ref);
        match &self.backend {
            Backend::Local => {
                let result = match self.objects.get(&data).await {
                    Ok(result) => result,
                    Err(object_store::Error::NotFound { .. }) => return Err(MediaError::NotFound),
                    Err(e) => return Err(unavailable(e)),
                };
                let body = result
                    .into_stream()
                    .map(|chunk| {
                        chunk
                            .map(MediaBytes::new)
                            .map_err(|e| std::io::Error::other(e.to_string()))
                    })
                    .boxed();
                Ok(Download::Body { info, body })
            }
            #[cfg(feature = "s3")]
            Backend::S3(s3) => {
                let url = s3::presign_get(s3, &data, DOWNLOAD_URL_TTL, &info).await?;
                Ok(Download::Redirect { info, url })
            }
        }
    }
}

fn unavailable(e: object_store::Error) -> MediaError {
    MediaError::Unavailable(e.to_string())
}

#[cfg(test)]
mod tests;

//! `storage.media`: where uploaded media lives, how big and how long.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// Validated `storage.media`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaConfig {
    pub backend: MediaBackend,
    /// The largest item a client may upload.
    pub max_bytes: u64,
    /// How long an item lives after its upload.
    pub ttl: Duration,
}

impl Default for MediaConfig {
    fn default() -> MediaConfig {
        MediaConfig {
            backend: MediaBackend::None,
            max_bytes: DEFAULT_MAX_BYTES,
            ttl: DEFAULT_TTL,
        }
    }
}

/// 100 MB, the reference's maximum file size.
pub const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;
/// 24 h, the reference's media TTL.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaBackend {
    /// Media storage is off: `upload_request` answers `MEDIA_NOT_ENABLED`.
    None,
    /// A directory on this machine.
    Local { path: PathBuf },
    /// An S3-compatible bucket. Credentials come from the environment.
    S3 {
        /// `None`: AWS.
        endpoint: Option<String>,
        bucket: String,
        /// `None`: `AWS_REGION`, `AWS_DEFAULT_REGION`, or `us-east-1`.
        region: Option<String>,
    },
}

/// `storage.media`: where uploaded media lives, how big and how long.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawMedia {
    /// Media storage: `none` (off: uploads answer `MEDIA_NOT_ENABLED`), `local` (a directory) or `s3` (an S3-compatible bucket; cargo feature `s3`).
    backend: BackendKind,
    /// `local`: the directory media is stored in; required, created if missing. An error with `s3`.
    path: Option<String>,
    /// `s3`: the S3-compatible endpoint URL (`http://` or `https://`); omit for AWS. An error with `local`.
    endpoint: Option<String>,
    /// `s3`: the bucket; required, and it must exist. Credentials come from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`), never from this file.
    bucket: Option<String>,
    /// `s3`: the region. Default: `AWS_REGION`, then `AWS_DEFAULT_REGION`, then `us-east-1`.
    region: Option<String>,
    /// The largest upload in bytes; larger ones answer 413 / `UPLOAD_FAILED`.
    max_bytes: u64,
    /// How long an item lives after its upload; then 410 `media expired`.
    ttl: ConfigDuration,
}

impl Default for RawMedia {
    fn default() -> RawMedia {
        RawMedia {
            backend: BackendKind::None,
            path: None,
            endpoint: None,
            bucket: None,
            region: None,
            max_bytes: DEFAULT_MAX_BYTES,
            ttl: ConfigDuration(DEFAULT_TTL),
        }
    }
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum BackendKind {
    None,
    Local,
    S3,
}

fn key(field: &str) -> String {
    format!("storage.media.{field}")
}

/// Keys of another backend are errors, so a half-edited config does not
/// silently use the wrong store. With `none` they are ignored, so a backend
/// can be switched off by changing one line.
pub(super) fn validate(raw: RawMedia) -> Result<MediaConfig, ConfigError> {
    if raw.max_bytes == 0 {
        return Err(ConfigError::new(key("max_bytes"), "must be greater than 0"));
    }
    if raw.ttl.0.is_zero() {
        return Err(ConfigError::new(key("ttl"), "must be greater than 0"));
    }
    let only_for = |field: &str, value: &Option<String>, backend: &str| match value {
        Some(_) => Err(ConfigError::new(
            key(field),
            format!("only used with storage.media.backend {backend}"),
        )),
        None => Ok(()),
    };
    let backend = match raw.backend {
        BackendKind::None => MediaBackend::None,
        BackendKind::Local => {
            only_for("endpoint", &raw.endpoint, "s3")?;
            only_for("bucket", &raw.bucket, "s3")?;
            only_for("region", &raw.region, "s3")?;
            match raw.path {
                Some(path) if !path.is_empty() => MediaBackend::Local {
                    path: PathBuf::from(path),
                },
                _ => {
                    return Err(ConfigError::new(
                        key("path"),
                        "required when storage.media.backend is local",
                    ));
                }
            }
        }
        BackendKind::S3 => {
            if !cfg!(feature = "s3") {
                return Err(ConfigError::new(
                    key("backend"),
                    "s3 is not built into this binary (cargo feature `s3`)",
                ));
            }
            only_for("path", &raw.path, "local")?;
            if let Some(endpoint) = &raw.endpoint
                && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
            {
                return Err(ConfigError::new(
                    key("endpoint"),
                    "must start with http:// or https://",
                ));
            }
            let bucket = match raw.bucket {
                Some(bucket) if !bucket.is_empty() => bucket,
                _ => {
                    return Err(ConfigError::new(
                        key("bucket"),
                        "required when storage.media.backend is s3",
                    ));
                }
            };
            if raw.region.as_deref() == Some("") {
                return Err(ConfigError::new(key("region"), "must not be empty"));
            }
            MediaBackend::S3 {
                endpoint: raw.endpoint,
                bucket,
                region: raw.region,
            }
        }
    };
    Ok(MediaConfig {
        backend,
        max_bytes: raw.max_bytes,
        ttl: raw.ttl.0,
    })
}

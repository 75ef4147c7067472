//! The S3-compatible backend: object_store's `AmazonS3` on reqwest with
//! rustls on ring, and presigned URLs for uploads and downloads.

use std::time::Duration;

use agentwire_core::media::sanitized_filename;
use agentwire_core::{MediaError, MediaInfo};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::signer::{HeaderValue, Method, SignedUrlOptions, Signer};
use object_store::{
    Attribute, Attributes, BackoffConfig, ClientOptions, PutMultipartOptions, RetryConfig,
};

/// Where the bucket is and how to reach it (`storage.media.*` plus the AWS
/// credentials from the environment).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// `None`: AWS itself. `http://` endpoints are allowed (local S3 servers).
    pub endpoint: Option<String>,
    pub bucket: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    /// For temporary credentials (`AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Settings {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Requests to the store give up after this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A failed request is retried at most this often, and never once this
/// long has passed since the first try: the store's own default (10 retries
/// within 3 minutes) kept an upload's client waiting minutes for an answer
/// while the store was down.
const MAX_RETRIES: usize = 3;
const RETRY_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn build(settings: &S3Settings) -> Result<AmazonS3, object_store::Error> {
    // reqwest is built with rustls but no bundled crypto provider (so that
    // aws-lc-rs, which needs cmake, stays out of the build): the process
    // installs one before any store is opened (the binary, in `main`).
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(&settings.bucket)
        .with_region(&settings.region)
        .with_access_key_id(&settings.access_key_id)
        .with_secret_access_key(&settings.secret_access_key)
        .with_client_options(
            ClientOptions::new()
                .with_timeout(REQUEST_TIMEOUT)
                .with_connect_timeout(CONNECT_TIMEOUT),
        )
        .with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        });
    if let Some(token) = &settings.session_token {
        builder = builder.with_token(token);
    }
    if let Some(endpoint) = &settings.endpoint {
        builder = builder
            .with_endpoint(endpoint.trim_end_matches('/'))
            .with_allow_http(endpoint.starts_with("http://"));
    }
    builder.build()
}

/// Writes an object with `mime_type` as its `Content-Type`.
pub(crate) fn typed(mime_type: &str) -> PutMultipartOptions {
    PutMultipartOptions {
        attributes: Attributes::from_iter([(Attribute::ContentType, mime_type.to_owned())]),
        ..PutMultipartOptions::default()
    }
}

/// Presigned URLs are valid for whole seconds, at least one.
fn whole_seconds(ttl: Duration) -> Duration {
    Duration::from_secs(ttl.as_secs_f64().ceil().max(1.0) as u64)
}

/// A presigned PUT that binds the `Content-Type` the client was told to send.
pub(crate) async fn presign_put(
    s3: &AmazonS3,
    path: &Path,
    ttl: Duration,
    mime_type: &str,
) -> Result<String, MediaError> {
    let content_type =
        HeaderValue::from_str(mime_type).map_err(|_| MediaError::UnsupportedMediaType)?;
    let options = SignedUrlOptions::new().with_signed_header(
        object_store::signer::HeaderName::from_static("content-type"),
        content_type,
    );
    s3.signed_url_opts(Method::PUT, path, whole_seconds(ttl), &options)
        .await
        .map(String::from)
        .map_err(|e| MediaError::Unavailable(e.to_string()))
}

/// A presigned GET whose response carries the item's type and an inline
/// disposition with its (sanitised) filename.
pub(crate) async fn presign_get(
    s3: &AmazonS3,
    path: &Path,
    ttl: Duration,
    info: &MediaInfo,
) -> Result<String, MediaError> {
    let disposition = format!(
        "inline; filename=\"{}\"",
        sanitized_filename(&info.filename)
    );
    let options = SignedUrlOptions::new().with_query([
        ("response-content-type", info.mime_type.as_str()),
        ("response-content-disposition", disposition.as_str()),
    ]);
    s3.signed_url_opts(Method::GET, path, whole_seconds(ttl), &options)
        .await
        .map(String::from)
        .map_err(|e| MediaError::Unavailable(e.to_string()))
}

//! The JWKS: read from a file once, or fetched from a URL (directly or through
//! OIDC discovery) when first needed, cached, and refetched when a token names
//! an unknown `kid` or the cache is old, never more often than `min_refresh`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::auth::AuthError;
use parking_lot::Mutex;
use reqwest::Url;
use serde::Deserialize;

use crate::jwk::{Jwk, parse_jwks};

/// Each request (connect, headers, body) must finish within this.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A JWKS or discovery document over this size is refused.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Keys older than this are refetched on next use (so a key removed from the
/// set stops being accepted); if that fetch fails the old keys are kept.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// Where the keys come from.
enum Origin {
    /// A file, read at build time; never refetched.
    Static,
    Url(Url),
    Discovery {
        /// `<issuer>/.well-known/openid-configuration`.
        configuration: Url,
        /// The discovered `jwks_uri`, until a fetch from it fails.
        jwks_uri: Mutex<Option<Url>>,
    },
}

#[derive(Default)]
struct State {
    /// `None` until a fetch succeeded.
    keys: Option<Arc<[Jwk]>>,
    /// When the keys were fetched.
    fetched_at: Option<Instant>,
    /// When a fetch was last attempted, successful or not.
    attempted_at: Option<Instant>,
}

pub(crate) struct Jwks {
    origin: Origin,
    /// Named in logs.
    issuer: String,
    http: Option<reqwest::Client>,
    min_refresh: Duration,
    state: Mutex<State>,
    /// Held while fetching, so concurrent misses make one fetch.
    fetching: tokio::sync::Mutex<()>,
}

impl Jwks {
    /// Reads and parses a JWKS file; errors name the file.
    pub(crate) fn from_file(path: &Path, issuer: &str) -> Result<Jwks, String> {
        let document = std::fs::read(path)
            .map_err(|e| format!("cannot read the JWKS file {}: {e}", path.display()))?;
        let keys = parse_jwks(&document)
            .map_err(|reason| format!("the JWKS file {}: {reason}", path.display()))?;
        if keys.is_empty() {
            return Err(format!(
                "the JWKS file {} has no usable signature key (RS256, ES256 or EdDSA)",
                path.display()
            ));
        }
        Ok(Jwks {
            origin: Origin::Static,
            issuer: issuer.to_owned(),
            http: None,
            min_refresh: Duration::ZERO,
            state: Mutex::new(State {
                keys: Some(keys.into()),
                fetched_at: None,
                attempted_at: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn from_url(url: &str, issuer: &str, min_refresh: Duration) -> Result<Jwks, String> {
        let url = parse_http_url(url).map_err(|reason| format!("the JWKS URL {reason}"))?;
        Jwks::fetched(Origin::Url(url), issuer, min_refresh)
    }

    pub(crate) fn from_discovery(
        discovery_issuer: &str,
        issuer: &str,
        min_refresh: Duration,
    ) -> Result<Jwks, String> {
        let base = discovery_issuer.trim_end_matches('/');
        let configuration = parse_http_url(&format!("{base}/.well-known/openid-configuration"))
            .map_err(|reason| format!("the OIDC issuer URL {reason}"))?;
        Jwks::fetched(
            Origin::Discovery {
                configuration,
                jwks_uri: Mutex::new(None),
            },
            issuer,
            min_refresh,
        )
    }

    fn fetched(origin: Origin, issuer: &str, min_refresh: Duration) -> Result<Jwks, String> {
        // reqwest is built with rustls but no bundled crypto provider (no
        // aws-lc-rs, so no cmake): the process installs one before this
        // client is built (the binary does, in `main`).
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| format!("cannot build the HTTP client for the JWKS: {e}"))?;
        Ok(Jwks {
            origin,
            issuer: issuer.to_owned(),
            http: Some(http),
            min_refresh,
            state: Mutex::new(State::default()),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The key set to verify a token naming `kid` with: the cached set if it
    /// is fresh and (when `kid` is given) holds `kid`, else a refetched one
    /// when the refresh bound allows, else the cached one (on which the
    /// caller finds `kid` unknown).
    pub(crate) async fn keys_for(&self, kid: Option<&str>) -> Result<Arc<[Jwk]>, AuthError> {
        if let Some(keys) = self.usable(kid) {
            return Ok(keys);
        }
        let _fetching = self.fetching.lock().await;
        // Someone may have fetched while this task waited.
        if let Some(keys) = self.usable(kid) {
            return Ok(keys);
        }
        let (current, may_fetch) = {
            let mut state = self.state.lock();
            let now = Instant::now();
            let may_fetch = self.http.is_some()
                && state
                    .attempted_at
                    .is_none_or(|at| now.duration_since(at) >= self.min_refresh);
            if may_fetch {
                state.attempted_at = Some(now);
            }
            (state.keys.clone(), may_fetch)
        };
        if !may_fetch {
            return match current {
                Some(keys) => {
                    if kid.is_some() {
                        tracing::debug!(issuer = %self.issuer, kid = ?kid, "unknown kid; JWKS refetch skipped (refreshed recently)");
                    }
                    Ok(keys)
                }
                None => Err(AuthError::Unavailable),
            };
        }
        match self.fetch().await {
            Ok(keys) => {
                let keys: Arc<[Jwk]> = keys.into();
                tracing::debug!(issuer = %self.issuer, keys = keys.len(), "JWKS fetched");
                let mut state = self.state.lock();
                state.keys = Some(keys.clone());
                state.fetched_at = Some(Instant::now());
                Ok(keys)
            }
            Err(reason) => {
                tracing::warn!(issuer = %self.issuer, reason, "JWKS fetch failed");
                // Stale keys that know the kid beat refusing everyone.
                match current {
                    Some(keys) if kid.is_none_or(|kid| contains(&keys, kid)) => Ok(keys),
                    _ => Err(AuthError::Unavailable),
                }
            }
        }
    }

    /// The cached set, if it can answer for `kid` without a fetch.
    fn usable(&self, kid: Option<&str>) -> Option<Arc<[Jwk]>> {
        let state = self.state.lock();
        let keys = state.keys.as_ref()?;
        let fresh = match &self.origin {
            Origin::Static => true,
            _ => state.fetched_at.is_some_and(|at| at.elapsed() < MAX_AGE),
        };
        let knows_kid = kid.is_none_or(|kid| contains(keys, kid));
        // A static set never changes: whatever it says is final.
        (matches!(self.origin, Origin::Static) || (fresh && knows_kid)).then(|| keys.clone())
    }

    /// Fetches the set; the error is a reason to log (no URL, no body).
    async fn fetch(&self) -> Result<Vec<Jwk>, String> {
        let Some(http) = &self.http else {
            return Err("no HTTP client".to_owned());
        };
        let url = match &self.origin {
            Origin::Static => return Err("a JWKS file is never refetched".to_owned()),
            Origin::Url(url) => url.clone(),
            Origin::Discovery {
                configuration,
                jwks_uri,
            } => {
                let cached = jwks_uri.lock().clone();
                match cached {
                    Some(url) => url,
                    None => {
                        let url = discover(http, configuration).await?;
                        *jwks_uri.lock() = Some(url.clone());
                        url
                    }
                }
            }
        };
        let result = async {
            let document = get(http, &url).await?;
            parse_jwks(&document)
        }
        .await;
        if result.is_err()
            && let Origin::Discovery { jwks_uri, .. } = &self.origin
        {
            // The provider may have moved its keys: discover again next time.
            *jwks_uri.lock() = None;
        }
        result
    }
}

fn contains(keys: &[Jwk], kid: &str) -> bool {
    keys.iter().any(|key| key.kid.as_deref() == Some(kid))
}

#[derive(Deserialize)]
struct Discovery {
    jwks_uri: String,
}

async fn discover(http: &reqwest::Client, configuration: &Url) -> Result<Url, String> {
    let document = get(http, configuration)
        .await
        .map_err(|reason| format!("OIDC discovery: {reason}"))?;
    let discovery: Discovery = serde_json::from_slice(&document)
        .map_err(|_| "OIDC discovery: no `jwks_uri` in the document".to_owned())?;
    parse_http_url(&discovery.jwks_uri)
        .map_err(|reason| format!("OIDC discovery: jwks_uri {reason}"))
}

/// GETs `url`, at most [`MAX_DOCUMENT_BYTES`], within [`FETCH_TIMEOUT`].
async fn get(http: &reqwest::Client, url: &Url) -> Result<Vec<u8>, String> {
    let mut response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(request_error)?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("HTTP status {}", status.as_u16()));
    }
    if response
        .content_length()
        .is_some_and(|length| length > MAX_DOCUMENT_BYTES as u64)
    {
        return Err("document over 1 MiB".to_owned());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(request_error)? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err("document over 1 MiB".to_owned());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn request_error(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "connection failed".to_owned()
    } else if e.is_redirect() {
        "too many redirects".to_owned()
    } else {
        "request failed".to_owned()
    }
}

/// An `http` or `https` URL with a host. The reason never repeats the URL.
fn parse_http_url(url: &str) -> Result<Url, &'static str> {
    let parsed = Url::parse(url).map_err(|_| "is not a valid URL")?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must be http or https");
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("has no host");
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_validated() {
        assert!(parse_http_url("https://idp.example.com/jwks").is_ok());
        assert!(parse_http_url("http://127.0.0.1:8080/jwks").is_ok());
        assert_eq!(
            parse_http_url("ftp://x/jwks").unwrap_err(),
            "must be http or https"
        );
        assert_eq!(
            parse_http_url("not a url").unwrap_err(),
            "is not a valid URL"
        );
        assert_eq!(
            parse_http_url("file:///etc/jwks").unwrap_err(),
            "must be http or https"
        );
    }

    #[test]
    fn discovery_url_is_under_the_issuer() {
        // The key set's HTTP client needs what the binary's `main` installs.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let jwks = Jwks::from_discovery("https://idp.example.com/realms/a/", "iss", Duration::ZERO)
            .unwrap();
        let Origin::Discovery { configuration, .. } = &jwks.origin else {
            panic!("not discovery");
        };
        assert_eq!(
            configuration.as_str(),
            "https://idp.example.com/realms/a/.well-known/openid-configuration"
        );
    }

    #[test]
    fn missing_file_is_named() {
        let err = Jwks::from_file(Path::new("/nonexistent/jwks.json"), "iss")
            .err()
            .unwrap();
        assert!(err.contains("/nonexistent/jwks.json"), "{err}");
    }
}

//! The shared HTTP side: the pooled client, the endpoint URL, and a POST
//! whose streamed SSE body is read with a first-token deadline and an idle
//! timeout around every read.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use tokio::time::Instant;

use crate::retry::{Fault, Policy};
use crate::sse::{SseEvent, SseParser};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every HTTP provider shares.
pub(crate) struct HttpSettings {
    pub client: reqwest::Client,
    pub timeouts: Timeouts,
    pub policy: Policy,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub first_token: Duration,
    pub idle: Duration,
}

/// One client per provider, so connections are pooled across requests. No
/// overall timeout: streams are bounded per read instead.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    // reqwest is built with rustls but no bundled crypto provider (so that
    // aws-lc-rs, which needs cmake, stays out of the build): the process
    // installs one before any provider is built (the binary, in `main`).
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// `base_url` (or `default` when empty) joined with `path`, checked.
pub(crate) fn endpoint(base_url: &str, default: &str, path: &str) -> Result<String, String> {
    let base = base_url.trim();
    let base = if base.is_empty() { default } else { base };
    // The URL itself is not repeated: it could carry credentials.
    let url = reqwest::Url::parse(base).map_err(|e| format!("is not a valid URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or fragment".to_owned());
    }
    Ok(format!("{}/{path}", base.trim_end_matches('/')))
}

/// A header value holding a secret: marked sensitive so that it is never
/// printed. The error does not repeat the value.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, String> {
    let mut header =
        HeaderValue::from_str(value).map_err(|_| "is not a valid HTTP header value".to_owned())?;
    header.set_sensitive(true);
    Ok(header)
}

/// `Retry-After` in seconds (integer or decimal). HTTP dates are ignored.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let secs: f64 = value.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Sends `request` (a POST with a JSON body) and opens its SSE body. The
/// first-token deadline starts now and covers the response head and the
/// first bytes of the body. A non-success status is a fault; its body is
/// never read.
pub(crate) async fn open(
    request: reqwest::RequestBuilder,
    body: Bytes,
    timeouts: Timeouts,
) -> Result<SseStream, Fault> {
    let deadline = Instant::now() + timeouts.first_token;
    let request = request
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(body);
    let response = match tokio::time::timeout_at(deadline, request.send()).await {
        Err(_) => return Err(Fault::FirstTokenTimeout(timeouts.first_token)),
        Ok(Err(e)) if e.is_builder() => return Err(Fault::Unreadable("invalid request")),
        Ok(Err(e)) => {
            tracing::debug!(error = %e.without_url(), "model request not sent");
            return Err(Fault::Unreachable);
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        return Err(Fault::Status {
            status: status.as_u16(),
            retry_after: retry_after(response.headers()),
        });
    }
    Ok(SseStream {
        body: Box::pin(response.bytes_stream()),
        parser: SseParser::new(),
        pending: VecDeque::new(),
        deadline,
        started: false,
        ended: false,
        timeouts,
    })
}

/// The events of a streamed body.
pub(crate) struct SseStream {
    body: ByteStream,
    parser: SseParser,
    pending: VecDeque<SseEvent>,
    deadline: Instant,
    /// Whether any byte of the body arrived.
    started: bool,
    ended: bool,
    timeouts: Timeouts,
}

impl SseStream {
    /// A body already in memory, delivered in `pieces`, under the same
    /// timeouts: the stream decoders without a socket (`crate::fuzzing`).
    pub(crate) fn from_pieces(pieces: Vec<Bytes>, timeouts: Timeouts) -> SseStream {
        SseStream {
            body: Box::pin(futures_util::stream::iter(pieces.into_iter().map(Ok))),
            parser: SseParser::new(),
            pending: VecDeque::new(),
            deadline: Instant::now() + timeouts.first_token,
            started: false,
            ended: false,
            timeouts,
        }
    }

    /// Takes what is already buffered after the stream's end marker without
    /// waiting, so that a body that has in fact ended frees its connection
    /// for the pool.
    pub fn close(mut self) {
        while let Some(Some(Ok(_))) = self.body.next().now_or_never() {}
    }

    /// The next event; `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, Fault> {
        let mut events = Vec::new();
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            let read = if self.started {
                tokio::time::timeout(self.timeouts.idle, self.body.next())
                    .await
                    .map_err(|_| Fault::Stalled(self.timeouts.idle))?
            } else {
                tokio::time::timeout_at(self.deadline, self.body.next())
                    .await
                    .map_err(|_| Fault::FirstTokenTimeout(self.timeouts.first_token))?
            };
            match read {
                Some(Ok(bytes)) => {
                    if !bytes.is_empty() {
                        self.started = true;
                    }
                    self.parser.push(&bytes, &mut events);
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e.without_url(), "model stream broke off");
                    return Err(Fault::Interrupted);
                }
                None => {
                    self.ended = true;
                    self.parser.finish(&mut events);
                }
            }
            self.pending.extend(events.drain(..));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_join_and_validate() {
        assert_eq!(
            endpoint("http://localhost:11434/v1/", "x", "chat/completions").unwrap(),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(
            endpoint("", "https://api.anthropic.com", "v1/messages").unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        assert!(endpoint("localhost:8080", "x", "p").is_err());
        assert!(endpoint("http://h/v1?key=1", "x", "p").is_err());
    }

    #[test]
    fn retry_after_reads_seconds() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(500)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn secret_headers_are_sensitive_and_errors_do_not_echo() {
        assert!(secret_header("Bearer sk-x").unwrap().is_sensitive());
        let err = secret_header("sk-SECRET\n").unwrap_err();
        assert!(!err.contains("SECRET"));
    }
}

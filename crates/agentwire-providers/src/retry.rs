//! Faults, their classification into [`ProviderErrorKind`]s and the retry
//! loop with exponential backoff.

use std::future::Future;
use std::time::Duration;

use agentwire_core::{ModelReply, ProviderError, ProviderErrorKind};

/// What went wrong in one attempt. Carries no response body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fault {
    /// A non-success HTTP status (with a 429's `Retry-After`, if any).
    Status {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// No connection, or it failed before a response.
    Unreachable,
    /// The body broke off, or ended before the stream's end marker.
    Interrupted,
    /// Nothing within the first-token timeout.
    FirstTokenTimeout(Duration),
    /// Silence for the idle timeout after the body started.
    Stalled(Duration),
    /// The stream was not in the expected format.
    Unreadable(&'static str),
    /// The provider reported an error inside the stream. `label` is its
    /// sanitised error type, never its message.
    Remote {
        kind: ProviderErrorKind,
        retryable: bool,
        label: String,
    },
}

/// A failed attempt, and whether text already reached the sink (which rules
/// out a retry).
#[derive(Debug)]
pub(crate) struct Failure {
    pub fault: Fault,
    pub streamed: bool,
}

impl Failure {
    /// A failure before anything was streamed.
    pub fn early(fault: Fault) -> Failure {
        Failure {
            fault,
            streamed: false,
        }
    }
}

impl Fault {
    fn retryable(&self) -> bool {
        match self {
            // 529: Anthropic's "overloaded".
            Fault::Status { status, .. } => matches!(status, 429 | 502 | 503 | 504 | 529),
            Fault::Unreachable | Fault::Interrupted => true,
            Fault::Remote { retryable, .. } => *retryable,
            Fault::FirstTokenTimeout(_) | Fault::Stalled(_) | Fault::Unreadable(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Fault::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The provider type and model errors name, and how to retry.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    pub provider: &'static str,
    pub model: String,
    pub max_retries: u32,
    pub backoff: Duration,
    pub max_delay: Duration,
}

fn attempts(n: u32) -> String {
    if n == 1 {
        "after 1 attempt".to_owned()
    } else {
        format!("after {n} attempts")
    }
}

impl Policy {
    /// `body` as the bytes of a JSON request.
    pub(crate) fn json_body(
        &self,
        body: &serde_json::Value,
    ) -> Result<bytes::Bytes, ProviderError> {
        serde_json::to_vec(body)
            .map(bytes::Bytes::from)
            .map_err(|_| self.error(ProviderErrorKind::Failed, "request not serialisable"))
    }

    /// The wait before retry `retry` (0-based).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let delay = match retry_after {
            Some(after) => after,
            None => self
                .backoff
                .checked_mul(2u32.saturating_pow(retry))
                .unwrap_or(Duration::MAX),
        };
        delay.min(self.max_delay)
    }

    pub fn error(&self, kind: ProviderErrorKind, what: &str) -> ProviderError {
        ProviderError::new(
            kind,
            format!("provider {} model {}: {what}", self.provider, self.model),
        )
    }

    fn classify(&self, fault: &Fault, tries: u32) -> ProviderError {
        use ProviderErrorKind as K;
        match fault {
            Fault::Status { status: 429, .. } => self.error(
                K::RateLimited,
                &format!("rate limited (HTTP 429) {}", attempts(tries)),
            ),
            Fault::Status {
                status: status @ (502 | 503 | 504 | 529),
                ..
            } => self.error(
                K::Unavailable,
                &format!("unavailable (HTTP {status}) {}", attempts(tries)),
            ),
            Fault::Status {
                status: status @ 500..=599,
                ..
            } => self.error(K::Unavailable, &format!("server error (HTTP {status})")),
            Fault::Status {
                status: status @ (401 | 403),
                ..
            } => self.error(
                K::AuthFailed,
                &format!("authentication failed (HTTP {status})"),
            ),
            Fault::Status { status, .. } => {
                self.error(K::Failed, &format!("request rejected (HTTP {status})"))
            }
            Fault::Unreachable => {
                self.error(K::Unavailable, &format!("unreachable {}", attempts(tries)))
            }
            Fault::Interrupted => self.error(
                K::Unavailable,
                &format!("stream interrupted {}", attempts(tries)),
            ),
            Fault::FirstTokenTimeout(after) => {
                self.error(K::Timeout, &format!("no response within {after:?}"))
            }
            Fault::Stalled(after) => {
                self.error(K::Stalled, &format!("stream stalled for {after:?}"))
            }
            Fault::Unreadable(what) => {
                self.error(K::Failed, &format!("unreadable stream ({what})"))
            }
            Fault::Remote {
                kind,
                retryable,
                label,
            } => {
                let what = if *retryable {
                    format!("stream error ({label}) {}", attempts(tries))
                } else {
                    format!("stream error ({label})")
                };
                self.error(*kind, &what)
            }
        }
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retries run
    /// out.
    pub async fn run<F, Fut>(&self, mut attempt: F) -> Result<ModelReply, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<ModelReply, Failure>>,
    {
        let mut tries = 0u32;
        loop {
            tries += 1;
            let failure = match attempt().await {
                Ok(reply) => return Ok(reply),
                Err(failure) => failure,
            };
            let retry = tries - 1;
            if failure.streamed || !failure.fault.retryable() || retry >= self.max_retries {
                let error = self.classify(&failure.fault, tries);
                tracing::warn!(
                    provider = self.provider,
                    model = %self.model,
                    attempts = tries,
                    error = %error.message,
                    "model request failed"
                );
                return Err(error);
            }
            let delay = self.delay(retry, failure.fault.retry_after());
            tracing::info!(
                provider = self.provider,
                model = %self.model,
                attempt = tries,
                fault = ?failure.fault,
                ?delay,
                "model request failed, retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// Keeps an error type reported by a provider only if it looks like an
/// identifier (`overloaded_error`), so no free text of a response leaks.
pub(crate) fn sanitize_label(label: Option<&str>) -> String {
    match label {
        Some(l)
            if !l.is_empty()
                && l.len() <= 40
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') =>
        {
            l.to_owned()
        }
        _ => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    fn policy(max_retries: u32) -> Policy {
        Policy {
            provider: "openai",
            model: "gpt-4o-mini".into(),
            max_retries,
            backoff: Duration::from_millis(200),
            max_delay: Duration::from_secs(1),
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = policy(5);
        assert_eq!(p.delay(0, None), Duration::from_millis(200));
        assert_eq!(p.delay(1, None), Duration::from_millis(400));
        assert_eq!(p.delay(2, None), Duration::from_millis(800));
        assert_eq!(p.delay(3, None), Duration::from_secs(1));
        assert_eq!(p.delay(40, None), Duration::from_secs(1));
        assert_eq!(
            p.delay(0, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(60))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn messages_name_provider_model_and_attempts() {
        let p = policy(2);
        let e = p.classify(
            &Fault::Status {
                status: 429,
                retry_after: None,
            },
            3,
        );
        assert_eq!(e.kind, ProviderErrorKind::RateLimited);
        assert_eq!(
            e.message,
            "provider openai model gpt-4o-mini: rate limited (HTTP 429) after 3 attempts"
        );
        let kind = |status| {
            p.classify(
                &Fault::Status {
                    status,
                    retry_after: None,
                },
                1,
            )
            .kind
        };
        assert_eq!(kind(500), ProviderErrorKind::Unavailable);
        assert_eq!(kind(503), ProviderErrorKind::Unavailable);
        assert_eq!(kind(401), ProviderErrorKind::AuthFailed);
        assert_eq!(kind(403), ProviderErrorKind::AuthFailed);
        assert_eq!(kind(404), ProviderErrorKind::Failed);
        assert_eq!(kind(302), ProviderErrorKind::Failed);
    }

    #[test]
    fn labels_are_identifiers_or_unknown() {
        assert_eq!(sanitize_label(Some("overloaded_error")), "overloaded_error");
        assert_eq!(sanitize_label(Some("key sk-SECRET leaked")), "unknown");
        assert_eq!(sanitize_label(None), "unknown");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_only_retryable_faults_and_never_after_streaming() {
        let p = policy(2);
        let calls = Mutex::new(0);
        let run = |fault: Fault, streamed: bool| {
            *calls.lock() = 0;
            let calls = &calls;
            p.run(move || {
                *calls.lock() += 1;
                let fault = fault.clone();
                async move { Err(Failure { fault, streamed }) }
            })
        };
        let e = run(
            Fault::Status {
                status: 503,
                retry_after: None,
            },
            false,
        )
        .await
        .unwrap_err();
        assert_eq!(*calls.lock(), 3);
        assert!(
            e.message
                .ends_with("unavailable (HTTP 503) after 3 attempts")
        );
        run(
            Fault::Status {
                status: 500,
                retry_after: None,
            },
            false,
        )
        .await
        .unwrap_err();
        assert_eq!(*calls.lock(), 1);
        run(Fault::Interrupted, true).await.unwrap_err();
        assert_eq!(*calls.lock(), 1);
        run(Fault::Unreachable, false).await.unwrap_err();
        assert_eq!(*calls.lock(), 3);
    }
}

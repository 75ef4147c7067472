//! Model providers behind the [`ModelProvider`] port.
//!
//! # Layout
//!
//! - [`openai`]: any OpenAI-compatible Chat Completions endpoint (OpenAI,
//!   Ollama, vLLM, …), streamed.
//! - [`anthropic`]: the Anthropic Messages API, streamed.
//! - [`mock`]: a scripted model in the shape of Omnia's mock provider.
//! - `mock_realtime`: a scripted voice provider ([`MockRealtime`]) on the
//!   realtime port: energy VAD, echo or tone replies, barge-in, faults.
//! - `openai_realtime`: the OpenAI Realtime API ([`OpenAiRealtime`]) on the
//!   realtime port, over a WebSocket: truncation at barge-in, session rollover.
//! - `cascade`: local voice ([`Cascade`]) on the realtime port: speech-to-text,
//!   the agent's text model and text-to-speech over OpenAI-compatible HTTP,
//!   with the mock's energy VAD and output pacing (`vad`, shared).
//! - `embeddings`: an OpenAI-compatible embeddings endpoint
//!   ([`OpenAiEmbeddings`]) behind agent memory's `Embedder` port.
//! - [`sse`]: the Server-Sent Events parser both HTTP providers read with.
//! - `streaming`: what the two streaming HTTP providers share: the provider
//!   around a wire format and one reply loop over the SSE body; each wire
//!   supplies its request, headers and event decoding.
//! - `http` and `retry`: the shared HTTP fault handling: one pooled client per
//!   provider, the first-token and idle timeouts around every read, the
//!   classification of faults and the retries with exponential backoff.
//!
//! Build a provider from its [`ProviderSettings`] with [`build`].
//!
//! # Invariants
//!
//! Error messages name the provider type and the model and never carry the
//! provider's response body or the API key; neither is ever logged. Retries
//! happen only before any text reached the [`TextSink`](agentwire_core::TextSink).
//! Streams have no whole-request timeout: each read has its own.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentwire_core::ModelProvider;
use agentwire_core::realtime::{CallError, CallFailure};
use tokio::task::JoinHandle;

use crate::streaming::{Endpoint, HttpProvider, Wire};

mod anthropic;
mod cascade;
pub use cascade::{Cascade, CascadeSettings, SpeechEndpoint};
mod embeddings;
pub use embeddings::{EmbeddingsSettings, OpenAiEmbeddings};
mod http;
mod mock;
pub use mock::SCENARIO_KEY as MOCK_SCENARIO_KEY;
mod mock_realtime;

pub use mock_realtime::{MockRealtime, MockVoice, MockVoiceOutput, MockVoiceTool};
mod openai;
mod openai_realtime;
pub use openai_realtime::{OpenAiRealtime, OpenAiRealtimeSettings};
mod retry;
pub mod sse;
mod streaming;
mod vad;

#[doc(hidden)]
pub mod fuzzing;

/// The OpenAI API, the default `base_url` of [`ProviderKind::OpenAi`].
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The Anthropic API, the default `base_url` of [`ProviderKind::Anthropic`].
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// Checks a configured `base_url` as building an endpoint on it would: an
/// http or https URL without a query or fragment. The error does not
/// repeat the URL (it could carry credentials).
pub fn check_base_url(base_url: &str) -> Result<(), String> {
    http::endpoint(base_url, OPENAI_DEFAULT_BASE_URL, "").map(drop)
}

/// An API key. Its `Debug` prints `ApiKey(<redacted>)`; it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> ApiKey {
        ApiKey(key)
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> ApiKey {
        ApiKey(key.to_owned())
    }
}

/// One configured provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    /// The config's name for the provider (the mock's fallback text uses it).
    pub name: String,
    pub model: String,
    /// Longest wait, from the start of a request, for the first byte of the
    /// streamed body. Default 90 s.
    pub first_token_timeout: Duration,
    /// Longest silence once the body has started. Default 30 s.
    pub idle_timeout: Duration,
    /// Retries after the first attempt for 429, 502, 503, 504 and unreachable
    /// endpoints. Default 2.
    pub max_retries: u32,
    /// Backoff before retry `i` (0-based): `retry_backoff · 2^i`, capped at
    /// `max_retry_delay`. Default 500 ms.
    pub retry_backoff: Duration,
    /// Cap on any one wait between attempts, also on a 429's `Retry-After`.
    /// Default 20 s.
    pub max_retry_delay: Duration,
    /// Sampling parameters sent with every request (a PromptPack's
    /// `parameters`). Default: none, the model's own.
    pub sampling: Sampling,
    pub kind: ProviderKind,
}

/// Sampling parameters a request carries; `None` leaves the model's
/// default. Which ones a provider type takes: [`ProviderKind::unsupported`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    pub temperature: Option<f64>,
    /// The reply's length limit in tokens. Anthropic requires one: without
    /// it, 4096.
    pub max_tokens: Option<u32>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
}

impl Sampling {
    /// The names of the parameters given, in a fixed order.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("temperature", self.temperature.is_some()),
            ("max_tokens", self.max_tokens.is_some()),
            ("top_p", self.top_p.is_some()),
            ("top_k", self.top_k.is_some()),
            ("frequency_penalty", self.frequency_penalty.is_some()),
            ("presence_penalty", self.presence_penalty.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

impl ProviderSettings {
    pub const DEFAULT_FIRST_TOKEN_TIMEOUT: Duration = Duration::from_secs(90);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_MAX_RETRIES: u32 = 2;
    pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(500);
    pub const DEFAULT_MAX_RETRY_DELAY: Duration = Duration::from_secs(20);

    /// Settings with every default.
    pub fn new(name: impl Into<String>, model: impl Into<String>, kind: ProviderKind) -> Self {
        ProviderSettings {
            name: name.into(),
            model: model.into(),
            first_token_timeout: Self::DEFAULT_FIRST_TOKEN_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            retry_backoff: Self::DEFAULT_RETRY_BACKOFF,
            max_retry_delay: Self::DEFAULT_MAX_RETRY_DELAY,
            sampling: Sampling::default(),
            kind,
        }
    }
}

/// Which wire format, and where.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderKind {
    /// An OpenAI-compatible Chat Completions endpoint. `base_url` ends before
    /// `/chat/completions`, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1` (Ollama, no key). Empty: the OpenAI API.
    OpenAi {
        base_url: String,
        api_key: Option<ApiKey>,
    },
    /// The Anthropic Messages API. `base_url` ends before `/v1/messages`.
    /// Empty: `https://api.anthropic.com`.
    Anthropic {
        base_url: String,
        api_key: Option<ApiKey>,
    },
    /// A scripted model.
    Mock {
        default_response: Option<String>,
        /// By scenario id (a message's `mock_scenario`; `default` without one).
        scenarios: BTreeMap<String, MockScenario>,
    },
}

impl ProviderKind {
    /// The first parameter of `sampling` this provider type does not send,
    /// if any: OpenAI's Chat Completions has no `top_k`, Anthropic's
    /// Messages no frequency or presence penalty. The scripted mock takes
    /// every one (a script's replies do not depend on them).
    pub fn unsupported(&self, sampling: &Sampling) -> Option<&'static str> {
        let taken: &[&str] = match self {
            ProviderKind::OpenAi { .. } => &[
                "temperature",
                "max_tokens",
                "top_p",
                "frequency_penalty",
                "presence_penalty",
            ],
            ProviderKind::Anthropic { .. } => &["temperature", "max_tokens", "top_p", "top_k"],
            ProviderKind::Mock { .. } => return None,
        };
        sampling
            .given()
            .into_iter()
            .find(|name| !taken.contains(name))
    }
}

/// A scripted conversation: what the mock answers on each turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MockScenario {
    /// By turn number, from 1: one plus the assistant messages already in
    /// the request.
    pub turns: BTreeMap<u32, MockTurn>,
    /// The answer for a turn the scenario does not script (PromptKit's
    /// scenario `defaultResponse`); without it the provider's.
    pub default_response: Option<String>,
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum MockTurn {
    Text(String),
    ToolCalls {
        content: Option<String>,
        /// `(name, arguments)` of each call.
        tool_calls: Vec<(String, serde_json::Value)>,
    },
}

/// Builds the provider `settings` describe. The error names the problem
/// (and never the key).
pub fn build(settings: ProviderSettings) -> Result<Arc<dyn ModelProvider>, String> {
    match settings.kind {
        ProviderKind::OpenAi {
            ref base_url,
            ref api_key,
        } => http_provider::<openai::OpenAi>(&settings, base_url, api_key.as_ref()),
        ProviderKind::Anthropic {
            ref base_url,
            ref api_key,
        } => http_provider::<anthropic::Anthropic>(&settings, base_url, api_key.as_ref()),
        ProviderKind::Mock {
            default_response,
            scenarios,
        } => {
            for (id, scenario) in &scenarios {
                if scenario.turns.contains_key(&0) {
                    return Err(format!(
                        "provider {} (mock): scenarios.{id}.turns.0: turns are numbered from 1",
                        settings.name
                    ));
                }
            }
            Ok(Arc::new(mock::MockProvider::new(
                settings.name,
                settings.model,
                default_response,
                scenarios,
            )))
        }
    }
}

/// A provider speaking `W` at `base_url` with `api_key`.
fn http_provider<W: Wire>(
    settings: &ProviderSettings,
    base_url: &str,
    api_key: Option<&ApiKey>,
) -> Result<Arc<dyn ModelProvider>, String> {
    let endpoint = Endpoint::new::<W>(base_url, api_key)
        .map_err(|e| format!("provider {} ({}): {e}", settings.name, W::NAME))?;
    if let Some(name) = settings.kind.unsupported(&settings.sampling) {
        return Err(format!(
            "provider {} ({}): does not take {name}",
            settings.name,
            W::NAME
        ));
    }
    let http = http_settings(settings, W::NAME)?;
    Ok(Arc::new(HttpProvider::<W>::new(
        http,
        endpoint,
        settings.sampling.clone(),
    )))
}

/// The HTTP side of a `provider` (`openai`, `anthropic`) from `settings`,
/// checked: a model, positive timeouts, a client.
fn http_settings(
    settings: &ProviderSettings,
    provider: &'static str,
) -> Result<http::HttpSettings, String> {
    let name = &settings.name;
    if settings.model.trim().is_empty() {
        return Err(format!("provider {name} ({provider}): model is empty"));
    }
    if settings.first_token_timeout.is_zero() {
        return Err(format!(
            "provider {name} ({provider}): first_token_timeout must be positive"
        ));
    }
    if settings.idle_timeout.is_zero() {
        return Err(format!(
            "provider {name} ({provider}): idle_timeout must be positive"
        ));
    }
    Ok(http::HttpSettings {
        client: http::client().map_err(|e| format!("provider {name} ({provider}): {e}"))?,
        timeouts: http::Timeouts {
            first_token: settings.first_token_timeout,
            idle: settings.idle_timeout,
        },
        policy: retry::Policy {
            provider,
            model: settings.model.clone(),
            max_retries: settings.max_retries,
            backoff: settings.retry_backoff,
            max_delay: settings.max_retry_delay,
        },
    })
}

/// What `task` ends with; never, when there is none (a `select!` branch
/// on a task that may not be running). A task that panicked or was aborted
/// is an internal failure saying `failed`.
async fn task_outcome<T>(
    task: &mut Option<JoinHandle<Result<T, CallError>>>,
    failed: &'static str,
) -> Result<T, CallError> {
    match task {
        Some(task) => task
            .await
            .unwrap_or_else(|_| Err(CallError::new(CallFailure::Internal, failed))),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(base_url: &str, key: Option<&str>) -> ProviderSettings {
        ProviderSettings::new(
            "main",
            "gpt-4o-mini",
            ProviderKind::OpenAi {
                base_url: base_url.into(),
                api_key: key.map(ApiKey::from),
            },
        )
    }

    #[test]
    fn each_provider_type_names_the_sampling_parameter_it_does_not_take() {
        let top_k = Sampling {
            temperature: Some(1.0),
            top_k: Some(5),
            ..Sampling::default()
        };
        let penalty = Sampling {
            frequency_penalty: Some(0.5),
            ..Sampling::default()
        };
        let anthropic = ProviderKind::Anthropic {
            base_url: String::new(),
            api_key: None,
        };
        let mock = ProviderKind::Mock {
            default_response: None,
            scenarios: BTreeMap::new(),
        };
        assert_eq!(openai("", None).kind.unsupported(&top_k), Some("top_k"));
        assert_eq!(openai("", None).kind.unsupported(&penalty), None);
        assert_eq!(anthropic.unsupported(&top_k), None);
        assert_eq!(anthropic.unsupported(&penalty), Some("frequency_penalty"));
        assert_eq!(mock.unsupported(&penalty), None);
        let mut settings = openai("", None);
        settings.sampling = top_k;
        let Err(error) = build(settings) else {
            panic!("built with top_k");
        };
        assert_eq!(error, "provider main (openai): does not take top_k");
    }

    #[test]
    fn debug_never_prints_the_key() {
        let settings = openai("https://api.openai.com/v1", Some("sk-SECRET"));
        let debug = format!("{settings:?}");
        assert!(!debug.contains("sk-SECRET"), "{debug}");
        assert!(debug.contains("ApiKey(<redacted>)"), "{debug}");
    }

    #[test]
    fn defaults_match_the_spec() {
        let s = openai("", None);
        assert_eq!(s.first_token_timeout, Duration::from_secs(90));
        assert_eq!(s.idle_timeout, Duration::from_secs(30));
        assert_eq!(s.max_retries, 2);
        assert_eq!(s.retry_backoff, Duration::from_millis(500));
    }

    #[test]
    fn build_accepts_good_settings() {
        // What the binary's `main` installs before any provider is built.
        let _ = rustls::crypto::ring::default_provider().install_default();
        assert!(build(openai("http://localhost:11434/v1", None)).is_ok());
        assert!(build(openai("", Some("sk-x"))).is_ok());
        let anthropic = ProviderSettings::new(
            "claude",
            "claude-sonnet-4-5",
            ProviderKind::Anthropic {
                base_url: String::new(),
                api_key: Some("k".into()),
            },
        );
        assert!(build(anthropic).is_ok());
    }

    #[test]
    fn build_names_the_problem() {
        let err = build(openai("not a url", None)).err().unwrap();
        assert!(err.contains("base_url"), "{err}");
        assert!(err.contains("main"), "{err}");
        let err = build(openai("ftp://example.com", None)).err().unwrap();
        assert!(err.contains("base_url"), "{err}");
        let mut s = openai("http://localhost/v1", None);
        s.model = " ".into();
        assert!(build(s).err().unwrap().contains("model"));
        let mut s = openai("http://localhost/v1", None);
        s.idle_timeout = Duration::ZERO;
        assert!(build(s).err().unwrap().contains("idle_timeout"));
        let err = build(openai("http://localhost/v1", Some("sk-SECRET\n")))
            .err()
            .unwrap();
        assert!(err.contains("api_key") && !err.contains("SECRET"), "{err}");
        let mock = ProviderSettings::new(
            "m",
            "x",
            ProviderKind::Mock {
                default_response: None,
                scenarios: BTreeMap::from([(
                    "s".to_owned(),
                    MockScenario {
                        turns: BTreeMap::from([(0, MockTurn::Text("t".into()))]),
                        default_response: None,
                    },
                )]),
            },
        );
        assert!(build(mock).err().unwrap().contains("scenarios.s.turns.0"));
    }
}

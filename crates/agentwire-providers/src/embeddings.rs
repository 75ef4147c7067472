//! An OpenAI-compatible embeddings endpoint (`POST {base_url}/embeddings`)
//! behind the [`Embedder`] port: what `memory.embeddings` names, for agent
//! memory's vectors.
//!
//! One request per call, bounded by `timeout` as a whole, never retried:
//! the caller (a memory write or recall) goes on by words alone when it
//! fails, so a slow endpoint costs a turn at most `timeout`. Errors name
//! the status or what was wrong with the answer, never the texts, the key
//! or the body.

use std::time::Duration;

use agentwire_core::memory::vectors::MAX_DIMENSIONS;
use agentwire_core::{EmbedError, Embedder};
use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;

use crate::http::{client, endpoint, secret_header};
use crate::{ApiKey, OPENAI_DEFAULT_BASE_URL};

/// `memory.embeddings`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingsSettings {
    /// Empty: OpenAI's.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Sent as `dimensions` (models that can shorten their vectors), and
    /// required of every vector the endpoint returns; `None`: whatever the
    /// model gives.
    pub dimensions: Option<usize>,
    /// The longest a request may take, whole.
    pub timeout: Duration,
}

impl EmbeddingsSettings {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
}

/// The endpoint, ready to call.
pub struct OpenAiEmbeddings {
    client: reqwest::Client,
    url: String,
    authorization: Option<HeaderValue>,
    model: String,
    dimensions: Option<usize>,
    timeout: Duration,
}

/// The answer's shape: `{"data": [{"index", "embedding"}], ...}`.
#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbeddings {
    /// The endpoint of `settings`; the error says which setting is wrong
    /// (`base_url` or `api_key`) without repeating it.
    pub fn new(settings: &EmbeddingsSettings) -> Result<OpenAiEmbeddings, (&'static str, String)> {
        let url = endpoint(&settings.base_url, OPENAI_DEFAULT_BASE_URL, "embeddings")
            .map_err(|e| ("base_url", e))?;
        let authorization = match &settings.api_key {
            Some(key) => Some(
                secret_header(&format!("Bearer {}", key.expose())).map_err(|e| ("api_key", e))?,
            ),
            None => None,
        };
        Ok(OpenAiEmbeddings {
            client: client().map_err(|e| ("base_url", e))?,
            url,
            authorization,
            model: settings.model.clone(),
            dimensions: settings.dimensions,
            timeout: settings.timeout,
        })
    }

    fn body(&self, texts: &[&str]) -> serde_json::Value {
        let mut body = serde_json::json!({
            "model": self.model,
            "input": texts,
            "encoding_format": "float",
        });
        if let Some(dimensions) = self.dimensions {
            body["dimensions"] = dimensions.into();
        }
        body
    }

    /// The vectors of `answer`, in the order of the `count` texts asked.
    fn vectors(&self, answer: Answer, count: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let wrong = |what: &str| Err(EmbedError(format!("the answer {what}")));
        if answer.data.len() != count {
            return wrong(&format!(
                "has {} vectors for {count} texts",
                answer.data.len()
            ));
        }
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; count];
        for datum in answer.data {
            match vectors.get_mut(datum.index) {
                Some(slot @ None) => *slot = Some(datum.embedding),
                _ => return wrong(&format!("repeats or exceeds index {}", datum.index)),
            }
        }
        let vectors: Vec<Vec<f32>> = vectors.into_iter().flatten().collect();
        let length = vectors.first().map_or(0, Vec::len);
        if length == 0 || length > MAX_DIMENSIONS {
            return wrong(&format!("has vectors of {length} numbers"));
        }
        if vectors.iter().any(|v| v.len() != length) {
            return wrong("has vectors of different lengths");
        }
        if self.dimensions.is_some_and(|d| d != length) {
            return wrong(&format!(
                "has vectors of {length} numbers, not `dimensions`"
            ));
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbeddings {
    async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut request = self
            .client
            .post(&self.url)
            .timeout(self.timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(self.body(texts).to_string());
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        let response = request.send().await.map_err(|e| {
            let what = if e.is_timeout() {
                "timed out"
            } else {
                "is unreachable"
            };
            EmbedError(format!("the endpoint {what}"))
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(EmbedError(format!(
                "the endpoint answered HTTP {}",
                status.as_u16()
            )));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|_| EmbedError("the answer was cut off".to_owned()))?;
        let answer: Answer = serde_json::from_slice(&bytes)
            .map_err(|_| EmbedError("the answer is not an embeddings list".to_owned()))?;
        self.vectors(answer, texts.len())
    }
}

#[cfg(test)]
mod tests;

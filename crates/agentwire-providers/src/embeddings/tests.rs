//! Against an in-process fake embeddings endpoint on loopback that answers
//! as OpenAI's `POST /v1/embeddings` does, byte for byte (its documented
//! response, pretty-printed as the API sends it): the request's headers
//! and body, the vectors in index order, and every failure named without
//! the key, the texts or the body.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::*;

const KEY: &str = "sk-embed-SECRET-3333";
const SECRET_BODY: &str = "{\"error\":{\"message\":\"SECRET provider body\"}}";

/// OpenAI's answer for two inputs, as the API formats it (the second
/// listed first, to check the order is by `index`).
const ANSWER: &str = r#"{
  "object": "list",
  "data": [
    {
      "object": "embedding",
      "index": 1,
      "embedding": [
        0.0023064255,
        -0.009327292,
        -0.0028842222
      ]
    },
    {
      "object": "embedding",
      "index": 0,
      "embedding": [
        -0.006929283495992422,
        0.005336422007530928,
        0.00047350498218997
      ]
    }
  ],
  "model": "text-embedding-3-small",
  "usage": {
    "prompt_tokens": 8,
    "total_tokens": 8
  }
}"#;

struct Script {
    status: StatusCode,
    body: &'static str,
    delay: Duration,
}

struct Fake {
    script: Script,
    seen: Mutex<Vec<(String, HeaderMap, Bytes)>>,
}

async fn handle(
    State(fake): State<Arc<Fake>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    fake.seen
        .lock()
        .push((uri.path().to_owned(), headers, body));
    tokio::time::sleep(fake.script.delay).await;
    let json = [("content-type", "application/json")];
    (fake.script.status, json, fake.script.body).into_response()
}

async fn serve(script: Script) -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake {
        script,
        seen: Mutex::default(),
    });
    let app = Router::new().fallback(handle).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, base_url)
}

fn settings(base_url: &str) -> EmbeddingsSettings {
    EmbeddingsSettings {
        base_url: base_url.to_owned(),
        model: "text-embedding-3-small".to_owned(),
        api_key: Some(ApiKey::new(KEY)),
        dimensions: Some(3),
        timeout: Duration::from_secs(5),
    }
}

fn answering(status: StatusCode, body: &'static str) -> Script {
    Script {
        status,
        body,
        delay: Duration::ZERO,
    }
}

#[tokio::test]
async fn the_request_is_openais_and_the_vectors_come_back_in_order() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (fake, base_url) = serve(answering(StatusCode::OK, ANSWER)).await;
    let embedder = OpenAiEmbeddings::new(&settings(&base_url)).unwrap();
    let vectors = embedder
        .embed(&["likes tea", "lives in Lisbon"])
        .await
        .unwrap();
    // The numbers as the answer wrote them, each the nearest f32.
    let numbers = |texts: [&str; 3]| texts.map(|t| t.parse::<f32>().unwrap()).to_vec();
    assert_eq!(
        vectors,
        [
            numbers([
                "-0.006929283495992422",
                "0.005336422007530928",
                "0.00047350498218997"
            ]),
            numbers(["0.0023064255", "-0.009327292", "-0.0028842222"]),
        ]
    );
    let seen = fake.seen.lock();
    let (path, headers, body) = &seen[0];
    assert_eq!(path, "/v1/embeddings");
    assert_eq!(headers["authorization"], format!("Bearer {KEY}").as_str());
    assert_eq!(headers["content-type"], "application/json");
    let body: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "text-embedding-3-small",
            "input": ["likes tea", "lives in Lisbon"],
            "encoding_format": "float",
            "dimensions": 3,
        })
    );
}

#[tokio::test]
async fn without_dimensions_none_is_sent_and_any_length_is_taken() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (fake, base_url) = serve(answering(StatusCode::OK, ANSWER)).await;
    let mut settings = settings(&base_url);
    settings.dimensions = None;
    settings.api_key = None;
    let embedder = OpenAiEmbeddings::new(&settings).unwrap();
    assert_eq!(embedder.embed(&["a", "b"]).await.unwrap()[0].len(), 3);
    let seen = fake.seen.lock();
    let body: Value = serde_json::from_slice(&seen[0].2).unwrap();
    assert!(body.get("dimensions").is_none(), "{body}");
    assert!(seen[0].1.get("authorization").is_none());
}

/// Each failure's message, which never holds the key, a text or the body.
async fn failure(script: Script, texts: &[&str], dimensions: Option<usize>) -> String {
    let (_fake, base_url) = serve(script).await;
    let mut settings = settings(&base_url);
    settings.dimensions = dimensions;
    settings.timeout = Duration::from_millis(300);
    let embedder = OpenAiEmbeddings::new(&settings).unwrap();
    let error = embedder.embed(texts).await.unwrap_err().to_string();
    for secret in [KEY, "SECRET", "likes tea"] {
        assert!(!error.contains(secret), "{error}");
    }
    error
}

#[tokio::test]
async fn failures_are_named_without_the_key_the_texts_or_the_body() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let two = ["likes tea", "lives in Lisbon"];
    let cases: [(Script, &[&str], Option<usize>, &str); 6] = [
        (
            answering(StatusCode::UNAUTHORIZED, SECRET_BODY),
            &two,
            Some(3),
            "embeddings: the endpoint answered HTTP 401",
        ),
        (
            answering(StatusCode::OK, "SECRET not json"),
            &two,
            Some(3),
            "embeddings: the answer is not an embeddings list",
        ),
        (
            answering(StatusCode::OK, ANSWER),
            &["likes tea"],
            Some(3),
            "embeddings: the answer has 2 vectors for 1 texts",
        ),
        (
            answering(StatusCode::OK, ANSWER),
            &two,
            Some(1536),
            "embeddings: the answer has vectors of 3 numbers, not `dimensions`",
        ),
        (
            answering(StatusCode::OK, r#"{"data":[{"index":0,"embedding":[]}]}"#),
            &["likes tea"],
            None,
            "embeddings: the answer has vectors of 0 numbers",
        ),
        (
            Script {
                delay: Duration::from_secs(5),
                ..answering(StatusCode::OK, ANSWER)
            },
            &two,
            Some(3),
            "embeddings: the endpoint timed out",
        ),
    ];
    for (script, texts, dimensions, expected) in cases {
        assert_eq!(failure(script, texts, dimensions).await, expected);
    }
}

#[test]
fn a_bad_base_url_is_named_as_the_setting() {
    let error = OpenAiEmbeddings::new(&settings("ftp://example.com"))
        .err()
        .unwrap();
    assert_eq!(
        error,
        ("base_url", "must be an http or https URL".to_owned())
    );
}

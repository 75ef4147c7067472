//! Agent memory with `memory.embeddings`, over real sockets: the server
//! asks a fake OpenAI-compatible embeddings endpoint (its request and
//! answer as OpenAI's, byte for byte) for the vectors of what the scripted
//! model remembers and recalls; a fact said again in other words
//! supersedes the first, a question without a word in common finds it by
//! meaning, and an endpoint that is down leaves memory working by words.

use serde_json::{Value, json};

use crate::agent_memory::{quoted, reply, sample};
use crate::credentials::{ALICE_KEY, auth_yaml};
use crate::fake_http::{Answer, FakeHttp};
use crate::support::TestServer;

const MODEL: &str = r#"
providers:
  - name: memo
    type: mock
    scenarios:
      tea:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "likes tea"}}]}
          2: "Noted: {{last_tool_result}}"
      chai:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "drinks chai every morning"}}]}
          2: "Noted: {{last_tool_result}}"
      beverage:
        turns:
          1: {tool_calls: [{name: memory__recall, arguments: {query: "which beverage"}}]}
          2: "Recalled: {{last_tool_result}}"
      drinks:
        turns:
          1: {tool_calls: [{name: memory__recall, arguments: {query: "drinks"}}]}
          2: "Recalled: {{last_tool_result}}"
"#;

const AGENTS: &str = "  - {name: concierge, handler: runtime, provider: memo, access_level: public, memory: {enabled: true}}\n";

/// One dimension per meaning: "chai" and "beverage" mean what "tea" does.
const MEANINGS: [&[&str]; 3] = [&["tea", "chai", "beverage"], &["coffee"], &["lisbon"]];

fn vector(text: &str) -> Vec<f32> {
    let words: Vec<&str> = text.split(' ').collect();
    let count = |meaning: &[&str]| words.iter().filter(|w| meaning.contains(w)).count() as f32;
    MEANINGS.iter().map(|m| count(m)).collect()
}

/// The answer OpenAI's `POST /v1/embeddings` gives for `request`, in its
/// layout: `{"object": "list", "data": [{"object": "embedding", "index",
/// "embedding"}], "model", "usage"}`.
fn embeddings(request: &Value) -> String {
    let inputs = request["input"].as_array().expect("input is a list");
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let embedding = vector(text.as_str().unwrap());
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let answer = json!({
        "object": "list",
        "data": data,
        "model": request["model"],
        "usage": {"prompt_tokens": 4, "total_tokens": 4},
    });
    serde_json::to_string_pretty(&answer).unwrap()
}

async fn server(base_url: &str) -> TestServer {
    let memory = format!(
        "memory:\n  embeddings: {{base_url: \"{base_url}\", model: text-embedding-3-small, api_key: sk-e2e-SECRET, dimensions: 3, timeout: 2s}}\n"
    );
    TestServer::with_runtime(&format!("{MODEL}{}{memory}", auth_yaml()), AGENTS).await
}

#[tokio::test]
async fn a_fact_said_again_supersedes_and_a_question_finds_it_by_meaning() {
    let endpoint = FakeHttp::start(|_, seen| Answer::json(&embeddings(&seen.json()))).await;
    let server = server(&format!("http://{}/v1", endpoint.addr)).await;
    let alice = Some(ALICE_KEY);
    let first = quoted(
        &reply(&server, "agent=concierge", alice, "tea").await,
        "Noted: ",
    );
    assert_eq!(first, json!({"status": "remembered", "id": first["id"]}));
    let again = quoted(
        &reply(&server, "agent=concierge", alice, "chai").await,
        "Noted: ",
    );
    assert_eq!(
        again,
        json!({"status": "remembered", "id": first["id"], "superseded": {"similarity": 1.0}})
    );
    let found = quoted(
        &reply(&server, "agent=concierge", alice, "beverage").await,
        "Recalled: ",
    );
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["memories"][0]["content"], "drinks chai every morning");
    assert_eq!(found["memories"][0]["id"], first["id"]);

    let requests = endpoint.requests().await;
    let bodies: Vec<Value> = requests.iter().map(|r| r.json()).collect();
    assert!(
        requests
            .iter()
            .all(|r| r.request_line == "POST /v1/embeddings HTTP/1.1"),
        "{requests:?}"
    );
    let expected = |text: &str| {
        json!({"model": "text-embedding-3-small", "input": [text],
               "encoding_format": "float", "dimensions": 3})
    };
    assert_eq!(
        bodies,
        [
            expected("likes tea"),
            expected("drinks chai every morning"),
            expected("which beverage")
        ]
    );
    assert_eq!(
        sample(&server, "agentwire_memory_embed_seconds_count").await,
        3.0
    );
    assert_eq!(
        sample(&server, "agentwire_memory_embed_failures_total").await,
        0.0
    );
}

#[tokio::test]
async fn an_embeddings_endpoint_that_is_down_leaves_memory_working_by_words() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let server = server(&base_url).await;
    let alice = Some(ALICE_KEY);
    let noted = quoted(
        &reply(&server, "agent=concierge", alice, "chai").await,
        "Noted: ",
    );
    assert_eq!(noted["status"], "remembered", "{noted}");
    let found = quoted(
        &reply(&server, "agent=concierge", alice, "drinks").await,
        "Recalled: ",
    );
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(
        sample(&server, "agentwire_memory_embed_failures_total").await,
        2.0
    );
}

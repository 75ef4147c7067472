//! The Anthropic messages provider: text and usage, tool use assembled from
//! fragmented JSON, the request body, and how its error events and
//! statuses (overloaded, 529, 403) are classified and retried.

use agentwire_core::{
    ModelMessage, ModelRequest, ModelToolCall, PartKind, ProviderErrorKind, ToolSpec, Usage,
};
use serde_json::json;

use crate::support::{
    Fake, PING, Reply, an, an_end, an_start, an_text_block, an_tool_block, anthropic, complete,
    media, user,
};

#[tokio::test]
async fn anthropic_streams_text_and_usage() {
    let mut t = an_start();
    t.push_str(PING);
    t.push_str(&an_text_block(0, &["Hello", "! How", " can I help?"]));
    t.push_str(&an_end("end_turn", 15));
    let fake = Fake::start(vec![Reply::sse(t)]).await;
    let provider = anthropic(&fake.url(), Some("sk-ant-test"));
    let request = ModelRequest {
        system: Some("Be kind.".into()),
        ..user("hi")
    };
    let (result, sink) = complete(&provider, &request).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Hello", "! How", " can I help?"]);
    assert_eq!(reply.text, "Hello! How can I help?");
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 25,
            output_tokens: 15
        })
    );
    let (path, headers, body) = fake.request(0);
    assert_eq!(path, "/v1/messages");
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert!(headers.get("authorization").is_none());
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["system"], "Be kind.");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[tokio::test]
async fn anthropic_assembles_tool_use_from_fragmented_json() {
    let mut t = an_start();
    t.push_str(&an_text_block(0, &["Checking both."]));
    t.push_str(&an_tool_block(
        1,
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "get_weather",
        &[
            "",
            "{\"location\": \"San Fra",
            "ncisco, CA\", \"unit\": \"fah",
            "renheit\"}",
        ],
    ));
    t.push_str(PING);
    t.push_str(&an_tool_block(2, "toolu_02Ab", "get_time", &[]));
    t.push_str(&an_tool_block(3, "toolu_03Cd", "bad", &["{\"x\": tru"]));
    t.push_str(&an_end("tool_use", 89));
    // \r\n line endings and cuts every 5 bytes.
    let t = t.replace('\n', "\r\n");
    let fake = Fake::start(vec![Reply::sse_in_pieces(t, 5)]).await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, sink) = complete(&provider, &user("weather and time?")).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Checking both."]);
    assert_eq!(
        reply.tool_calls,
        vec![
            ModelToolCall {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            },
            ModelToolCall {
                id: "toolu_02Ab".into(),
                name: "get_time".into(),
                arguments: json!({}),
            },
            ModelToolCall {
                id: "toolu_03Cd".into(),
                name: "bad".into(),
                arguments: json!({"raw": "{\"x\": tru"}),
            },
        ]
    );
    assert_eq!(reply.usage.unwrap().output_tokens, 89);
}

/// A request with two images (inline and by URL), an answer of two tool
/// calls without text, and their results (one failed).
fn images_and_tool_results() -> ModelRequest<'static> {
    ModelRequest {
        system: Some("System here.".into()),
        messages: vec![
            ModelMessage::User {
                text: "Describe".into(),
                parts: vec![
                    media(PartKind::Image, "image/jpeg", "/9j/4AAQSkZJRg=="),
                    media(PartKind::Image, "image/png", "https://example.com/a.png"),
                ]
                .into(),
            },
            ModelMessage::Assistant {
                text: Default::default(),
                tool_calls: vec![
                    ModelToolCall {
                        id: "toolu_1".into(),
                        name: "one".into(),
                        arguments: json!({"a": 1}),
                    },
                    ModelToolCall {
                        id: "toolu_2".into(),
                        name: "two".into(),
                        arguments: json!({}),
                    },
                ],
            },
            ModelMessage::Tool {
                call_id: "toolu_1".into(),
                name: "one".into(),
                content: "1".into(),
                is_error: false,
            },
            ModelMessage::Tool {
                call_id: "toolu_2".into(),
                name: "two".into(),
                content: "failed".into(),
                is_error: true,
            },
        ],
        tools: vec![ToolSpec {
            name: "one".into(),
            description: "First".into(),
            parameters: json!({"type": "object"}),
        }],
        ..ModelRequest::default()
    }
}

#[tokio::test]
async fn anthropic_maps_the_request_body() {
    let mut t = an_start();
    t.push_str(&an_text_block(0, &["ok"]));
    t.push_str(&an_end("end_turn", 1));
    let fake = Fake::start(vec![Reply::sse(t)]).await;
    let provider = anthropic(&fake.url(), None);
    let request = images_and_tool_results();
    let (result, _) = complete(&provider, &request).await;
    result.unwrap();
    let (_, headers, body) = fake.request(0);
    assert!(headers.get("x-api-key").is_none());
    assert_eq!(body["system"], "System here.");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Describe"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "one", "input": {"a": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "two", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "failed", "is_error": true},
            ]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "one", "description": "First", "input_schema": {"type": "object"}}])
    );
}

#[tokio::test]
async fn anthropic_overloaded_error_event_before_text_is_retried() {
    let mut overloaded = an_start();
    overloaded.push_str(&an(
        "error",
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded sk-SECRET"}}),
    ));
    let mut ok = an_start();
    ok.push_str(&an_text_block(0, &["fine"]));
    ok.push_str(&an_end("end_turn", 2));
    let fake = Fake::start(vec![Reply::sse(overloaded.clone()), Reply::sse(ok)]).await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "fine");
    assert_eq!(fake.count(), 2);

    let fake = Fake::start(vec![Reply::sse(overloaded)]).await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::Unavailable);
    assert_eq!(
        error.message,
        "provider anthropic model claude-sonnet-4-5: stream error (overloaded_error) after 3 attempts"
    );
    assert_eq!(fake.count(), 3);
}

#[tokio::test]
async fn anthropic_529_and_403_are_classified() {
    let fake = Fake::start(vec![Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    )])
    .await;
    let provider = anthropic(&fake.url(), Some("k"));
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Unavailable);
    assert_eq!(fake.count(), 3);

    let fake = Fake::start(vec![Reply::status(
        403,
        r#"{"type":"error","error":{"type":"permission_error","message":"key sk-SECRET lacks access"}}"#,
    )])
    .await;
    let provider = anthropic(&fake.url(), Some("sk-SECRET"));
    let (result, _) = complete(&provider, &user("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ProviderErrorKind::AuthFailed);
    assert!(!error.message.contains("SECRET"), "{}", error.message);
    assert_eq!(
        error.message,
        "provider anthropic model claude-sonnet-4-5: authentication failed (HTTP 403)"
    );
    assert_eq!(fake.count(), 1);
}

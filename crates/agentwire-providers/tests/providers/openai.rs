//! The OpenAI chat-completions provider: text and usage streamed in order,
//! tool calls assembled from fragmented deltas, headers and connection
//! pooling, the request body, and deltas forwarded as they arrive.

use std::time::{Duration, Instant};

use agentwire_core::{
    ContentPart, ModelMessage, ModelRequest, ModelToolCall, PartKind, ToolSpec, Usage,
};
use serde_json::json;

use crate::support::{
    Fake, OA_USAGE, Reply, complete, media, oa, oa_delta, oa_text, oa_text_transcript,
    oa_tool_delta, openai, user,
};

#[tokio::test]
async fn openai_streams_text_deltas_in_order_with_usage() {
    let fake = Fake::start(vec![Reply::sse(oa_text_transcript(&[
        "Hello",
        " there",
        ", how",
        " can I help?",
    ]))])
    .await;
    let provider = openai(&format!("{}/v1", fake.url()), Some("sk-test-key"));
    let (result, sink) = complete(&provider, &user("hi")).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Hello", " there", ", how", " can I help?"]);
    assert_eq!(reply.text, "Hello there, how can I help?");
    assert!(reply.tool_calls.is_empty());
    assert_eq!(
        reply.usage,
        Some(Usage {
            input_tokens: 19,
            output_tokens: 10
        })
    );
    let (path, headers, body) = fake.request(0);
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(headers["authorization"], "Bearer sk-test-key");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["accept"], "text/event-stream");
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[tokio::test]
async fn openai_assembles_tool_calls_from_fragmented_deltas() {
    let mut t = oa_delta(
        "{\"role\":\"assistant\",\"content\":null,\"refusal\":null}",
        "null",
    );
    t.push_str(&oa_text("Let me check."));
    t.push_str(&oa_tool_delta(
        0,
        Some(("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather")),
        "",
    ));
    for fragment in ["{\"", "city", "\":\"", "Paris", "\",\"unit\":\"c", "\"}"] {
        t.push_str(&oa_tool_delta(0, None, fragment));
    }
    t.push_str(&oa_tool_delta(
        1,
        Some(("call_kLmN0pQrStUvWxYz12345678", "get_time")),
        "{\"tz\":",
    ));
    t.push_str(&oa_tool_delta(1, None, "\"Europe/Paris\"}"));
    t.push_str(&oa_tool_delta(2, Some(("call_broken", "noisy")), "{\"a\":"));
    t.push_str(&oa_delta("{}", "\"tool_calls\""));
    t.push_str(&oa("", OA_USAGE));
    t.push_str("data: [DONE]\n\n");
    // Cut every 7 bytes: events, lines and JSON split across writes.
    let fake = Fake::start(vec![Reply::sse_in_pieces(t, 7)]).await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("weather?")).await;
    let reply = result.unwrap();
    assert_eq!(sink.texts(), ["Let me check."]);
    assert_eq!(reply.text, "Let me check.");
    assert_eq!(
        reply.tool_calls,
        vec![
            ModelToolCall {
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Paris", "unit": "c"}),
            },
            ModelToolCall {
                id: "call_kLmN0pQrStUvWxYz12345678".into(),
                name: "get_time".into(),
                arguments: json!({"tz": "Europe/Paris"}),
            },
            ModelToolCall {
                id: "call_broken".into(),
                name: "noisy".into(),
                arguments: json!({"raw": "{\"a\":"}),
            },
        ]
    );
    assert_eq!(reply.usage.unwrap().output_tokens, 10);
}

#[tokio::test]
async fn openai_sends_no_authorization_without_a_key_and_pools_connections() {
    let fake = Fake::start(vec![Reply::sse(oa_text_transcript(&["ok"]))]).await;
    let provider = openai(&format!("{}/v1/", fake.url()), None);
    let (result, _) = complete(&provider, &user("hi")).await;
    assert_eq!(result.unwrap().text, "ok");
    let (path, headers, _) = fake.request(0);
    assert_eq!(path, "/v1/chat/completions");
    assert!(headers.get("authorization").is_none());
    // The second request reuses the pooled connection.
    let (result, _) = complete(&provider, &user("again")).await;
    assert_eq!(result.unwrap().text, "ok");
    assert_eq!(fake.peer(0), fake.peer(1));
}

#[tokio::test]
async fn openai_maps_the_request_body() {
    let fake = Fake::start(vec![Reply::sse(oa_text_transcript(&["ok"]))]).await;
    let provider = openai(&fake.url(), Some("sk-x"));
    let request = ModelRequest {
        system: Some("You are terse.".into()),
        messages: vec![
            ModelMessage::User {
                text: "What is in the picture?".into(),
                parts: vec![
                    ContentPart::text("What is in the picture?"),
                    media(PartKind::Image, "image/png", "iVBORw0KGgoAAAANSUhEUg=="),
                    media(PartKind::Video, "video/mp4", "https://example.com/v.mp4"),
                ]
                .into(),
            },
            ModelMessage::Assistant {
                text: "Let me look it up.".into(),
                tool_calls: vec![ModelToolCall {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments: json!({"q": "cat"}),
                }],
            },
            ModelMessage::Tool {
                call_id: "call_1".into(),
                name: "lookup".into(),
                content: "{\"found\":true}".into(),
                is_error: false,
            },
        ],
        tools: vec![ToolSpec {
            name: "lookup".into(),
            description: "Looks things up".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }],
        metadata: std::borrow::Cow::Owned(agentwire_core::Metadata::from([(
            agentwire_providers::MOCK_SCENARIO_KEY.to_owned(),
            "never-sent".to_owned(),
        )])),
    };
    let (result, _) = complete(&provider, &request).await;
    result.unwrap();
    let (_, _, body) = fake.request(0);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}},
                {"type": "text", "text": "[video attachment: video/mp4]"},
            ]},
            {"role": "assistant", "content": "Let me look it up.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"cat\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"found\":true}"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "lookup",
            "description": "Looks things up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }}])
    );
    assert!(!body.to_string().contains("never-sent"));
}

#[tokio::test]
async fn openai_forwards_deltas_as_they_drip_in() {
    let gap = Duration::from_millis(120);
    let mut pieces = vec![(
        Duration::ZERO,
        oa_delta("{\"role\":\"assistant\",\"content\":\"\"}", "null").into_bytes(),
    )];
    for text in ["one", " two", " three"] {
        pieces.push((gap, oa_text(text).into_bytes()));
    }
    let mut tail = oa_delta("{}", "\"stop\"");
    tail.push_str("data: [DONE]\n\n");
    pieces.push((gap, tail.into_bytes()));
    let fake = Fake::start(vec![Reply::Stream {
        pieces,
        hang: false,
    }])
    .await;
    let provider = openai(&fake.url(), None);
    let (result, sink) = complete(&provider, &user("count")).await;
    let ended = Instant::now();
    assert_eq!(result.unwrap().text, "one two three");
    let deltas = sink.deltas.lock().clone();
    assert_eq!(deltas.len(), 3);
    // Each delta reached the sink when its chunk arrived, not at the end.
    assert!(ended - deltas[0].0 >= gap * 2, "{:?}", ended - deltas[0].0);
    assert!(deltas[1].0 - deltas[0].0 >= gap / 2);
    assert!(deltas[2].0 - deltas[1].0 >= gap / 2);
    assert!(ended - deltas[2].0 >= gap / 2);
}

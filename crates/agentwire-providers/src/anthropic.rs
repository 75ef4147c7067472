//! The Anthropic Messages API (`POST {base_url}/v1/messages`), streamed.

use std::collections::BTreeMap;

use agentwire_core::{
    ContentPart, ModelMessage, ModelProvider, ModelReply, ModelRequest, ModelToolCall, PartKind,
    ProviderError, ProviderErrorKind, TextSink, Usage,
};
use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{self, HttpSettings, SseStream};
use crate::retry::{Failure, Fault, sanitize_label};

pub(crate) const API_VERSION: &str = "2023-06-01";
pub(crate) const MAX_TOKENS: u32 = 4096;

pub(crate) struct AnthropicProvider {
    http: HttpSettings,
    /// `{base_url}/v1/messages`.
    url: String,
    /// The `x-api-key` value, marked sensitive.
    key: Option<HeaderValue>,
}

impl AnthropicProvider {
    pub fn new(http: HttpSettings, url: String, key: Option<HeaderValue>) -> AnthropicProvider {
        AnthropicProvider { http, url, key }
    }

    async fn attempt(&self, body: Bytes, sink: &dyn TextSink) -> Result<ModelReply, Failure> {
        let mut request = self
            .http
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION);
        if let Some(key) = &self.key {
            request = request.header("x-api-key", key.clone());
        }
        let stream = http::open(request, body, self.http.timeouts)
            .await
            .map_err(Failure::early)?;
        read_stream(stream, sink).await
    }
}

/// The reply in an opened body: events until `message_stop`.
pub(crate) async fn read_stream(
    mut stream: SseStream,
    sink: &dyn TextSink,
) -> Result<ModelReply, Failure> {
    let mut reply = Assembly::default();
    loop {
        let event = match stream.next().await {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(fault) => return Err(reply.failure(fault)),
        };
        if event.data.trim().is_empty() {
            continue;
        }
        let parsed: Event = match serde_json::from_str(&event.data) {
            Ok(parsed) => parsed,
            Err(_) => return Err(reply.failure(Fault::Unreadable("invalid JSON event"))),
        };
        let kind = parsed.kind.clone().or(event.event).unwrap_or_default();
        match kind.as_str() {
            "message_stop" => {
                reply.done = true;
                break;
            }
            "error" => {
                let label = parsed.error.as_ref().and_then(|e| e.kind.as_deref());
                return Err(reply.failure(remote_fault(label)));
            }
            _ => reply.event(&kind, parsed, sink).await,
        }
    }
    if !reply.done {
        return Err(reply.failure(Fault::Interrupted));
    }
    stream.close();
    Ok(reply.finish())
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    fn provider_name(&self) -> &'static str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.http.policy.model
    }

    async fn complete(
        &self,
        request: &ModelRequest<'_>,
        text: &dyn TextSink,
    ) -> Result<ModelReply, ProviderError> {
        let body = self
            .http
            .policy
            .json_body(&request_body(&self.http.policy.model, request))?;
        self.http
            .policy
            .run(move || self.attempt(body.clone(), text))
            .await
    }
}

/// The Messages request for `request`.
pub(crate) fn request_body(model: &str, request: &ModelRequest<'_>) -> Value {
    let mut messages: Vec<Value> = Vec::with_capacity(request.messages.len());
    // Whether the last message pushed is a user message of tool results, to
    // which the next tool result is added.
    let mut open_results = false;
    for message in &request.messages {
        match message {
            ModelMessage::User { text, parts } => {
                messages.push(json!({ "role": "user", "content": user_content(text, parts) }));
                open_results = false;
            }
            ModelMessage::Assistant { text, tool_calls } => {
                if text.is_empty() && tool_calls.is_empty() {
                    // The API refuses empty content; an empty answer adds nothing.
                    continue;
                }
                let content = if tool_calls.is_empty() {
                    Value::from(text.as_ref())
                } else {
                    let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
                    if !text.is_empty() {
                        blocks.push(json!({ "type": "text", "text": text }));
                    }
                    blocks.extend(tool_calls.iter().map(|call| {
                        json!({
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.name,
                            "input": call.arguments,
                        })
                    }));
                    Value::Array(blocks)
                };
                messages.push(json!({ "role": "assistant", "content": content }));
                open_results = false;
            }
            ModelMessage::Tool {
                call_id,
                content,
                is_error,
                ..
            } => {
                let mut block =
                    json!({ "type": "tool_result", "tool_use_id": call_id, "content": content });
                if *is_error {
                    block["is_error"] = Value::Bool(true);
                }
                match messages.last_mut() {
                    Some(last) if open_results => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => {
                        messages.push(json!({ "role": "user", "content": [block] }));
                        open_results = true;
                    }
                }
            }
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": MAX_TOKENS,
        "stream": true,
        "messages": messages,
    });
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body["system"] = Value::from(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
    }
    body
}

/// A plain string without media; content blocks with it.
fn user_content(text: &str, parts: &[ContentPart]) -> Value {
    let media: Vec<&ContentPart> = parts.iter().filter(|p| p.media.is_some()).collect();
    if media.is_empty() {
        return Value::from(text);
    }
    let mut blocks = Vec::with_capacity(media.len() + 1);
    if !text.is_empty() {
        blocks.push(json!({ "type": "text", "text": text }));
    }
    for part in media {
        let Some(m) = &part.media else { continue };
        let source = match (&m.data, &m.url) {
            (Some(data), _) => {
                Some(json!({ "type": "base64", "media_type": m.mime_type, "data": data }))
            }
            (None, Some(url)) => Some(json!({ "type": "url", "url": url })),
            (None, None) => None,
        };
        match (part.kind, source) {
            (Some(PartKind::Image), Some(source)) => {
                blocks.push(json!({ "type": "image", "source": source }));
            }
            _ => blocks.push(json!({ "type": "text", "text": crate::attachment_note(part) })),
        }
    }
    Value::Array(blocks)
}

/// An `error` event. Only its type, sanitised, reaches the message.
fn remote_fault(label: Option<&str>) -> Fault {
    let label = sanitize_label(label);
    let (kind, retryable) = match label.as_str() {
        "rate_limit_error" => (ProviderErrorKind::RateLimited, true),
        "overloaded_error" => (ProviderErrorKind::Unavailable, true),
        "api_error" => (ProviderErrorKind::Unavailable, false),
        "authentication_error" | "permission_error" => (ProviderErrorKind::AuthFailed, false),
        _ => (ProviderErrorKind::Failed, false),
    };
    Fault::Remote {
        kind,
        retryable,
        label,
    }
}

// The streamed events, read leniently.

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<StartMessage>,
    index: Option<u32>,
    content_block: Option<Block>,
    delta: Option<Delta>,
    usage: Option<EventUsage>,
    error: Option<EventError>,
}

#[derive(Deserialize)]
struct StartMessage {
    usage: Option<EventUsage>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    text: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    partial_json: Option<String>,
}

#[derive(Deserialize)]
struct EventUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl EventUsage {
    /// All the input, cached or not, if the event reports any.
    fn input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}

#[derive(Deserialize)]
struct EventError {
    #[serde(rename = "type")]
    kind: Option<String>,
}

struct ToolBlock {
    id: String,
    name: String,
    /// The `input` of `content_block_start`, used when no JSON is streamed.
    start_input: Option<Value>,
    json: String,
}

#[derive(Default)]
struct Assembly {
    text: String,
    /// Tool-use blocks by content-block index.
    tools: BTreeMap<u32, ToolBlock>,
    usage: Option<Usage>,
    done: bool,
    streamed: bool,
}

impl Assembly {
    fn failure(&self, fault: Fault) -> Failure {
        Failure {
            fault,
            streamed: self.streamed,
        }
    }

    async fn text(&mut self, text: &str, sink: &dyn TextSink) {
        if text.is_empty() {
            return;
        }
        sink.text(text).await;
        self.streamed = true;
        self.text.push_str(text);
    }

    async fn event(&mut self, kind: &str, event: Event, sink: &dyn TextSink) {
        match kind {
            "message_start" => {
                if let Some(usage) = event.message.and_then(|m| m.usage) {
                    self.usage = Some(Usage {
                        input_tokens: usage.input().unwrap_or(0),
                        output_tokens: usage.output_tokens.unwrap_or(0),
                    });
                }
            }
            "content_block_start" => {
                let Some(block) = event.content_block else {
                    return;
                };
                match block.kind.as_deref() {
                    Some("text") => self.text(block.text.as_deref().unwrap_or(""), sink).await,
                    Some("tool_use") => {
                        let index = event.index.unwrap_or(0);
                        self.tools.insert(
                            index,
                            ToolBlock {
                                id: block.id.unwrap_or_default(),
                                name: block.name.unwrap_or_default(),
                                start_input: block.input,
                                json: String::new(),
                            },
                        );
                    }
                    // Thinking and other blocks are not part of the answer.
                    _ => {}
                }
            }
            "content_block_delta" => {
                let Some(delta) = event.delta else { return };
                match delta.kind.as_deref() {
                    Some("text_delta") => {
                        self.text(delta.text.as_deref().unwrap_or(""), sink).await;
                    }
                    Some("input_json_delta") => {
                        let index = event.index.unwrap_or(0);
                        if let (Some(tool), Some(json)) =
                            (self.tools.get_mut(&index), delta.partial_json)
                        {
                            tool.json.push_str(&json);
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(usage) = event.usage {
                    let current = self.usage.get_or_insert_with(Usage::default);
                    if let Some(input) = usage.input() {
                        current.input_tokens = input;
                    }
                    if let Some(output) = usage.output_tokens {
                        current.output_tokens = output;
                    }
                }
            }
            // ping, content_block_stop and anything new carry nothing we need.
            _ => {}
        }
    }

    fn finish(self) -> ModelReply {
        let tool_calls = self
            .tools
            .into_iter()
            .map(|(index, tool)| {
                let arguments = if tool.json.trim().is_empty() {
                    tool.start_input
                        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
                } else {
                    crate::parse_arguments(&tool.json)
                };
                ModelToolCall {
                    id: if tool.id.is_empty() {
                        format!("call_{index}_{}", tool.name)
                    } else {
                        tool.id
                    },
                    name: tool.name,
                    arguments,
                }
            })
            .collect();
        ModelReply {
            text: self.text,
            tool_calls,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::{MediaContent, ToolSpec};

    fn tool<'a>(call_id: &str, content: &'a str, is_error: bool) -> ModelMessage<'a> {
        ModelMessage::Tool {
            call_id: call_id.into(),
            name: "t".into(),
            content: content.into(),
            is_error,
        }
    }

    #[test]
    fn request_maps_every_message_kind_and_merges_tool_results() {
        let request = ModelRequest {
            system: Some("Be brief.".into()),
            messages: vec![
                ModelMessage::User {
                    text: "Look".into(),
                    parts: vec![
                        ContentPart::media(
                            PartKind::Image,
                            MediaContent {
                                data: Some("iVBORw0KGgo=".into()),
                                mime_type: "image/png".into(),
                                ..MediaContent::default()
                            },
                        ),
                        ContentPart::media(
                            PartKind::Image,
                            MediaContent {
                                url: Some("https://example.com/cat.jpg".into()),
                                mime_type: "image/jpeg".into(),
                                ..MediaContent::default()
                            },
                        ),
                        ContentPart::media(
                            PartKind::File,
                            MediaContent {
                                data: Some("JVBERi0=".into()),
                                mime_type: "application/pdf".into(),
                                ..MediaContent::default()
                            },
                        ),
                    ]
                    .into(),
                },
                ModelMessage::Assistant {
                    text: "Checking.".into(),
                    tool_calls: vec![
                        ModelToolCall {
                            id: "toolu_1".into(),
                            name: "a".into(),
                            arguments: json!({"x": 1}),
                        },
                        ModelToolCall {
                            id: "toolu_2".into(),
                            name: "b".into(),
                            arguments: json!({}),
                        },
                    ],
                },
                tool("toolu_1", "ok", false),
                tool("toolu_2", "boom", true),
                ModelMessage::User {
                    text: "And?".into(),
                    parts: vec![].into(),
                },
            ],
            tools: vec![ToolSpec {
                name: "a".into(),
                description: "A".into(),
                parameters: json!({"type": "object"}),
            }],
            scenario: None,
        };
        assert_eq!(
            request_body("claude-sonnet-4-5", &request),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "stream": true,
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "Look"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                        {"type": "text", "text": "[file attachment: application/pdf]"},
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {"x": 1}},
                        {"type": "tool_use", "id": "toolu_2", "name": "b", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
                    ]},
                    {"role": "user", "content": "And?"},
                ],
                "tools": [{"name": "a", "description": "A", "input_schema": {"type": "object"}}],
            })
        );
    }

    #[test]
    fn error_events_are_classified_by_type() {
        let kind = |label| match remote_fault(Some(label)) {
            Fault::Remote {
                kind, retryable, ..
            } => (kind, retryable),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            kind("overloaded_error"),
            (ProviderErrorKind::Unavailable, true)
        );
        assert_eq!(
            kind("rate_limit_error"),
            (ProviderErrorKind::RateLimited, true)
        );
        assert_eq!(
            kind("authentication_error"),
            (ProviderErrorKind::AuthFailed, false)
        );
        assert_eq!(
            kind("invalid_request_error"),
            (ProviderErrorKind::Failed, false)
        );
    }
}

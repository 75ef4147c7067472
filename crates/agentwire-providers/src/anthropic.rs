//! The Anthropic Messages API (`POST {base_url}/v1/messages`), streamed.

use agentwire_core::{
    MediaContent, ModelMessage, ModelRequest, ModelToolCall, ProviderErrorKind, TextSink, Usage,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Sampling;
use crate::retry::{Fault, sanitize_label};
use crate::sse::SseEvent;
use crate::streaming::{PartialCall, Reply, Step, Wire, user_content};

const API_VERSION: &str = "2023-06-01";
const MAX_TOKENS: u32 = 4096;

/// The Messages wire: events until `message_stop`.
pub(crate) struct Anthropic;

impl Wire for Anthropic {
    const NAME: &'static str = "anthropic";
    const DEFAULT_BASE_URL: &'static str = crate::ANTHROPIC_DEFAULT_BASE_URL;
    const PATH: &'static str = "v1/messages";
    const KEY_HEADER: &'static str = "x-api-key";
    const KEY_PREFIX: &'static str = "";
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", API_VERSION)];

    fn request_body(model: &str, sampling: &Sampling, request: &ModelRequest<'_>) -> Value {
        let mut body = request_body(model, request);
        let fields = [
            ("max_tokens", sampling.max_tokens.map(Value::from)),
            ("temperature", sampling.temperature.map(Value::from)),
            ("top_p", sampling.top_p.map(Value::from)),
            ("top_k", sampling.top_k.map(Value::from)),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                body[name] = value;
            }
        }
        body
    }

    async fn event(
        event: &SseEvent,
        _data: &str,
        reply: &mut Reply,
        sink: &dyn TextSink,
    ) -> Result<Step, Fault> {
        let mut parsed: Event = serde_json::from_str(&event.data)
            .map_err(|_| Fault::Unreadable("invalid JSON event"))?;
        // The type in the data, else the event's name.
        let own_kind = parsed.kind.take();
        let kind = own_kind.as_deref().or(event.event.as_deref());
        match kind.unwrap_or_default() {
            "message_stop" => return Ok(Step::End),
            "error" => {
                let label = parsed.error.as_ref().and_then(|e| e.kind.as_deref());
                return Err(remote_fault(label));
            }
            "message_start" => message_start(parsed, reply),
            "content_block_start" => block_start(parsed, reply, sink).await,
            "content_block_delta" => block_delta(parsed, reply, sink).await,
            "message_delta" => message_delta(parsed, reply),
            // ping, content_block_stop and anything new carry nothing we need.
            _ => {}
        }
        Ok(Step::More)
    }
}

/// The Messages request for `request`.
fn request_body(model: &str, request: &ModelRequest<'_>) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": MAX_TOKENS,
        "stream": true,
        "messages": messages(&request.messages),
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

/// The conversation as Messages: the tool results that follow one another
/// in one user message, empty answers left out.
fn messages(conversation: &[ModelMessage<'_>]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::with_capacity(conversation.len());
    // Whether the last message pushed is a user message of tool results, to
    // which the next tool result is added.
    let mut open_results = false;
    for message in conversation {
        match message {
            ModelMessage::User { text, parts } => {
                let content = user_content(text, parts, image);
                messages.push(json!({ "role": "user", "content": content }));
                open_results = false;
            }
            ModelMessage::Assistant { text, tool_calls } => {
                let Some(content) = assistant_content(text, tool_calls) else {
                    continue;
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
    messages
}

/// An answer's content: its text alone, or blocks of its text and its
/// tool calls; none for an empty answer (the API refuses empty content, and
/// it adds nothing).
fn assistant_content(text: &str, tool_calls: &[ModelToolCall]) -> Option<Value> {
    if tool_calls.is_empty() {
        return (!text.is_empty()).then(|| Value::from(text));
    }
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
    Some(Value::Array(blocks))
}

/// An image as an `image` block: its bytes inline, or its URL.
fn image(media: &MediaContent) -> Option<Value> {
    let source = match (&media.data, &media.url) {
        (Some(data), _) => json!({ "type": "base64", "media_type": media.mime_type, "data": data }),
        (None, Some(url)) => json!({ "type": "url", "url": url }),
        (None, None) => return None,
    };
    Some(json!({ "type": "image", "source": source }))
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

/// `message_start`: the usage so far.
fn message_start(event: Event, reply: &mut Reply) {
    if let Some(usage) = event.message.and_then(|m| m.usage) {
        reply.usage = Some(Usage {
            input_tokens: usage.input().unwrap_or(0),
            output_tokens: usage.output_tokens.unwrap_or(0),
        });
    }
}

/// `content_block_start`: a text block's first text, or a tool call.
async fn block_start(event: Event, reply: &mut Reply, sink: &dyn TextSink) {
    let Some(block) = event.content_block else {
        return;
    };
    match block.kind.as_deref() {
        Some("text") => reply.text(block.text.as_deref().unwrap_or(""), sink).await,
        Some("tool_use") => {
            let index = event.index.unwrap_or(0);
            reply.calls.insert(
                index,
                PartialCall {
                    id: block.id.unwrap_or_default(),
                    name: block.name.unwrap_or_default(),
                    start_input: block.input,
                    arguments: String::new(),
                },
            );
        }
        // Thinking and other blocks are not part of the answer.
        _ => {}
    }
}

/// `content_block_delta`: text, or a piece of a tool call's JSON input.
async fn block_delta(event: Event, reply: &mut Reply, sink: &dyn TextSink) {
    let Some(delta) = event.delta else { return };
    match delta.kind.as_deref() {
        Some("text_delta") => {
            reply.text(delta.text.as_deref().unwrap_or(""), sink).await;
        }
        Some("input_json_delta") => {
            let index = event.index.unwrap_or(0);
            if let (Some(call), Some(json)) = (reply.calls.get_mut(&index), delta.partial_json) {
                call.arguments.push_str(&json);
            }
        }
        _ => {}
    }
}

/// `message_delta`: the usage, updated with what it reports.
fn message_delta(event: Event, reply: &mut Reply) {
    if let Some(usage) = event.usage {
        let current = reply.usage.get_or_insert_with(Usage::default);
        if let Some(input) = usage.input() {
            current.input_tokens = input;
        }
        if let Some(output) = usage.output_tokens {
            current.output_tokens = output;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::{PartKind, ToolSpec};

    use crate::streaming::tests::media;

    fn tool<'a>(call_id: &str, content: &'a str, is_error: bool) -> ModelMessage<'a> {
        ModelMessage::Tool {
            call_id: call_id.into(),
            name: "t".into(),
            content: content.into(),
            is_error,
        }
    }

    /// A request with every kind of message: a user's text with an inline
    /// image, an image by URL and a PDF; text and two tool calls; their
    /// results (one failed); a user's plain text.
    fn every_message_kind() -> ModelRequest<'static> {
        ModelRequest {
            system: Some("Be brief.".into()),
            messages: vec![
                ModelMessage::User {
                    text: "Look".into(),
                    parts: vec![
                        media(PartKind::Image, "image/png", "iVBORw0KGgo="),
                        media(PartKind::Image, "image/jpeg", "https://example.com/cat.jpg"),
                        media(PartKind::File, "application/pdf", "JVBERi0="),
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
            ..ModelRequest::default()
        }
    }

    #[test]
    fn sampling_parameters_are_sent_and_max_tokens_replaces_the_default() {
        let request = ModelRequest::default();
        let plain = <Anthropic as Wire>::request_body("m", &Sampling::default(), &request);
        assert_eq!(plain["max_tokens"], json!(MAX_TOKENS));
        let sampling = Sampling {
            max_tokens: Some(100),
            top_k: Some(40),
            ..Sampling::default()
        };
        let body = <Anthropic as Wire>::request_body("m", &sampling, &request);
        assert_eq!(
            (&body["max_tokens"], &body["top_k"]),
            (&json!(100), &json!(40))
        );
        assert!(body.get("temperature").is_none());
    }

    #[test]
    fn request_maps_every_message_kind_and_merges_tool_results() {
        let request = every_message_kind();
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

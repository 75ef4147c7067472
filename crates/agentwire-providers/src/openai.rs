//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`),
//! streamed: OpenAI itself, Ollama, vLLM, LiteLLM and the like.

use std::collections::BTreeMap;

use agentwire_core::{
    ContentPart, ModelMessage, ModelProvider, ModelReply, ModelRequest, ModelToolCall, PartKind,
    ProviderError, ProviderErrorKind, TextSink, Usage,
};
use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{self, HttpSettings, SseStream};
use crate::retry::{Failure, Fault, sanitize_label};

pub(crate) struct OpenAiProvider {
    http: HttpSettings,
    /// `{base_url}/chat/completions`.
    url: String,
    /// `Bearer <key>`, marked sensitive; none for keyless servers (Ollama).
    auth: Option<HeaderValue>,
}

impl OpenAiProvider {
    pub fn new(http: HttpSettings, url: String, auth: Option<HeaderValue>) -> OpenAiProvider {
        OpenAiProvider { http, url, auth }
    }

    async fn attempt(&self, body: Bytes, sink: &dyn TextSink) -> Result<ModelReply, Failure> {
        let mut request = self.http.client.post(&self.url);
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let stream = http::open(request, body, self.http.timeouts)
            .await
            .map_err(Failure::early)?;
        read_stream(stream, sink).await
    }
}

/// The reply in an opened body: chunks until `[DONE]`, or until the body
/// ends after a `finish_reason`.
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
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            reply.done = true;
            break;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(_) => return Err(reply.failure(Fault::Unreadable("invalid JSON chunk"))),
        };
        if let Some(error) = chunk.error {
            return Err(reply.failure(remote_fault(&error)));
        }
        reply.chunk(chunk, sink).await;
    }
    if !reply.done && !reply.finished {
        return Err(reply.failure(Fault::Interrupted));
    }
    stream.close();
    Ok(reply.finish())
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    fn provider_name(&self) -> &'static str {
        "openai"
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

/// The Chat Completions request for `request`.
pub(crate) fn request_body(model: &str, request: &ModelRequest<'_>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({ "role": "system", "content": system }));
    }
    for message in &request.messages {
        messages.push(match message {
            ModelMessage::User { text, parts } => {
                json!({ "role": "user", "content": user_content(text, parts) })
            }
            ModelMessage::Assistant { text, tool_calls } => {
                let content = if text.is_empty() && !tool_calls.is_empty() {
                    Value::Null
                } else {
                    Value::from(text.as_ref())
                };
                let mut message = json!({ "role": "assistant", "content": content });
                if !tool_calls.is_empty() {
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": call.arguments.to_string(),
                                },
                            })
                        })
                        .collect();
                }
                message
            }
            ModelMessage::Tool {
                call_id, content, ..
            } => json!({ "role": "tool", "tool_call_id": call_id, "content": content }),
        });
    }
    let mut body = json!({
        "model": model,
        "stream": true,
        "stream_options": { "include_usage": true },
        "messages": messages,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
    }
    body
}

/// A plain string without media; content parts with it.
fn user_content(text: &str, parts: &[ContentPart]) -> Value {
    let media: Vec<&ContentPart> = parts.iter().filter(|p| p.media.is_some()).collect();
    if media.is_empty() {
        return Value::from(text);
    }
    let mut content = Vec::with_capacity(media.len() + 1);
    if !text.is_empty() {
        content.push(json!({ "type": "text", "text": text }));
    }
    for part in media {
        let Some(m) = &part.media else { continue };
        let url = match (&m.data, &m.url) {
            (Some(data), _) => Some(format!("data:{};base64,{data}", m.mime_type)),
            (None, Some(url)) => Some(url.clone()),
            (None, None) => None,
        };
        match (part.kind, url) {
            (Some(PartKind::Image), Some(url)) => {
                let mut image = json!({ "url": url });
                if let Some(detail) = &m.detail {
                    image["detail"] = Value::from(detail.as_str());
                }
                content.push(json!({ "type": "image_url", "image_url": image }));
            }
            _ => content.push(json!({ "type": "text", "text": crate::attachment_note(part) })),
        }
    }
    Value::Array(content)
}

// The streamed chunk, read leniently: compatible servers omit or null fields.

#[derive(Deserialize)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<ChunkUsage>,
    error: Option<ChunkError>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<u32>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ChunkUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ChunkError {
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<Value>,
}

/// An error object inside the stream (OpenAI sends one mid-stream on
/// server trouble). Only its type, sanitised, reaches the message.
fn remote_fault(error: &ChunkError) -> Fault {
    let label = sanitize_label(
        error
            .kind
            .as_deref()
            .or_else(|| error.code.as_ref().and_then(Value::as_str)),
    );
    let (kind, retryable) = if label.contains("rate_limit") {
        (ProviderErrorKind::RateLimited, true)
    } else if label.contains("server_error") || label.contains("overloaded") {
        (ProviderErrorKind::Unavailable, true)
    } else {
        (ProviderErrorKind::Failed, false)
    };
    Fault::Remote {
        kind,
        retryable,
        label,
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The reply as its chunks arrive.
#[derive(Default)]
struct Assembly {
    text: String,
    /// By the delta's `index`.
    calls: BTreeMap<u32, PartialCall>,
    usage: Option<Usage>,
    /// A `finish_reason` was seen.
    finished: bool,
    /// `[DONE]` was seen.
    done: bool,
    /// Text went to the sink.
    streamed: bool,
}

impl Assembly {
    fn failure(&self, fault: Fault) -> Failure {
        Failure {
            fault,
            streamed: self.streamed,
        }
    }

    async fn chunk(&mut self, chunk: Chunk, sink: &dyn TextSink) {
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
                sink.text(&content).await;
                self.streamed = true;
                self.text.push_str(&content);
            }
            for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let index = call
                    .index
                    .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
                let partial = self.calls.entry(index).or_default();
                if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                    partial.id = id;
                }
                if let Some(function) = call.function {
                    if let Some(name) = function.name.filter(|n| !n.is_empty())
                        && partial.name.is_empty()
                    {
                        partial.name = name;
                    }
                    if let Some(arguments) = function.arguments {
                        partial.arguments.push_str(&arguments);
                    }
                }
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens.unwrap_or(0),
                output_tokens: usage.completion_tokens.unwrap_or(0),
            });
        }
    }

    fn finish(self) -> ModelReply {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| ModelToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}_{}", call.name)
                } else {
                    call.id
                },
                arguments: crate::parse_arguments(&call.arguments),
                name: call.name,
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

    #[test]
    fn request_maps_every_message_kind() {
        let request = ModelRequest {
            system: Some("Be brief.".into()),
            messages: vec![
                ModelMessage::User {
                    text: "What is this?".into(),
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
                                detail: Some("low".into()),
                                ..MediaContent::default()
                            },
                        ),
                        ContentPart::media(
                            PartKind::Audio,
                            MediaContent {
                                data: Some("UklGRg==".into()),
                                mime_type: "audio/wav".into(),
                                ..MediaContent::default()
                            },
                        ),
                    ]
                    .into(),
                },
                ModelMessage::Assistant {
                    text: Default::default(),
                    tool_calls: vec![ModelToolCall {
                        id: "call_abc".into(),
                        name: "get_weather".into(),
                        arguments: json!({"city": "Paris"}),
                    }],
                },
                ModelMessage::Tool {
                    call_id: "call_abc".into(),
                    name: "get_weather".into(),
                    content: "{\"temp\":21}".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather for a city".into(),
                parameters: json!({"type": "object"}),
            }],
            scenario: Some("ignored".into()),
        };
        assert_eq!(
            request_body("gpt-4o-mini", &request),
            json!({
                "model": "gpt-4o-mini",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}},
                        {"type": "text", "text": "[audio attachment: audio/wav]"},
                    ]},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_abc", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_abc", "content": "{\"temp\":21}"},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object"},
                }}],
            })
        );
    }

    #[test]
    fn plain_user_text_is_a_string_and_no_tools_means_no_tools_key() {
        let request = ModelRequest {
            messages: vec![ModelMessage::User {
                text: "hi".into(),
                parts: vec![ContentPart::text("hi")].into(),
            }],
            ..ModelRequest::default()
        };
        let body = request_body("llama3.2", &request);
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn stream_errors_are_classified_by_type_only() {
        let error: ChunkError =
            serde_json::from_str(r#"{"message":"sk-SECRET","type":"server_error"}"#).unwrap();
        assert_eq!(
            remote_fault(&error),
            Fault::Remote {
                kind: ProviderErrorKind::Unavailable,
                retryable: true,
                label: "server_error".into()
            }
        );
    }
}

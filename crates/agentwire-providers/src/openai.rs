//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`),
//! streamed: OpenAI itself, Ollama, vLLM, LiteLLM and the like.

use agentwire_core::{
    MediaContent, ModelMessage, ModelRequest, ProviderErrorKind, TextSink, Usage,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Sampling;
use crate::retry::{Fault, sanitize_label};
use crate::sse::SseEvent;
use crate::streaming::{Reply, Step, Wire, user_content};

/// The Chat Completions wire: chunks until `[DONE]`, or until the body
/// ends after a `finish_reason`.
pub(crate) struct OpenAi;

impl Wire for OpenAi {
    const NAME: &'static str = "openai";
    const DEFAULT_BASE_URL: &'static str = crate::OPENAI_DEFAULT_BASE_URL;
    const PATH: &'static str = "chat/completions";
    const KEY_HEADER: &'static str = "authorization";
    const KEY_PREFIX: &'static str = "Bearer ";
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    fn request_body(model: &str, sampling: &Sampling, request: &ModelRequest<'_>) -> Value {
        let mut body = request_body(model, request);
        let fields = [
            ("temperature", sampling.temperature.map(Value::from)),
            ("max_tokens", sampling.max_tokens.map(Value::from)),
            ("top_p", sampling.top_p.map(Value::from)),
            (
                "frequency_penalty",
                sampling.frequency_penalty.map(Value::from),
            ),
            (
                "presence_penalty",
                sampling.presence_penalty.map(Value::from),
            ),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                body[name] = value;
            }
        }
        body
    }

    async fn event(
        _event: &SseEvent,
        data: &str,
        reply: &mut Reply,
        sink: &dyn TextSink,
    ) -> Result<Step, Fault> {
        if data == "[DONE]" {
            return Ok(Step::End);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|_| Fault::Unreadable("invalid JSON chunk"))?;
        if let Some(error) = chunk.error {
            return Err(remote_fault(&error));
        }
        read_chunk(chunk, reply, sink).await;
        Ok(Step::More)
    }
}

/// The Chat Completions request for `request`.
fn request_body(model: &str, request: &ModelRequest<'_>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({ "role": "system", "content": system }));
    }
    for message in &request.messages {
        messages.push(match message {
            ModelMessage::User { text, parts } => {
                json!({ "role": "user", "content": user_content(text, parts, image_url) })
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

/// An image as an `image_url` part: its bytes as a `data:` URL, or its URL.
fn image_url(media: &MediaContent) -> Option<Value> {
    let url = match (&media.data, &media.url) {
        (Some(data), _) => format!("data:{};base64,{data}", media.mime_type),
        (None, Some(url)) => url.clone(),
        (None, None) => return None,
    };
    let mut image = json!({ "url": url });
    if let Some(detail) = &media.detail {
        image["detail"] = Value::from(detail.as_str());
    }
    Some(json!({ "type": "image_url", "image_url": image }))
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

/// Reads one chunk of choice 0 into `reply`: its text, its tool-call
/// fragments, whether it finished, and the usage.
async fn read_chunk(chunk: Chunk, reply: &mut Reply, sink: &dyn TextSink) {
    for choice in chunk.choices.unwrap_or_default() {
        if choice.index.unwrap_or(0) != 0 {
            continue;
        }
        if choice.finish_reason.is_some() {
            reply.complete = true;
        }
        let Some(delta) = choice.delta else { continue };
        if let Some(content) = delta.content {
            reply.text(&content, sink).await;
        }
        for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            add_call_fragment(reply, position, call);
        }
    }
    if let Some(usage) = chunk.usage {
        reply.usage = Some(Usage {
            input_tokens: usage.prompt_tokens.unwrap_or(0),
            output_tokens: usage.completion_tokens.unwrap_or(0),
        });
    }
}

/// A tool call's fragment, at `position` in its delta: the first id and
/// name seen, and a piece of the arguments.
fn add_call_fragment(reply: &mut Reply, position: usize, call: DeltaToolCall) {
    let index = call
        .index
        .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
    let partial = reply.calls.entry(index).or_default();
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

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::{ContentPart, ModelToolCall, PartKind, ToolSpec};

    use crate::streaming::tests::media;

    /// A request with every kind of message: a user's text with an inline
    /// image, an image by URL and audio; a tool call; its result.
    fn every_message_kind() -> ModelRequest<'static> {
        let mut cat = media(PartKind::Image, "image/jpeg", "https://example.com/cat.jpg");
        if let Some(m) = &mut cat.media {
            m.detail = Some("low".into());
        }
        ModelRequest {
            system: Some("Be brief.".into()),
            messages: vec![
                ModelMessage::User {
                    text: "What is this?".into(),
                    parts: vec![
                        media(PartKind::Image, "image/png", "iVBORw0KGgo="),
                        cat,
                        media(PartKind::Audio, "audio/wav", "UklGRg=="),
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
            metadata: std::borrow::Cow::Owned(agentwire_core::Metadata::from([(
                crate::MOCK_SCENARIO_KEY.to_owned(),
                "ignored".to_owned(),
            )])),
        }
    }

    #[test]
    fn request_maps_every_message_kind() {
        let request = every_message_kind();
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
    fn sampling_parameters_are_sent_when_given() {
        let request = ModelRequest::default();
        let plain = <OpenAi as Wire>::request_body("m", &Sampling::default(), &request);
        assert!(plain.get("temperature").is_none() && plain.get("max_tokens").is_none());
        let sampling = Sampling {
            temperature: Some(0.2),
            max_tokens: Some(512),
            presence_penalty: Some(-1.0),
            ..Sampling::default()
        };
        let body = <OpenAi as Wire>::request_body("m", &sampling, &request);
        assert_eq!(
            (
                &body["temperature"],
                &body["max_tokens"],
                &body["presence_penalty"]
            ),
            (&json!(0.2), &json!(512), &json!(-1.0))
        );
        assert!(body.get("top_p").is_none());
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

//! What the streaming HTTP providers (OpenAI-compatible Chat Completions,
//! Anthropic Messages) share: the provider around a [`Wire`] format, the
//! reply loop over the SSE body, and the reply as its events build it.
//!
//! A wire supplies only what differs: its endpoint, headers and request
//! body, and the decoding of one event. The loop owns the rest: reading the
//! events (with the first-token and idle timeouts of [`SseStream`]),
//! skipping blank ones, turning every fault into a [`Failure`] that knows
//! whether text was streamed, the end of the body before the wire's end
//! marker, and handing the connection back to the pool.

use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;

use agentwire_core::{
    ContentPart, MediaContent, ModelProvider, ModelReply, ModelRequest, ModelToolCall, PartKind,
    ProviderError, TextSink, Usage,
};
use async_trait::async_trait;
use bytes::Bytes;
use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use crate::http::{self, HttpSettings, SseStream};
use crate::retry::{Failure, Fault};
use crate::sse::SseEvent;
use crate::{ApiKey, Sampling};

/// One streaming wire format: what the shared provider and loop ask of it.
pub(crate) trait Wire: 'static {
    /// The provider type, as errors name it (`openai`).
    const NAME: &'static str;
    /// Where requests go when `base_url` is empty.
    const DEFAULT_BASE_URL: &'static str;
    /// The endpoint's path below `base_url`.
    const PATH: &'static str;
    /// The header that carries the key, and what comes before the key in it.
    const KEY_HEADER: &'static str;
    const KEY_PREFIX: &'static str;
    /// The headers every request carries besides the key.
    const HEADERS: &'static [(&'static str, &'static str)];

    /// The request body for `request`, with `sampling`'s parameters.
    fn request_body(model: &str, sampling: &Sampling, request: &ModelRequest<'_>) -> Value;

    /// Decodes one event of the body into `reply`, streaming its text to
    /// `sink` through [`Reply::text`]. `data` is the event's data trimmed,
    /// never empty. A fault ends the attempt.
    fn event(
        event: &SseEvent,
        data: &str,
        reply: &mut Reply,
        sink: &dyn TextSink,
    ) -> impl Future<Output = Result<Step, Fault>> + Send;
}

/// What the loop does after an event.
pub(crate) enum Step {
    /// Reads on.
    More,
    /// The wire's end marker: the reply is whole.
    End,
}

/// Where a provider sends its requests, and the key it sends with them.
pub(crate) struct Endpoint {
    /// `{base_url}/{W::PATH}`.
    url: String,
    /// The [`Wire::KEY_HEADER`] value, marked sensitive; none for keyless
    /// servers (Ollama).
    key: Option<HeaderValue>,
}

impl Endpoint {
    /// `W`'s endpoint at `base_url` with `api_key`, both checked. The error
    /// says which is wrong, never the key.
    pub fn new<W: Wire>(base_url: &str, api_key: Option<&ApiKey>) -> Result<Endpoint, String> {
        let url = http::endpoint(base_url, W::DEFAULT_BASE_URL, W::PATH)
            .map_err(|e| format!("base_url {e}"))?;
        let key = api_key
            .map(|key| http::secret_header(&format!("{}{}", W::KEY_PREFIX, key.expose())))
            .transpose()
            .map_err(|e| format!("api_key {e}"))?;
        Ok(Endpoint { url, key })
    }
}

/// A provider speaking `W` over HTTP.
pub(crate) struct HttpProvider<W> {
    http: HttpSettings,
    endpoint: Endpoint,
    sampling: Sampling,
    wire: PhantomData<fn() -> W>,
}

impl<W: Wire> HttpProvider<W> {
    pub fn new(http: HttpSettings, endpoint: Endpoint, sampling: Sampling) -> HttpProvider<W> {
        HttpProvider {
            http,
            endpoint,
            sampling,
            wire: PhantomData,
        }
    }

    async fn attempt(&self, body: Bytes, sink: &dyn TextSink) -> Result<ModelReply, Failure> {
        let mut request = self.http.client.post(&self.endpoint.url);
        for &(name, value) in W::HEADERS {
            request = request.header(name, value);
        }
        if let Some(key) = &self.endpoint.key {
            request = request.header(W::KEY_HEADER, key.clone());
        }
        let stream = http::open(request, body, self.http.timeouts)
            .await
            .map_err(Failure::early)?;
        read::<W>(stream, sink).await
    }
}

#[async_trait]
impl<W: Wire> ModelProvider for HttpProvider<W> {
    fn provider_name(&self) -> &'static str {
        W::NAME
    }

    fn model(&self) -> &str {
        &self.http.policy.model
    }

    async fn complete(
        &self,
        request: &ModelRequest<'_>,
        text: &dyn TextSink,
    ) -> Result<ModelReply, ProviderError> {
        let body = self.http.policy.json_body(&W::request_body(
            &self.http.policy.model,
            &self.sampling,
            request,
        ))?;
        self.http
            .policy
            .run(move || self.attempt(body.clone(), text))
            .await
    }
}

/// The reply in an opened body: events until the wire's end marker, or
/// until the body ends after the reply was [`complete`](Reply::complete).
pub(crate) async fn read<W: Wire>(
    mut stream: SseStream,
    sink: &dyn TextSink,
) -> Result<ModelReply, Failure> {
    let mut reply = Reply::default();
    let ended = loop {
        let event = match stream.next().await {
            Ok(Some(event)) => event,
            Ok(None) => break false,
            Err(fault) => return Err(reply.failure(fault)),
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        match W::event(&event, data, &mut reply, sink).await {
            Ok(Step::More) => {}
            Ok(Step::End) => break true,
            Err(fault) => return Err(reply.failure(fault)),
        }
    };
    if !ended && !reply.complete {
        return Err(reply.failure(Fault::Interrupted));
    }
    stream.close();
    Ok(reply.finish())
}

/// A tool call as its events arrive.
#[derive(Default)]
pub(crate) struct PartialCall {
    pub id: String,
    pub name: String,
    /// Arguments given whole when the call starts, used when none stream.
    pub start_input: Option<Value>,
    /// The streamed arguments, a JSON text in pieces.
    pub arguments: String,
}

impl PartialCall {
    /// The call; without an id, `call_<index>_<name>`.
    fn finish(self, index: u32) -> ModelToolCall {
        let arguments = match self.start_input {
            Some(input) if self.arguments.trim().is_empty() => input,
            _ => parse_arguments(&self.arguments),
        };
        ModelToolCall {
            id: if self.id.is_empty() {
                format!("call_{index}_{}", self.name)
            } else {
                self.id
            },
            name: self.name,
            arguments,
        }
    }
}

/// The reply as its events arrive.
#[derive(Default)]
pub(crate) struct Reply {
    text: String,
    /// Tool calls by their index on the wire.
    pub calls: BTreeMap<u32, PartialCall>,
    pub usage: Option<Usage>,
    /// The reply is whole even if the body ends without the end marker
    /// (OpenAI: a `finish_reason` was seen).
    pub complete: bool,
    /// Text went to the sink.
    streamed: bool,
}

impl Reply {
    /// Streams `text` to the sink and adds it to the reply; nothing when
    /// empty.
    pub async fn text(&mut self, text: &str, sink: &dyn TextSink) {
        if text.is_empty() {
            return;
        }
        sink.text(text).await;
        self.streamed = true;
        self.text.push_str(text);
    }

    fn failure(&self, fault: Fault) -> Failure {
        Failure {
            fault,
            streamed: self.streamed,
        }
    }

    fn finish(self) -> ModelReply {
        ModelReply {
            text: self.text,
            tool_calls: self
                .calls
                .into_iter()
                .map(|(index, call)| call.finish(index))
                .collect(),
            usage: self.usage,
        }
    }
}

/// A user message's content: its text as a plain string when it has no
/// media; else blocks: the text, then each image part as `image` writes it
/// (when it can) and every other part as an [`attachment_note`].
pub(crate) fn user_content(
    text: &str,
    parts: &[ContentPart],
    image: impl Fn(&MediaContent) -> Option<Value>,
) -> Value {
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
        let block = match part.kind {
            Some(PartKind::Image) => image(m),
            _ => None,
        };
        blocks.push(
            block.unwrap_or_else(|| json!({ "type": "text", "text": attachment_note(part) })),
        );
    }
    Value::Array(blocks)
}

/// The text a model gets for a media part it cannot take as such:
/// `[audio attachment: audio/wav]`.
fn attachment_note(part: &ContentPart) -> String {
    let kind = match part.kind {
        Some(PartKind::Image) => "image",
        Some(PartKind::Audio) => "audio",
        Some(PartKind::Video) => "video",
        Some(PartKind::Text) => "text",
        Some(PartKind::File) | None => "file",
    };
    let mime = part.media.as_ref().map_or("", |m| m.mime_type.as_str());
    let mime = if mime.is_empty() {
        "application/octet-stream"
    } else {
        mime
    };
    format!("[{kind} attachment: {mime}]")
}

/// Tool-call arguments from the string a model streamed: `{}` when empty,
/// `{"raw": "<string>"}` when not JSON.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| json!({ "raw": raw }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A media part of `kind`: at `source` when it is a URL, else with
    /// `source` as its bytes, base64.
    pub(crate) fn media(kind: PartKind, mime: &str, source: &str) -> ContentPart {
        let (data, url) = if source.starts_with("https://") {
            (None, Some(source.into()))
        } else {
            (Some(source.into()), None)
        };
        ContentPart::media(
            kind,
            MediaContent {
                data,
                url,
                mime_type: mime.into(),
                ..MediaContent::default()
            },
        )
    }

    #[test]
    fn arguments_parse_or_fall_back_to_raw() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(parse_arguments("{\"a\":"), json!({"raw": "{\"a\":"}));
    }

    #[test]
    fn attachment_notes_name_kind_and_mime() {
        let part = ContentPart::media(
            PartKind::Audio,
            MediaContent {
                mime_type: "audio/wav".into(),
                ..MediaContent::default()
            },
        );
        assert_eq!(attachment_note(&part), "[audio attachment: audio/wav]");
    }

    #[test]
    fn a_call_without_streamed_arguments_keeps_its_start_input() {
        let call = PartialCall {
            name: "t".into(),
            start_input: Some(json!({"a": 1})),
            arguments: " ".into(),
            ..PartialCall::default()
        };
        let call = call.finish(3);
        assert_eq!(
            (call.id.as_str(), call.arguments),
            ("call_3_t", json!({"a": 1}))
        );
    }
}

//! The model port: what the runtime asks a language model and what comes
//! back, independent of any provider's wire format.

use std::borrow::Cow;

use async_trait::async_trait;

use crate::content::{ContentPart, Metadata};
use crate::error::ErrorCode;

/// One request to a model: the conversation so far and the tools it may call.
/// Its messages borrow what they can from the session's history (`'h`): a
/// turn shows the model its whole window, and copying every text of it on
/// every turn was a tenth of a streamed turn's CPU.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest<'h> {
    /// The agent's instructions (system prompt).
    pub system: Option<String>,
    pub messages: Vec<ModelMessage<'h>>,
    pub tools: Vec<ToolSpec>,
    /// The client's metadata of the message the turn answers, as it sent
    /// it. A model is not sent it (a handler shows the model what it
    /// chooses in `messages`); a scripted provider picks its script by it.
    pub metadata: Cow<'h, Metadata>,
}

/// A message of the conversation as the model sees it: borrowed from the
/// stored history where it is the stored text, owned where the turn made it.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelMessage<'h> {
    User {
        text: Cow<'h, str>,
        /// Media parts (images, audio, files) sent beside the text.
        parts: Cow<'h, [ContentPart]>,
    },
    Assistant {
        text: Cow<'h, str>,
        tool_calls: Vec<ModelToolCall>,
    },
    /// The outcome of one tool call, answering an assistant's `tool_calls`.
    Tool {
        call_id: String,
        name: String,
        /// The result as text (JSON for structured results).
        content: Cow<'h, str>,
        is_error: bool,
    },
}

impl ModelRequest<'_> {
    /// The request with nothing borrowed (test doubles keep what they were
    /// asked).
    pub fn into_owned(self) -> ModelRequest<'static> {
        ModelRequest {
            system: self.system,
            messages: self
                .messages
                .into_iter()
                .map(ModelMessage::into_owned)
                .collect(),
            tools: self.tools,
            metadata: Cow::Owned(self.metadata.into_owned()),
        }
    }
}

impl ModelMessage<'_> {
    /// The message with nothing borrowed, for a conversation that outlives
    /// what it was built from.
    pub fn into_owned(self) -> ModelMessage<'static> {
        match self {
            ModelMessage::User { text, parts } => ModelMessage::User {
                text: Cow::Owned(text.into_owned()),
                parts: Cow::Owned(parts.into_owned()),
            },
            ModelMessage::Assistant { text, tool_calls } => ModelMessage::Assistant {
                text: Cow::Owned(text.into_owned()),
                tool_calls,
            },
            ModelMessage::Tool {
                call_id,
                name,
                content,
                is_error,
            } => ModelMessage::Tool {
                call_id,
                name,
                content: Cow::Owned(content.into_owned()),
                is_error,
            },
        }
    }
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelToolCall {
    /// The provider's id for the call, echoed back with its result.
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the arguments.
    pub parameters: serde_json::Value,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelReply {
    /// All the text of the answer (what was streamed, joined).
    pub text: String,
    /// Tools the model wants called before it answers further.
    pub tool_calls: Vec<ModelToolCall>,
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Where a provider streams text as it arrives.
#[async_trait]
pub trait TextSink: Send + Sync {
    async fn text(&self, delta: &str);
}

/// A language model behind some wire format.
#[async_trait]
pub trait ModelProvider: Send + Sync + 'static {
    /// The wire format, as traces name it (`gen_ai.provider.name`):
    /// `openai`, `anthropic`, `mock`.
    fn provider_name(&self) -> &'static str;

    /// The model asked for (`gen_ai.request.model`).
    fn model(&self) -> &str;

    /// Runs one completion, streaming its text to `text` as it arrives.
    /// Retries, backoff and timeouts happen inside; an `Err` is final.
    async fn complete(
        &self,
        request: &ModelRequest<'_>,
        text: &dyn TextSink,
    ) -> Result<ModelReply, ProviderError>;
}

/// Why a completion failed, classified for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// 429 after the retries.
    RateLimited,
    /// Unreachable, or a 5xx (502/503/504 after the retries; 500 at once).
    Unavailable,
    /// The stream stopped partway for longer than the idle timeout.
    Stalled,
    /// Nothing arrived within the first-token timeout.
    Timeout,
    /// 401 or 403: the credentials are wrong.
    AuthFailed,
    /// Anything else (a 4xx for the request itself, an unreadable stream).
    Failed,
}

/// A failed completion. `message` is shown to the client: it names the model
/// and the provider type and never carries the provider's response body,
/// which can hold credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    pub message: String,
}

impl ProviderError {
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind,
            message: message.into(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self.kind {
            ProviderErrorKind::RateLimited => ErrorCode::ProviderRateLimited,
            ProviderErrorKind::Unavailable => ErrorCode::ProviderUnavailable,
            ProviderErrorKind::Stalled => ErrorCode::ProviderStalled,
            ProviderErrorKind::Timeout => ErrorCode::ProviderTimeout,
            ProviderErrorKind::AuthFailed => ErrorCode::ProviderAuthFailed,
            ProviderErrorKind::Failed => ErrorCode::Internal,
        }
    }
}

/// A set of server-side tools, such as one HTTP API or one MCP server's
/// tools. Opened per connection (see [`ToolSource`]) so that stateful servers
/// keep one session per client.
#[async_trait]
pub trait ToolBox: Send + Sync {
    /// The tools this box offers.
    fn specs(&self) -> &[ToolSpec];

    /// Runs `name`. `Err` is the tool's failure, returned to the model as an
    /// error result; it must not carry secrets.
    async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, String>;

    /// Whether the box can serve no more calls (its server went away): the
    /// connection's next turn opens a new one instead of reusing it.
    fn is_closed(&self) -> bool {
        false
    }
}

/// Opens a [`ToolBox`]: once per connection, reused across its turns.
#[async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// A short name for logs and errors (the config's tool name).
    fn name(&self) -> &str;

    /// What kind of source it is, as traces name it
    /// (`agentwire.tool.side`): `http`, `mcp`.
    fn kind(&self) -> &'static str;

    async fn open(&self) -> Result<std::sync::Arc<dyn ToolBox>, String>;
}

/// Tools whose every call acts for one caller in one session (agent
/// memory): a voice call opens its own with who is calling, as a text turn
/// hands its [`TurnCaller`](crate::TurnCaller) to the handler.
pub trait CallerToolSource: Send + Sync + 'static {
    fn open_for(
        &self,
        caller: std::sync::Arc<crate::TurnCaller>,
        session: crate::SessionId,
    ) -> std::sync::Arc<dyn ToolBox>;
}

//! A voice call's exchanges in its session. A call is not a turn (text
//! turns run beside it, and it holds no turn lease), but what was said is
//! the session's as much as a typed message: each response, when it ends,
//! is stored as the caller's transcript and the reply's, so history, the
//! sessions API and the next text turn's context all show it.

use super::Agent;
use super::records::record;
use super::{Engine, SubmitError};
use agentwire_core::content::Metadata;
use agentwire_core::ids::SessionId;
use agentwire_core::session::{MessageBody, ReplyEnd, StoredMessage, Via};
use agentwire_core::time::Timestamp;
use agentwire_core::turn::{ToolOutcome, ToolSide};

/// One response of a call and the utterance it answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VoiceExchange {
    /// What the caller said; empty when the response answered nothing the
    /// caller said (a greeting).
    pub user: String,
    /// The reply's transcript, as far as it was spoken.
    pub reply: String,
    /// The caller barged in before the reply's end.
    pub interrupted: bool,
    /// The tools the model called for the reply (the server's and the
    /// client's), in order.
    pub tools: Vec<VoiceToolStep>,
}

/// A tool call of a voice response and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceToolStep {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    /// Who ran it: the server, or the caller's client.
    pub side: ToolSide,
    pub outcome: ToolOutcome,
}

impl Engine {
    /// Stores `exchange` on `session` (created by it if new), as
    /// [`Engine::record_event`] attaches: the same owner and agent checks.
    pub async fn record_voice_exchange(
        &self,
        agent: &Agent,
        namespace: &str,
        owner: Option<&str>,
        session: &SessionId,
        exchange: VoiceExchange,
    ) -> Result<(), SubmitError> {
        let lease = self.attach(session, agent, namespace, owner, true).await?;
        let messages = spoken(session, exchange, self.inner.clock.now());
        lease.store_messages(messages, None).await?;
        Ok(())
    }
}

/// The messages of `exchange`, in the order they were said: the caller's
/// transcript (when it said something), the tool steps, the reply.
fn spoken(session: &SessionId, exchange: VoiceExchange, at: Timestamp) -> Vec<StoredMessage> {
    let voice = |body| StoredMessage {
        via: Via::Voice,
        ..record(session, body, Metadata::new(), at)
    };
    let mut messages = Vec::with_capacity(2 + 2 * exchange.tools.len());
    if !exchange.user.is_empty() {
        messages.push(voice(MessageBody::User {
            text: exchange.user,
            parts: Vec::new(),
            attachment: None,
        }));
    }
    for step in exchange.tools {
        messages.push(voice(MessageBody::ToolCall {
            id: step.id.clone(),
            name: step.name,
            arguments: step.arguments,
            side: step.side,
        }));
        messages.push(voice(MessageBody::ToolResult {
            id: step.id,
            outcome: step.outcome,
        }));
    }
    messages.push(voice(MessageBody::Reply {
        text: exchange.reply,
        parts: Vec::new(),
        end: match exchange.interrupted {
            true => ReplyEnd::Interrupted,
            false => ReplyEnd::Complete,
        },
    }));
    messages
}

//! Session summaries: the [`Summarizer`] port that writes them, and the
//! [`SummaryPolicy`] that says when an agent's sessions get one. The
//! engine's scheduler (`agentwire-engine`) runs them once a session has been
//! idle.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::session::StoredMessage;

/// Writes a session's summary from its stored messages.
#[async_trait]
pub trait Summarizer: Send + Sync + 'static {
    /// A short recap of `messages` (every stored message of the session, in
    /// order, events and failures included). `Err` is logged, never shown.
    async fn summarize(&self, messages: &[StoredMessage]) -> Result<String, String>;
}

/// How an agent's sessions are summarised.
#[derive(Clone)]
pub struct SummaryPolicy {
    /// Idle time after a completed turn before the summary is written.
    pub after_idle: Duration,
    pub summarizer: Arc<dyn Summarizer>,
}

//! The tool calls whose streams are open on this replica, for
//! `notifications/cancelled`, and the elicitations they wait on, for the
//! client's answers: the client names either by its JSON-RPC id, which is
//! only unique within its MCP session and credential, so those key it too
//! (a digest of the credential: the tables hold no secret).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::HeaderMap;
use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::identity;

/// Bounded by the calls in flight: one entry per open stream, each a turn
/// the admission path let through, removed when the stream ends; and one
/// per client tool call such a stream asked about, removed with it.
#[derive(Default)]
pub(crate) struct Running {
    calls: Arc<Mutex<HashMap<CallKey, (u64, CancellationToken)>>>,
    answers: Answers,
    next: AtomicU64,
}

/// An elicitation's answer as its stream gets it: the client tool call it
/// was about, and the client's `result` (`None`: an error).
pub(crate) type Answer = (String, Option<Value>);

type Answers = Arc<Mutex<HashMap<CallKey, (String, mpsc::Sender<Answer>)>>>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CallKey {
    mcp_session: String,
    credential: [u8; 32],
    request: String,
}

impl CallKey {
    fn new(headers: &HeaderMap, request_id: &Value) -> CallKey {
        let credential = identity::bearer(headers).unwrap_or("");
        CallKey {
            mcp_session: super::mcp_session(headers).to_owned(),
            credential: Sha256::digest(credential.as_bytes()).into(),
            request: request_id.to_string(),
        }
    }
}

/// A call's place in the table while its stream is open: its cancel, and
/// its removal when dropped.
pub(crate) struct Registration {
    calls: Arc<Mutex<HashMap<CallKey, (u64, CancellationToken)>>>,
    key: CallKey,
    generation: u64,
    pub(crate) cancel: CancellationToken,
    answers: Answers,
    /// The elicitations this stream waits on.
    asked: Vec<CallKey>,
}

impl Running {
    /// Registers the call `request_id` of the request with `headers`. A
    /// resumed stream takes over from the stream it resumes.
    pub(crate) fn register(&self, headers: &HeaderMap, request_id: &Value) -> Registration {
        let key = CallKey::new(headers, request_id);
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        self.calls
            .lock()
            .insert(key.clone(), (generation, cancel.clone()));
        Registration {
            calls: self.calls.clone(),
            key,
            generation,
            cancel,
            answers: self.answers.clone(),
            asked: Vec::new(),
        }
    }
}

impl Registration {
    /// Waits for the client's answer to the request `request_id` (an
    /// elicitation about the client tool call `call`): it comes to `tx`.
    pub(crate) fn expect_answer(
        &mut self,
        request_id: &Value,
        call: &str,
        tx: mpsc::Sender<Answer>,
    ) {
        let key = CallKey {
            request: request_id.to_string(),
            ..self.key.clone()
        };
        self.answers
            .lock()
            .insert(key.clone(), (call.to_owned(), tx));
        self.asked.push(key);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut answers = self.answers.lock();
        for key in &self.asked {
            answers.remove(key);
        }
        drop(answers);
        let mut calls = self.calls.lock();
        if calls
            .get(&self.key)
            .is_some_and(|(g, _)| *g == self.generation)
        {
            calls.remove(&self.key);
        }
    }
}

/// `notifications/cancelled`: cancels the call `params.requestId` of the
/// same MCP session and credential, if its stream is open here. Unknown
/// or finished calls are ignored, as the protocol says.
pub(crate) fn cancel(state: &AppState, headers: &HeaderMap, params: &Value) {
    let Some(request_id) = params.get("requestId") else {
        return;
    };
    let key = CallKey::new(headers, request_id);
    if let Some((_, token)) = state.mcp().running.calls.lock().get(&key) {
        token.cancel();
    }
}

/// A client's answer to one of our requests: to the stream that waits on
/// it, if it is open here. Others are dropped (the tool call then times
/// out, as one the client never answered).
pub(crate) fn answer(state: &AppState, headers: &HeaderMap, id: &Value, result: Option<Value>) {
    let key = CallKey::new(headers, id);
    let waiting = state.mcp().running.answers.lock().remove(&key);
    if let Some((call, tx)) = waiting {
        // The stream holds room for the answers it asked for.
        let _ = tx.try_send((call, result));
    }
}

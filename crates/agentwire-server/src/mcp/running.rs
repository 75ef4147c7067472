//! The tool calls whose streams are open on this replica, for
//! `notifications/cancelled`: the client names the call by its request
//! id, which is only unique within its MCP session and credential, so
//! those key it too (a digest of the credential: the table holds no
//! secret).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::HeaderMap;
use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::identity;

/// Bounded by the calls in flight: one entry per open stream, each a turn
/// the admission path let through, removed when the stream ends.
#[derive(Default)]
pub(crate) struct Running {
    calls: Arc<Mutex<HashMap<CallKey, (u64, CancellationToken)>>>,
    next: AtomicU64,
}

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
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
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

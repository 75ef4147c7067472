//! A session opening on a connection: the opening message's declaration
//! checked against what the session opened with, and the agent's
//! [`SessionInit`] run, before anything of the message is stored.

use std::sync::Arc;

use agentwire_core::memory::TurnCaller;
use agentwire_core::session::SessionRecord;
use agentwire_core::session_init::{
    Declaration, DeclarationRefusal, InitRefusal, Opening, RefusalReason, SessionOpening,
};
use serde_json::Value;

use super::{LiveSession, SessionLease, SubmitRequest};

/// What a session opened with: its declaration as the client sent it (what
/// the store keeps) and parsed (what is compared and prepared).
#[derive(Debug, Default)]
pub(crate) struct OpenedWith {
    pub(crate) raw: Option<Value>,
    parsed: Declaration,
}

impl OpenedWith {
    /// A stored session's. A stored declaration was parsed when it was
    /// accepted; one that no longer parses opens as declared, and is refused
    /// again when the session opens.
    pub(crate) fn stored(record: &SessionRecord) -> OpenedWith {
        let parsed = record
            .declaration
            .as_ref()
            .and_then(|raw| Declaration::parse(raw).ok())
            .unwrap_or_default();
        OpenedWith {
            raw: record.declaration.clone(),
            parsed,
        }
    }
}

impl SessionLease {
    /// Opens the session for the message, when the message opens it on its
    /// connection or the session has not been prepared in this process: a
    /// new session takes the message's declaration; a session that opened
    /// before keeps its own, and a message that declares something else is
    /// refused (`DeclarationMismatch`). Called with the turn flag held; on
    /// a refusal the caller gives it back.
    pub(crate) async fn open_for(&self, req: &SubmitRequest<'_>) -> Result<(), InitRefusal> {
        let declaration = match req.opening {
            Opening::Opens { declaration } => declaration,
            Opening::Continues => None,
        };
        // Nothing to check or prepare: every message of an agent without
        // session init that declares nothing (the turn's hot path).
        if req.agent.session_init.is_none() && declaration.is_none() {
            return Ok(());
        }
        let (opened, prepared) = {
            let state = self.session.state.lock();
            (state.opened_with.clone(), state.prepared)
        };
        // Prepared once per process: a session resumed here by a rejoin,
        // another door or a restart is prepared with what it opened with.
        if matches!(req.opening, Opening::Continues) && prepared {
            return Ok(());
        }
        let declared = match declaration {
            Some(raw) => Declaration::parse(raw)?,
            None => Declaration::default(),
        };
        let effective = match &opened {
            Some(opened) if !declared.is_empty() && declared != opened.parsed => {
                return Err(mismatch(&declared, &opened.parsed).into());
            }
            Some(opened) => opened.clone(),
            None => Arc::new(OpenedWith {
                raw: declaration.filter(|_| !declared.is_empty()).cloned(),
                parsed: declared,
            }),
        };
        let caller = TurnCaller {
            owner: req.owner.map(str::to_owned),
            memory_facet: req.memory_facet.map(str::to_owned),
        };
        match &req.agent.session_init {
            Some(init) => {
                init.open(SessionOpening {
                    agent: &req.agent.name,
                    session: self.id(),
                    caller: &caller,
                    grants: req.grants,
                    declaration: &effective.parsed,
                    scope: req.scope,
                })
                .await?;
            }
            None => {
                if let Some(handle) = effective.parsed.sandboxes.keys().next() {
                    return Err(DeclarationRefusal::sandbox(
                        handle,
                        RefusalReason::SessionInitUnsupported,
                        "this agent takes no declarations",
                    )
                    .into());
                }
            }
        }
        let mut state = self.session.state.lock();
        state.opened_with.get_or_insert(effective);
        state.prepared = true;
        Ok(())
    }
}

impl LiveSession {
    /// The record the store creates for the session: with what it opened
    /// with.
    pub(crate) fn record_to_create(&self) -> SessionRecord {
        let declaration =
            (self.state.lock().opened_with.as_ref()).and_then(|opened| opened.raw.clone());
        SessionRecord {
            declaration,
            ..self.record.clone()
        }
    }
}

/// The first handle on which two declarations differ.
fn mismatch(declared: &Declaration, opened: &Declaration) -> DeclarationRefusal {
    let handle = declared
        .sandboxes
        .iter()
        .find(|(handle, sandbox)| opened.sandboxes.get(*handle) != Some(sandbox))
        .map(|(handle, _)| handle.as_str())
        .or_else(|| {
            opened
                .sandboxes
                .keys()
                .find(|handle| !declared.sandboxes.contains_key(*handle))
                .map(String::as_str)
        })
        .unwrap_or("");
    DeclarationRefusal::sandbox(
        handle,
        RefusalReason::DeclarationMismatch,
        "the session was opened with another declaration; resume it with the same one, or with none",
    )
}

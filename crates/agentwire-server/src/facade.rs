//! What the request/response front doors (A2A, MCP, REST functions) share:
//! who calls, a request's message made a turn through the one admission
//! path, and a turn read to its end.
//!
//! A request is a connection that lives as long as its turn: it gets an
//! [`Admission`] of its own (so the frame rate does not apply, but the
//! server's inbound budget does), its credential is checked when the turn
//! starts, and the caller's turns per minute, the busy rule and the
//! session's ownership are the WebSocket's. Sessions opened here are the
//! WebSocket's sessions (namespace `default`): the same owner continues
//! them on either.

use std::sync::Arc;

use agentwire_core::{
    ClientAnswer, ConnectionScope, ContentPart, Credentials, LogReader, Metadata, Opening, Reply,
    ToolSide, TurnEvent, TurnFailure,
};
use agentwire_engine::{SessionLease, TurnHandle};
use axum::http::HeaderMap;

use crate::budget::InboundPermit;
use crate::connection::{Admission, Busy, CredentialClock, Refusal, TurnIntent};
use crate::identity::{self, Caller};
use crate::lifecycle::{self, RequestSlot};
use crate::upgrade::{self, ClientAddress};
use crate::{AgentEntry, AppState};

/// How long a continued session stays in memory after its turn starts: a
/// client that goes on with the conversation in its next request finds it
/// live rather than loaded from the store again. Only a request that
/// continued a session holds it (a one-off call, such as a REST function,
/// holds nothing), so what is held is the conversations that went on
/// through a request door in the last minute.
const REQUEST_SESSION_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// The namespace of the sessions a request opens: the WebSocket's default.
const NAMESPACE: &str = "default";

/// The caller of a request to `agent`: its `Authorization: Bearer`
/// credential checked as on `/ws` (401 for a refused or missing one on a
/// private agent, 403 for an identity the agent does not admit, 429 after
/// too many failed attempts, counted with every other front door's).
pub(crate) async fn caller(
    state: &AppState,
    headers: &HeaderMap,
    agent: &AgentEntry,
    address: ClientAddress,
) -> Result<Caller, upgrade::Refusal> {
    let credentials = Credentials {
        bearer: identity::bearer(headers),
        ..Credentials::default()
    };
    identity::identify(state, &credentials, agent, address).await
}

/// `application/json`, with any parameters (`; charset=utf-8`): the
/// content type a JSON front door accepts.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// A message a request asks an agent to answer.
pub(crate) struct RequestMessage<'a> {
    pub(crate) agent: &'a AgentEntry,
    pub(crate) caller: &'a Caller,
    /// The session to continue; `None` opens a new one.
    pub(crate) session: Option<&'a str>,
    /// The message's text; `None`: its text parts joined.
    pub(crate) text: Option<String>,
    pub(crate) parts: Vec<ContentPart>,
    pub(crate) metadata: Metadata,
    /// The request body's size: held from the server's inbound budget
    /// until the turn ends.
    pub(crate) body_bytes: usize,
}

/// A turn a request started, and what it holds while it runs.
pub(crate) struct RequestTurn {
    pub(crate) handle: TurnHandle,
    pub(crate) hold: TurnHold,
}

/// What a request's turn holds until the request has read it: the
/// message's bytes in the inbound budget, the request's scope, and its
/// place among the requests the drain waits for.
pub(crate) struct TurnHold {
    _permit: InboundPermit,
    _scope: Arc<ConnectionScope>,
    _request: RequestSlot,
}

/// Admits `message` and starts its turn, through the one admission path.
pub(crate) async fn start(
    state: &Arc<AppState>,
    message: RequestMessage<'_>,
) -> Result<RequestTurn, Refusal> {
    let mut admission = Admission::new(&state.settings().limits);
    let permit = admission.text(state, message.body_bytes)?;
    let credential = CredentialClock::new(state, message.caller.identity.as_ref());
    let scope = ConnectionScope::new();
    let minted = state.engine().mint_session_id();
    let continued = message.session.is_some();
    let intent = TurnIntent {
        agent: &message.agent.agent,
        namespace: NAMESPACE,
        caller: message.caller,
        memory_facet: message.agent.memory_facet.as_deref(),
        credential: &credential,
        busy: Busy::Idle,
        current: &minted,
        minted: &minted,
        requested: message.session,
        content: message.text,
        parts: message.parts,
        attach: None,
        metadata: message.metadata,
        scope: &scope,
        // Declares nothing: prepared with what the session opened with.
        opening: Opening::Continues,
    };
    let request = lifecycle::hold_request(state);
    let handle = Admission::turn(state, intent).await?;
    if continued {
        handle.session.hold_for(REQUEST_SESSION_GRACE);
    }
    Ok(RequestTurn {
        handle,
        hold: TurnHold {
            _permit: permit,
            _scope: scope,
            _request: request,
        },
    })
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ending {
    Completed(Reply),
    Failed(TurnFailure),
    Cancelled(Reply),
}

/// Why a client tool call is denied on a front door that cannot ask its
/// client to run one: the model is told, and answers without it.
pub(crate) const NO_CLIENT_TOOLS: &str =
    "this front door cannot run client-side tools; answer without it";

/// Reads the turn's events to its terminal, calling `on_text` with each
/// piece of streamed text. A client tool call is denied at once with
/// [`NO_CLIENT_TOOLS`]: the model goes on without it.
pub(crate) async fn finish(
    session: &SessionLease,
    events: &mut LogReader,
    mut on_text: impl FnMut(&str),
) -> Ending {
    loop {
        let entry = match events.next().await {
            Ok(entry) => entry,
            // A reader that reads as it goes is never overtaken; should it
            // be, what it missed cannot be told: the turn is lost to it.
            Err(_) => return Ending::Failed(TurnFailure::internal()),
        };
        match step(session, &entry.event) {
            Step::Text(text) => on_text(text),
            Step::Ended(ending) => return ending,
            Step::Other => {}
        }
    }
}

/// What one of a turn's log entries is to a front door that reads the
/// turn to its end, entry by entry (as [`finish`] does, for a door that
/// also does something between entries: MCP's progress, its event ids).
pub(crate) enum Step<'a> {
    Text(&'a str),
    Ended(Ending),
    Other,
}

/// Reads one entry: a client tool call is denied at once with
/// [`NO_CLIENT_TOOLS`].
pub(crate) fn step<'a>(session: &SessionLease, event: &'a TurnEvent) -> Step<'a> {
    match event {
        TurnEvent::TextDelta(text) => Step::Text(text),
        TurnEvent::ToolCall(call) if call.side == ToolSide::Client => {
            let denied = ClientAnswer::Nack(NO_CLIENT_TOOLS.to_owned());
            session.answer_client_call(&call.id, denied);
            Step::Other
        }
        TurnEvent::Completed(reply) => Step::Ended(Ending::Completed(reply.clone())),
        TurnEvent::Failed(failure) => Step::Ended(Ending::Failed(failure.clone())),
        TurnEvent::Cancelled(reply) => Step::Ended(Ending::Cancelled(reply.clone())),
        _ => Step::Other,
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, header};

    use super::is_json;

    #[test]
    fn only_json_content_types_are_json() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            is_json(&headers)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(!with("text/plain"));
        assert!(!with("application/jsonx"));
        assert!(!is_json(&HeaderMap::new()));
    }
}

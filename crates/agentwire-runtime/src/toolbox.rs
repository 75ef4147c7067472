//! Server tool sets opened once per connection and reused across its turns,
//! so a stateful MCP server keeps one session per client; they close with
//! the connection. And the tools prepared for the turn's session (its
//! sandboxes'), which live as long as the session's instances.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_core::{SessionTools, ToolBox, ToolSource, TurnContext};
use parking_lot::Mutex;
use tokio::sync::OnceCell;

/// An opened tool set.
pub(crate) struct OpenBox {
    pub(crate) tool_box: Arc<dyn ToolBox>,
    /// [`ToolSource::kind`], for traces.
    pub(crate) kind: &'static str,
}

/// A tool set opened at most once, by whichever turn needs it first.
type OpenOnce = Arc<OnceCell<Arc<dyn ToolBox>>>;

/// The connection's open tool sets, by agent and source name.
#[derive(Default)]
struct ConnectionToolboxes {
    opened: Mutex<HashMap<(String, String), OpenOnce>>,
}

/// The agent's tool sets for this turn's connection, opening those not open
/// yet. A source that fails to open is left out of this turn (and tried again
/// on the next), so one broken server does not take the agent down; one whose
/// open box has closed (its MCP server died) is opened again.
pub(crate) async fn open_for_connection(
    turn: &TurnContext,
    agent: &str,
    sources: &[Arc<dyn ToolSource>],
) -> Vec<OpenBox> {
    let cache = turn.scope.get_or_init(ConnectionToolboxes::default);
    let mut boxes = Vec::with_capacity(sources.len());
    for source in sources {
        let cell = {
            let mut opened = cache.opened.lock();
            let cell = opened
                .entry((agent.to_owned(), source.name().to_owned()))
                .or_default();
            if cell.get().is_some_and(|tool_box| tool_box.is_closed()) {
                tracing::warn!(tool = source.name(), "tool source closed; opening it again");
                *cell = OpenOnce::default();
            }
            cell.clone()
        };
        match cell.get_or_try_init(|| source.open()).await {
            Ok(tool_box) => boxes.push(OpenBox {
                tool_box: tool_box.clone(),
                kind: source.kind(),
            }),
            Err(error) => {
                tracing::warn!(tool = source.name(), %error, "tool source unavailable for this turn");
            }
        }
    }
    boxes
}

/// What traces name a session's prepared tools' side.
const SESSION_KIND: &str = "sandbox";

/// The tool boxes prepared for the turn's session.
pub(crate) async fn for_session(tools: &dyn SessionTools, turn: &TurnContext) -> Vec<OpenBox> {
    tools
        .for_session(&turn.session_id)
        .await
        .into_iter()
        .map(|tool_box| OpenBox {
            tool_box,
            kind: SESSION_KIND,
        })
        .collect()
}

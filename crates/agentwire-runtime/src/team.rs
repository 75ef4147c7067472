//! Delegation and handoff between agents, on the engine's turn.
//!
//! **Delegation** (`delegate_agent`, arguments `{target_agent, message}`, as
//! the Gnosari engine names them): the target's handler runs on a sub-turn
//! ([`TurnContext::delegated`]) that sees the message alone. Its events go
//! to the connection between two `AgentSwitched` events (to the target, then
//! back), so each dialect can tell them apart: Gnosari does not stream a
//! delegate's run (behaviour notes §5.18) and Omnia drops its text, while a
//! client tool it calls still reaches the client. None of its work is stored.
//! Its answer is the tool's result, stored with the call like any server
//! tool's. A failed sub-turn is an error result, never a failed turn.
//! Delegations nest at most [`MAX_DELEGATION_DEPTH`] deep.
//!
//! **Handoff** (`transfer_to_<agent>`, no arguments, as the OpenAI Agents SDK
//! names them): the call is answered `{"assistant": "<agent>"}`, then the
//! target, a runtime agent, takes over the rest of the turn with the
//! conversation so far, its own instructions, model and tools; its answer is
//! the turn's reply. An `AgentSwitched` event marks the change, so the
//! events that follow carry its name. Only the first handoff of a round
//! counts.
//!
//! Targets are found by key in a [`Roster`], filled once every agent exists
//! and held weakly, so agents that name each other form no reference cycle.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use agentwire_core::content::effective_text;
use agentwire_core::{
    Handler, Metadata, ModelToolCall, ToolOutcome, ToolSpec, TurnContext, TurnInput,
};
use serde_json::{Value, json};

use crate::{RuntimeHandler, RuntimeSettings, announce};

/// The delegation tool's name.
pub const DELEGATE_TOOL: &str = "delegate_agent";

/// How many delegations may nest: an agent asked by an agent asked by an
/// agent may not ask a fourth.
pub const MAX_DELEGATION_DEPTH: u32 = 3;

/// An agent this one may ask through `delegate_agent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// The target's key in the roster.
    pub target: String,
    /// When to ask it, shown to the model in the tool's description.
    pub instructions: Option<String>,
}

/// An agent this one may hand the turn to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The target's key in the roster; it must be a runtime agent.
    pub target: String,
    /// When to hand over: the transfer tool's description.
    pub description: Option<String>,
}

/// The name of the tool that hands the turn to `agent`: the OpenAI Agents
/// SDK's, `transfer_to_` and the name with every character other than an
/// ASCII letter or digit made `_`, lowercased.
pub fn transfer_tool_name(agent: &str) -> String {
    let mut name = String::from("transfer_to_");
    name.extend(agent.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '_'
        }
    }));
    name
}

/// An agent a roster holds.
pub enum Peer {
    /// A runtime agent: a delegation or handoff target.
    Runtime(Arc<RuntimeHandler>),
    /// Any other handler: a delegation target only.
    Handler {
        name: String,
        handler: Arc<dyn Handler>,
    },
}

impl Peer {
    fn name(&self) -> &str {
        match self {
            Peer::Runtime(runtime) => &runtime.settings.agent_name,
            Peer::Handler { name, .. } => name,
        }
    }

    fn handler(&self) -> Arc<dyn Handler> {
        match self {
            Peer::Runtime(runtime) => runtime.clone(),
            Peer::Handler { handler, .. } => handler.clone(),
        }
    }
}

enum WeakPeer {
    Runtime(Weak<RuntimeHandler>),
    Handler(Weak<dyn Handler>),
}

/// The agents that delegation and handoff targets are looked up in, by key:
/// the configured agents, or the agents of one team file.
#[derive(Default)]
pub struct Roster {
    peers: OnceLock<HashMap<String, (String, WeakPeer)>>,
}

impl Roster {
    pub fn new() -> Arc<Roster> {
        Arc::new(Roster::default())
    }

    /// Fills the roster, once every agent in it exists. Agents are held
    /// weakly: whoever serves them keeps them alive. `false` when it was
    /// filled already (and is left as it was).
    pub fn fill(&self, peers: impl IntoIterator<Item = (String, Peer)>) -> bool {
        let peers = peers
            .into_iter()
            .map(|(key, peer)| {
                let name = peer.name().to_owned();
                let weak = match peer {
                    Peer::Runtime(runtime) => WeakPeer::Runtime(Arc::downgrade(&runtime)),
                    Peer::Handler { handler, .. } => WeakPeer::Handler(Arc::downgrade(&handler)),
                };
                (key, (name, weak))
            })
            .collect();
        self.peers.set(peers).is_ok()
    }

    /// The agent's name (the one its events carry).
    fn name(&self, key: &str) -> Option<&str> {
        self.peers.get()?.get(key).map(|(name, _)| name.as_str())
    }

    fn peer(&self, key: &str) -> Option<Peer> {
        let (name, weak) = self.peers.get()?.get(key)?;
        Some(match weak {
            WeakPeer::Runtime(runtime) => Peer::Runtime(runtime.upgrade()?),
            WeakPeer::Handler(handler) => Peer::Handler {
                name: name.clone(),
                handler: handler.upgrade()?,
            },
        })
    }
}

/// One agent's team tools.
pub(crate) struct TeamTools<'a> {
    settings: &'a RuntimeSettings,
    /// Transfer tool name → handoff.
    transfers: Vec<(String, &'a Handoff)>,
}

impl<'a> TeamTools<'a> {
    pub(crate) fn new(settings: &'a RuntimeSettings) -> TeamTools<'a> {
        let transfers = settings
            .handoffs
            .iter()
            .map(|h| (transfer_tool_name(target_name(settings, &h.target)), h))
            .collect();
        TeamTools {
            settings,
            transfers,
        }
    }

    pub(crate) fn delegates(&self, tool: &str) -> bool {
        tool == DELEGATE_TOOL && !self.settings.delegations.is_empty()
    }

    /// The handoff `tool` makes, if it is a transfer tool.
    pub(crate) fn handoff(&self, tool: &str) -> Option<&'a Handoff> {
        self.transfers
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, h)| *h)
    }

    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        let delegations = &self.settings.delegations;
        if !delegations.is_empty() {
            let names: Vec<&str> = delegations
                .iter()
                .map(|d| target_name(self.settings, &d.target))
                .collect();
            let mut description =
                String::from("Delegate a task to another agent in the team and get its answer.");
            for (delegation, name) in delegations.iter().zip(&names) {
                description.push_str(&format!("\n- {name}"));
                if let Some(instructions) = &delegation.instructions {
                    description.push_str(&format!(": {}", instructions.trim()));
                }
            }
            specs.push(ToolSpec {
                name: DELEGATE_TOOL.to_owned(),
                description,
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "target_agent": {
                            "type": "string",
                            "enum": names,
                            "description": "Name of the agent to delegate the task to",
                        },
                        "message": {
                            "type": "string",
                            "description": "The message or task to delegate to the target agent",
                        },
                    },
                    "required": ["target_agent", "message"],
                }),
            });
        }
        for (tool, handoff) in &self.transfers {
            let name = target_name(self.settings, &handoff.target);
            let description = match &handoff.description {
                Some(text) => format!("Hand the conversation over to {name}: {}", text.trim()),
                None => format!("Hand the conversation over to {name} to handle the request."),
            };
            specs.push(ToolSpec {
                name: tool.clone(),
                description,
                parameters: json!({"type": "object", "properties": {}}),
            });
        }
        specs
    }
}

/// The name of the roster's `key`, or the key itself.
fn target_name<'a>(settings: &'a RuntimeSettings, key: &'a str) -> &'a str {
    settings.roster.name(key).unwrap_or(key)
}

/// Runs a `delegate_agent` call of the agent `from`.
pub(crate) async fn delegate(
    turn: &TurnContext,
    from: &RuntimeSettings,
    call: &ModelToolCall,
) -> ToolOutcome {
    announce(turn, call).await;
    let outcome = delegation_outcome(turn, from, call).await;
    turn.events().tool_result(&call.id, outcome.clone()).await;
    outcome
}

async fn delegation_outcome(
    turn: &TurnContext,
    from: &RuntimeSettings,
    call: &ModelToolCall,
) -> ToolOutcome {
    let text = |key: &str| call.arguments.get(key).and_then(Value::as_str);
    let (Some(target), Some(message)) = (text("target_agent"), text("message")) else {
        return ToolOutcome::Error(
            "invalid arguments: target_agent and message must be strings".to_owned(),
        );
    };
    if message.trim().is_empty() {
        return ToolOutcome::Error("invalid arguments: message must not be empty".to_owned());
    }
    let delegation = from
        .delegations
        .iter()
        .find(|d| d.target == target || from.roster.name(&d.target) == Some(target));
    let Some(delegation) = delegation else {
        let known: Vec<&str> = from
            .delegations
            .iter()
            .map(|d| target_name(from, &d.target))
            .collect();
        return ToolOutcome::Error(format!(
            "agent {target:?} is not one this agent can delegate to; available: {}",
            known.join(", ")
        ));
    };
    if turn.delegation_depth() >= MAX_DELEGATION_DEPTH {
        return ToolOutcome::Error(format!(
            "delegations nest at most {MAX_DELEGATION_DEPTH} deep; answer without delegating"
        ));
    }
    let Some(peer) = from.roster.peer(&delegation.target) else {
        return ToolOutcome::Error(format!("agent {target:?} is not available"));
    };
    let name = peer.name().to_owned();
    turn.events().agent_switched(&name, true).await;
    let sub_turn = turn.delegated(TurnInput {
        text: message.to_owned(),
        parts: Vec::new(),
        metadata: Metadata::new(),
    });
    let result = peer.handler().run(&sub_turn).await;
    let delegated = turn.delegation_depth() > 0;
    turn.events()
        .agent_switched(&from.agent_name, delegated)
        .await;
    match result {
        Ok(reply) => ToolOutcome::Ok(Value::String(effective_text(
            Some(&reply.text),
            &reply.parts,
        ))),
        Err(failure) => ToolOutcome::Error(format!("{name} could not answer: {}", failure.message)),
    }
}

/// Runs a transfer call of the agent `from`: the first of a round sets
/// `handoff`.
pub(crate) async fn hand_off(
    turn: &TurnContext,
    from: &RuntimeSettings,
    call: &ModelToolCall,
    to: &Handoff,
    handoff: &mut Option<Arc<RuntimeHandler>>,
) -> ToolOutcome {
    announce(turn, call).await;
    let target = match from.roster.peer(&to.target) {
        Some(Peer::Runtime(runtime)) => Some(runtime),
        _ => None,
    };
    let outcome = match (&*handoff, target) {
        (Some(already), _) => ToolOutcome::Error(format!(
            "the conversation is already being handed to {}",
            already.settings.agent_name
        )),
        (None, Some(target)) => {
            let outcome = ToolOutcome::Ok(json!({ "assistant": target.settings.agent_name }));
            *handoff = Some(target);
            outcome
        }
        (None, None) => ToolOutcome::Error(format!(
            "agent {:?} is not available",
            target_name(from, &to.target)
        )),
    };
    turn.events().tool_result(&call.id, outcome.clone()).await;
    outcome
}

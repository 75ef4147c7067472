//! The tool loop with delegation and handoff, on a real engine and an
//! in-memory store, with models scripted by functions of their requests.

use std::sync::Arc;
use std::time::Duration;

use agentwire_core::testing::{CountingIds, DownloadsOnly, FixedClock, png_info};
use agentwire_core::{
    ConnectionScope, ContentPart, Download, Handler, MediaContent, MediaStore, MessageRole,
    Metadata, ModelMessage, ModelProvider, ModelReply, ModelRequest, ModelToolCall, PartKind,
    ProviderError, ProviderErrorKind, Reply, StoredMessage, TextSink, Timestamp, ToolOutcome,
    ToolSide, TurnContext, TurnEvent, TurnFailure,
};
use agentwire_engine::{Agent, Engine, SubmitRequest};
use agentwire_store::MemoryStore;
use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{Value, json};

mod pack;

use crate::{
    DEFAULT_CONTEXT_MESSAGES, Delegation, Handoff, Peer, Roster, RuntimeHandler, RuntimeSettings,
};

type Script = dyn Fn(&ModelRequest<'_>) -> Result<ModelReply, ProviderError> + Send + Sync;

/// A model that answers with `script(request)`, streaming the text, and
/// remembers every request.
struct Scripted {
    script: Box<Script>,
    seen: Mutex<Vec<ModelRequest<'static>>>,
}

impl Scripted {
    fn new(
        script: impl Fn(&ModelRequest<'_>) -> Result<ModelReply, ProviderError> + Send + Sync + 'static,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<ModelRequest<'static>> {
        self.seen.lock().clone()
    }
}

#[async_trait]
impl ModelProvider for Scripted {
    fn provider_name(&self) -> &'static str {
        "mock"
    }

    fn model(&self) -> &str {
        "scripted"
    }

    async fn complete(
        &self,
        request: &ModelRequest<'_>,
        text: &dyn TextSink,
    ) -> Result<ModelReply, ProviderError> {
        self.seen.lock().push(request.clone().into_owned());
        let reply = (self.script)(request)?;
        if !reply.text.is_empty() {
            text.text(&reply.text).await;
        }
        Ok(reply)
    }
}

fn says(text: &str) -> Result<ModelReply, ProviderError> {
    Ok(ModelReply {
        text: text.to_owned(),
        ..ModelReply::default()
    })
}

fn calls(text: &str, tools: &[(&str, Value)]) -> Result<ModelReply, ProviderError> {
    Ok(ModelReply {
        text: text.to_owned(),
        tool_calls: tools
            .iter()
            .map(|(name, arguments)| ModelToolCall {
                id: format!("model-{name}"),
                name: (*name).to_owned(),
                arguments: arguments.clone(),
            })
            .collect(),
        usage: None,
    })
}

/// A model that delegates `message` to `target` once, then answers what
/// `report` makes of the result.
fn delegates_once(
    target: &'static str,
    message: &'static str,
    report: fn(&str) -> String,
) -> Arc<Scripted> {
    Scripted::new(move |request| match last_tool_result(request) {
        None => calls(
            "",
            &[(
                "delegate_agent",
                json!({"target_agent": target, "message": message}),
            )],
        ),
        Some((result, _)) => says(&report(result)),
    })
}

/// The latest tool result the model was shown, with its error flag.
fn last_tool_result<'r>(request: &'r ModelRequest<'_>) -> Option<(&'r str, bool)> {
    request.messages.iter().rev().find_map(|m| match m {
        ModelMessage::Tool {
            content, is_error, ..
        } => Some((content.as_ref(), *is_error)),
        _ => None,
    })
}

fn assistants(request: &ModelRequest<'_>) -> usize {
    request
        .messages
        .iter()
        .filter(|m| matches!(m, ModelMessage::Assistant { .. }))
        .count()
}

fn runtime_agent(
    name: &str,
    provider: Arc<Scripted>,
    roster: &Arc<Roster>,
    delegations: &[&str],
    handoffs: &[&str],
) -> Arc<RuntimeHandler> {
    let settings = settings(name, provider, roster, delegations, handoffs);
    Arc::new(RuntimeHandler::new(settings))
}

fn settings(
    name: &str,
    provider: Arc<Scripted>,
    roster: &Arc<Roster>,
    delegations: &[&str],
    handoffs: &[&str],
) -> RuntimeSettings {
    RuntimeSettings {
        agent_name: name.to_owned(),
        instructions: Some(format!("You are {name}.")),
        provider,
        server_tools: Vec::new(),
        client_tools: Vec::new(),
        max_rounds: 5,
        context_messages: DEFAULT_CONTEXT_MESSAGES,
        metadata_template: None,
        delegations: delegations
            .iter()
            .map(|t| Delegation {
                target: (*t).to_owned(),
                instructions: Some(format!("ask {t}")),
            })
            .collect(),
        handoffs: handoffs
            .iter()
            .map(|t| Handoff {
                target: (*t).to_owned(),
                description: None,
            })
            .collect(),
        roster: roster.clone(),
        memory: None,
        turn_instructions: None,
        reply_limit: None,
    }
}

fn fill(roster: &Roster, agents: &[&Arc<RuntimeHandler>]) {
    let peers = agents
        .iter()
        .map(|a| (a.settings.agent_name.clone(), Peer::Runtime((*a).clone())));
    assert!(roster.fill(peers));
}

/// What a turn showed and stored.
struct Outcome {
    events: Vec<TurnEvent>,
    stored: Vec<StoredMessage>,
}

impl Outcome {
    fn reply(&self) -> &Reply {
        match self.events.last() {
            Some(TurnEvent::Completed(reply)) => reply,
            other => panic!("the turn did not complete: {other:?}"),
        }
    }

    /// The events with tool ids and deltas abbreviated, for comparing.
    fn shape(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|event| match event {
                TurnEvent::TextDelta(text) => format!("text {text}"),
                TurnEvent::ToolCall(call) => format!("call {} {}", call.name, call.arguments),
                TurnEvent::ToolResult { outcome, side, .. } => {
                    assert_eq!(*side, ToolSide::Server);
                    match outcome {
                        ToolOutcome::Ok(value) => format!("result {value}"),
                        ToolOutcome::Error(e) | ToolOutcome::Denied(e) => format!("error {e}"),
                    }
                }
                TurnEvent::AgentSwitched { name, delegated } => {
                    format!(
                        "switch {name}{}",
                        if *delegated { " (delegated)" } else { "" }
                    )
                }
                TurnEvent::Completed(reply) => format!("completed {}", reply.text),
                TurnEvent::Failed(failure) => format!("failed {}", failure.message),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn stored_roles(&self) -> Vec<(MessageRole, String)> {
        self.stored
            .iter()
            .map(|m| {
                let shown = m
                    .body
                    .text()
                    .map_or_else(|| format!("{:?}", m.body), str::to_owned);
                (m.role(), shown)
            })
            .collect()
    }
}

/// Runs one user turn of `handler` on a fresh engine.
async fn run_turn(handler: Arc<dyn Handler>, text: &str) -> Outcome {
    run_turn_with_media(handler, text, Vec::new(), None).await
}

/// Runs one user turn of `handler`, whose message carries `parts`, on a
/// fresh engine with `media` storage.
async fn run_turn_with_media(
    handler: Arc<dyn Handler>,
    text: &str,
    parts: Vec<ContentPart>,
    media: Option<Arc<dyn MediaStore>>,
) -> Outcome {
    let mut engine = Engine::new(
        Arc::new(MemoryStore::new()),
        Arc::new(FixedClock(Timestamp(1_000))),
        Arc::new(CountingIds::default()),
    );
    if let Some(media) = media {
        engine = engine.with_media(media);
    }
    let agent = Arc::new(Agent {
        name: "team".to_owned(),
        context_ttl: Duration::from_secs(60),
        ack_timeout: Duration::from_secs(1),
        client_tool_timeout: Duration::from_secs(1),
        handler,
        session_init: None,
    });
    let scope = ConnectionScope::new();
    let current = engine.mint_session_id();
    let metadata = Metadata::from([("mock_scenario".to_owned(), "team".to_owned())]);
    let handle = engine
        .submit(SubmitRequest {
            agent: &agent,
            namespace: "default",
            owner: None,
            memory_facet: None,
            current: &current,
            minted: &current,
            requested: None,
            content: Some(text.to_owned()),
            parts,
            attachment: None,
            metadata,
            scope: &scope,
            opening: agentwire_core::Opening::Continues,
            grants: &[],
        })
        .await
        .expect("accepted");
    let session = handle.session.id().clone();
    let mut reader = handle.events;
    let mut events = Vec::new();
    // The turn's events after its start marker, up to its terminal.
    while let Ok(entry) = reader.next().await {
        let event = Arc::unwrap_or_clone(entry.event);
        if matches!(event, TurnEvent::TurnStarted { .. }) {
            continue;
        }
        let terminal = event.is_terminal();
        events.push(event);
        if terminal {
            break;
        }
    }
    let stored = engine.store().load_messages(&session).await.unwrap();
    Outcome { events, stored }
}

#[tokio::test]
async fn a_delegate_answers_on_a_sub_turn_whose_answer_is_the_tool_result() {
    let roster = Roster::new();
    let lead_model = delegates_once("researcher", "How long do refunds take?", |result| {
        format!("Researcher says: {result}")
    });
    let researcher_model = Scripted::new(|_| says("Five days."));
    let lead = runtime_agent("lead", lead_model.clone(), &roster, &["researcher"], &[]);
    let researcher = runtime_agent("researcher", researcher_model.clone(), &roster, &[], &[]);
    fill(&roster, &[&lead, &researcher]);

    let outcome = run_turn(lead.clone(), "refunds?").await;
    assert_eq!(
        outcome.shape(),
        [
            r#"call delegate_agent {"message":"How long do refunds take?","target_agent":"researcher"}"#,
            "switch researcher (delegated)",
            "text Five days.",
            "switch lead",
            r#"result "Five days.""#,
            "text Researcher says: Five days.",
            "completed Researcher says: Five days.",
        ]
    );
    // The delegate saw the message alone, under its own instructions, with
    // no scenario (the user's metadata stays with the user's message).
    let seen = researcher_model.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].system.as_deref(), Some("You are researcher."));
    assert_eq!(
        seen[0].messages,
        [ModelMessage::User {
            text: "How long do refunds take?".into(),
            parts: Default::default()
        }]
    );
    assert!(seen[0].metadata.is_empty(), "{:?}", seen[0].metadata);
    assert!(seen[0].tools.is_empty(), "the researcher has no tools");
    // The lead was offered the delegation tool, naming its target.
    let tools = &lead_model.requests()[0].tools;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "delegate_agent");
    assert_eq!(
        tools[0].parameters["properties"]["target_agent"]["enum"],
        json!(["researcher"])
    );
    assert!(
        tools[0]
            .description
            .contains("- researcher: ask researcher")
    );
    // Only the call and its answer are stored, not the delegate's work.
    let stored = outcome.stored_roles();
    let roles: Vec<MessageRole> = stored.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        roles,
        [
            MessageRole::User,
            MessageRole::Tool,
            MessageRole::Tool,
            MessageRole::Assistant
        ]
    );
    assert!(stored[2].1.contains("Five days."), "{stored:?}");
}

#[tokio::test]
async fn a_handoff_gives_the_rest_of_the_turn_and_the_conversation_to_the_target() {
    let roster = Roster::new();
    let lead_model = Scripted::new(|_| {
        calls(
            "Let me pass you on.",
            &[("transfer_to_closer_2", json!({}))],
        )
    });
    let closer_model = Scripted::new(|request| {
        says(&format!(
            "Closer here, after {} tool result(s).",
            request
                .messages
                .iter()
                .filter(|m| matches!(m, ModelMessage::Tool { .. }))
                .count()
        ))
    });
    let lead = runtime_agent("lead", lead_model.clone(), &roster, &[], &["Closer-2"]);
    let closer = runtime_agent("Closer-2", closer_model.clone(), &roster, &[], &[]);
    fill(&roster, &[&lead, &closer]);

    let outcome = run_turn(lead.clone(), "bye").await;
    assert_eq!(
        outcome.shape(),
        [
            "text Let me pass you on.",
            "call transfer_to_closer_2 {}",
            r#"result {"assistant":"Closer-2"}"#,
            "switch Closer-2",
            "text Closer here, after 1 tool result(s).",
            "completed Closer here, after 1 tool result(s).",
        ]
    );
    let tools = &lead_model.requests()[0].tools;
    assert_eq!(tools[0].name, "transfer_to_closer_2");
    // The target continues the conversation under its own instructions.
    let seen = &closer_model.requests()[0];
    assert_eq!(seen.system.as_deref(), Some("You are Closer-2."));
    assert_eq!(
        seen.metadata.get("mock_scenario").map(String::as_str),
        Some("team")
    );
    assert_eq!(seen.messages.len(), 3, "user, transfer call, its result");
    let roles: Vec<MessageRole> = outcome.stored.iter().map(|m| m.role()).collect();
    assert_eq!(
        roles,
        [
            MessageRole::User,
            MessageRole::Assistant,
            MessageRole::Tool,
            MessageRole::Tool,
            MessageRole::Assistant
        ],
        "the handoff and the target's answer belong to the turn"
    );
}

/// The URL of the image in the request's first user message.
fn image_url(request: &ModelRequest<'_>) -> Option<String> {
    request.messages.iter().find_map(|m| match m {
        ModelMessage::User { parts, .. } => {
            parts.iter().find_map(|p| p.media.as_ref()?.url.clone())
        }
        _ => None,
    })
}

#[tokio::test]
async fn stored_media_is_resolved_afresh_for_every_model_call() {
    let roster = Roster::new();
    let lead_model = Scripted::new(|_| calls("", &[("transfer_to_closer", json!({}))]));
    let closer_model = Scripted::new(|_| says("A cat."));
    let lead = runtime_agent("lead", lead_model.clone(), &roster, &[], &["closer"]);
    let closer = runtime_agent("closer", closer_model.clone(), &roster, &[], &[]);
    fill(&roster, &[&lead, &closer]);
    let storage_ref = "omnia://sessions/s0/media/0123456789abcdef0123456789abcdef";
    let image = ContentPart::media(
        PartKind::Image,
        MediaContent {
            storage_ref: Some(storage_ref.to_owned()),
            mime_type: "image/png".into(),
            ..MediaContent::default()
        },
    );
    // A presigning store: every download of the item is a new URL, numbered,
    // as S3 mints a fresh signature each time.
    let media = Arc::new(DownloadsOnly::new(|storage_ref, n| {
        let url = format!("https://bucket.test/pic.png?signature={n}");
        Ok(Download::Redirect {
            info: png_info(storage_ref),
            url,
        })
    }));
    let outcome =
        run_turn_with_media(lead, "what is this?", vec![image], Some(media.clone())).await;
    assert_eq!(outcome.reply().text, "A cat.");
    // Two model calls (the lead's, then the handoff target's), each with a
    // URL minted for it, not one minted for the turn.
    assert_eq!(
        image_url(&lead_model.requests()[0]).as_deref(),
        Some("https://bucket.test/pic.png?signature=1")
    );
    assert_eq!(
        image_url(&closer_model.requests()[0]).as_deref(),
        Some("https://bucket.test/pic.png?signature=2")
    );
    assert_eq!(media.downloads(), 2);
    // What is stored keeps the reference alone.
    let stored = outcome.stored[0].body.parts()[0].media.as_ref().unwrap();
    assert_eq!(stored.storage_ref.as_deref(), Some(storage_ref));
    assert_eq!((stored.url.as_ref(), stored.data.as_ref()), (None, None));
}

#[tokio::test]
async fn delegation_then_handoff_in_one_turn() {
    let roster = Roster::new();
    let lead_model = Scripted::new(|request| match assistants(request) {
        0 => calls(
            "",
            &[(
                "delegate_agent",
                json!({"target_agent": "researcher", "message": "q"}),
            )],
        ),
        _ => calls(
            &format!("Noted: {}", last_tool_result(request).unwrap().0),
            &[("transfer_to_closer", json!({}))],
        ),
    });
    let lead = runtime_agent("lead", lead_model, &roster, &["researcher"], &["closer"]);
    let researcher = runtime_agent(
        "researcher",
        Scripted::new(|_| says("A")),
        &roster,
        &[],
        &[],
    );
    let closer = runtime_agent("closer", Scripted::new(|_| says("B")), &roster, &[], &[]);
    fill(&roster, &[&lead, &researcher, &closer]);
    let outcome = run_turn(lead.clone(), "go").await;
    assert_eq!(
        outcome.shape(),
        [
            r#"call delegate_agent {"message":"q","target_agent":"researcher"}"#,
            "switch researcher (delegated)",
            "text A",
            "switch lead",
            r#"result "A""#,
            "text Noted: A",
            "call transfer_to_closer {}",
            r#"result {"assistant":"closer"}"#,
            "switch closer",
            "text B",
            "completed B",
        ]
    );
}

#[tokio::test]
async fn unknown_targets_bad_arguments_and_failed_delegates_are_error_results() {
    let roster = Roster::new();
    let lead_model = Scripted::new(|request| match assistants(request) {
        0 => calls(
            "",
            &[
                (
                    "delegate_agent",
                    json!({"target_agent": "nobody", "message": "q"}),
                ),
                ("delegate_agent", json!({"target_agent": "flaky"})),
                (
                    "delegate_agent",
                    json!({"target_agent": "flaky", "message": "q"}),
                ),
            ],
        ),
        _ => says("done anyway"),
    });
    let flaky_model = Scripted::new(|_| {
        Err(ProviderError::new(
            ProviderErrorKind::Unavailable,
            "mock model m unavailable",
        ))
    });
    let lead = runtime_agent("lead", lead_model.clone(), &roster, &["flaky"], &[]);
    let flaky = runtime_agent("flaky", flaky_model, &roster, &[], &[]);
    fill(&roster, &[&lead, &flaky]);
    let outcome = run_turn(lead.clone(), "go").await;
    let errors: Vec<String> = outcome
        .shape()
        .into_iter()
        .filter(|e| e.starts_with("error"))
        .collect();
    assert_eq!(
        errors,
        [
            r#"error agent "nobody" is not one this agent can delegate to; available: flaky"#,
            "error invalid arguments: target_agent and message must be strings",
            "error flaky could not answer: mock model m unavailable",
        ]
    );
    assert_eq!(outcome.reply().text, "done anyway");
    let last = lead_model.requests().pop().unwrap();
    assert_eq!(
        last_tool_result(&last),
        Some(("flaky could not answer: mock model m unavailable", true))
    );
}

#[tokio::test]
async fn delegations_nest_at_most_three_deep() {
    let roster = Roster::new();
    // Asks itself until told it cannot, then reports what it was told.
    let model = delegates_once("narcissus", "again", |result| format!("[{result}]"));
    let agent = runtime_agent("narcissus", model.clone(), &roster, &["narcissus"], &[]);
    fill(&roster, &[&agent]);
    let outcome = run_turn(agent.clone(), "go").await;
    assert_eq!(
        outcome.reply().text,
        "[[[[delegations nest at most 3 deep; answer without delegating]]]]"
    );
    assert_eq!(model.requests().len(), 8, "four agents, two requests each");
    let switches: Vec<String> = outcome
        .shape()
        .into_iter()
        .filter(|e| e.starts_with("switch"))
        .collect();
    assert_eq!(
        switches,
        [
            "switch narcissus (delegated)",
            "switch narcissus (delegated)",
            "switch narcissus (delegated)",
            "switch narcissus (delegated)",
            "switch narcissus (delegated)",
            "switch narcissus",
        ]
    );
}

/// A non-runtime handler: answers with its input.
struct Parrot;

#[async_trait]
impl Handler for Parrot {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        turn.events().text_delta("squawk").await;
        Ok(Reply::text(format!("parrot: {}", turn.input.text)))
    }
}

#[tokio::test]
async fn any_handler_can_be_delegated_to() {
    let roster = Roster::new();
    let lead_model = delegates_once("Polly", "hello", str::to_owned);
    let lead = runtime_agent("lead", lead_model, &roster, &["polly"], &[]);
    let parrot: Arc<dyn Handler> = Arc::new(Parrot);
    assert!(roster.fill([
        ("lead".to_owned(), Peer::Runtime(lead.clone())),
        (
            "polly".to_owned(),
            Peer::Handler {
                name: "Polly".to_owned(),
                handler: parrot.clone(),
            }
        ),
    ]));
    let outcome = run_turn(lead.clone(), "hi").await;
    assert_eq!(
        outcome.shape()[1..4],
        ["switch Polly (delegated)", "text squawk", "switch lead"],
        "the target is named by its name, its key works too"
    );
    assert_eq!(outcome.reply().text, "parrot: hello");
}

#[tokio::test]
async fn only_the_first_handoff_of_a_round_counts() {
    let roster = Roster::new();
    let lead_model = Scripted::new(|_| {
        calls(
            "",
            &[("transfer_to_b", json!({})), ("transfer_to_c", json!({}))],
        )
    });
    let lead = runtime_agent("lead", lead_model, &roster, &[], &["b", "c"]);
    let b = runtime_agent("b", Scripted::new(|_| says("b here")), &roster, &[], &[]);
    let c = runtime_agent("c", Scripted::new(|_| says("c here")), &roster, &[], &[]);
    fill(&roster, &[&lead, &b, &c]);
    let outcome = run_turn(lead.clone(), "hi").await;
    assert_eq!(
        outcome.shape(),
        [
            "call transfer_to_b {}",
            r#"result {"assistant":"b"}"#,
            "call transfer_to_c {}",
            "error the conversation is already being handed to b",
            "switch b",
            "text b here",
            "completed b here",
        ]
    );
}

#[tokio::test]
async fn rounds_are_counted_across_handoffs() {
    let roster = Roster::new();
    let a = runtime_agent(
        "a",
        Scripted::new(|_| calls("", &[("transfer_to_b", json!({}))])),
        &roster,
        &[],
        &["b"],
    );
    let b = runtime_agent(
        "b",
        Scripted::new(|_| calls("", &[("transfer_to_a", json!({}))])),
        &roster,
        &[],
        &["a"],
    );
    fill(&roster, &[&a, &b]);
    let outcome = run_turn(a.clone(), "ping-pong").await;
    assert_eq!(
        outcome.shape().last().unwrap(),
        "failed the turn stopped at the agent's limit of 5 tool-call rounds"
    );
}

#[test]
fn transfer_tools_are_named_as_the_agents_sdk_names_them() {
    assert_eq!(
        crate::transfer_tool_name("Tech Support"),
        "transfer_to_tech_support"
    );
    assert_eq!(crate::transfer_tool_name("a.b-C"), "transfer_to_a_b_c");
}

/// A session's prepared tools: one box with `ws__where`, which answers
/// the session it was prepared for.
struct PreparedTools;

struct SessionBox {
    session: String,
    specs: Vec<agentwire_core::ToolSpec>,
}

#[async_trait]
impl agentwire_core::ToolBox for SessionBox {
    fn specs(&self) -> &[agentwire_core::ToolSpec] {
        &self.specs
    }

    async fn call(&self, _: &str, _: Value) -> Result<Value, String> {
        Ok(json!(format!("in {}", self.session)))
    }
}

#[async_trait]
impl agentwire_core::SessionTools for PreparedTools {
    async fn for_session(
        &self,
        session: &agentwire_core::SessionId,
    ) -> Vec<Arc<dyn agentwire_core::ToolBox>> {
        let spec = agentwire_core::ToolSpec {
            name: "ws__where".into(),
            description: "Where am I".into(),
            parameters: json!({"type": "object"}),
        };
        vec![Arc::new(SessionBox {
            session: session.to_string(),
            specs: vec![spec],
        })]
    }
}

#[tokio::test]
async fn a_sessions_prepared_tools_are_offered_beside_the_agents_own() {
    let provider = Scripted::new(|request| match last_tool_result(request) {
        None => calls("", &[("ws__where", json!({}))]),
        Some((result, _)) => says(&format!("I am {result}")),
    });
    let agent = runtime_agent("solo", provider.clone(), &Roster::new(), &[], &[]);
    let agent = Arc::into_inner(agent).unwrap();
    let handler = Arc::new(agent.with_session_tools(Arc::new(PreparedTools)));
    let outcome = run_turn(handler, "where?").await;
    let session = outcome.stored[0].session_id.to_string();
    assert_eq!(outcome.reply().text, format!("I am in {session}"));
    let offered: Vec<String> = provider.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["ws__where"]);
}

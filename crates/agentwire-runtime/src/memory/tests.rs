//! The memory tools through a turn of their own, on the in-memory store:
//! Omnia's result shapes field by field, scopes the model cannot cross, and
//! the errors it reads.

use std::sync::Arc;

use agentwire_core::testing::{CountingIds, FixedClock};
use agentwire_core::{
    ClientToolBroker, ConnectionScope, Epoch, MemoryTier, ModelToolCall, SessionId, SessionLog,
    Timestamp, ToolOutcome, TurnCaller, TurnContext, TurnInput, TurnSetup,
};
use agentwire_store::MemoryStore;
use serde_json::{Value, json};

use super::{MemorySettings, MemoryTools, specs};

mod vectors;

/// 2026-12-05T10:00:00Z.
const NOW: i64 = 1_796_464_800_000_000_000;

fn settings(store: &Arc<MemoryStore>, tier: MemoryTier) -> MemorySettings {
    MemorySettings {
        store: store.clone(),
        tier,
        clock: Arc::new(FixedClock(Timestamp(NOW))),
        retrieval: None,
        category_ttl: Arc::default(),
        embedder: None,
        scope_agent: None,
    }
}

fn turn(owner: Option<&str>, facet: Option<&str>) -> TurnContext {
    let log = SessionLog::new(Epoch(1));
    TurnContext::new(TurnSetup {
        session_id: SessionId::parse("s-1").unwrap(),
        input: TurnInput::default(),
        history: Arc::default(),
        cancel: Default::default(),
        scope: ConnectionScope::new(),
        caller: Arc::new(TurnCaller {
            owner: owner.map(str::to_owned),
            memory_facet: facet.map(str::to_owned),
        }),
        writer: log.start_turn("helper", None),
        client_tools: ClientToolBroker::new(),
        ids: Arc::new(CountingIds::default()),
        ack_timeout: std::time::Duration::from_secs(1),
        result_timeout: std::time::Duration::from_secs(1),
        media: None,
        calls: None,
    })
}

/// Runs `name` with `arguments` as `turn`'s caller talking to `agent`.
async fn call(
    settings: &MemorySettings,
    agent: &str,
    turn: &TurnContext,
    name: &str,
    arguments: Value,
) -> Result<Value, String> {
    let tools = MemoryTools::new(settings, agent);
    let call = ModelToolCall {
        id: "call-1".to_owned(),
        name: name.to_owned(),
        arguments,
    };
    match tools.run(turn, &call).await {
        ToolOutcome::Ok(value) => Ok(value),
        ToolOutcome::Error(error) => Err(error),
        ToolOutcome::Denied(reason) => panic!("denied: {reason}"),
    }
}

#[tokio::test]
async fn a_remembered_fact_is_recalled_in_omnias_shape() {
    let store = Arc::new(MemoryStore::new());
    let memory = settings(&store, MemoryTier::CallerWithAgent);
    let alice = turn(Some("alice"), Some("trip-42"));
    let arguments = json!({
        "content": "prefers window seats",
        "type": "preference",
        "confidence": 0.9,
        "category": "memory:preferences",
        "metadata": {"source": "chat"},
        "about_kind": "preference",
        "about_key": "seat",
    });
    let remembered = call(&memory, "helper", &alice, specs::REMEMBER_TOOL, arguments).await;
    let remembered = remembered.unwrap();
    assert_eq!(remembered["status"], "remembered");
    let id = remembered["id"].as_str().unwrap().to_owned();
    assert_eq!(remembered.as_object().unwrap().len(), 2);
    let query = json!({"query": "which seats"});
    let recalled = call(&memory, "helper", &alice, specs::RECALL_TOOL, query)
        .await
        .unwrap();
    assert_eq!(recalled["count"], 1);
    let found = &recalled["memories"][0];
    let expected = json!({
        "id": id,
        "type": "preference",
        "content": "prefers window seats",
        "metadata": {
            "source": "chat",
            "provenance": "user_requested",
            "about_kind": "preference",
            "about_key": "seat",
            "category": "memory:preferences",
        },
        "confidence": 0.9,
        "scope": {
            "tier": "caller_agent",
            "virtual_user_id": "alice",
            "agent_id": "helper",
            "memory_facet": "trip-42",
        },
        "session_id": "s-1",
        "turn_range": [0, 0],
        "created_at": "2026-12-05T10:00:00Z",
        "accessed_at": "2026-12-05T10:00:00Z",
    });
    assert_eq!(found, &expected);
    // The same subject again replaces it in place.
    let again =
        json!({"content": "prefers aisle seats", "about_kind": "preference", "about_key": "seat"});
    let replaced = call(&memory, "helper", &alice, specs::REMEMBER_TOOL, again)
        .await
        .unwrap();
    assert_eq!(replaced["id"], id.as_str());
    let listed = call(&memory, "helper", &alice, specs::LIST_TOOL, json!({}))
        .await
        .unwrap();
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["memories"][0]["content"], "prefers aisle seats");
    assert_eq!(listed["memories"][0]["type"], "general");
    assert_eq!(listed["memories"][0]["confidence"], 0.8);
}

#[tokio::test]
async fn no_argument_crosses_a_scope() {
    let store = Arc::new(MemoryStore::new());
    let memory = settings(&store, MemoryTier::CallerWithAgent);
    let alice = turn(Some("alice"), None);
    let fact = json!({"content": "lives in Lisbon"});
    let id = call(&memory, "helper", &alice, specs::REMEMBER_TOOL, fact)
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let strangers = [
        ("helper", turn(Some("bob"), None)),
        ("other", turn(Some("alice"), None)),
        ("helper", turn(Some("alice"), Some("work"))),
        ("helper", turn(None, None)),
    ];
    for (agent, stranger) in &strangers {
        let recall = json!({"query": "Lisbon"});
        let found = call(&memory, agent, stranger, specs::RECALL_TOOL, recall)
            .await
            .unwrap();
        assert_eq!(found["count"], 0, "{agent}");
        let by_id = json!({"memory_id": id});
        let opened = call(&memory, agent, stranger, specs::OPEN_TOOL, by_id.clone()).await;
        assert_eq!(opened.unwrap_err(), "memory open: memory not found");
        let forgot = call(&memory, agent, stranger, specs::FORGET_TOOL, by_id)
            .await
            .unwrap_err();
        assert!(
            forgot == "memory forget: memory not found" || forgot.contains("identified caller"),
            "{forgot}"
        );
        // Scope-looking arguments are not arguments at all.
        let forged =
            json!({"query": "Lisbon", "scope": {"virtual_user_id": "alice"}, "owner": "alice"});
        let found = call(&memory, agent, stranger, specs::RECALL_TOOL, forged)
            .await
            .unwrap();
        assert_eq!(found["count"], 0);
    }
    let mine = call(
        &memory,
        "helper",
        &alice,
        specs::OPEN_TOOL,
        json!({"memory_id": id}),
    )
    .await;
    assert_eq!(mine.unwrap()["content"], "lives in Lisbon");
}

#[tokio::test]
async fn the_shared_caller_tier_spans_the_agents_that_choose_it() {
    let store = Arc::new(MemoryStore::new());
    let shared = settings(&store, MemoryTier::Caller);
    let own = settings(&store, MemoryTier::CallerWithAgent);
    let alice = turn(Some("alice"), None);
    let fact = json!({"content": "is allergic to peanuts"});
    call(&shared, "chef", &alice, specs::REMEMBER_TOOL, fact)
        .await
        .unwrap();
    let query = json!({"query": "peanuts"});
    let waiter = call(&shared, "waiter", &alice, specs::RECALL_TOOL, query.clone()).await;
    assert_eq!(waiter.unwrap()["count"], 1);
    let private = call(&own, "waiter", &alice, specs::RECALL_TOOL, query).await;
    assert_eq!(private.unwrap()["count"], 0);
}

#[tokio::test]
async fn the_model_reads_omnias_errors() {
    let store = Arc::new(MemoryStore::new());
    let memory = settings(&store, MemoryTier::CallerWithAgent);
    let alice = turn(Some("alice"), None);
    let anonymous = turn(None, None);
    let cases = [
        (
            &alice,
            specs::REMEMBER_TOOL,
            json!({}),
            "memory remember: content is required",
        ),
        (
            &alice,
            specs::REMEMBER_TOOL,
            json!({"content": " "}),
            "memory remember: content is required",
        ),
        (
            &alice,
            specs::FORGET_TOOL,
            json!({}),
            "memory forget: memory_id is required",
        ),
        (
            &alice,
            specs::FORGET_TOOL,
            json!({"memory_id": "nope"}),
            "memory forget: memory not found",
        ),
        (
            &alice,
            specs::RECALL_TOOL,
            json!({}),
            "memory recall: query is required",
        ),
        (
            &alice,
            specs::RECALL_TOOL,
            json!({"query": "x", "limit": -1}),
            "memory recall: limit must be a whole number of 0 or more",
        ),
        (
            &alice,
            specs::REMEMBER_TOOL,
            json!({"content": "x", "category": "memory:secrets"}),
            "memory remember: category must be one of memory:identity, memory:preferences, memory:context, memory:location, memory:health, memory:history",
        ),
        (
            &alice,
            specs::REMEMBER_TOOL,
            json!({"content": "x", "about_kind": "a"}),
            "memory remember: about_kind and about_key go together",
        ),
        (
            &alice,
            specs::REMEMBER_TOOL,
            json!({"content": "x", "confidence": 2}),
            "memory remember: confidence must be a number from 0 to 1",
        ),
        (
            &alice,
            specs::REMEMBER_TOOL,
            json!("x"),
            "memory remember: the arguments must be a JSON object",
        ),
        (
            &anonymous,
            specs::REMEMBER_TOOL,
            json!({"content": "x"}),
            "memory remember: memory needs an identified caller",
        ),
    ];
    for (turn, tool, arguments, expected) in cases {
        let error = call(&memory, "helper", turn, tool, arguments.clone())
            .await
            .unwrap_err();
        assert_eq!(error, expected, "{tool} {arguments}");
    }
    let anonymous_reads = call(&memory, "helper", &anonymous, specs::LIST_TOOL, json!({})).await;
    assert_eq!(anonymous_reads.unwrap()["count"], 0);
}

#[tokio::test]
async fn recall_shows_a_long_body_short_and_open_shows_it_whole() {
    let store = Arc::new(MemoryStore::new());
    let memory = settings(&store, MemoryTier::CallerWithAgent);
    let alice = turn(Some("alice"), None);
    let body = format!("itinerary {}", "é".repeat(2000));
    let fact = json!({"content": body, "title": "Trip", "summary": "Lisbon in May"});
    let id = call(&memory, "helper", &alice, specs::REMEMBER_TOOL, fact)
        .await
        .unwrap()["id"]
        .clone();
    let recalled = call(
        &memory,
        "helper",
        &alice,
        specs::RECALL_TOOL,
        json!({"query": "itinerary"}),
    )
    .await;
    let short = recalled.unwrap()["memories"][0].clone();
    assert!(short.get("content").is_none(), "{short}");
    assert_eq!(short["has_full_body"], true);
    assert_eq!(short["title"], "Trip");
    assert_eq!(short["summary"], "Lisbon in May");
    assert_eq!(
        short["content_preview"].as_str().unwrap().chars().count(),
        240
    );
    let opened = call(
        &memory,
        "helper",
        &alice,
        specs::OPEN_TOOL,
        json!({"memory_id": id}),
    )
    .await;
    assert_eq!(opened.unwrap()["content"], body.as_str());
    let forgotten = call(
        &memory,
        "helper",
        &alice,
        specs::FORGET_TOOL,
        json!({"memory_id": id}),
    )
    .await;
    assert_eq!(
        forgotten.unwrap(),
        json!({"status": "forgotten", "memory_id": id})
    );
    let gone = call(
        &memory,
        "helper",
        &alice,
        specs::RECALL_TOOL,
        json!({"query": "itinerary"}),
    )
    .await;
    assert_eq!(gone.unwrap(), json!({"count": 0, "memories": []}));
}

#[test]
fn the_tools_are_omnias_with_open() {
    let specs = specs::all();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "memory__recall",
            "memory__remember",
            "memory__list",
            "memory__forget",
            "memory__open"
        ]
    );
    let props = |n: usize| -> Vec<String> {
        let mut keys: Vec<String> = specs[n].parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(props(0), ["limit", "min_confidence", "query", "types"]);
    assert_eq!(
        props(1),
        [
            "about_key",
            "about_kind",
            "category",
            "confidence",
            "content",
            "metadata",
            "purpose",
            "summary",
            "title",
            "type"
        ]
    );
    assert_eq!(props(2), ["limit", "offset", "types"]);
    assert_eq!(props(3), ["memory_id"]);
    assert_eq!(specs[0].parameters["required"], json!(["query"]));
    assert_eq!(specs[1].parameters["required"], json!(["content"]));
    assert_eq!(specs[3].parameters["required"], json!(["memory_id"]));
    assert_eq!(
        specs[1].parameters["properties"]["category"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert!(
        specs[1].description.contains("about_kind") && specs[1].description.contains("about_key")
    );
}

/// A model that answers "ok" and keeps the system prompt of each request.
#[derive(Default)]
struct Prompts(parking_lot::Mutex<Vec<Option<String>>>);

#[async_trait::async_trait]
impl agentwire_core::ModelProvider for Prompts {
    fn provider_name(&self) -> &'static str {
        "mock"
    }

    fn model(&self) -> &str {
        "prompts"
    }

    async fn complete(
        &self,
        request: &agentwire_core::ModelRequest<'_>,
        _text: &dyn agentwire_core::TextSink,
    ) -> Result<agentwire_core::ModelReply, agentwire_core::ProviderError> {
        self.0.lock().push(request.system.clone());
        Ok(agentwire_core::ModelReply {
            text: "ok".to_owned(),
            ..Default::default()
        })
    }
}

fn handler(model: &Arc<Prompts>, memory: MemorySettings) -> crate::RuntimeHandler {
    crate::RuntimeHandler::new(crate::RuntimeSettings {
        agent_name: "helper".to_owned(),
        instructions: Some("Be brief.".to_owned()),
        provider: model.clone(),
        server_tools: Vec::new(),
        client_tools: Vec::new(),
        max_rounds: 3,
        context_messages: crate::DEFAULT_CONTEXT_MESSAGES,
        metadata_template: None,
        delegations: Vec::new(),
        handoffs: Vec::new(),
        roster: crate::Roster::new(),
        memory: Some(memory),
        turn_instructions: None,
        reply_limit: None,
    })
}

fn asking(owner: Option<&str>, text: &str) -> TurnContext {
    let mut turn = turn(owner, None);
    turn.input.text = text.to_owned();
    turn
}

#[tokio::test]
async fn ambient_recall_puts_the_best_matches_in_the_system_prompt_within_budget() {
    use agentwire_core::Handler;
    let store = Arc::new(MemoryStore::new());
    let mut memory = settings(&store, MemoryTier::CallerWithAgent);
    let alice = turn(Some("alice"), None);
    let facts = [
        "prefers window seats",
        "flies to Lisbon in May",
        "hates early flights",
    ];
    for fact in facts {
        let remembered = call(
            &memory,
            "helper",
            &alice,
            specs::REMEMBER_TOOL,
            json!({"content": fact}),
        );
        remembered.await.unwrap();
    }
    memory.retrieval = Some(super::Retrieval {
        limit: 5,
        max_chars: 40,
    });
    let model = Arc::new(Prompts::default());
    let agent = handler(&model, memory.clone());
    agent
        .run(&asking(Some("alice"), "book my flights and seats"))
        .await
        .unwrap();
    agent
        .run(&asking(Some("bob"), "book my flights and seats"))
        .await
        .unwrap();
    agent
        .run(&asking(Some("alice"), "what is the weather"))
        .await
        .unwrap();
    let prompts = model.0.lock().clone();
    let alices = prompts[0].as_deref().unwrap();
    assert!(
        alices.starts_with("Be brief.\n\nWhat you remember about this user"),
        "{alices}"
    );
    // Two of the three match; both fit in 40 characters, no third would.
    assert!(alices.contains("\n- prefers window seats"), "{alices}");
    assert!(alices.contains("\n- hates early flights"), "{alices}");
    assert!(!alices.contains("Lisbon"), "{alices}");
    assert_eq!(
        prompts[1].as_deref(),
        Some("Be brief."),
        "another caller recalls nothing"
    );
    assert_eq!(prompts[2].as_deref(), Some("Be brief."), "nothing matches");
    memory.retrieval = None;
    let model = Arc::new(Prompts::default());
    handler(&model, memory)
        .run(&asking(Some("alice"), "seats"))
        .await
        .unwrap();
    assert_eq!(
        model.0.lock()[0].as_deref(),
        Some("Be brief."),
        "off without retrieval"
    );
}

#[tokio::test]
async fn a_category_with_a_ttl_expires_and_is_read_no_more() {
    let store = Arc::new(MemoryStore::new());
    let hour = std::time::Duration::from_secs(3600);
    let ttl = std::collections::BTreeMap::from([("memory:health".to_owned(), hour)]);
    let memory = MemorySettings {
        category_ttl: Arc::new(ttl),
        ..settings(&store, MemoryTier::CallerWithAgent)
    };
    let alice = turn(Some("alice"), None);
    let health = json!({"content": "is allergic to peanuts", "category": "memory:health"});
    call(&memory, "helper", &alice, specs::REMEMBER_TOOL, health)
        .await
        .unwrap();
    let other = json!({"content": "likes peanuts in stories", "category": "memory:preferences"});
    call(&memory, "helper", &alice, specs::REMEMBER_TOOL, other)
        .await
        .unwrap();
    let query = json!({"query": "peanuts"});
    let now = call(&memory, "helper", &alice, specs::RECALL_TOOL, query.clone())
        .await
        .unwrap();
    assert_eq!(now["count"], 2);
    let expiring = now["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metadata"]["category"] == "memory:health");
    assert_eq!(expiring.unwrap()["expires_at"], "2026-12-05T11:00:00Z");
    let later = MemorySettings {
        clock: Arc::new(FixedClock(Timestamp(NOW).plus(hour))),
        ..memory
    };
    let then = call(&later, "helper", &alice, specs::RECALL_TOOL, query)
        .await
        .unwrap();
    assert_eq!(then["count"], 1);
    assert_eq!(then["memories"][0]["content"], "likes peanuts in stories");
}

#[tokio::test]
async fn the_agents_own_memory_is_read_but_never_forgotten_by_the_model() {
    use agentwire_core::AgentMemory;
    let store = Arc::new(MemoryStore::new());
    let memory = settings(&store, MemoryTier::CallerWithAgent);
    let agents =
        agentwire_core::MemoryScope::new(MemoryTier::Agent, &TurnCaller::default(), "helper");
    let fact = agentwire_core::Fact {
        kind: "general".to_owned(),
        content: "Checkout is at 11:00.".to_owned(),
        metadata: serde_json::Map::new(),
        confidence: 1.0,
        category: None,
        about: None,
        purpose: None,
        title: None,
        summary: None,
    };
    let new = agentwire_core::NewMemory {
        id: "fact-1".to_owned(),
        scope: agents.unwrap(),
        fact,
        session_id: None,
        now: Timestamp(NOW),
        expires_at: None,
        vector: None,
    };
    store.remember(new).await.unwrap();
    let alice = turn(Some("alice"), Some("trip-7"));
    let found = call(
        &memory,
        "helper",
        &alice,
        specs::RECALL_TOOL,
        json!({"query": "checkout"}),
    )
    .await;
    assert_eq!(found.unwrap()["memories"][0]["id"], "fact-1");
    let forget = json!({"memory_id": "fact-1"});
    let refused = call(&memory, "helper", &alice, specs::FORGET_TOOL, forget).await;
    assert_eq!(refused.unwrap_err(), "memory forget: memory not found");
    let opened = call(
        &memory,
        "helper",
        &alice,
        specs::OPEN_TOOL,
        json!({"memory_id": "fact-1"}),
    )
    .await;
    assert_eq!(opened.unwrap()["content"], "Checkout is at 11:00.");
}

//! The scripted mock provider: scenarios whose turns advance with the
//! conversation, the default scenario, and the default-response and
//! fallback texts, streamed in chunks of characters.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentwire_core::{ModelMessage, ModelProvider, ModelRequest, ModelToolCall};
use agentwire_providers::{MockScenario, MockTurn, ProviderKind, ProviderSettings, build};
use serde_json::json;

use crate::support::{complete, user};

fn mock(default_response: Option<&str>) -> Arc<dyn ModelProvider> {
    let scenarios = BTreeMap::from([
        (
            "default".to_owned(),
            MockScenario {
                turns: BTreeMap::from([(1, MockTurn::Text("Default scenario, turn one.".into()))]),
                default_response: None,
            },
        ),
        (
            "tools".to_owned(),
            MockScenario {
                turns: BTreeMap::from([
                    (
                        1,
                        MockTurn::ToolCalls {
                            content: Some("Let me find where you are.".into()),
                            tool_calls: vec![
                                ("get_location".into(), json!({"accuracy": "high"})),
                                ("get_time".into(), json!({})),
                            ],
                        },
                    ),
                    (
                        2,
                        MockTurn::Text(
                            "Based on your coordinates, you are in Denver, Colorado.".into(),
                        ),
                    ),
                ]),
                default_response: None,
            },
        ),
    ]);
    build(ProviderSettings::new(
        "mock-llm",
        "mock-model",
        ProviderKind::Mock {
            default_response: default_response.map(str::to_owned),
            scenarios,
        },
    ))
    .unwrap()
}

fn scenario(id: Option<&str>, messages: Vec<ModelMessage<'static>>) -> ModelRequest<'static> {
    ModelRequest {
        messages,
        metadata: std::borrow::Cow::Owned(
            id.map(|id| {
                (
                    agentwire_providers::MOCK_SCENARIO_KEY.to_owned(),
                    id.to_owned(),
                )
            })
            .into_iter()
            .collect(),
        ),
        ..ModelRequest::default()
    }
}

fn user_msg(text: &str) -> ModelMessage<'static> {
    ModelMessage::User {
        text: text.to_owned().into(),
        parts: Default::default(),
    }
}

#[tokio::test]
async fn mock_turns_advance_through_a_tool_round_trip() {
    let provider = mock(None);
    let mut messages = vec![user_msg("where am I?")];
    let (result, sink) = complete(&provider, &scenario(Some("tools"), messages.clone())).await;
    let reply = result.unwrap();
    assert_eq!(reply.text, "Let me find where you are.");
    assert_eq!(sink.texts(), ["Let me find where yo", "u are."]);
    assert_eq!(
        reply.tool_calls,
        vec![
            ModelToolCall {
                id: "call_0_get_location".into(),
                name: "get_location".into(),
                arguments: json!({"accuracy": "high"}),
            },
            ModelToolCall {
                id: "call_1_get_time".into(),
                name: "get_time".into(),
                arguments: json!({}),
            },
        ]
    );
    messages.push(ModelMessage::Assistant {
        text: reply.text.into(),
        tool_calls: reply.tool_calls,
    });
    for (id, content) in [
        ("call_0_get_location", "39.7,-104.9"),
        ("call_1_get_time", "noon"),
    ] {
        messages.push(ModelMessage::Tool {
            call_id: id.into(),
            name: "x".into(),
            content: content.into(),
            is_error: false,
        });
    }
    let (result, sink) = complete(&provider, &scenario(Some("tools"), messages.clone())).await;
    let reply = result.unwrap();
    assert_eq!(
        reply.text,
        "Based on your coordinates, you are in Denver, Colorado."
    );
    assert!(reply.tool_calls.is_empty());
    assert_eq!(
        sink.texts(),
        [
            "Based on your coordi",
            "nates, you are in De",
            "nver, Colorado."
        ]
    );
    // Turn 3 is not scripted: the fallback text.
    messages.push(ModelMessage::Assistant {
        text: reply.text.into(),
        tool_calls: Vec::new(),
    });
    messages.push(user_msg("thanks"));
    let (result, _) = complete(&provider, &scenario(Some("tools"), messages)).await;
    assert_eq!(
        result.unwrap().text,
        "Mock response for provider mock-llm model mock-model"
    );
}

#[tokio::test]
async fn mock_picks_the_default_scenario_without_one() {
    let provider = mock(None);
    for id in [None, Some("")] {
        let (result, sink) = complete(&provider, &scenario(id, vec![user_msg("hi")])).await;
        assert_eq!(result.unwrap().text, "Default scenario, turn one.");
        assert_eq!(sink.texts(), ["Default scenario, tu", "rn one."]);
    }
}

#[tokio::test]
async fn mock_answers_default_response_then_fallback_text() {
    let with_default = mock(Some("Canned answer from the default response."));
    let (result, sink) = complete(
        &with_default,
        &scenario(Some("unknown"), vec![user_msg("hi")]),
    )
    .await;
    let reply = result.unwrap();
    assert_eq!(reply.text, "Canned answer from the default response.");
    assert_eq!(
        sink.texts(),
        ["Canned answer from t", "he default response."]
    );
    assert_eq!(reply.usage, None);

    let without = mock(None);
    let (result, sink) = complete(&without, &scenario(Some("unknown"), vec![user_msg("hi")])).await;
    assert_eq!(
        result.unwrap().text,
        "Mock response for provider mock-llm model mock-model"
    );
    assert_eq!(
        sink.texts(),
        [
            "Mock response for pr",
            "ovider mock-llm mode",
            "l mock-model"
        ]
    );
    // Chunks count characters, not bytes.
    let provider = build(ProviderSettings::new(
        "m",
        "x",
        ProviderKind::Mock {
            default_response: Some("ü".repeat(25)),
            scenarios: BTreeMap::new(),
        },
    ))
    .unwrap();
    let (_, sink) = complete(&provider, &user("hi")).await;
    assert_eq!(sink.texts(), ["ü".repeat(20), "ü".repeat(5)]);
}

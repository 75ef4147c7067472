//! Unit tests of the team-file loader: both generations of the format
//! mapped onto runtime agents, the orchestrator default, and errors that
//! name the file and the key.

use std::collections::BTreeMap;

use agentwire_core::ToolSpec;
use agentwire_providers::ProviderKind;

use super::*;
use crate::config::runtime::ToolConfig;

fn provider() -> ProviderSettings {
    ProviderSettings::new(
        "p",
        "house-model",
        ProviderKind::Mock {
            default_response: None,
            scenarios: BTreeMap::new(),
        },
    )
}

/// A `tools[]` entry named `name` (a client tool: nothing to build).
fn config_tool(name: &str) -> NamedTool {
    NamedTool {
        name: name.to_owned(),
        config: ToolConfig::Client {
            spec: ToolSpec {
                name: name.to_owned(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            },
            consent_message: None,
            categories: Vec::new(),
        },
    }
}

fn env(name: &str) -> Option<String> {
    (name == "TRIAGE_MODEL").then(|| "gpt-4.1".to_owned())
}

/// Loads `yaml` from a file; errors as `(key, message)` with the path
/// replaced by `FILE`.
fn load_text(yaml: &str, tools: &[NamedTool]) -> Result<LoadedTeam, (String, String)> {
    // What the binary's `main` installs first: MCP entries build HTTP clients.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("team.yaml");
    std::fs::write(&path, yaml).unwrap();
    let path = path.display().to_string();
    load("teams[0].file", &path, &provider(), tools, &env).map_err(|e| {
        (
            e.key.replace(&path, "FILE"),
            e.message.replace(&path, "FILE"),
        )
    })
}

const NEW: &str = r#"
id: helpdesk
config: {max_turns: 20}
tools:
  - id: orders_api
    name: Orders API
    module: gnosari.tools.builtin.api_request
    class: APIRequestTool
    args: {base_url: "${ORDERS_URL:https://orders.internal}"}
  - id: docs_mcp
    command: docs-server
    args: ["--stdio", 3]
    timeout: 2.5
  - id: web_mcp
    url: http://127.0.0.1:9000/mcp
    connection_type: streamable_http
    headers: {Authorization: "Bearer x"}
traits:
  - id: concise
    instructions: Keep answers short.
agents:
  - id: triage
    name: Triage
    is_orchestrator: true
    model: "${TRIAGE_MODEL}"
    instructions: Route the user.
    traits: [concise]
    delegations:
      - {target_agent_id: billing, instructions: Refunds., mode: async}
    handoffs:
      - {target_agent_id: Tech Support, condition: App problems.}
    access_level: PUBLIC
  - id: billing
    name: Billing
    max_turns: 3
    instructions: Billing questions.
    tools: [orders_api, web_mcp]
    access_level: password
  - id: tech
    name: Tech Support
    instructions: Troubleshoot.
    tools: [docs_mcp]
"#;

#[test]
fn the_new_generation_maps_onto_runtime_agents() {
    let team = load_text(NEW, &[config_tool("orders_api")]).unwrap();
    assert_eq!(team.id.as_deref(), Some("helpdesk"));
    assert_eq!(team.orchestrator, 0);
    let [triage, billing, tech] = &team.agents[..] else {
        panic!("three agents");
    };
    assert_eq!(
        (triage.id.as_str(), triage.name.as_str()),
        ("triage", "Triage")
    );
    assert_eq!(
        triage.instructions,
        "Route the user.\n\nKeep answers short."
    );
    assert_eq!(triage.model, "gpt-4.1");
    assert_eq!(triage.max_rounds, 20);
    assert_eq!(
        triage.delegations,
        [Delegation {
            target: "billing".into(),
            instructions: Some("Refunds.".into())
        }]
    );
    assert_eq!(
        triage.handoffs,
        [Handoff {
            target: "tech".into(),
            description: Some("App problems.".into())
        }],
        "a target is matched by id, then by name"
    );
    assert_eq!(triage.access_level, Some(AccessLevel::Public));
    assert_eq!(billing.model, "house-model");
    assert_eq!(billing.max_rounds, 3);
    assert_eq!(billing.access_level, Some(AccessLevel::Private));
    assert!(matches!(&billing.tools[0], FileTool::Config(name) if name == "orders_api"));
    match &billing.tools[1] {
        FileTool::Mcp(McpSettings {
            name,
            transport: McpTransport::Http { url, headers },
            ..
        }) => {
            assert_eq!(name, "web_mcp");
            assert_eq!(url, "http://127.0.0.1:9000/mcp");
            assert_eq!(headers.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    match &tech.tools[0] {
        FileTool::Mcp(McpSettings {
            transport: McpTransport::Stdio { command, args, .. },
            timeout,
            ..
        }) => {
            assert_eq!(command, "docs-server");
            assert_eq!(args, &["--stdio", "3"]);
            assert_eq!(*timeout, std::time::Duration::from_millis(2500));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(tech.access_level, None, "follows the team");
}

const OLD: &str = r#"
name: Fruit Team
tools:
  - name: delegate_agent
    module: gnosari.tools.delegate_agent
    class: DelegateAgentTool
    args:
      pass
agents:
  - name: Alice
    instructions: Fruit.
    can_transfer_to: [Bob, {agent: Coordinator, instructions: Back to the coordinator.}]
  - name: Coordinator
    orchestrator: true
    instructions: Coordinate.
    tools: [delegate_agent]
    delegation:
      - agent: Alice
        instructions: Fruit questions
  - name: Bob
    instructions: Maths.
"#;

#[test]
fn the_old_generation_maps_onto_runtime_agents() {
    let team = load_text(OLD, &[]).unwrap();
    assert_eq!(team.id, None);
    assert_eq!(team.orchestrator, 1);
    let coordinator = &team.agents[1];
    assert_eq!(coordinator.id, "Coordinator");
    assert!(coordinator.tools.is_empty(), "delegation is built in");
    assert_eq!(coordinator.delegations[0].target, "Alice");
    assert_eq!(
        team.agents[0].handoffs,
        [
            Handoff {
                target: "Bob".into(),
                description: None
            },
            Handoff {
                target: "Coordinator".into(),
                description: Some("Back to the coordinator.".into())
            },
        ]
    );
    assert_eq!(team.agents[0].max_rounds, 10);
}

#[test]
fn no_orchestrator_marked_is_the_first_agent() {
    let team = load_text("agents:\n  - name: a\n    instructions: x\n", &[]).unwrap();
    assert_eq!(team.orchestrator, 0);
}

/// Files with one fault each: the key the error names and a fragment of
/// its message.
const FAULTY_FILES: &[(&str, &str, &str)] = &[
    (
        NEW,
        "FILE: agents[1].tools[0]",
        "APIRequestTool cannot run here",
    ),
    (
        "agents:\n  - id: a\n    instructions: x\n    delegations: [{target_agent_id: zed}]\n",
        "FILE: agents[0].delegations[0].target_agent_id",
        "no agent with id or name \"zed\"",
    ),
    (
        "agents:\n  - id: a\n    instructions: x\n    can_transfer_to: [a]\n",
        "FILE: agents[0].can_transfer_to[0]",
        "cannot name itself",
    ),
    (
        "agents:\n  - {id: a, instructions: x, is_orchestrator: true}\n  - {id: b, instructions: other, orchestrator: true}\n",
        "FILE: agents[1].orchestrator",
        "agents[0] is the orchestrator already",
    ),
    (
        "agents:\n  - id: a\n",
        "FILE: agents[0].instructions",
        "required",
    ),
    (
        "agents:\n  - {id: a, instructions: x}\n  - {name: a, instructions: other}\n",
        "FILE: agents[1].id",
        "also agents[0]'s",
    ),
    (
        "agents:\n  - {id: a, instructions: x, max_turns: many}\n",
        "FILE: agents[0].max_turns",
        "invalid type",
    ),
    (
        "tools:\n  - {id: t, url: 'http://x/sse', connection_type: sse}\nagents:\n  - {id: a, instructions: x, tools: [t]}\n",
        "FILE: tools[0].connection_type",
        "not supported",
    ),
    (
        "agents:\n  - {id: a, instructions: x, tools: [nope]}\n",
        "FILE: agents[0].tools[0]",
        "no tool with id \"nope\"",
    ),
    (
        "agents:\n  - {id: a, instructions: '${NOT_SET_ANYWHERE}'}\n",
        "FILE: agents[0].instructions",
        "${NOT_SET_ANYWHERE}: environment variable is not set and has no default (line 2)",
    ),
    (
        "# model: ${NOT_SET_ANYWHERE}\nagents:\n  - {id: a, instructions: x, can_transfer_to: [7]}\n",
        "FILE: agents[0].can_transfer_to[0]",
        "expected an agent's id or name, or a mapping with `agent`",
    ),
    (
        "agents:\n  - {id: a, instructions: x, can_transfer_to: [{instructions: help}]}\n",
        "FILE: agents[0].can_transfer_to[0]",
        "missing field `agent`",
    ),
    ("agents: []\n", "FILE: agents", "at least one agent"),
    ("agents: [1, 2\n", "teams[0].file", "FILE: invalid YAML"),
];

#[test]
fn errors_name_the_file_and_the_key() {
    for (yaml, key, fragment) in FAULTY_FILES {
        let (got_key, message) = match load_text(yaml, &[]) {
            Err(e) => e,
            Ok(_) => panic!("{key}: accepted"),
        };
        assert_eq!(&got_key, key, "{message}");
        assert!(message.contains(fragment), "{key}: {message}");
    }
}

#[test]
fn an_unreadable_file_is_named_by_its_teams_key() {
    let missing = load(
        "teams[3].file",
        "/nonexistent/team.yaml",
        &provider(),
        &[],
        &env,
    )
    .err()
    .unwrap();
    assert_eq!(missing.key, "teams[3].file");
    assert!(
        missing
            .message
            .starts_with("cannot read /nonexistent/team.yaml")
    );
}

/// A substituted value a check refuses is named by its reference, in the
/// form it was given (not lowercased).
#[test]
fn a_refused_substituted_value_is_not_shown() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("team.yaml");
    let yaml = concat!(
        "tools:\n  - {id: t, url: 'http://x/mcp', connection_type: ${KIND}}\n",
        "agents:\n  - {id: a, instructions: x, access_level: ${LEVEL}, tools: [t]}\n",
    );
    std::fs::write(&path, yaml).unwrap();
    let path = path.display().to_string();
    for (level, kind) in [("Hunter2", "http"), ("public", "Hunter2-SSE")] {
        let lookup = |name: &str| match name {
            "LEVEL" => Some(level.to_owned()),
            "KIND" => Some(kind.to_owned()),
            _ => None,
        };
        let error = load("teams[0].file", &path, &provider(), &[], &lookup)
            .err()
            .expect("refused");
        let message = error.message.to_ascii_lowercase();
        assert!(!message.contains("hunter2"), "{error}");
        assert!(
            error.message.contains("${LEVEL}") || error.message.contains("${KIND}"),
            "{error}"
        );
    }
}

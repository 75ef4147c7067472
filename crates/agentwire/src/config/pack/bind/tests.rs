use std::collections::BTreeMap;

use agentwire_providers::{ApiKey, ProviderKind, ProviderSettings};
use agentwire_tools::{HttpToolSettings, McpSettings, McpTransport};
use serde_json::{Value, json};

use super::*;
use crate::config::HttpToolSettingsDebug;

fn client(name: &str) -> NamedTool {
    NamedTool {
        name: name.to_owned(),
        config: ToolConfig::Client {
            spec: ToolSpec {
                name: name.to_owned(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            },
            consent_message: None,
            categories: Vec::new(),
        },
    }
}

fn http(name: &str) -> NamedTool {
    let settings = HttpToolSettings::new(name, "GET", "http://127.0.0.1:9/");
    NamedTool {
        name: name.to_owned(),
        config: ToolConfig::Http(HttpToolSettingsDebug(settings)),
    }
}

fn mcp(name: &str) -> NamedTool {
    let transport = McpTransport::Stdio {
        command: "true".to_owned(),
        args: Vec::new(),
        env: Vec::new(),
    };
    NamedTool {
        name: name.to_owned(),
        config: ToolConfig::Mcp(McpSettings::new(name, transport)),
    }
}

/// The agent `agents[2]` on an Anthropic provider with `tools`, running
/// the prompt `support`.
fn source(tools: Vec<NamedTool>) -> PackSource {
    PackSource {
        agent_key: "agents[2]".to_owned(),
        prompt: Some("support".to_owned()),
        variables: BTreeMap::new(),
        tool_map: BTreeMap::new(),
        provider: ProviderSettings::new(
            "main",
            "claude",
            ProviderKind::Anthropic {
                base_url: String::new(),
                api_key: Some(ApiKey::from("k")),
            },
        ),
        tools,
        requires_ai_disclosure: None,
        max_rounds: None,
    }
}

/// A pack of two prompts: `support` offers `read`, `write` and `lookup`
/// (`write` blocklisted), `sales` offers nothing.
fn pack(edit: impl FnOnce(&mut Value)) -> Pack {
    let tool = |name: &str| json!({"name": name, "description": format!("{name} it")});
    let mut document = json!({
      "id": "desk", "name": "Desk", "version": "1.0.0",
      "template_engine": {"version": "v1", "syntax": "{{variable}}"},
      "prompts": {
        "support": {"id": "support", "name": "Support", "version": "1.0.0",
          "system_template": "Help {{tier}} customers.",
          "variables": [{"name": "tier", "type": "string", "required": false,
            "default": "free", "validation": {"enum": ["free", "pro"]}}],
          "tools": ["read", "write", "lookup"],
          "tool_policy": {"blocklist": ["write"]},
          "parameters": {"temperature": 0.5}},
        "sales": {"id": "sales", "name": "Sales", "version": "1.0.0", "system_template": "Sell."}
      },
      "tools": {"read": tool("read"), "write": tool("write"), "lookup": tool("lookup")}
    });
    edit(&mut document);
    agentwire_pack::compile(&document.to_string(), "desk.json")
        .expect("the test pack compiles")
        .pack
}

fn failure(pack: &Pack, source: &PackSource) -> String {
    bind(pack, Vec::new(), source).unwrap_err().to_string()
}

#[test]
fn a_pack_of_several_prompts_needs_one_named() {
    let named = |prompt: Option<&str>| PackSource {
        prompt: prompt.map(str::to_owned),
        ..source(Vec::new())
    };
    assert_eq!(
        failure(&pack(|_| {}), &named(None)),
        "agents[2].pack.prompt: required: the pack has 2 prompts (sales, support)"
    );
    let plan = bind(&pack(|_| {}), Vec::new(), &named(Some("sales"))).unwrap();
    assert_eq!((plan.prompt.as_str(), plan.tools.len()), ("sales", 0));
    assert_eq!(
        failure(&pack(|_| {}), &named(Some("refunds"))),
        "agents[2].pack.prompt: the pack has no prompt \"refunds\" (it has sales, support)"
    );
}

#[test]
fn tools_bind_by_name_or_by_the_map_and_an_mcp_server_runs_several() {
    let mut source = source(vec![mcp("files"), client("lookup")]);
    assert_eq!(
        failure(&pack(|_| {}), &source),
        "tools.read: bound to no tool: the agent's tools have none named \"read\" (or name one in pack.tools)"
    );
    source.tool_map = BTreeMap::from([("read".to_owned(), "files".to_owned())]);
    let plan = bind(&pack(|_| {}), Vec::new(), &source).unwrap();
    let bound: Vec<(&str, &str, &str)> = plan
        .tools
        .iter()
        .map(|t| {
            let spec = &t.spec;
            (
                spec.name.as_str(),
                spec.description.as_str(),
                t.entry.name.as_str(),
            )
        })
        .collect();
    // `write` is blocklisted: not offered, so not bound.
    assert_eq!(
        bound,
        [
            ("read", "read it", "files"),
            ("lookup", "lookup it", "lookup")
        ]
    );
    let all_offered = pack(|d| d["prompts"]["support"]["tool_policy"] = json!({}));
    source
        .tool_map
        .insert("write".to_owned(), "files".to_owned());
    assert_eq!(
        bind(&all_offered, Vec::new(), &source).unwrap().tools.len(),
        3
    );
    // An http or client tool runs one pack tool.
    source
        .tool_map
        .insert("read".to_owned(), "lookup".to_owned());
    let error = failure(&all_offered, &source);
    assert_eq!(
        error,
        "agents[2].pack.tools.read: \"lookup\" runs \"read\" and \"lookup\"; an http or client tool runs one"
    );
}

#[test]
fn the_map_and_the_agents_tools_must_each_be_used() {
    let mut source = source(vec![http("read"), client("lookup"), client("spare")]);
    assert_eq!(
        failure(&pack(|_| {}), &source),
        "agents[2].tools[2]: runs none of the tools the pack's prompt \"support\" offers"
    );
    source.tools.pop();
    source.tool_map = BTreeMap::from([("write".to_owned(), "read".to_owned())]);
    assert_eq!(
        failure(&pack(|_| {}), &source),
        "agents[2].pack.tools.write: the prompt \"support\" offers no tool \"write\""
    );
    source.tool_map = BTreeMap::from([("read".to_owned(), "elsewhere".to_owned())]);
    assert_eq!(
        failure(&pack(|_| {}), &source),
        "agents[2].pack.tools.read: \"elsewhere\" is not one of the agent's tools"
    );
}

#[test]
fn variables_are_checked_against_their_type_and_validation() {
    let mut source = source(vec![http("read"), client("lookup")]);
    let plan = bind(&pack(|_| {}), Vec::new(), &source).unwrap();
    assert_eq!(plan.variables[0].default, Some(json!("free")));
    assert!(plan.variables[0].fixed.is_none());
    source.variables = BTreeMap::from([("tier".to_owned(), json!("gold"))]);
    let error = failure(&pack(|_| {}), &source);
    assert!(
        error.starts_with("agents[2].pack.variables.tier: the variable's validation"),
        "{error}"
    );
    assert!(!error.contains("gold"), "no value in the message: {error}");
    source.variables = BTreeMap::from([("tier".to_owned(), json!(3))]);
    assert_eq!(
        failure(&pack(|_| {}), &source),
        "agents[2].pack.variables.tier: not a string"
    );
    source.variables.clear();
    let bad_default =
        pack(|d| d["prompts"]["support"]["variables"][0]["default"] = json!("platinum"));
    let error = failure(&bad_default, &source);
    assert!(
        error.starts_with("prompts.support.variables[0].default: the variable's validation"),
        "{error}"
    );
}

#[test]
fn parameters_the_provider_does_not_take_are_named() {
    let source = source(vec![http("read"), client("lookup")]);
    let penalty = pack(|d| d["prompts"]["support"]["parameters"]["presence_penalty"] = json!(1));
    assert_eq!(
        failure(&penalty, &source),
        "prompts.support.parameters.presence_penalty: the agent's provider \"main\" (anthropic) does not take presence_penalty"
    );
    let plan = bind(&pack(|_| {}), Vec::new(), &source).unwrap();
    assert_eq!(
        (plan.sampling.temperature, plan.max_rounds),
        (Some(0.5), 10)
    );
}

//! PromptPack agents (`agents[].pack`) over real sockets: a pack loads and
//! answers with its template, parameters and tools as the model sees them;
//! `requires_ai_disclosure` reaches `connected`; variables come from the
//! config, then the message's metadata, then their defaults; `max_length`
//! cuts a reply; invalid packs fail `check-config` naming the JSON path;
//! and `agentwire pack compile` prints and exits as documented. Compile
//! mode is in `packs_compile_mode.rs`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config_errors::{agentwire, check_config, write_config};
use crate::fake_http::{openai_model, openai_text};
use crate::support::TestServer;

/// The reference's minimal useful pack: one prompt, one tool, disclosure
/// required in `metadata`.
pub(crate) fn useful_pack() -> Value {
    json!({
      "$schema": "https://promptpack.org/schema/latest/promptpack.schema.json",
      "id": "echo-agent", "name": "Echo Agent", "version": "1.0.0",
      "description": "Smallest useful pack: one prompt, one tool.",
      "template_engine": { "version": "v1", "syntax": "{{variable}}" },
      "prompts": {
        "chat": {
          "id": "chat", "name": "Chat", "version": "1.0.0",
          "system_template": "You are {{persona}}. Call get_time when asked the time.",
          "variables": [{ "name": "persona", "type": "string", "required": false, "default": "a concise assistant" }],
          "tools": ["get_time"], "tool_policy": { "tool_choice": "auto", "max_rounds": 3 },
          "parameters": { "temperature": 0.2, "max_tokens": 512 },
          "validators": [{ "type": "max_length", "enabled": true, "params": { "max_characters": 2000 } }]
        }
      },
      "tools": {
        "get_time": { "name": "get_time", "description": "Current time in an IANA timezone",
          "parameters": { "type": "object", "properties": { "tz": { "type": "string" } }, "required": ["tz"] } }
      },
      "metadata": { "domain": "demo", "language": "en", "requires_ai_disclosure": true },
      "compilation": { "compiled_with": "packc-v1.0.0", "created_at": "2026-08-21T00:00:00Z", "schema": "v1" }
    })
}

/// The strict minimum: one prompt, nothing else.
pub(crate) fn minimal_pack(template: &str) -> Value {
    json!({
      "id": "hello", "name": "Hello", "version": "1.0.0",
      "template_engine": { "version": "v1", "syntax": "{{variable}}" },
      "prompts": { "chat": { "id": "chat", "name": "Chat", "version": "1.0.0",
        "system_template": template } }
    })
}

/// Writes `pack` as `name` in `dir`.
pub(crate) fn write_pack(dir: &Path, name: &str, pack: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(pack).unwrap()).unwrap();
    path
}

/// Where `needle` starts in `pack` as [`write_pack`] writes it: the
/// `line:column` a diagnostic names (the last occurrence with `Last`).
fn position(pack: &Value, needle: &str, which: Occurrence) -> String {
    let text = serde_json::to_string_pretty(pack).unwrap();
    let at = match which {
        Occurrence::First => text.find(needle),
        Occurrence::Last => text.rfind(needle),
    }
    .expect("the needle is in the pack");
    let line = text[..at].matches('\n').count() + 1;
    let column = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
    format!("{line}:{column}")
}

enum Occurrence {
    First,
    Last,
}

/// A provider `model` on the fake OpenAI API at `addr`, and the client
/// tool `get_time`.
fn openai_top_level(addr: std::net::SocketAddr) -> String {
    format!(
        "providers:\n  - name: model\n    type: openai\n    model: gpt-4o-mini\n    base_url: http://{addr}/v1\n\
tools:\n  - name: get_time\n    type: client\n    description: overridden by the pack\n"
    )
}

/// The one system message of the model's request.
fn system_prompt(request: &Value) -> &str {
    let first = &request["messages"][0];
    assert_eq!(first["role"], "system", "{request}");
    first["content"].as_str().unwrap()
}

#[tokio::test]
async fn the_minimal_useful_pack_loads_and_the_model_sees_its_template_parameters_and_tool() {
    let dir = tempfile::tempdir().unwrap();
    let pack = write_pack(dir.path(), "echo.pack.json", &useful_pack());
    let model = openai_model(vec![openai_text("It is noon.")]).await;
    let agent = format!(
        "  - name: packed\n    handler: runtime\n    provider: model\n    tools: [get_time]\n    pack: {}\n",
        pack.display()
    );
    let server = TestServer::with_runtime(&openai_top_level(model.addr), &agent).await;
    let (mut client, connected) = server.connect("agent=packed").await;
    assert_eq!(connected["connected"]["ai_disclosure"], true, "{connected}");
    client.say("what time is it?").await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(
        (&done["type"], &done["content"]),
        (&json!("done"), &json!("It is noon."))
    );
    let request = model.requests().await[0].json();
    assert_eq!(
        system_prompt(&request),
        "You are a concise assistant. Call get_time when asked the time."
    );
    assert_eq!(
        (&request["temperature"], &request["max_tokens"]),
        (&json!(0.2), &json!(512))
    );
    assert_eq!(
        request["tools"],
        json!([{"type": "function", "function": {
            "name": "get_time", "description": "Current time in an IANA timezone",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}
        }}])
    );
    let listing = server.http("GET", "/api/v1/agents", &[], b"").await.json();
    let packed = listing["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "packed")
        .unwrap();
    assert_eq!(
        packed["pack"],
        json!({"id": "echo-agent", "version": "1.0.0", "prompt": "chat", "compile": "at_startup",
            "compiles": 1, "error": null, "warnings": []})
    );
    assert_eq!(packed["ai_disclosure"], true);
    server.stop().await;
}

#[tokio::test]
async fn a_pack_without_requires_ai_disclosure_announces_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = write_pack(dir.path(), "quiet.json", &minimal_pack("Be kind."));
    let mut loud = minimal_pack("Be kind.");
    loud["requires_ai_disclosure"] = json!(true);
    let loud = write_pack(dir.path(), "loud.json", &loud);
    let top_level = "providers:\n  - name: mock\n    type: mock\n    default_response: Hello.\n";
    let agent = |name: &str, path: &Path| {
        format!(
            "  - name: {name}\n    handler: runtime\n    provider: mock\n    pack: {}\n",
            path.display()
        )
    };
    let agents = agent("quiet", &quiet) + &agent("loud", &loud);
    let server = TestServer::with_runtime(top_level, &agents).await;
    let (mut client, connected) = server.connect("agent=quiet").await;
    assert!(
        connected["connected"].get("ai_disclosure").is_none(),
        "{connected}"
    );
    client.say("hi").await;
    assert_eq!(client.recv_turn().await.pop().unwrap()["content"], "Hello.");
    let (_, connected) = server.connect("agent=loud").await;
    assert_eq!(
        connected["connected"]["ai_disclosure"], true,
        "top level, as metadata: {connected}"
    );
    server.stop().await;
}

/// A pack whose template takes `tier` (checked) from the message and
/// `company` from the config.
fn tiers_pack() -> Value {
    let mut pack = minimal_pack("Serve a {{tier}} customer of {{company}}.");
    pack["prompts"]["chat"]["variables"] = json!([
        {"name": "tier", "type": "string", "required": true, "validation": {"enum": ["free", "pro"]}},
        {"name": "company", "type": "string", "required": true}
    ]);
    pack
}

#[tokio::test]
async fn variables_come_from_the_config_then_the_message_metadata_then_their_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let pack = write_pack(dir.path(), "tiers.json", &tiers_pack());
    let model = openai_model(vec![openai_text("Welcome.")]).await;
    let agent = format!(
        "  - name: tiers\n    handler: runtime\n    provider: model\n    pack:\n      path: {}\n      variables: {{company: Acme}}\n",
        pack.display()
    );
    let server = TestServer::with_runtime(&openai_top_level(model.addr), &agent).await;
    let (mut client, _) = server.connect("agent=tiers").await;
    client.say("hello").await;
    let error = client.recv_turn().await.pop().unwrap();
    assert_eq!(
        error["error"],
        json!({"code": "INVALID_MESSAGE", "message": "this agent needs metadata.tier (a required variable of its pack)"})
    );
    let message = |tier: &str| json!({"type": "message", "content": "hello", "metadata": {"tier": tier, "company": "Evil Corp"}});
    client.send_json(message("gold")).await;
    let error = client.recv_turn().await.pop().unwrap();
    assert_eq!(error["error"]["code"], "INVALID_MESSAGE", "{error}");
    let text = error["error"]["message"].as_str().unwrap();
    assert!(
        text.starts_with("metadata.tier breaks the agent's pack"),
        "{text}"
    );
    assert!(!text.contains("gold"), "no value in the message: {text}");
    client.send_json(message("pro")).await;
    assert_eq!(
        client.recv_turn().await.pop().unwrap()["content"],
        "Welcome."
    );
    let requests = model.requests().await;
    assert_eq!(requests.len(), 1, "refused turns never reached the model");
    // The config's company stands: metadata cannot change it.
    assert_eq!(
        system_prompt(&requests[0].json()),
        "Serve a pro customer of Acme."
    );
    server.stop().await;
}

#[tokio::test]
async fn max_length_cuts_the_reply_before_the_client_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut pack = minimal_pack("Talk a lot.");
    pack["prompts"]["chat"]["validators"] =
        json!([{"type": "max_length", "params": {"max_characters": 12}}]);
    let pack = write_pack(dir.path(), "short.json", &pack);
    let top_level = "providers:\n  - name: mock\n    type: mock\n    default_response: This reply goes on and on and on.\n";
    let agent = format!(
        "  - name: short\n    handler: runtime\n    provider: mock\n    pack: {}\n",
        pack.display()
    );
    let server = TestServer::with_runtime(top_level, &agent).await;
    let (mut client, _) = server.connect("agent=short").await;
    client.say("hi").await;
    let frames = client.recv_turn().await;
    let streamed: String = frames
        .iter()
        .filter(|f| f["type"] == "chunk")
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "This reply g");
    assert_eq!(frames.last().unwrap()["content"], "This reply g");
    server.stop().await;
}

/// A config of one pack agent on `provider` (a mock or an openai
/// provider), with `agent_extra` lines in the agent.
fn pack_config(pack: &Path, provider: &str, agent_extra: &str) -> String {
    format!(
        "providers:\n{provider}\
tools:\n  - name: get_time\n    type: client\n  - name: ask\n    type: a2a\n    url: http://127.0.0.1:9/\n\
agents:\n  - name: packed\n    handler: runtime\n    provider: model\n    pack: {}\n{agent_extra}",
        pack.display()
    )
}

const MOCK: &str = "  - name: model\n    type: mock\n";
const OPENAI: &str = "  - name: model\n    type: openai\n    model: gpt-4o-mini\n    base_url: http://127.0.0.1:9/v1\n";

/// `check-config` on a pack agent: exit 64, and stderr naming `key` and
/// then `fragment`.
fn assert_pack_refused(pack: &Value, provider: &str, agent_extra: &str, key: &str, fragment: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_pack(dir.path(), "pack.json", pack);
    let (_config_dir, config) = write_config(&pack_config(&path, provider, agent_extra));
    let output = check_config(&config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    let prefix = format!("config error: {key}: ");
    assert!(stderr.starts_with(&prefix), "{prefix:?}: {stderr}");
    let fragment = fragment.replace("{file}", &path.display().to_string());
    assert!(stderr.contains(&fragment), "{fragment:?}: {stderr}");
}

#[tokio::test]
async fn invalid_packs_fail_check_config_naming_the_file_and_the_json_path() {
    let tools = "    tools: [get_time]\n";
    let mut bad_version = useful_pack();
    bad_version["prompts"]["chat"]["version"] = json!("one");
    let at = position(&bad_version, "\"version\": \"one\"", Occurrence::First);
    assert_pack_refused(
        &bad_version,
        MOCK,
        tools,
        "agents[0].pack",
        &format!("{{file}}:{at}: prompts.chat.version: Does not match pattern"),
    );
    let mut evals = useful_pack();
    evals["evals"] = json!([{"id": "tone"}]);
    assert_pack_refused(
        &evals,
        MOCK,
        tools,
        "agents[0].pack",
        ": evals: not supported",
    );
    let at = position(&useful_pack(), "\"get_time\": {", Occurrence::Last);
    assert_pack_refused(
        &useful_pack(),
        MOCK,
        "",
        "agents[0].pack",
        &format!("{{file}}:{at}: tools.get_time: bound to no tool"),
    );
    assert_pack_refused(
        &useful_pack(),
        MOCK,
        "    tools: [get_time, ask]\n",
        "agents[0].pack",
        "agents[0].tools[1]: runs none of the tools",
    );
    let mut top_k = useful_pack();
    top_k["prompts"]["chat"]["parameters"]["top_k"] = json!(40);
    assert_pack_refused(
        &top_k,
        OPENAI,
        tools,
        "agents[0].pack",
        "prompts.chat.parameters.top_k: the agent's provider \"model\" (openai) does not take top_k",
    );
    let variables = "    tools: [get_time]\n    requires_ai_disclosure: false\n";
    assert_pack_refused(
        &useful_pack(),
        MOCK,
        variables,
        "agents[0].pack",
        "agents[0].requires_ai_disclosure: false, but the pack declares true",
    );
    let mut none_declared = minimal_pack("Hello {{name}}");
    none_declared["compilation"] = useful_pack()["compilation"].clone();
    assert_pack_refused(
        &none_declared,
        MOCK,
        "",
        "agents[0].pack",
        "prompts.chat.system_template: system_template references variables, but none are declared",
    );
}

#[tokio::test]
async fn pack_settings_the_config_cannot_honour_are_named_by_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_pack(dir.path(), "pack.json", &useful_pack());
    let cases = [
        (
            "    tools: [get_time]\n    instructions: Be brief.\n",
            "agents[0].instructions",
            "not with `pack`",
        ),
        (
            "    tools: [get_time]\n    max_rounds: 4\n",
            "agents[0].pack",
            "agents[0].max_rounds: not with the pack's tool_policy.max_rounds",
        ),
    ];
    for (extra, key, fragment) in cases {
        assert_pack_refused(&useful_pack(), MOCK, extra, key, fragment);
    }
    let block = format!(
        "providers:\n{MOCK}tools:\n  - name: get_time\n    type: client\nagents:\n  - name: packed\n    handler: runtime\n    provider: model\n    tools: [get_time]\n    pack:\n      path: {}\n      variables: {{mood: grim}}\n",
        path.display()
    );
    let (_config_dir, config) = write_config(&block);
    let stderr = String::from_utf8(check_config(&config).stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        "config error: agents[0].pack: agents[0].pack.variables.mood: the prompt \"chat\" declares no variable \"mood\""
    );
}

#[tokio::test]
async fn pack_compile_exits_0_with_warnings_and_1_with_errors_and_prints_where() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_pack(dir.path(), "hello.json", &minimal_pack("Be kind."));
    let output_path = dir.path().join("out.pack.json");
    let run = |path: &Path, output: Option<&Path>| {
        let mut command = agentwire();
        command.arg("pack").arg("compile").arg(path);
        if let Some(output) = output {
            command.arg("--output").arg(output);
        }
        command.output().expect("the binary runs")
    };
    let compiled = run(&good, Some(&output_path));
    let file = good.display().to_string();
    assert_eq!(compiled.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(compiled.stdout).unwrap(),
        format!(
            "{file}: warning: compilation: missing: packc validate would refuse the pack (agentwire needs none)\n\
{file}: compiled pack hello 1.0.0: 1 prompt(s), 1 warning(s)\n"
        )
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&output_path).unwrap()).unwrap();
    assert_eq!(written, minimal_pack("Be kind."));
    assert_eq!(
        run(&output_path, None).status.code(),
        Some(0),
        "the output compiles"
    );

    let yaml = dir.path().join("broken.pack.yaml");
    std::fs::write(
        &yaml,
        "id: Broken\nname: Broken\nversion: 1.0.0\ntemplate_engine: {version: v1, syntax: \"{{variable}}\"}\nprompts: {}\nextra: 1\n",
    )
    .unwrap();
    let failed = run(&yaml, None);
    let file = yaml.display().to_string();
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(failed.stdout).unwrap(),
        format!(
            "{file}:6:1: error: (root): Additional property extra is not allowed\n\
{file}:1:1: error: id: Does not match pattern '^[a-z][a-z0-9-]*$'\n\
{file}:5:1: error: prompts: Must have at least 1 properties\n\
{file}: did not compile: 3 error(s), 0 warning(s)\n"
        )
    );
    assert_eq!(
        run(&dir.path().join("missing.json"), None).status.code(),
        Some(1)
    );
    let usage = agentwire().args(["pack", "compile"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2), "no path: a usage error");
}

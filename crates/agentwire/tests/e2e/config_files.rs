//! Config files as users write them: variables in comments and values, the
//! README's own examples, PromptKit mock files, errors that say which forms
//! a key takes, and a damaged session database refused before the port is
//! bound.

use std::net::TcpListener;
use std::path::Path;

use serde_json::json;

use crate::config_errors::{ONE_AGENT, agentwire, check_config, write_config};
use crate::support::TestServer;

/// `check-config` on `text` exits 0.
fn assert_accepted(text: &str) {
    let (_dir, path) = write_config(text);
    let output = check_config(&path);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `check-config` on `text` exits 64 with `config error: <key>: ...`
/// mentioning `fragment`.
fn assert_rejected(text: &str, key: &str, fragment: &str) {
    let (_dir, path) = write_config(text);
    let output = check_config(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{key}: {stderr}");
    let prefix = format!("config error: {key}: ");
    assert!(stderr.starts_with(&prefix), "{prefix:?}: {stderr}");
    assert!(stderr.contains(fragment), "{fragment:?}: {stderr}");
}

/// The fenced YAML block of README.md that contains `marker`.
fn readme_yaml_block(marker: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md is readable");
    readme
        .split("```yaml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default())
        .find(|block| block.contains(marker))
        .unwrap_or_else(|| panic!("README.md has a yaml block with {marker:?}"))
        .to_owned()
}

#[tokio::test]
async fn a_variable_in_a_comment_does_not_break_the_config() {
    assert_accepted(&format!(
        "# api_key: ${{AGENTWIRE_TEST_UNSET_VAR_XYZ}}\nserver:\n  listen: 127.0.0.1:0   # or ${{AGENTWIRE_TEST_UNSET_VAR_XYZ}}\n{ONE_AGENT}"
    ));
}

#[tokio::test]
async fn the_readme_ollama_example_loads_as_written() {
    let block = readme_yaml_block("base_url: http://localhost:11434/v1");
    assert!(
        block.contains("${OPENAI_API_KEY}"),
        "the example still shows the commented api_key: {block}"
    );
    let (_dir, path) = write_config(&block);
    let output = agentwire()
        .env_remove("OPENAI_API_KEY")
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "README example:\n{block}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn an_unset_variable_in_a_value_names_its_key_path_and_line() {
    assert_rejected(
        "providers:\n  - name: local\n    type: openai\n    model: llama3.2\n    api_key: \"Bearer ${AGENTWIRE_TEST_UNSET_VAR_XYZ}\"\nagents:\n  - name: echo\n    handler: echo\n",
        "providers[0].api_key",
        "${AGENTWIRE_TEST_UNSET_VAR_XYZ}: environment variable is not set and has no default (line 5)",
    );
    assert_rejected(
        &format!(
            "tools:\n  - name: t\n    type: mcp\n    command: x\n    env:\n      ${{AGENTWIRE_TEST_UNSET_VAR_XYZ}}: v\n{ONE_AGENT}"
        ),
        "tools[0].env.${AGENTWIRE_TEST_UNSET_VAR_XYZ}",
        "substituted in values only, not in keys",
    );
}

#[tokio::test]
async fn values_are_substituted_escaped_and_never_read_as_yaml_structure() {
    // An unquoted number stays a number; a default with colons is one value.
    assert_accepted(&format!(
        "server:\n  listen: ${{AGENTWIRE_TEST_UNSET_VAR_XYZ:127.0.0.1:0}}\n  limits:\n    max_connections: ${{AGENTWIRE_TEST_UNSET_VAR_XYZ:25}}\n{ONE_AGENT}"
    ));
    // A quoted value stays text, so a number there is refused as text.
    assert_rejected(
        &format!(
            "server:\n  limits:\n    max_connections: \"${{AGENTWIRE_TEST_UNSET_VAR_XYZ:25}}\"\n{ONE_AGENT}"
        ),
        "server.limits.max_connections",
        "invalid type: string",
    );
    // What a client sees: `$${` is a literal `${`, and a default fills in,
    // in a plain value and in a quoted one.
    let providers = r#"
providers:
  - name: scripted
    type: mock
    default_response: Literal $${HOME}, ${AGENTWIRE_TEST_UNSET_VAR_XYZ:a default}, $5   # ${NOT_SET_EITHER}
    scenarios:
      quoted:
        turns:
          1: "${AGENTWIRE_TEST_UNSET_VAR_XYZ:- not: a list # nor a comment}"
"#;
    let agent = "  - name: assistant\n    handler: runtime\n    provider: scripted\n";
    let server = TestServer::with_runtime(providers, agent).await;
    let (mut client, _) = server.connect("agent=assistant").await;
    client.say("hello").await;
    let frames = client.recv_turn().await;
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["content"], "Literal ${HOME}, a default, $5");
    // A new session, so that the scenario's turn 1 is the one played.
    let (mut client, _) = server.connect("agent=assistant").await;
    client.script("quoted", "hello").await;
    let frames = client.recv_turn().await;
    assert_eq!(
        frames.last().unwrap()["content"],
        "- not: a list # nor a comment"
    );
}

#[tokio::test]
async fn a_mock_turn_of_no_accepted_form_says_which_forms_are_accepted() {
    assert_rejected(
        "providers:\n  - name: m\n    type: mock\n    scenarios:\n      s:\n        turns:\n          1: 42\nagents:\n  - name: echo\n    handler: echo\n",
        "providers[0].scenarios.s.turns.1",
        "expected a text, or a mapping with `content` (a text) and/or `tool_calls`",
    );
    assert_rejected(
        "providers:\n  - name: m\n    type: mock\n    scenarios:\n      s:\n        turns:\n          1: {type: multimodal, content: x}\nagents:\n  - name: echo\n    handler: echo\n",
        "providers[0].scenarios.s.turns.1.type",
        "unknown variant `multimodal`, expected `text` or `tool_calls`",
    );
}

/// A PromptKit mock file as an Omnia deployment has it (camelCase keys,
/// `type: tool_calls`, a turn with only `content`, a scenario default, a
/// `selfplay` section).
const PROMPTKIT_MOCK: &str = r#"
defaultResponse: "I only know scripts."
scenarios:
  location:
    turns:
      1:
        type: tool_calls
        content: "Let me check."
        tool_calls:
          - name: get_location
            arguments:
              accuracy: high
      2:
        type: text
        content: "Based on your coordinates, you are in Denver, Colorado."
  greeting:
    defaultResponse: "Still here."
    turns:
      1:
        content: "Hello from the mock."
selfplay:
  curious-user:
    turns:
      1: "What can you do?"
"#;

#[tokio::test]
async fn a_promptkit_mock_file_scripts_a_runtime_agent() {
    let dir = tempfile::tempdir().unwrap();
    let mock = dir.path().join("mock-responses.yaml");
    std::fs::write(&mock, PROMPTKIT_MOCK).unwrap();
    let top_level = format!(
        r#"
providers:
  - name: scripted
    type: mock
    mock_config: {}
tools:
  - name: get_location
    type: client
    description: The user's location
    parameters: {{type: object, properties: {{accuracy: {{type: string}}}}}}
"#,
        mock.display()
    );
    let agent = "  - name: assistant\n    handler: runtime\n    provider: scripted\n    tools: [get_location]\n";
    let server = TestServer::with_runtime(&top_level, agent).await;

    let (mut client, _) = server.connect("agent=assistant").await;
    client.script("location", "Where am I?").await;
    let first = client.recv().await;
    assert_eq!(
        (first["type"].as_str(), first["content"].as_str()),
        (Some("chunk"), Some("Let me check."))
    );
    let call = client.recv().await;
    assert_eq!(call["type"], "tool_call", "{call}");
    assert_eq!(call["tool_call"]["name"], "get_location");
    assert_eq!(call["tool_call"]["arguments"], json!({"accuracy": "high"}));
    let call_id = call["tool_call"]["id"].as_str().unwrap().to_owned();
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": call_id}}))
        .await;
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": call_id, "result": {"lat": 39.7, "lon": -105.0}}}))
        .await;
    let frames = client.recv_turn().await;
    assert_eq!(
        frames.last().unwrap()["content"],
        "Based on your coordinates, you are in Denver, Colorado.",
        "{frames:?}"
    );

    let (mut client, _) = server.connect("agent=assistant").await;
    client.script("greeting", "Hi").await;
    let frames = client.recv_turn().await;
    assert_eq!(frames.last().unwrap()["content"], "Hello from the mock.");
    client.script("greeting", "Hi again").await;
    let frames = client.recv_turn().await;
    assert_eq!(
        frames.last().unwrap()["content"],
        "Still here.",
        "an unscripted turn answers the scenario's defaultResponse"
    );
    client.say("no scenario").await;
    let frames = client.recv_turn().await;
    assert_eq!(frames.last().unwrap()["content"], "I only know scripts.");
}

#[tokio::test]
async fn a_broken_mock_file_names_the_file_and_the_key_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let mock = dir.path().join("mock.yaml");
    std::fs::write(
        &mock,
        "scenarios:\n  s:\n    turns:\n      1: {type: tool_calls, content: x}\n",
    )
    .unwrap();
    let config = format!(
        "providers:\n  - name: m\n    type: mock\n    mock_config: {}\n{ONE_AGENT}",
        mock.display()
    );
    assert_rejected(
        &config,
        &format!("{}: scenarios.s.turns.1", mock.display()),
        "`type: tool_calls` needs a non-empty `tool_calls` list",
    );
    assert_rejected(
        &format!(
            "providers:\n  - name: m\n    type: mock\n    mock_config: {}\n    default_response: x\n{ONE_AGENT}",
            mock.display()
        ),
        "providers[0].default_response",
        "give `mock_config` or inline scripts, not both",
    );
    assert_rejected(
        &format!(
            "providers:\n  - name: m\n    type: mock\n    mock_config: {}\n{ONE_AGENT}",
            dir.path().join("missing.yaml").display()
        ),
        "providers[0].mock_config",
        "cannot read",
    );
}

#[tokio::test]
async fn a_damaged_session_database_fails_before_the_port_is_bound() {
    // The test holds the port: a server that bound first would fail on it
    // ("cannot bind"), so only a check made before binding reports the
    // database.
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    for (name, contents) in [
        (
            "garbage.db",
            b"this is not a database, only text\n".repeat(200),
        ),
        ("damaged.db", damaged_database(dir.path())),
    ] {
        let db = dir.path().join(name);
        std::fs::write(&db, &contents).unwrap();
        let (_config_dir, config) = write_config(&format!(
            "storage:\n  sessions: sqlite://{}\n{ONE_AGENT}",
            db.display()
        ));
        let output = agentwire()
            .env("RUST_LOG", "info")
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--config",
            ])
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{name}: {stderr}");
        assert!(
            stderr.contains("config error: storage.sessions: ")
                && stderr.contains(&db.display().to_string()),
            "{name}: the error names the key and the file: {stderr}"
        );
        assert!(!stderr.contains("listening"), "{name}: {stderr}");
        assert!(!stderr.contains("cannot bind"), "{name}: {stderr}");
    }
    drop(held);
}

/// A real session database whose pages past the first are overwritten: it
/// opens, and only reading it whole finds the damage.
fn damaged_database(dir: &Path) -> Vec<u8> {
    let path = dir.join("source.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
         CREATE INDEX filler_body ON filler (body);",
    )
    .unwrap();
    for i in 0..2000 {
        conn.execute(
            "INSERT INTO filler (body) VALUES (?1)",
            [format!("{i:08}{}", "x".repeat(200))],
        )
        .unwrap();
    }
    drop(conn);
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    assert!(bytes.len() > 8 * page, "a database of several pages");
    let end = bytes.len() - page;
    for (i, byte) in bytes[2 * page..end].iter_mut().enumerate() {
        *byte = (i * 31 % 251) as u8;
    }
    bytes
}

#[tokio::test]
async fn the_readme_mock_example_loads_with_its_file() {
    let block = readme_yaml_block("mock_config: ./mock-responses.yaml");
    let (config_part, file_part) = block
        .split_once("# mock-responses.yaml:\n")
        .expect("the example shows the file's contents");
    let file: String = file_part
        .lines()
        .map(|line| format!("{}\n", line.strip_prefix("#   ").unwrap_or(line)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mock-responses.yaml"), &file).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("{config_part}{ONE_AGENT}")).unwrap();
    let output = agentwire()
        .current_dir(dir.path())
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "mock file:\n{file}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

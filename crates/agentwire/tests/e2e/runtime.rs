//! `handler: runtime` agents end to end: a scripted model calls a server-side
//! HTTP tool, then a client-side tool, then answers.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use crate::fake_http::{Answer, FakeHttp};
use crate::support::{Client, TestServer, assert_error, stored_messages};

/// A one-route weather API: answers every request with the same JSON.
async fn weather_api() -> FakeHttp {
    FakeHttp::start(|_, _| Answer::json(r#"{"temperature_c":3,"sky":"overcast"}"#)).await
}

fn config(api: SocketAddr) -> String {
    format!(
        r#"
providers:
  - name: scripted
    type: mock
    model: mock-1
    default_response: "I only know scripts."
    scenarios:
      trip:
        turns:
          1:
            content: "Let me look that up."
            tool_calls:
              - name: get_weather
                arguments: {{city: "Oslo"}}
          2:
            tool_calls:
              - name: get_location
                arguments: {{precision: "city"}}
          3: "It is 3°C and overcast in Oslo; you are in Denver."
      loop:
        turns:
          1: {{tool_calls: [{{name: get_weather, arguments: {{city: "A"}}}}]}}
          2: {{tool_calls: [{{name: get_weather, arguments: {{city: "B"}}}}]}}
          3: {{tool_calls: [{{name: get_weather, arguments: {{city: "C"}}}}]}}
      bad-args:
        turns:
          1: {{tool_calls: [{{name: get_weather, arguments: {{town: "Oslo"}}}}]}}
          2: "Sorry, I could not check."
tools:
  - name: get_weather
    type: http
    description: Current weather for a city
    parameters:
      type: object
      properties: {{city: {{type: string}}}}
      required: [city]
    request:
      method: GET
      url: "http://{api}/weather/{{{{city}}}}"
  - name: get_location
    type: client
    description: The user's location
    parameters:
      type: object
      properties: {{precision: {{type: string}}}}
    consent_message: "Share your location?"
    categories: [location]
"#
    )
}

const RUNTIME_AGENT: &str = "  - name: assistant
    handler: runtime
    provider: scripted
    instructions: You are a travel assistant.
    tools: [get_weather, get_location]
    max_rounds: 2
";

/// The `trip` turn up to its client tool call: the first chunk, then the
/// client tool's call (the server tool is not shown), once the HTTP tool
/// has run; the call's id.
async fn until_the_client_tool_call(client: &mut Client, api: &FakeHttp) -> String {
    let first = client.recv().await;
    assert_eq!(
        (first["type"].as_str(), first["content"].as_str()),
        (Some("chunk"), Some("Let me look that up."))
    );
    let call = client.recv().await;
    assert_eq!(
        call["type"], "tool_call",
        "the server tool is not shown; the client tool is: {call}"
    );
    assert_eq!(call["tool_call"]["name"], "get_location");
    assert_eq!(call["tool_call"]["arguments"], json!({"precision": "city"}));
    assert_eq!(call["tool_call"]["consent_message"], "Share your location?");
    let requests = api.requests().await;
    assert_eq!(
        requests.len(),
        1,
        "the HTTP tool ran before the client was asked"
    );
    assert_eq!(requests[0].request_line, "GET /weather/Oslo HTTP/1.1");
    call["tool_call"]["id"].as_str().unwrap().to_owned()
}

/// The answer's `frames`: 20-character chunks, then its `done` on `session`.
fn assert_streamed_answer(frames: &[Value], session: &str) {
    let (chunks, done) = frames.split_at(frames.len() - 1);
    let streamed: String = chunks
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["content"].as_str().unwrap().chars().count() <= 20),
        "20-character chunks"
    );
    assert_eq!(
        streamed,
        "It is 3°C and overcast in Oslo; you are in Denver."
    );
    assert_eq!(done[0]["type"], "done");
    assert_eq!(done[0]["content"], streamed.as_str());
    assert_eq!(done[0]["session_id"], session);
}

/// Stored of the `trip` turn on `session`: the user's message, the interim
/// text, each tool's call and result with its side, and the answer.
fn assert_trip_stored(db: &Path, session: &str) {
    let rows: Vec<(String, String)> = stored_messages(db)
        .into_iter()
        .filter(|m| m.0 == session)
        .map(|(_, _, role, content)| (role, content))
        .collect();
    let roles: Vec<&str> = rows.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "tool",
            "assistant"
        ],
        "{rows:?}"
    );
    assert_eq!(rows[1].1, "Let me look that up.");
    let step = |i: usize| serde_json::from_str::<Value>(&rows[i].1).unwrap();
    assert_eq!(step(2)["call"]["name"], "get_weather");
    assert_eq!(step(2)["call"]["side"], "server");
    assert_eq!(
        step(3)["result"]["value"],
        json!({"temperature_c": 3, "sky": "overcast"})
    );
    assert_eq!(step(4)["call"]["name"], "get_location");
    assert_eq!(step(4)["call"]["side"], "client");
    assert_eq!(step(5)["result"]["value"], json!({"city": "Denver"}));
}

#[tokio::test]
async fn a_scripted_model_uses_a_server_tool_then_a_client_tool_then_answers() {
    let api = weather_api().await;
    let server = TestServer::with_runtime(&config(api.addr), RUNTIME_AGENT).await;
    let (mut client, connected) = server.connect("agent=assistant").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    client
        .script(
            "trip",
            "What's the weather where I'm going, and where am I?",
        )
        .await;

    let call_id = until_the_client_tool_call(&mut client, &api).await;
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": call_id}}))
        .await;
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": call_id, "result": {"city": "Denver"}}}))
        .await;
    assert_streamed_answer(&client.recv_turn().await, &session);

    assert_trip_stored(&server.db_path, &session);
}

#[tokio::test]
async fn the_loop_stops_at_max_rounds_keeping_the_work_done() {
    let api = weather_api().await;
    let server = TestServer::with_runtime(&config(api.addr), RUNTIME_AGENT).await;
    let (mut client, connected) = server.connect("agent=assistant").await;
    client.script("loop", "keep going").await;
    let error = client.recv().await;
    assert_error(
        &error,
        "MAX_ROUNDS_EXCEEDED",
        "the turn stopped at the agent's limit of 2 tool-call rounds",
    );
    assert_eq!(api.requests().await.len(), 2, "two rounds ran");
    let session = connected["session_id"].as_str().unwrap();
    let tool_rows = stored_messages(&server.db_path)
        .into_iter()
        .filter(|m| m.0 == session && m.2 == "tool")
        .count();
    assert_eq!(tool_rows, 4, "both rounds' calls and results are kept");
    client.say("hello again").await;
    assert_eq!(
        client.recv().await["type"],
        "chunk",
        "the next message starts a new turn"
    );
}

#[tokio::test]
async fn invalid_arguments_go_back_to_the_model_as_an_error() {
    let api = weather_api().await;
    let server = TestServer::with_runtime(&config(api.addr), RUNTIME_AGENT).await;
    let (mut client, _) = server.connect("agent=assistant").await;
    client.script("bad-args", "weather?").await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["content"], "Sorry, I could not check.");
    assert_eq!(api.requests().await.len(), 0, "the tool never ran");
}

#[tokio::test]
async fn a_resumed_session_gives_the_model_its_context() {
    let api = weather_api().await;
    let server = TestServer::with_runtime(&config(api.addr), RUNTIME_AGENT).await;
    let (mut client, connected) = server.connect("agent=assistant").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    client.say("hi").await;
    let done = client.recv_turn().await.pop().unwrap();
    assert_eq!(done["content"], "I only know scripts.");
    drop(client);
    // The mock numbers its turns by the assistant messages it is shown: a
    // resumed session that lost its context would replay turn 1.
    let (mut client, _) = server.connect("agent=assistant").await;
    client
        .send_json(json!({"type": "message", "content": "x", "session_id": session, "metadata": {"mock_scenario": "trip"}}))
        .await;
    let first = client.recv().await;
    assert_eq!(
        first["type"], "tool_call",
        "turn 2 of the script (after one assistant message): {first}"
    );
    assert_eq!(first["tool_call"]["name"], "get_location");
    let call_id = first["tool_call"]["id"].as_str().unwrap();
    client
        .send_json(json!({"type": "tool_call_nack", "tool_call_nack": {"call_id": call_id, "reason": "no"}}))
        .await;
    assert_eq!(client.recv_turn().await.pop().unwrap()["type"], "done");
}

/// server-everything's entry point: `AGENTWIRE_TEST_MCP_EVERYTHING`, else
/// where `scripts/install-test-deps.sh` puts it. `None` skips the test,
/// except under CI, where a missing server is a failure.
pub(crate) fn mcp_everything() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("AGENTWIRE_TEST_MCP_EVERYTHING").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    });
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and the MCP server is missing at {}; run scripts/install-test-deps.sh",
        path.display()
    );
    eprintln!("skipped: MCP server-everything not installed (run scripts/install-test-deps.sh)");
    None
}

#[tokio::test]
async fn an_mcp_tool_from_a_real_server_reaches_the_reply() {
    let Some(entry) = mcp_everything() else {
        return;
    };
    let top_level = format!(
        r#"
providers:
  - name: scripted
    type: mock
    scenarios:
      mcp:
        turns:
          1: {{tool_calls: [{{name: echo, arguments: {{message: "hello from the model"}}}}]}}
          2: "The server said: {{{{last_tool_result}}}}"
          3: {{tool_calls: [{{name: echo, arguments: {{message: "second turn"}}}}]}}
          4: "Again: {{{{last_tool_result}}}}"
tools:
  - name: everything
    type: mcp
    command: node
    args: ["{}", "stdio"]
    timeout: 20s
"#,
        entry.display()
    );
    let agent = "  - name: mcp-agent\n    handler: runtime\n    provider: scripted\n    tools: [everything]\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    let (mut client, _) = server.connect("agent=mcp-agent").await;
    client.script("mcp", "echo something").await;
    let done = tokio::time::timeout(std::time::Duration::from_secs(30), client.recv_turn())
        .await
        .expect("the turn ends")
        .pop()
        .unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let text = done["content"].as_str().unwrap();
    assert!(text.starts_with("The server said: "), "{text}");
    assert!(
        text.contains("hello from the model"),
        "the MCP echo result reached the reply: {text}"
    );
    // The connection's MCP session serves its next turn too.
    client.script("mcp", "again").await;
    let done = client.recv_turn().await.pop().unwrap();
    let text = done["content"].as_str().unwrap();
    assert!(
        text.starts_with("Again: ") && text.contains("second turn"),
        "{text}"
    );
}

//! Tools inside a voice call: the agent's server tools run on the server,
//! its client tools are asked of the caller's client as in a text turn
//! (`tool_call`, then `tool_call_ack` / `tool_result` / `tool_call_nack`),
//! and each step is stored with the exchange it belongs to.

use serde_json::{Value, json};

use crate::agent_memory::{quoted, reply};
use crate::credentials::sha256_hex;
use crate::support::{Client, TestServer, assert_error, stored_messages};
use crate::voice::{WEATHER_16K, next_text, speak, until_done};
use crate::voice_park::{blip, connect, resumed, wait_metric};

const ALICE: &str = "ak_voice_tools_alice_0123456789";

/// A runtime agent whose voice model calls the client tool `get_location`
/// after every utterance: `locator` (the client has 300 ms to acknowledge)
/// and `patient-locator` (10 s: the call is asked while the test is still
/// speaking).
fn client_tool_config() -> String {
    format!(
        r#"auth:
  api_keys:
    - {{id: a, sha256: {}, subject: alice}}
providers:
  - {{name: text, type: mock, default_response: "typed answer"}}
tools:
  - name: get_location
    type: client
    description: The caller's location
    parameters: {{type: object, properties: {{precision: {{type: string}}}}, required: [precision]}}
    consent_message: "Share your location?"
    categories: [location]
voice_providers:
  - name: locating-voice
    type: mock
    output: echo
    reply: "You are in"
    tool: {{name: get_location, arguments: {{precision: city}}}}
"#,
        sha256_hex(ALICE)
    )
}

const CLIENT_TOOL_AGENTS: &str = "  - {name: locator, handler: runtime, provider: text, tools: [get_location], voice: locating-voice, ack_timeout: 300ms}
  - {name: patient-locator, handler: runtime, provider: text, tools: [get_location], voice: locating-voice, ack_timeout: 10s}
";

async fn client_tool_server() -> TestServer {
    TestServer::with_server_and_runtime(
        "  allow_unauthenticated: true\n  limits:\n    call_park_window: 3s",
        &client_tool_config(),
        CLIENT_TOOL_AGENTS,
    )
    .await
}

/// Text frames up to the call's `tool_call`, which is returned.
async fn until_tool_call(client: &mut Client, session: &str) -> Value {
    loop {
        let frame = next_text(client).await;
        assert_eq!(frame["session_id"], session, "{frame}");
        assert_ne!(frame["type"], "error", "{frame}");
        if frame["type"] == "tool_call" {
            return frame;
        }
    }
}

/// The reply's streamed transcript (not the caller's).
fn reply_text(texts: &[Value]) -> String {
    texts
        .iter()
        .filter(|t| t["type"] == "chunk" && t.get("role").is_none())
        .map(|t| t["content"].as_str().unwrap())
        .collect()
}

/// The session's stored rows: (role, content).
fn stored(server: &TestServer, session: &str) -> Vec<(String, String)> {
    stored_messages(&server.db_path)
        .into_iter()
        .filter(|m| m.0 == session)
        .map(|m| (m.2, m.3))
        .collect()
}

#[tokio::test]
async fn a_client_tool_inside_a_call_is_asked_of_the_caller_and_its_answer_spoken() {
    let server = client_tool_server().await;
    let (mut client, connected) = server.connect("agent=patient-locator&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let call = until_tool_call(&mut client, &session).await;
    let tool = &call["tool_call"];
    assert_eq!(tool["name"], "get_location");
    assert_eq!(tool["arguments"], json!({"precision": "city"}));
    assert_eq!(tool["consent_message"], "Share your location?");
    assert_eq!(tool["categories"], json!(["location"]));
    let id = tool["id"].as_str().unwrap().to_owned();
    assert!(
        id.len() >= 32,
        "an unguessable id, not the provider's: {id}"
    );
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": id}}))
        .await;
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": {"city": "Lisbon"}}}))
        .await;
    let (texts, audio) = until_done(&mut client, &session).await;
    assert_eq!(reply_text(&texts), r#"You are in {"city":"Lisbon"}"#);
    assert!(!audio.is_empty(), "the reply is spoken");
    // Answered once: a second answer finds nothing pending.
    assert_nothing_pending(&mut client, &id).await;
    // Stored in order: what was said, the client's step, the reply.
    let rows = stored(&server, &session);
    let roles: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(roles, ["user", "tool", "tool", "assistant"], "{rows:?}");
    let step: Value = serde_json::from_str(&rows[1].1).unwrap();
    assert_eq!(step["call"]["id"], id.as_str());
    assert_eq!(step["call"]["side"], "client");
    assert!(rows[2].1.contains("Lisbon"), "{rows:?}");
}

#[tokio::test]
async fn a_client_tool_the_caller_leaves_unanswered_is_denied_and_the_reply_says_so() {
    let server = client_tool_server().await;
    let (mut client, connected) = server.connect("agent=locator&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    let call = until_tool_call(&mut client, &session).await;
    let id = call["tool_call"]["id"].as_str().unwrap().to_owned();
    // No ack within the agent's 300 ms: the client is told the call is over.
    let expired = until_tool_call_result(&mut client).await;
    assert_eq!(expired["tool_result"]["id"], id.as_str());
    let reason = "client did not acknowledge the tool call within 300ms";
    assert_eq!(expired["tool_result"]["error"], reason);
    let (texts, _) = until_done(&mut client, &session).await;
    assert_eq!(
        reply_text(&texts),
        format!(r#"You are in {{"error":"{reason}"}}"#)
    );
    // A late answer is refused.
    assert_nothing_pending(&mut client, &id).await;
}

/// An answer to call `id` from `client` is refused: nothing of that id
/// is pending for it.
async fn assert_nothing_pending(client: &mut Client, id: &str) {
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": id, "result": 1}}))
        .await;
    assert_error(
        &next_text(client).await,
        "INVALID_MESSAGE",
        "no pending tool call",
    );
}

async fn until_tool_call_result(client: &mut Client) -> Value {
    loop {
        let frame = next_text(client).await;
        if frame["type"] == "tool_result" {
            return frame;
        }
        assert_ne!(frame["type"], "done", "{frame}");
    }
}

#[tokio::test]
async fn a_client_tool_pending_when_the_call_drops_is_answered_from_the_resumed_socket() {
    let server = client_tool_server().await;
    let query = "agent=patient-locator&binary=true";
    let (mut old, connected) = connect(&server, query, Some(ALICE)).await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut old, &session, 16_000, 0, WEATHER_16K, false).await;
    let call = until_tool_call(&mut old, &session).await;
    let id = call["tool_call"]["id"].as_str().unwrap().to_owned();
    blip(old).await;
    wait_metric(&server, "agentwire_calls_parked", 1.0).await;
    // Another caller cannot answer it: the call is not theirs to hold.
    let (mut stranger, _) = server.connect("agent=patient-locator&binary=true").await;
    assert_nothing_pending(&mut stranger, &id).await;
    let (mut new, connected) =
        connect(&server, &format!("{query}&resume={session}"), Some(ALICE)).await;
    assert!(resumed(&connected), "{connected}");
    assert_eq!(next_text(&mut new).await["type"], "session_config");
    // The pending call is handed to the new socket with what it missed.
    let again = until_tool_call(&mut new, &session).await;
    assert_eq!(again["tool_call"]["id"], id.as_str());
    new.send_json(
        json!({"type": "tool_result", "tool_result": {"call_id": id, "result": "Lisbon"}}),
    )
    .await;
    let (texts, _) = until_done(&mut new, &session).await;
    assert_eq!(reply_text(&texts), r#"You are in "Lisbon""#);
    let rows = stored(&server, &session);
    let roles: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(roles, ["user", "tool", "tool", "assistant"], "{rows:?}");
}
#[tokio::test]
async fn a_server_tool_runs_inside_a_call_and_its_step_is_stored_with_the_exchange() {
    let api = crate::fake_http::FakeHttp::start(|_, _| {
        crate::fake_http::Answer::json(r#"{"forecast":"sunny"}"#)
    })
    .await;
    let top_level = format!(
        r#"providers:
  - {{name: text, type: mock, default_response: "typed answer"}}
tools:
  - name: weather
    type: http
    description: The weather in a city
    parameters: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    request:
      method: GET
      url: "http://{api}/weather/{{{{city}}}}"
voice_providers:
  - name: tool-voice
    type: mock
    output: echo
    reply: "The weather:"
    tool: {{name: weather, arguments: {{city: Lisbon}}}}
"#,
        api = api.addr
    );
    let agent = "  - {name: forecaster, handler: runtime, provider: text, tools: [weather], voice: tool-voice, instructions: \"Answer about the weather.\"}\n";
    let server = TestServer::with_runtime(&top_level, agent).await;
    let (mut client, connected) = server.connect("agent=forecaster&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let (texts, audio) = until_done(&mut client, &session).await;
    let reply: String = texts
        .iter()
        .filter(|t| t["type"] == "chunk" && t.get("role").is_none())
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    assert_eq!(reply, r#"The weather: {"forecast":"sunny"}"#);
    assert!(!audio.is_empty());
    let requests = api.requests().await;
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0].request_line.starts_with("GET /weather/Lisbon "),
        "{}",
        requests[0].request_line
    );
    // Stored in order: what was said, the tool step, the reply.
    let stored = stored_messages(&server.db_path);
    let roles: Vec<&str> = stored
        .iter()
        .filter(|m| m.0 == session)
        .map(|m| m.2.as_str())
        .collect();
    assert_eq!(roles, ["user", "tool", "tool", "assistant"], "{stored:?}");
}

/// A voice agent with memory: its voice model remembers a seat after every
/// utterance; its text model recalls it.
fn memory_config() -> String {
    format!(
        r#"auth:
  api_keys:
    - {{id: a, sha256: {}, subject: alice}}
providers:
  - name: text
    type: mock
    scenarios:
      recall:
        turns:
          1: {{tool_calls: [{{name: memory__recall, arguments: {{query: "window seats"}}}}]}}
          2: "Recalled: {{{{last_tool_result}}}}"
voice_providers:
  - name: remembering-voice
    type: mock
    output: echo
    reply: "Noted"
    tool: {{name: memory__remember, arguments: {{content: "prefers window seats"}}}}
"#,
        sha256_hex(ALICE)
    )
}

#[tokio::test]
async fn memory_tools_in_a_call_act_for_its_caller_and_a_text_turn_recalls_them() {
    let server = TestServer::with_server_and_runtime(
        "  allow_unauthenticated: true",
        &memory_config(),
        "  - {name: concierge, handler: runtime, provider: text, voice: remembering-voice, memory: {enabled: true}}\n",
    )
    .await;
    let bearer = format!("Bearer {ALICE}");
    let headers = [("Authorization", bearer.as_str())];
    let mut client = server
        .try_connect_with("agent=concierge&binary=true&memory_facet=trip-7", &headers)
        .await
        .expect("admitted");
    let connected = client.recv().await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let (texts, _) = until_done(&mut client, &session).await;
    let spoken = reply_text(&texts);
    let result: Value = serde_json::from_str(spoken.strip_prefix("Noted ").unwrap()).unwrap();
    assert_eq!(result["status"], "remembered", "{spoken}");
    // Alice's text turn in the same facet recalls what her call remembered.
    let alice = Some(ALICE);
    let recalled = quoted(
        &reply(
            &server,
            "agent=concierge&memory_facet=trip-7",
            alice,
            "recall",
        )
        .await,
        "Recalled: ",
    );
    assert_eq!(recalled["count"], 1, "{recalled}");
    assert_eq!(recalled["memories"][0]["id"], result["id"]);
    assert_eq!(recalled["memories"][0]["session_id"], session.as_str());
    // Not another facet's, and not an anonymous caller's.
    for (query, bearer) in [
        ("agent=concierge", alice),
        ("agent=concierge&memory_facet=trip-7", None),
    ] {
        let found = quoted(&reply(&server, query, bearer, "recall").await, "Recalled: ");
        assert_eq!(found["count"], 0, "{query}: {found}");
    }
}

#[tokio::test]
async fn an_anonymous_callers_call_cannot_remember() {
    let server = TestServer::with_server_and_runtime(
        "  allow_unauthenticated: true",
        &memory_config(),
        "  - {name: concierge, handler: runtime, provider: text, voice: remembering-voice, memory: {enabled: true}}\n",
    )
    .await;
    let (mut client, connected) = server.connect("agent=concierge&binary=true").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    speak(&mut client, &session, 16_000, 0, WEATHER_16K, false).await;
    assert_eq!(next_text(&mut client).await["type"], "session_config");
    let (texts, _) = until_done(&mut client, &session).await;
    assert_eq!(
        reply_text(&texts),
        r#"Noted {"error":"memory remember: memory needs an identified caller"}"#
    );
}

//! Teams on the Gnosari endpoints `/ws/team/{team}` and
//! `/ws/team/{team}/agent/{agent}`: delegation and handoff driven by mock
//! model scripts, members, refusals, access levels, and Gnosari team files
//! of both generations.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::credentials::{ALICE_KEY, BOB_KEY, SECRET, sha256_hex};
use crate::support::{Client, Dialect, TestServer, stored_messages};

/// Opens a WebSocket on `path_and_query` with extra request headers; a
/// refused upgrade gives its status and body.
pub(crate) async fn try_connect(
    server: &TestServer,
    path_and_query: &str,
    headers: &[(&str, &str)],
) -> Result<Client, (u16, String)> {
    let mut request = server.url(path_and_query).into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(Client::new(ws, Dialect::of_path(path_and_query))),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned());
            Err((response.status().as_u16(), body.unwrap_or_default()))
        }
        Err(e) => panic!("connect failed: {e}"),
    }
}

async fn connect(server: &TestServer, path: &str) -> Client {
    match try_connect(server, path, &[]).await {
        Ok(client) => client,
        Err(refused) => panic!("{path}: upgrade refused: {refused:?}"),
    }
}

pub(crate) async fn turn(client: &mut Client, frame: Value) -> Vec<Value> {
    client.send_json(frame).await;
    client.recv_gnosari_turn().await
}

/// The turn's events with consecutive tokens of one agent joined, as
/// `(type, agent_name, detail)`.
fn story(events: &[Value]) -> Vec<(String, String, Value)> {
    let mut out: Vec<(String, String, Value)> = Vec::new();
    for event in events {
        let kind = event["type"].as_str().unwrap().to_owned();
        let agent = event["agent_name"].as_str().unwrap_or_default().to_owned();
        let detail = match kind.as_str() {
            "token" => {
                if let Some(last) = out.last_mut()
                    && last.0 == "token"
                    && last.1 == agent
                {
                    let joined = format!(
                        "{}{}",
                        last.2.as_str().unwrap(),
                        event["content"].as_str().unwrap()
                    );
                    last.2 = json!(joined);
                    continue;
                }
                event["content"].clone()
            }
            "tool_call" => json!({"tool": event["tool_name"], "args": event["args"]}),
            "tool_result" => json!({"tool": event["tool_name"], "result": event["result"]}),
            "agent_completed" => event["full_response"].clone(),
            "agent_started" => json!(null),
            _ => event.clone(),
        };
        out.push((kind, agent, detail));
    }
    out
}

fn step(kind: &str, agent: &str, detail: Value) -> (String, String, Value) {
    (kind.to_owned(), agent.to_owned(), detail)
}

/// A mock model whose `team` script has the orchestrator delegate to the
/// researcher, quote its answer and hand off to the closer; without a
/// script (as on a delegated sub-turn) it answers with its default.
const TEAM_CONFIG: &str = r#"
providers:
  - name: scripted
    type: mock
    default_response: "Refunds take 5 business days."
    scenarios:
      team:
        turns:
          1:
            tool_calls:
              - name: delegate_agent
                arguments: {target_agent: researcher, message: "How long do refunds take?"}
          2:
            content: "Researcher says: {{last_tool_result}}"
            tool_calls: [{name: transfer_to_closer, arguments: {}}]
          3: "Closer here: your refund is on its way."
teams:
  - name: helpdesk
    orchestrator: triage
    agents: [researcher, closer]
"#;

const TEAM_AGENTS: &str = "  - name: triage
    handler: runtime
    provider: scripted
    instructions: Route the user.
    delegations: [researcher]
    handoffs: [closer]
  - name: researcher
    handler: runtime
    provider: scripted
    instructions: Look things up.
  - name: closer
    handler: runtime
    provider: scripted
    instructions: Close the conversation.
";

/// The story of the `team` script's turn on the helpdesk: the triage
/// delegates to the researcher, quotes it and hands off to the closer.
fn delegate_then_hand_off_story() -> Vec<(String, String, Value)> {
    vec![
        step("agent_started", "triage", json!(null)),
        step(
            "tool_call",
            "triage",
            json!({"tool": "delegate_agent", "args": {"target_agent": "researcher", "message": "How long do refunds take?"}}),
        ),
        // The researcher's own run is not streamed (behaviour notes
        // §5.18): its answer is the call's result.
        step(
            "tool_result",
            "triage",
            json!({"tool": "delegate_agent", "result": "Refunds take 5 business days."}),
        ),
        step(
            "token",
            "triage",
            json!("Researcher says: Refunds take 5 business days."),
        ),
        step(
            "tool_call",
            "triage",
            json!({"tool": "transfer_to_closer", "args": {}}),
        ),
        step(
            "tool_result",
            "triage",
            json!({"tool": "transfer_to_closer", "result": {"assistant": "closer"}}),
        ),
        step(
            "token",
            "closer",
            json!("Closer here: your refund is on its way."),
        ),
        step(
            "agent_completed",
            "closer",
            json!("Closer here: your refund is on its way."),
        ),
    ]
}

/// Stored of the team turn on `session`: the user's message, the
/// orchestrator's calls and their outcomes, its interim text and the
/// closer's answer; not the researcher's own work.
fn assert_team_turn_stored(db: &Path, session: &str) {
    let rows: Vec<(String, String)> = stored_messages(db)
        .into_iter()
        .filter(|m| m.0 == session)
        .map(|m| (m.2, m.3))
        .collect();
    let roles: Vec<&str> = rows.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "tool",
            "tool",
            "assistant",
            "tool",
            "tool",
            "assistant"
        ],
        "{rows:?}"
    );
    assert_eq!(rows[3].1, "Researcher says: Refunds take 5 business days.");
    assert_eq!(rows[6].1, "Closer here: your refund is on its way.");
    let result: Value = serde_json::from_str(&rows[2].1).unwrap();
    assert_eq!(result["result"]["value"], "Refunds take 5 business days.");
}

#[tokio::test]
async fn a_team_turn_delegates_then_hands_off() {
    let server = TestServer::with_runtime(TEAM_CONFIG, TEAM_AGENTS).await;
    let mut client = connect(&server, "/ws/team/helpdesk").await;
    let events = turn(
        &mut client,
        json!({"message": "Where is my refund?", "metadata": {"mock_scenario": "team"}}),
    )
    .await;
    let session = events[0]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        story(&events),
        delegate_then_hand_off_story(),
        "{events:#?}"
    );

    // Stored: the user's message, the orchestrator's calls and their
    // outcomes, its interim text and the closer's answer; not the
    // researcher's own work.
    assert_team_turn_stored(&server.db_path, &session);

    // The next message of the session goes to the orchestrator again, which
    // sees the whole conversation (turn 4 of the script: none, so the
    // default answer).
    let next = turn(
        &mut client,
        json!({"message": "Thanks", "session_id": session, "metadata": {"mock_scenario": "team"}}),
    )
    .await;
    assert_eq!(
        story(&next).last().unwrap(),
        &step(
            "agent_completed",
            "triage",
            json!("Refunds take 5 business days.")
        )
    );
}

#[tokio::test]
async fn omnia_clients_see_neither_the_delegate_s_text_nor_the_team_tools() {
    let server = TestServer::with_runtime(TEAM_CONFIG, TEAM_AGENTS).await;
    let (mut client, _) = server.connect("agent=triage").await;
    client.script("team", "Where is my refund?").await;
    let frames = client.recv_turn().await;
    let (chunks, done) = frames.split_at(frames.len() - 1);
    assert!(chunks.iter().all(|f| f["type"] == "chunk"), "{frames:?}");
    let streamed: String = chunks
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        streamed,
        "Researcher says: Refunds take 5 business days.Closer here: your refund is on its way.",
        "the orchestrator's and the closer's text, not the researcher's own"
    );
    assert_eq!(done[0]["type"], "done");
    assert_eq!(
        done[0]["content"],
        "Closer here: your refund is on its way."
    );
}

#[tokio::test]
async fn a_member_answers_on_its_own_endpoint() {
    let server = TestServer::with_runtime(TEAM_CONFIG, TEAM_AGENTS).await;
    let mut client = connect(&server, "/ws/team/helpdesk/agent/researcher").await;
    let events = turn(&mut client, json!({"message": "Refunds?"})).await;
    assert_eq!(
        story(&events),
        [
            step("agent_started", "researcher", json!(null)),
            step(
                "token",
                "researcher",
                json!("Refunds take 5 business days.")
            ),
            step(
                "agent_completed",
                "researcher",
                json!("Refunds take 5 business days.")
            ),
        ]
    );
    // The orchestrator is a member too, and can still delegate there.
    let mut triage = connect(&server, "/ws/team/helpdesk/agent/triage").await;
    let events = turn(
        &mut triage,
        json!({"message": "Refunds?", "metadata": {"mock_scenario": "team"}}),
    )
    .await;
    assert_eq!(events.last().unwrap()["agent_name"], "closer");

    // Sessions belong to the endpoint that opened them.
    let session = events[0]["session_id"].as_str().unwrap().to_owned();
    for path in ["/ws/team/helpdesk", "/ws/agent/triage"] {
        let mut other = connect(&server, path).await;
        let refused = turn(
            &mut other,
            json!({"message": "again", "session_id": session}),
        )
        .await;
        assert_eq!(refused.len(), 1, "{path}: {refused:?}");
        assert_eq!(refused[0]["error"], "session not found", "{path}");
    }
}

#[tokio::test]
async fn unknown_teams_and_non_members_are_not_found() {
    let server = TestServer::with_runtime(TEAM_CONFIG, TEAM_AGENTS).await;
    for (path, body) in [
        ("/ws/team/nope", "team not found\n"),
        ("/ws/team/nope/agent/triage", "team not found\n"),
        ("/ws/team/helpdesk/agent/echo", "agent not found\n"),
        ("/ws/team/helpdesk/agent/nobody", "agent not found\n"),
    ] {
        let refused = try_connect(&server, path, &[]).await.err();
        assert_eq!(refused, Some((404, body.to_owned())), "{path}");
    }
    // Members stay agents of their own.
    let mut researcher = connect(&server, "/ws/agent/researcher").await;
    let events = turn(&mut researcher, json!({"message": "hi"})).await;
    assert_eq!(events.last().unwrap()["agent_name"], "researcher");
}

const TEAM_PASSWORD: &str = "team-pass-123";
const CAROL_KEY: &str = "ak_carol_0123456789";

fn team_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| agentwire_auth::hash_password(TEAM_PASSWORD).unwrap())
}

/// Alice may use everything, Bob `echo` only, Carol the `backoffice` team only.
async fn access_server() -> TestServer {
    let top_level = format!(
        r#"
auth:
  pseudonym_key: "a-pseudonym-key-for-tests"
  api_keys:
    - id: alice-key
      sha256: "{alice}"
      subject: alice
    - id: bob-key
      sha256: "{bob}"
      subject: bob
      agents: [echo]
    - id: carol-key
      sha256: "{carol}"
      subject: carol
      agents: [backoffice]
  jwt:
    issuer: https://issuer.test
    audience: agentwire
    hs256_secret: "{SECRET}"
teams:
  - name: lobby
    access_level: public
    orchestrator: open
    agents: [closed]
  - name: backoffice
    orchestrator: open
  - name: vault
    orchestrator: open
    password_argon2: '{hash}'
"#,
        alice = sha256_hex(ALICE_KEY),
        bob = sha256_hex(BOB_KEY),
        carol = sha256_hex(CAROL_KEY),
        hash = team_hash(),
    );
    let agents = "  - name: open\n    handler: echo\n    access_level: public\n  - name: closed\n    handler: echo\n";
    TestServer::with_runtime(&top_level, agents).await
}

async fn status(server: &TestServer, path: &str, headers: &[(&str, &str)]) -> u16 {
    match try_connect(server, path, headers).await {
        Ok(mut client) => {
            let events = turn(&mut client, json!({"message": "ping"})).await;
            assert_eq!(events.last().unwrap()["type"], "agent_completed", "{path}");
            101
        }
        Err((status, _)) => status,
    }
}

#[tokio::test]
async fn team_endpoints_apply_the_team_s_access_level_and_a_stricter_member_s() {
    let server = access_server().await;
    let alice = [("X-AUTH-TOKEN", ALICE_KEY)];
    let bob = [("X-AUTH-TOKEN", BOB_KEY)];
    let carol = [("X-AUTH-TOKEN", CAROL_KEY)];
    // A public team whose orchestrator is public needs no credential...
    assert_eq!(status(&server, "/ws/team/lobby", &[]).await, 101);
    assert_eq!(status(&server, "/ws/team/lobby/agent/open", &[]).await, 101);
    // ...but its private member does.
    assert_eq!(
        status(&server, "/ws/team/lobby/agent/closed", &[]).await,
        401
    );
    assert_eq!(
        status(&server, "/ws/team/lobby/agent/closed", &alice).await,
        101
    );
    // Private by default once auth is configured, though its orchestrator is public.
    assert_eq!(status(&server, "/ws/team/backoffice", &[]).await, 401);
    assert_eq!(status(&server, "/ws/team/backoffice", &alice).await, 101);
    // An API key's allow-list names teams: Bob's leaves it out, Carol's names it.
    assert_eq!(status(&server, "/ws/team/backoffice", &bob).await, 403);
    assert_eq!(status(&server, "/ws/team/backoffice", &carol).await, 101);
    assert_eq!(
        status(&server, "/ws/team/backoffice/agent/open", &carol).await,
        101
    );
    // A bad credential is ignored on a public agent or team (behaviour
    // notes §5.2), and refused on a private one.
    assert_eq!(status(&server, "/ws/agent/open?api_key=x", &[]).await, 101);
    assert_eq!(
        status(&server, "/ws/team/lobby", &[("X-AUTH-TOKEN", "wrong")]).await,
        101
    );
    assert_eq!(
        status(&server, "/ws/team/backoffice", &[("X-AUTH-TOKEN", "wrong")]).await,
        401
    );
    // The team's password, in both forms.
    assert_eq!(status(&server, "/ws/team/vault", &[]).await, 401);
    assert_eq!(
        status(
            &server,
            "/ws/team/vault",
            &[("X-Access-Password", TEAM_PASSWORD)]
        )
        .await,
        101
    );
    assert_eq!(
        status(
            &server,
            &format!("/ws/team/vault?password={TEAM_PASSWORD}"),
            &[]
        )
        .await,
        101
    );
    // A wrong password is 403 (behaviour notes §5.1).
    assert_eq!(
        status(&server, "/ws/team/vault?password=wrong-pass", &[]).await,
        403
    );
    // A team's password opens that team only.
    assert_eq!(
        status(
            &server,
            "/ws/team/backoffice",
            &[("X-Access-Password", TEAM_PASSWORD)]
        )
        .await,
        401
    );
}

/// The new generation of the format, as the behaviour notes' example writes
/// it: `id`s, `is_orchestrator`, `delegations` / `handoffs` with
/// `target_agent_id`, traits, knowledge, a built-in tool and an MCP server.
const NEW_GENERATION: &str = r#"
id: helpdesk
name: Helpdesk
description: First-line support for the Acme app
version: "1.0.0"
tags: [support]
config:
  max_turns: 20
  timeout: 120
tools:
  - id: orders_api
    name: Orders API
    description: Look up an order by number
    module: gnosari.tools.builtin.api_request
    class: APIRequestTool
    args:
      base_url: "${ORDERS_URL:https://orders.internal}"
  - id: docs_mcp
    name: Docs MCP
    command: "${DOCS_MCP_COMMAND:/bin/false}"
    args: ["--stdio"]
knowledge:
  - id: faq
    name: Product FAQ
    type: text
    data: ["Refunds are processed within 5 business days."]
traits:
  - id: concise
    name: Concise
    instructions: Keep answers under 120 words.
    weight: 1.0
agents:
  - id: triage
    name: Triage
    is_orchestrator: true
    model: "${HELPDESK_MODEL:gpt-4o-mini}"
    temperature: 0.3
    instructions: Greet the user, work out what they need, and route it.
    traits: [concise]
    delegations:
      - target_agent_id: billing
        instructions: Anything about invoices, refunds or charges.
        mode: sync
        timeout: 300
    handoffs:
      - target_agent_id: tech
        condition: The user reports a problem with the app.
    access_level: PUBLIC
  - id: billing
    name: Billing
    model: gpt-4o
    instructions: Answer billing questions using the orders API and the FAQ.
    tools: [orders_api]
    knowledge: [faq]
  - id: tech
    name: Tech Support
    instructions: Troubleshoot app problems using the docs server.
    tools: [docs_mcp]
    listen: [support.ticket]
"#;

/// The old generation, as the engine's examples write it: names only,
/// `orchestrator`, `delegation: [{agent, instructions}]`, `can_transfer_to`
/// as names or objects, and the delegation tool declared by hand.
const OLD_GENERATION: &str = r#"
name: Fruit Team
description: A coordinator with two specialists
tools:
  - name: delegate_agent
    module: gnosari.tools.delegate_agent
    class: DelegateAgentTool
    args:
      pass
agents:
  - name: Coordinator
    instructions: >
      You coordinate the conversation: delegate fruit questions to Alice
      and hand longer discussions to Bob.
    orchestrator: true
    model: gpt-4o
    temperature: 0.1
    tools: [delegate_agent]
    delegation:
      - agent: Alice
        instructions: Questions about fruit
    can_transfer_to:
      - agent: Bob
        instructions: Maths and general questions
  - name: Alice
    model: gpt-4o-mini
    temperature: 0.1
    instructions: You are Alice, a fruit specialist.
    can_transfer_to: [Coordinator]
  - name: Bob
    model: "${BOB_MODEL:o3-mini}"
    instructions: You are Bob, good at maths.
"#;

/// A config whose team (named `name`, else by the file) is the file
/// `team.yaml` in `dir`, holding `team_yaml`, on a mock with `scenario`.
async fn file_team_server(
    dir: &Path,
    team_yaml: &str,
    name: Option<&str>,
    scenario: &str,
) -> TestServer {
    let name = name.map_or(String::new(), |n| format!("name: {n}\n    "));
    let file = dir.join("team.yaml");
    std::fs::write(&file, team_yaml).unwrap();
    let top_level = format!(
        r#"
providers:
  - name: team-mock
    type: mock
    model: house-model
    scenarios:
{scenario}
tools:
  - name: orders_api
    type: http
    description: Look up an order by number
    parameters: {{type: object, properties: {{number: {{type: string}}}}, required: [number]}}
    request: {{method: GET, url: "http://127.0.0.1:9/orders/{{{{number}}}}"}}
teams:
  - {name}file: "{}"
    provider: team-mock
"#,
        file.display()
    );
    TestServer::with_runtime(&top_level, "").await
}

/// The `help` script of the new-generation team: the triage delegates to
/// Billing, quotes it and hands off to Tech Support.
const HELP_SCENARIO: &str = r#"      help:
        turns:
          1:
            tool_calls:
              - name: delegate_agent
                arguments: {target_agent: Billing, message: "Status of the refund for order 42?"}
          2:
            content: "Billing says: {{last_tool_result}}"
            tool_calls: [{name: transfer_to_tech_support}]
          3: "Tech Support here: please update the app."
"#;

/// The story of the `help` script's turn, Billing answering `billing`.
fn help_story(billing: &str) -> Vec<(String, String, Value)> {
    vec![
        step("agent_started", "Triage", json!(null)),
        step(
            "tool_call",
            "Triage",
            json!({"tool": "delegate_agent", "args": {"target_agent": "Billing", "message": "Status of the refund for order 42?"}}),
        ),
        // Billing's own run is not streamed: its answer is the result.
        step(
            "tool_result",
            "Triage",
            json!({"tool": "delegate_agent", "result": billing}),
        ),
        step("token", "Triage", json!(format!("Billing says: {billing}"))),
        step(
            "tool_call",
            "Triage",
            json!({"tool": "transfer_to_tech_support", "args": {}}),
        ),
        step(
            "tool_result",
            "Triage",
            json!({"tool": "transfer_to_tech_support", "result": {"assistant": "Tech Support"}}),
        ),
        step(
            "token",
            "Tech Support",
            json!("Tech Support here: please update the app."),
        ),
        step(
            "agent_completed",
            "Tech Support",
            json!("Tech Support here: please update the app."),
        ),
    ]
}

/// Members by id or by name; each asks the provider for its own model:
/// `${HELPDESK_MODEL:gpt-4o-mini}` took its default, and an agent without a
/// model gets the provider's. A tool is no member.
async fn assert_helpdesk_members_answer(server: &TestServer) {
    for (path, agent, model) in [
        ("/ws/team/helpdesk/agent/triage", "Triage", "gpt-4o-mini"),
        (
            "/ws/team/helpdesk/agent/Tech%20Support",
            "Tech Support",
            "house-model",
        ),
    ] {
        let mut member = connect(server, path).await;
        let events = turn(&mut member, json!({"message": "hello"})).await;
        assert_eq!(
            story(&events).last().unwrap(),
            &step(
                "agent_completed",
                agent,
                json!(format!(
                    "Mock response for provider team-mock model {model}"
                ))
            ),
            "{path}"
        );
    }
    let refused = try_connect(server, "/ws/team/helpdesk/agent/orders_api", &[])
        .await
        .err();
    assert_eq!(refused, Some((404, "agent not found\n".to_owned())));
}

#[tokio::test]
async fn a_new_generation_team_file_runs_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let server = file_team_server(dir.path(), NEW_GENERATION, None, HELP_SCENARIO).await;
    let mut client = connect(&server, "/ws/team/helpdesk").await;
    let events = turn(
        &mut client,
        json!({"message": "My refund is late and the app crashes", "metadata": {"mock_scenario": "help"}}),
    )
    .await;
    let billing = "Mock response for provider team-mock model gpt-4o";
    assert_eq!(story(&events), help_story(billing), "{events:#?}");
    assert_helpdesk_members_answer(&server).await;
}

#[tokio::test]
async fn an_old_generation_team_file_runs_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"      fruit:
        turns:
          1:
            tool_calls:
              - name: delegate_agent
                arguments: {target_agent: Alice, message: "Which apples keep longest?"}
          2:
            content: "Alice says: {{last_tool_result}}"
            tool_calls: [{name: transfer_to_bob}]
          3: "Bob here."
"#;
    let server = file_team_server(dir.path(), OLD_GENERATION, Some("fruit"), scenario).await;
    let mut client = connect(&server, "/ws/team/fruit").await;
    let events = turn(
        &mut client,
        json!({"message": "Apples?", "metadata": {"mock_scenario": "fruit"}}),
    )
    .await;
    let alice = "Mock response for provider team-mock model gpt-4o-mini";
    let story = story(&events);
    assert_eq!(story[0], step("agent_started", "Coordinator", json!(null)));
    // Alice's own run is not streamed: her answer is the result.
    assert_eq!(
        story[2],
        step(
            "tool_result",
            "Coordinator",
            json!({"tool": "delegate_agent", "result": alice})
        )
    );
    assert_eq!(
        story[3],
        step(
            "token",
            "Coordinator",
            json!(format!("Alice says: {alice}"))
        )
    );
    assert_eq!(
        story[5],
        step(
            "tool_result",
            "Coordinator",
            json!({"tool": "transfer_to_bob", "result": {"assistant": "Bob"}})
        )
    );
    assert_eq!(
        story[6..],
        [
            step("token", "Bob", json!("Bob here.")),
            step("agent_completed", "Bob", json!("Bob here.")),
        ]
    );
    // Bob's model is `${BOB_MODEL:o3-mini}`, substituted before parsing.
    let mut bob = connect(&server, "/ws/team/fruit/agent/Bob").await;
    let events = turn(&mut bob, json!({"message": "2+2?"})).await;
    assert_eq!(
        events.last().unwrap()["full_response"],
        "Mock response for provider team-mock model o3-mini"
    );
}

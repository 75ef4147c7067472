//! Agent memory over real sockets: the scripted model calls the memory
//! tools, and what one session remembers a later session of the same
//! caller and agent recalls, on a new connection, while no other caller,
//! agent, facet or an anonymous caller does. Scopes come from the server:
//! the model's arguments never name one.

use serde_json::{Value, json};

use crate::credentials::{ALICE_KEY, auth_yaml, token};
use crate::support::{Client, TestServer};

const MODEL: &str = r#"
providers:
  - name: memo
    type: mock
    scenarios:
      remember:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "prefers window seats", type: preference, about_kind: preference, about_key: seat}}]}
          2: "Noted: {{last_tool_result}}"
      correct:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "prefers aisle seats", about_kind: preference, about_key: seat}}]}
          2: "Updated: {{last_tool_result}}"
      recall:
        turns:
          1: {tool_calls: [{name: memory__recall, arguments: {query: "which seats"}}]}
          2: "Recalled: {{last_tool_result}}"
      forge:
        turns:
          1: {tool_calls: [{name: memory__forget, arguments: {memory_id: "FORGED", owner: "alice", scope: {virtual_user_id: "alice"}}}]}
          2: "Forgot: {{last_tool_result}}"
"#;

const AGENTS: &str = "  - {name: concierge, handler: runtime, provider: memo, access_level: public, memory: {enabled: true}}
  - {name: porter, handler: runtime, provider: memo, access_level: public, memory: {enabled: true}}
";

async fn server() -> TestServer {
    TestServer::with_runtime(&format!("{MODEL}{}", auth_yaml()), AGENTS).await
}

/// Connects to `/ws?<query>` as the holder of `bearer` (none: anonymous).
async fn connect(server: &TestServer, query: &str, bearer: Option<&str>) -> Client {
    let header = bearer.map(|b| format!("Bearer {b}"));
    let headers: Vec<(&str, &str)> = header
        .iter()
        .map(|h| ("Authorization", h.as_str()))
        .collect();
    let mut client = server
        .try_connect_with(query, &headers)
        .await
        .expect("admitted");
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    client
}

/// The reply of one scripted turn on a fresh connection.
pub(crate) async fn reply(
    server: &TestServer,
    query: &str,
    bearer: Option<&str>,
    scenario: &str,
) -> String {
    let mut client = connect(server, query, bearer).await;
    client.script(scenario, "hello").await;
    let turn = client.recv_turn().await;
    let done = turn.last().unwrap();
    assert_eq!(done["type"], "done", "{turn:?}");
    done["content"].as_str().unwrap().to_owned()
}

/// The tool result a scripted reply quotes after `prefix`.
pub(crate) fn quoted(reply: &str, prefix: &str) -> Value {
    let json = reply
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{reply}"));
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_owned()))
}

#[tokio::test]
async fn a_fact_remembered_in_one_session_is_recalled_in_the_next_by_its_caller_alone() {
    let server = server().await;
    let alice = Some(ALICE_KEY);
    let noted = quoted(
        &reply(&server, "agent=concierge", alice, "remember").await,
        "Noted: ",
    );
    assert_eq!(noted["status"], "remembered", "{noted}");
    let id = noted["id"].as_str().unwrap().to_owned();

    let recalled = quoted(
        &reply(&server, "agent=concierge", alice, "recall").await,
        "Recalled: ",
    );
    assert_eq!(recalled["count"], 1, "{recalled}");
    let memory = &recalled["memories"][0];
    assert_eq!(memory["id"], id.as_str());
    assert_eq!(memory["content"], "prefers window seats");
    assert_eq!(memory["type"], "preference");
    assert_eq!(memory["metadata"]["provenance"], "user_requested");
    assert_eq!(memory["scope"]["tier"], "caller_agent");
    assert_eq!(memory["scope"]["agent_id"], "concierge");
    assert!(memory["scope"]["virtual_user_id"].is_string(), "{memory}");
    assert!(memory["session_id"].is_string(), "{memory}");

    let bob = token("bob", 600);
    let strangers: [(&str, Option<&str>); 4] = [
        ("agent=concierge", Some(&bob)),
        ("agent=porter", alice),
        ("agent=concierge&memory_facet=project-x", alice),
        ("agent=concierge", None),
    ];
    for (query, bearer) in strangers {
        let found = quoted(&reply(&server, query, bearer, "recall").await, "Recalled: ");
        assert_eq!(found["count"], 0, "{query} {bearer:?}: {found}");
    }
}

#[tokio::test]
async fn the_same_subject_is_replaced_in_place() {
    let server = server().await;
    let alice = Some(ALICE_KEY);
    let first = quoted(
        &reply(&server, "agent=concierge", alice, "remember").await,
        "Noted: ",
    );
    let second = quoted(
        &reply(&server, "agent=concierge", alice, "correct").await,
        "Updated: ",
    );
    assert_eq!(first["id"], second["id"]);
    let recalled = quoted(
        &reply(&server, "agent=concierge", alice, "recall").await,
        "Recalled: ",
    );
    assert_eq!(recalled["count"], 1, "{recalled}");
    assert_eq!(recalled["memories"][0]["content"], "prefers aisle seats");
}

#[tokio::test]
async fn an_anonymous_caller_cannot_write_and_a_forged_id_is_not_found() {
    let server = server().await;
    let anonymous = reply(&server, "agent=concierge", None, "remember").await;
    assert_eq!(
        anonymous,
        "Noted: memory remember: memory needs an identified caller"
    );
    let forged = reply(&server, "agent=concierge", Some(ALICE_KEY), "forge").await;
    assert_eq!(forged, "Forgot: memory forget: memory not found");
}

#[tokio::test]
async fn gnosari_shows_the_memory_steps_and_shares_the_callers_memory() {
    let server = server().await;
    let mut gnosari = server
        .connect_gnosari(&format!("concierge?api_key={ALICE_KEY}"))
        .await;
    let remember =
        json!({"message": "remember my seat", "metadata": {"mock_scenario": "remember"}});
    gnosari.send_json(remember).await;
    let turn = gnosari.recv_gnosari_turn().await;
    let call = turn
        .iter()
        .find(|e| e["type"] == "tool_call")
        .expect("a tool_call event");
    assert_eq!(call["tool_name"], "memory__remember", "{call}");
    let result = turn
        .iter()
        .find(|e| e["type"] == "tool_result")
        .expect("a tool_result event");
    assert!(result.to_string().contains("remembered"), "{result}");
    // The same caller on Omnia, with no facet: the same memory.
    let recalled = quoted(
        &reply(&server, "agent=concierge", Some(ALICE_KEY), "recall").await,
        "Recalled: ",
    );
    assert_eq!(recalled["count"], 1, "{recalled}");
}

#[tokio::test]
async fn the_agents_endpoint_names_each_agents_memory_tier() {
    let shared = "  - {name: shared, handler: runtime, provider: memo, access_level: public, memory: {enabled: true, tier: caller}}\n  - {name: plain, handler: runtime, provider: memo, access_level: public, memory: {enabled: false}}\n";
    let server = TestServer::with_runtime(
        &format!("{MODEL}{}", auth_yaml()),
        &format!("{AGENTS}{shared}"),
    )
    .await;
    let listing: Value = server.http("GET", "/api/v1/agents", &[], b"").await.json();
    let tier = |name: &str| -> Value {
        let agents = listing["agents"].as_array().unwrap();
        let agent = agents.iter().find(|a| a["name"] == name).unwrap();
        agent["memory"].clone()
    };
    assert_eq!(tier("concierge"), "caller_agent", "{listing}");
    assert_eq!(tier("shared"), "caller");
    assert_eq!(tier("plain"), Value::Null, "memory: {{enabled: false}}");
    assert_eq!(tier("echo"), Value::Null, "not a runtime agent");
}

/// A model that remembers, forgets what it remembered (by the id the first
/// tool returned), then recalls.
const FORGETFUL: &str = r#"
      forget:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "lives in Lisbon"}}]}
          2: {tool_calls: [{name: memory__forget, arguments: {memory_id: "{{last_tool_result.id}}"}}]}
          3: {tool_calls: [{name: memory__recall, arguments: {query: "Lisbon"}}]}
          4: "After forgetting: {{last_tool_result}}"
"#;

/// Memory rows in the SQLite file at `db`, forgotten or not.
fn stored_memories(db: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT count(*) FROM memories", [], |row| row.get(0))
        .unwrap()
}

#[tokio::test]
async fn forgetting_hides_at_once_and_the_grace_deletes_the_row() {
    let top = format!(
        "{MODEL}{FORGETFUL}{}memory: {{forget_grace: 0s, purge_every: 200ms}}\n",
        auth_yaml()
    );
    let server = TestServer::with_runtime(&top, AGENTS).await;
    let after = reply(&server, "agent=concierge", Some(ALICE_KEY), "forget").await;
    assert_eq!(after, r#"After forgetting: {"count":0,"memories":[]}"#);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while stored_memories(&server.db_path) > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the forgotten row is still stored"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn within_its_grace_a_forgotten_memory_is_kept_but_never_read() {
    let server =
        TestServer::with_runtime(&format!("{MODEL}{FORGETFUL}{}", auth_yaml()), AGENTS).await;
    let after = reply(&server, "agent=concierge", Some(ALICE_KEY), "forget").await;
    assert_eq!(after, r#"After forgetting: {"count":0,"memories":[]}"#);
    let again = quoted(
        &reply(&server, "agent=concierge", Some(ALICE_KEY), "recall").await,
        "Recalled: ",
    );
    assert_eq!(again["count"], 0);
    assert_eq!(
        stored_memories(&server.db_path),
        1,
        "kept for its 30-day grace"
    );
}

/// `METHOD path` on the memories API as the holder of `bearer`.
async fn api(
    server: &TestServer,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: &[u8],
) -> crate::support::HttpResponse {
    let header = bearer.map(|b| format!("Bearer {b}"));
    let headers: Vec<(&str, &str)> = header
        .iter()
        .map(|h| ("Authorization", h.as_str()))
        .collect();
    server.http(method, path, &headers, body).await
}

fn body(response: &crate::support::HttpResponse) -> Value {
    serde_json::from_slice(&response.body).unwrap_or(Value::Null)
}

/// The contents of the caller's memories, sorted.
async fn contents(server: &TestServer, bearer: Option<&str>, query: &str) -> Vec<String> {
    let listed = api(
        server,
        "GET",
        &format!("/api/v1/memories{query}"),
        bearer,
        b"",
    )
    .await;
    assert_eq!(
        listed.status,
        200,
        "{}",
        String::from_utf8_lossy(&listed.body)
    );
    let mut contents: Vec<String> = body(&listed)["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    contents.sort();
    contents
}

/// Alice's two memories: the seat preference without a facet, and its
/// correction in facet `trip-7` (its id returned).
async fn alices_two_memories(server: &TestServer) -> String {
    let alice = Some(ALICE_KEY);
    reply(server, "agent=concierge", alice, "remember").await;
    let noted = reply(
        server,
        "agent=concierge&memory_facet=trip-7",
        alice,
        "correct",
    )
    .await;
    quoted(&noted, "Updated: ")["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_owner_lists_and_reads_their_memories_and_no_one_elses() {
    let server = server().await;
    let alice = Some(ALICE_KEY);
    let bob_token = token("bob", 600);
    let bob = Some(bob_token.as_str());
    let in_facet = alices_two_memories(&server).await;
    let both = ["prefers aisle seats", "prefers window seats"];
    assert_eq!(contents(&server, alice, "").await, both);
    assert_eq!(
        contents(&server, alice, "?memory_facet=").await,
        ["prefers window seats"]
    );
    let facet = "?memory_facet=trip-7&agent=concierge";
    assert_eq!(
        contents(&server, alice, facet).await,
        ["prefers aisle seats"]
    );
    assert!(contents(&server, bob, "").await.is_empty());
    let anonymous = api(&server, "GET", "/api/v1/memories", None, b"").await;
    assert_eq!(anonymous.status, 401, "no credential, as the sessions API");

    let path = format!("/api/v1/memories/{in_facet}");
    let shown = api(&server, "GET", &path, alice, b"").await;
    assert_eq!(shown.status, 200);
    let shown = body(&shown);
    assert_eq!(shown["tier"], "caller_agent");
    assert_eq!(shown["agent"], "concierge");
    assert_eq!(shown["memory_facet"], "trip-7");
    assert_eq!(shown["about_key"], "seat");
    assert_eq!(shown["metadata"]["provenance"], "user_requested");
    let theirs = api(&server, "GET", &path, bob, b"").await;
    assert_eq!(
        (theirs.status, body(&theirs)),
        (404, json!({"error": "memory not found"}))
    );
    assert_eq!(api(&server, "DELETE", &path, bob, b"").await.status, 404);
}

#[tokio::test]
async fn pages_end_where_the_memories_do_whatever_the_offset() {
    let server = server().await;
    let alice = Some(ALICE_KEY);
    alices_two_memories(&server).await;
    let page = |query: &'static str| {
        let server = &server;
        async move {
            let path = format!("/api/v1/memories{query}");
            let listed = api(server, "GET", &path, alice, b"").await;
            assert_eq!(listed.status, 200, "{query}");
            let listed = body(&listed);
            (
                listed["memories"].as_array().unwrap().len(),
                listed["next_offset"].clone(),
            )
        }
    };
    assert_eq!(page("?limit=1&offset=1").await, (1, json!(2)));
    assert_eq!(page("?limit=1&offset=2").await, (0, Value::Null));
    // Offsets past the stores' 64-bit OFFSET, and at the top of the
    // server's own numbers, are an empty last page, not a failure.
    assert_eq!(
        page("?limit=1&offset=9223372036854775808").await,
        (0, Value::Null)
    );
    assert_eq!(
        page("?limit=1&offset=18446744073709551615").await,
        (0, Value::Null)
    );
}

#[tokio::test]
async fn an_owner_exports_deletes_and_imports_their_memories() {
    let server = server().await;
    let alice = Some(ALICE_KEY);
    let in_facet = alices_two_memories(&server).await;
    let export = api(&server, "GET", "/api/v1/memories/export", alice, b"").await;
    assert_eq!(export.status, 200);
    assert_eq!(export.header("content-type"), Some("application/x-ndjson"));
    let exported = export.body.clone();
    assert_eq!(String::from_utf8_lossy(&exported).lines().count(), 2);

    let path = format!("/api/v1/memories/{in_facet}");
    assert_eq!(api(&server, "DELETE", &path, alice, b"").await.status, 204);
    assert_eq!(api(&server, "GET", &path, alice, b"").await.status, 404);
    let all = api(&server, "DELETE", "/api/v1/memories", alice, b"").await;
    assert_eq!((all.status, body(&all)), (200, json!({"deleted": 1})));
    assert!(contents(&server, alice, "").await.is_empty());
    let recalled = quoted(
        &reply(&server, "agent=concierge", alice, "recall").await,
        "Recalled: ",
    );
    assert_eq!(recalled["count"], 0, "deleted means gone from recall too");

    let import = "/api/v1/memories/import";
    let imported = api(&server, "POST", import, alice, &exported).await;
    assert_eq!(
        (imported.status, body(&imported)),
        (200, json!({"imported": 2}))
    );
    let both = ["prefers aisle seats", "prefers window seats"];
    assert_eq!(contents(&server, alice, "").await, both);
    let recalled = quoted(
        &reply(&server, "agent=concierge", alice, "recall").await,
        "Recalled: ",
    );
    assert_eq!(recalled["memories"][0]["content"], "prefers window seats");

    let line = b"{\"tier\":\"agent\",\"content\":\"secret text\"}\n";
    let bad = api(&server, "POST", import, alice, line).await;
    let refused = json!({"error": "invalid line 1: tier must be caller_agent or caller"});
    assert_eq!((bad.status, body(&bad)), (400, refused));
    assert_eq!(
        api(&server, "POST", import, None, &exported).await.status,
        401
    );
}

/// The value of the sample `name` in `/metrics`.
pub(crate) async fn sample(server: &TestServer, name: &str) -> f64 {
    let (_, body) = server.get("/metrics").await;
    let line = body.lines().find(|l| l.split(' ').next() == Some(name));
    let value = line
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or_else(|| panic!("{name}"));
    value.parse().unwrap()
}

#[tokio::test]
async fn metrics_count_memory_calls_without_their_text() {
    let server = server().await;
    let alice = Some(ALICE_KEY);
    reply(&server, "agent=concierge", alice, "remember").await;
    reply(&server, "agent=concierge", alice, "recall").await;
    reply(&server, "agent=concierge", alice, "forge").await;
    assert_eq!(
        sample(&server, "agentwire_memory_write_seconds_count").await,
        1.0
    );
    assert_eq!(
        sample(&server, "agentwire_memory_recall_seconds_count").await,
        1.0
    );
    let bucket = "agentwire_memory_recall_seconds_bucket{le=\"+Inf\"}";
    assert_eq!(sample(&server, bucket).await, 1.0);
    assert_eq!(sample(&server, "agentwire_memory_forgets_total").await, 0.0);
    let all = api(&server, "DELETE", "/api/v1/memories", alice, b"").await;
    assert_eq!(body(&all), json!({"deleted": 1}));
    assert_eq!(
        sample(&server, "agentwire_memory_hard_deletes_total").await,
        1.0
    );
    let (_, text) = server.get("/metrics").await;
    assert!(!text.contains("window seats"), "no memory text in /metrics");
}

/// A model that recalls the hotel's checkout time.
const HOTEL: &str = r#"
      checkout:
        turns:
          1: {tool_calls: [{name: memory__recall, arguments: {query: "checkout"}}]}
          2: "Recalled: {{last_tool_result}}"
"#;

#[tokio::test]
async fn an_agents_configured_facts_are_every_callers_to_recall_and_no_ones_to_change() {
    let agents = "  - {name: concierge, handler: runtime, provider: memo, access_level: public, memory: {enabled: true, facts: [\"Checkout is at 11:00.\"]}}\n";
    let server = TestServer::with_runtime(&format!("{MODEL}{HOTEL}{}", auth_yaml()), agents).await;
    let bob_token = token("bob", 600);
    let callers: [(&str, Option<&str>); 3] = [
        ("agent=concierge", Some(ALICE_KEY)),
        ("agent=concierge&memory_facet=trip-7", Some(&bob_token)),
        ("agent=concierge", None),
    ];
    for (query, bearer) in callers {
        let found = quoted(
            &reply(&server, query, bearer, "checkout").await,
            "Recalled: ",
        );
        assert_eq!(found["count"], 1, "{query} {bearer:?}: {found}");
        let memory = &found["memories"][0];
        assert_eq!(memory["content"], "Checkout is at 11:00.");
        assert_eq!(
            memory["scope"],
            json!({"tier": "agent", "agent_id": "concierge"})
        );
        assert_eq!(memory["metadata"]["provenance"], "configuration");
    }
    // Not a caller's: not listed, not deletable, not forgettable.
    assert!(contents(&server, Some(ALICE_KEY), "").await.is_empty());
    let all = api(&server, "DELETE", "/api/v1/memories", Some(ALICE_KEY), b"").await;
    assert_eq!(body(&all), json!({"deleted": 0}));
    let found = quoted(
        &reply(&server, "agent=concierge", None, "checkout").await,
        "Recalled: ",
    );
    assert_eq!(found["count"], 1, "still there");
}

#[tokio::test]
async fn the_memories_gauge_counts_live_memories_by_tier_after_each_purge() {
    let top_level = format!("{MODEL}{}memory:\n  purge_every: 200ms\n", auth_yaml());
    let agents = "  - {name: concierge, handler: runtime, provider: memo, access_level: public, memory: {enabled: true, facts: [\"Checkout is at 11:00.\"]}}\n";
    let server = TestServer::with_runtime(&top_level, agents).await;
    reply(&server, "agent=concierge", Some(ALICE_KEY), "remember").await;
    let gauge = |tier: &str| format!("agentwire_memories{{tier=\"{tier}\"}}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sample(&server, &gauge("caller_agent")).await < 1.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the gauge never counted the memory"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(sample(&server, &gauge("caller")).await, 0.0);
    assert_eq!(sample(&server, &gauge("agent")).await, 1.0);
}

//! The sessions API (`/api/v1/sessions*`) and session summaries: listing
//! and paging by owner, reading a session and its messages, deleting, who
//! may see what, and summaries written after an idle time (announced on the
//! Gnosari socket, rescheduled by a new turn, kept across a restart).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::credentials::{ALICE_KEY, BOB_KEY, auth_yaml, now_secs};
use crate::support::{Client, Dialect, HttpResponse, TestServer, stored_messages};

/// Providers and agents with short summary idle times.
const PROVIDERS: &str = r#"
providers:
  - name: agent-model
    type: mock
    default_response: "model answer"
    scenarios:
      summary:
        turns:
          1: "summary by the agent's own model"
  - name: summary-model
    type: mock
    default_response: "summary by the configured summarizer"
"#;

const SUMMARY_AGENTS: &str = "  - name: quick-summary
    handler: test
    summary_after_idle: 300ms
  - name: debounced
    handler: test
    summary_after_idle: 800ms
  - name: modelled
    handler: runtime
    provider: agent-model
    summary_after_idle: 300ms
  - name: summarized
    handler: echo
    summarizer: summary-model
    summary_after_idle: 300ms
";

/// A server with the `auth:` block of `credentials.rs` (so every agent is
/// private) and the summary agents.
async fn server() -> TestServer {
    TestServer::with_runtime(&format!("{PROVIDERS}{}", auth_yaml()), SUMMARY_AGENTS).await
}

/// `METHOD path` with `Authorization: Bearer <key>` when a key is given.
async fn call(server: &TestServer, method: &str, path: &str, key: Option<&str>) -> HttpResponse {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    server.http(method, path, &headers, b"").await
}

async fn get_json(server: &TestServer, path: &str, key: Option<&str>) -> Value {
    let response = call(server, "GET", path, key).await;
    assert_eq!(response.status, 200, "GET {path}: {}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.header("cache-control"), Some("no-store"));
    response.json()
}

/// Asserts a JSON error answer.
fn assert_api_error(response: &HttpResponse, status: u16, error: &str) {
    assert_eq!(
        (response.status, response.json()),
        (status, json!({"error": error})),
        "{}",
        response.text()
    );
}

/// One Gnosari turn on `agent_and_query`; the session id and the events up
/// to the terminal one.
async fn gnosari_turn(client: &mut Client, frame: Value) -> (String, Vec<Value>) {
    client.send_json(frame).await;
    let events = client.recv_gnosari_turn().await;
    let session = events[0]["session_id"].as_str().unwrap().to_owned();
    (session, events)
}

/// An Omnia connection with `Authorization: Bearer <key>`; the client and
/// its session id.
async fn omnia(server: &TestServer, agent: &str, key: &str) -> (Client, String) {
    let auth = format!("Bearer {key}");
    let mut client = server
        .try_connect_with(&format!("agent={agent}"), &[("Authorization", &auth)])
        .await
        .expect("upgrade accepted");
    let connected = client.recv().await;
    (client, connected["session_id"].as_str().unwrap().to_owned())
}

fn ids(page: &Value) -> Vec<&str> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect()
}

/// Unix milliseconds of `YYYY-MM-DDTHH:MM:SS[.mmm]Z`.
fn unix_millis(text: &str) -> i64 {
    let field = |range: std::ops::Range<usize>| -> i64 { text[range].parse().unwrap() };
    assert!(text.ends_with('Z') && text.as_bytes()[10] == b'T', "{text}");
    let (year, month, day) = (field(0..4), field(5..7), field(8..10));
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let millis = if text.len() > 20 { field(20..23) } else { 0 };
    ((days * 24 + field(11..13)) * 60 + field(14..16)) * 60_000 + field(17..19) * 1000 + millis
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Polls the session until it has a summary (at most `within`).
async fn summary_of(server: &TestServer, id: &str, key: Option<&str>, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let session = get_json(server, &format!("/api/v1/sessions/{id}"), key).await;
        if let Some(summary) = session.get("summary") {
            return summary.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no summary within {within:?}: {session}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The newest of a listing, `first`: an `echo` session with no summary yet,
/// created before it was last active, and active just now.
fn assert_newest_listed(first: &Value) {
    assert_eq!(first["agent"], "echo");
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["agent", "created_at", "id", "last_active_at"],
        "no summary yet"
    );
    let (created_at, active_at) = (
        unix_millis(first["created_at"].as_str().unwrap()),
        unix_millis(first["last_active_at"].as_str().unwrap()),
    );
    assert!(created_at <= active_at && (now_millis() - active_at).abs() < 10_000);
}

/// Alice's four sessions, `newest_first`, in pages of two by cursor; a limit
/// above the maximum is the maximum.
async fn assert_pages_of_two(server: &TestServer, newest_first: &[&str]) {
    let page1 = get_json(server, "/api/v1/sessions?limit=2", Some(ALICE_KEY)).await;
    assert_eq!(ids(&page1), newest_first[..2]);
    let cursor = page1["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let page2 = get_json(
        server,
        &format!("/api/v1/sessions?limit=2&cursor={cursor}"),
        Some(ALICE_KEY),
    )
    .await;
    assert_eq!(ids(&page2), newest_first[2..]);
    assert_eq!(
        page2["next_cursor"],
        Value::Null,
        "the last page is full: no further page"
    );
    // Above the maximum is the maximum.
    let capped = get_json(server, "/api/v1/sessions?limit=1000", Some(ALICE_KEY)).await;
    assert_eq!(ids(&capped), newest_first);
}

/// Alice's key in `X-AUTH-TOKEN` and in `?api_key=` lists the same
/// sessions, `newest_first`, as her bearer.
async fn assert_other_credential_forms_list(server: &TestServer, newest_first: &[&str]) {
    let by_header = server
        .http(
            "GET",
            "/api/v1/sessions",
            &[("X-AUTH-TOKEN", ALICE_KEY)],
            b"",
        )
        .await;
    assert_eq!(ids(&by_header.json()), newest_first);
    let by_query = get_json(
        server,
        &format!("/api/v1/sessions?api_key={ALICE_KEY}"),
        None,
    )
    .await;
    assert_eq!(ids(&by_query), newest_first);
}

/// A bad limit or cursor is refused.
async fn assert_bad_list_queries_refused(server: &TestServer) {
    for (query, error) in [
        ("limit=0", "invalid limit"),
        ("limit=-1", "invalid limit"),
        ("limit=ten", "invalid limit"),
        ("cursor=zz", "invalid cursor"),
        ("cursor=616263", "invalid cursor"),
    ] {
        let response = call(
            server,
            "GET",
            &format!("/api/v1/sessions?{query}"),
            Some(ALICE_KEY),
        )
        .await;
        assert_api_error(&response, 400, error);
    }
}

#[tokio::test]
async fn owners_list_their_sessions_newest_first_in_pages() {
    let server = server().await;
    let mut alice = server
        .connect_gnosari(&format!("test-agent?api_key={ALICE_KEY}"))
        .await;
    let mut created = Vec::new();
    for n in 1..=3 {
        let (id, _) = gnosari_turn(&mut alice, json!({"message": format!("hello {n}")})).await;
        created.push(id);
    }
    // An Omnia session of hers is listed beside them.
    let (mut on_omnia, omnia_id) = omnia(&server, "echo", ALICE_KEY).await;
    on_omnia.say("over omnia").await;
    on_omnia.recv_turn().await;
    created.push(omnia_id.clone());
    let mut bob = server
        .connect_gnosari(&format!("echo?api_key={BOB_KEY}"))
        .await;
    let (bobs, _) = gnosari_turn(&mut bob, json!({"message": "hi"})).await;

    let newest_first: Vec<&str> = created.iter().rev().map(String::as_str).collect();
    let all = get_json(&server, "/api/v1/sessions", Some(ALICE_KEY)).await;
    assert_eq!(ids(&all), newest_first);
    assert_eq!(all["next_cursor"], Value::Null);
    assert_newest_listed(&all["sessions"][0]);

    // Pages of two, by cursor.
    assert_pages_of_two(&server, &newest_first).await;

    // The other credential forms name the same owner.
    assert_other_credential_forms_list(&server, &newest_first).await;

    // Bob sees his own only.
    let bobs_list = get_json(&server, "/api/v1/sessions", Some(BOB_KEY)).await;
    assert_eq!(ids(&bobs_list), [bobs.as_str()]);

    assert_bad_list_queries_refused(&server).await;
}

/// The messages of weather turn `id`, as its owner reads them: the user's,
/// the tool's call and result, and `answer`.
async fn assert_weather_turn_messages(server: &TestServer, id: &str, answer: &str) {
    let messages = get_json(
        server,
        &format!("/api/v1/sessions/{id}/messages"),
        Some(ALICE_KEY),
    )
    .await;
    let messages = messages["messages"].as_array().unwrap();
    let shape: Vec<(u64, &str)> = messages
        .iter()
        .map(|m| (m["seq"].as_u64().unwrap(), m["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [(0, "user"), (1, "tool"), (2, "tool"), (3, "assistant")]
    );
    assert_eq!(messages[0]["content"], "what's the weather?");
    assert_eq!(messages[1]["content"]["call"]["name"], "weather");
    assert_eq!(
        messages[1]["content"]["call"]["arguments"],
        json!({"location": "Denver, CO"})
    );
    assert_eq!(messages[2]["content"]["result"]["status"], "ok");
    assert_eq!(
        messages[2]["content"]["result"]["value"]["temperature"],
        "72°F"
    );
    assert_eq!(messages[3]["content"], answer);
    assert!(messages[0]["created_at"].as_str().unwrap().ends_with('Z'));
}

/// Alice's session `id` is refused to another owner, to a missing
/// credential and to a bad one; an unknown id is not found, and the
/// methods the routes do not take are refused.
async fn assert_refused_to_all_but_its_owner(server: &TestServer, id: &str) {
    for path in [
        format!("/api/v1/sessions/{id}"),
        format!("/api/v1/sessions/{id}/messages"),
    ] {
        assert_api_error(
            &call(server, "GET", &path, Some(BOB_KEY)).await,
            404,
            "session not found",
        );
        assert_api_error(&call(server, "GET", &path, None).await, 401, "unauthorized");
        assert_api_error(
            &call(server, "GET", &path, Some("ak_forged_0123456789")).await,
            401,
            "unauthorized",
        );
    }
    assert_api_error(
        &call(server, "GET", "/api/v1/sessions", None).await,
        401,
        "unauthorized",
    );
    assert_api_error(
        &call(
            server,
            "DELETE",
            &format!("/api/v1/sessions/{id}"),
            Some(BOB_KEY),
        )
        .await,
        404,
        "session not found",
    );
    for unknown in ["no-such-session", "bad%20id"] {
        let response = call(
            server,
            "GET",
            &format!("/api/v1/sessions/{unknown}"),
            Some(ALICE_KEY),
        )
        .await;
        assert_api_error(&response, 404, "session not found");
    }
    let post = call(server, "POST", "/api/v1/sessions", Some(ALICE_KEY)).await;
    assert_api_error(&post, 405, "method not allowed");
    assert_eq!(post.header("allow"), Some("GET"));
    let put = call(
        server,
        "PUT",
        &format!("/api/v1/sessions/{id}"),
        Some(ALICE_KEY),
    )
    .await;
    assert_eq!(
        (put.status, put.header("allow")),
        (405, Some("GET, DELETE"))
    );
}

#[tokio::test]
async fn a_session_and_its_messages_are_its_owners_alone() {
    let server = server().await;
    let mut alice = server
        .connect_gnosari(&format!("demo?api_key={ALICE_KEY}"))
        .await;
    let (id, events) = gnosari_turn(&mut alice, json!({"message": "what's the weather?"})).await;
    let answer = events.last().unwrap()["full_response"]
        .as_str()
        .unwrap()
        .to_owned();

    let session = get_json(&server, &format!("/api/v1/sessions/{id}"), Some(ALICE_KEY)).await;
    assert_eq!(session["id"], id.as_str());
    assert_eq!(session["agent"], "demo");
    assert!(session.get("summary").is_none(), "{session}");
    assert_weather_turn_messages(&server, &id, &answer).await;

    // Another owner, a missing credential, a bad one, an unknown id.
    assert_refused_to_all_but_its_owner(&server, &id).await;
    // Bob's attempts changed nothing.
    get_json(&server, &format!("/api/v1/sessions/{id}"), Some(ALICE_KEY)).await;
}

#[tokio::test]
async fn events_and_failures_are_not_messages() {
    let server = server().await;
    let (mut client, id) = omnia(&server, "test-agent", ALICE_KEY).await;
    client.send_json(json!({"type": "disclosure_ack"})).await;
    client.script("error", "this fails").await;
    client.recv_turn().await;
    client.say("then works").await;
    client.recv_turn().await;
    let stored: Vec<String> = stored_messages(&server.db_path)
        .into_iter()
        .filter(|m| m.0 == id)
        .map(|m| m.2)
        .collect();
    assert_eq!(stored, ["event", "user", "error", "user", "assistant"]);
    let messages = get_json(
        &server,
        &format!("/api/v1/sessions/{id}/messages"),
        Some(ALICE_KEY),
    )
    .await;
    let shown: Vec<(u64, &str, &str)> = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["seq"].as_u64().unwrap(),
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (1, "user", "this fails"),
            (3, "user", "then works"),
            (4, "assistant", "echo: then works")
        ]
    );
    assert_eq!(
        messages["messages"][0]["metadata"],
        json!({"mock_scenario": "error"}),
        "the message's own metadata"
    );
}

#[tokio::test]
async fn deleting_removes_a_session_and_waits_for_its_turn() {
    let server = server().await;
    let (mut client, id) = omnia(&server, "test-agent", ALICE_KEY).await;
    let (mut other, kept) = omnia(&server, "test-agent", ALICE_KEY).await;
    other.say("keep me").await;
    other.recv_turn().await;

    // A turn waiting on a client tool is running: 409, and nothing is lost.
    client.script("client-tool", "where am I?").await;
    let call_frame = client.recv().await;
    assert_eq!(call_frame["type"], "tool_call", "{call_frame}");
    let path = format!("/api/v1/sessions/{id}");
    assert_api_error(
        &call(&server, "DELETE", &path, Some(ALICE_KEY)).await,
        409,
        "a turn is running on this session",
    );
    let call_id = call_frame["tool_call"]["id"].as_str().unwrap();
    client
        .send_json(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": call_id}}))
        .await;
    client
        .send_json(json!({"type": "tool_result", "tool_result": {"call_id": call_id, "result": {"lat": 1}}}))
        .await;
    assert_eq!(client.recv().await["type"], "done");
    assert!(stored_messages(&server.db_path).iter().any(|m| m.0 == id));

    let deleted = call(&server, "DELETE", &path, Some(ALICE_KEY)).await;
    assert_eq!(
        (deleted.status, deleted.body.len()),
        (204, 0),
        "{}",
        deleted.text()
    );
    assert_api_error(
        &call(&server, "GET", &path, Some(ALICE_KEY)).await,
        404,
        "session not found",
    );
    assert_api_error(
        &call(&server, "GET", &format!("{path}/messages"), Some(ALICE_KEY)).await,
        404,
        "session not found",
    );
    assert_api_error(
        &call(&server, "DELETE", &path, Some(ALICE_KEY)).await,
        404,
        "session not found",
    );
    let listed = get_json(&server, "/api/v1/sessions", Some(ALICE_KEY)).await;
    assert_eq!(ids(&listed), [kept.as_str()]);
    let rows = stored_messages(&server.db_path);
    assert!(
        rows.iter().all(|m| m.0 != id),
        "no message of the deleted session is left"
    );
    assert!(rows.iter().any(|m| m.0 == kept));

    // The socket still on the deleted session is told it is gone.
    client.say("anyone there?").await;
    let error = client.recv().await;
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["error"]["code"], "SESSION_EXPIRED", "{error}");
}

#[tokio::test]
async fn anonymous_callers_list_nothing_and_reach_anonymous_sessions_by_id() {
    let server = TestServer::start().await;
    let mut client = server.connect_gnosari("echo").await;
    let (id, _) = gnosari_turn(&mut client, json!({"message": "hello"})).await;
    let listed = get_json(&server, "/api/v1/sessions", None).await;
    assert_eq!(listed, json!({"sessions": [], "next_cursor": null}));
    let session = get_json(&server, &format!("/api/v1/sessions/{id}"), None).await;
    assert_eq!(session["agent"], "echo");
    let messages = get_json(&server, &format!("/api/v1/sessions/{id}/messages"), None).await;
    assert_eq!(messages["messages"][1]["content"], "Echo: hello");
    // A credential when none is configured is refused, never ignored.
    assert_api_error(
        &call(&server, "GET", "/api/v1/sessions", Some(ALICE_KEY)).await,
        401,
        "unauthorized",
    );
    let deleted = call(&server, "DELETE", &format!("/api/v1/sessions/{id}"), None).await;
    assert_eq!(deleted.status, 204);
}

/// `scheduled` announces the summary of `session`, due to the second, at a
/// time between `before` and now (plus the idle time).
fn assert_summary_scheduled(scheduled: &Value, session: &str, before: i64) {
    let keys: Vec<&str> = scheduled
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["scheduled_at", "session_id", "type"], "{scheduled}");
    assert_eq!(scheduled["type"], "session_summary_scheduled");
    assert_eq!(scheduled["session_id"], session);
    let at = scheduled["scheduled_at"].as_str().unwrap();
    assert_eq!(at.len(), 20, "to the second: {at}");
    let at = unix_millis(at) / 1000;
    assert!((before..=now_secs() + 2).contains(&at), "{at} vs {before}");
}

/// The summaries of the scripted, the modelled and the Omnia session, each
/// by its own means and the first not before its idle time; the listing
/// shows all three.
async fn assert_the_three_summaries(
    server: &TestServer,
    scripted_id: &str,
    modelled_id: &str,
    omnia_id: &str,
    before: i64,
) {
    let summary = summary_of(server, scripted_id, Some(ALICE_KEY), Duration::from_secs(2)).await;
    assert_eq!(
        summary["text"],
        "Asked: what's the weather? — Last answer: Hello world"
    );
    let written = unix_millis(summary["created_at"].as_str().unwrap());
    assert!(written >= before * 1000 + 300, "{written}");
    let summary = summary_of(server, modelled_id, Some(ALICE_KEY), Duration::from_secs(2)).await;
    assert_eq!(summary["text"], "summary by the agent's own model");
    let summary = summary_of(server, omnia_id, Some(ALICE_KEY), Duration::from_secs(2)).await;
    assert_eq!(summary["text"], "summary by the configured summarizer");

    // The listing shows summaries too.
    let listed = get_json(server, "/api/v1/sessions", Some(ALICE_KEY)).await;
    let with_summary = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.get("summary").is_some())
        .count();
    assert_eq!(with_summary, 3, "{listed}");
}

#[tokio::test]
async fn summaries_follow_the_idle_time_and_are_announced_after_agent_completed() {
    let server = server().await;
    let before = now_secs();
    let mut scripted = server
        .connect_gnosari(&format!("quick-summary?api_key={ALICE_KEY}"))
        .await;
    let (scripted_id, events) = gnosari_turn(
        &mut scripted,
        json!({"message": "  what's\nthe weather? ", "metadata": {"mock_scenario": "stream"}}),
    )
    .await;
    assert_eq!(events.last().unwrap()["type"], "agent_completed");
    let scheduled = scripted.recv_any_event().await;
    assert_summary_scheduled(&scheduled, &scripted_id, before);

    // A failed turn schedules nothing.
    let (_, failed) = gnosari_turn(
        &mut scripted,
        json!({"message": "x", "session_id": scripted_id, "metadata": {"mock_scenario": "error"}}),
    )
    .await;
    assert_eq!(failed.last().unwrap()["type"], "error");

    // A runtime agent summarises with its own model, another with the
    // configured summarizer; Omnia sessions are summarised as well.
    let mut modelled = server
        .connect_gnosari(&format!("modelled?api_key={ALICE_KEY}"))
        .await;
    let (modelled_id, _) = gnosari_turn(&mut modelled, json!({"message": "hi model"})).await;
    assert_eq!(
        modelled.recv_any_event().await["type"],
        "session_summary_scheduled"
    );
    let (mut on_omnia, omnia_id) = omnia(&server, "summarized", ALICE_KEY).await;
    on_omnia.say("hi summarizer").await;
    assert_eq!(on_omnia.recv_turn().await.last().unwrap()["type"], "done");
    assert!(
        get_json(
            &server,
            &format!("/api/v1/sessions/{omnia_id}"),
            Some(ALICE_KEY)
        )
        .await
        .get("summary")
        .is_none(),
        "not before the idle time"
    );

    assert_the_three_summaries(&server, &scripted_id, &modelled_id, &omnia_id, before).await;
}

#[tokio::test]
async fn a_new_turn_pushes_the_summary_back() {
    const IDLE_MS: i64 = 800;
    let server = server().await;
    let mut client = server
        .connect_gnosari(&format!("debounced?api_key={ALICE_KEY}"))
        .await;
    let (id, _) = gnosari_turn(&mut client, json!({"message": "first"})).await;
    let first = unix_millis(
        client.recv_any_event().await["scheduled_at"]
            .as_str()
            .unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second_sent = now_millis();
    let (again, _) =
        gnosari_turn(&mut client, json!({"message": "second", "session_id": id})).await;
    assert_eq!(again, id);
    let second = client.recv_any_event().await;
    assert_eq!(second["type"], "session_summary_scheduled");
    assert!(unix_millis(second["scheduled_at"].as_str().unwrap()) >= first);

    // The first summary to appear is the rescheduled one: none was written
    // at the first due time.
    let summary = summary_of(&server, &id, Some(ALICE_KEY), Duration::from_secs(3)).await;
    let written = unix_millis(summary["created_at"].as_str().unwrap());
    assert!(
        written >= second_sent + IDLE_MS,
        "written {}ms after the second turn was sent",
        written - second_sent
    );
    assert_eq!(summary["text"], "Asked: first — Last answer: echo: second");
}

#[tokio::test]
async fn a_summary_due_across_a_restart_is_written_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let agent = "  - name: slow-summary\n    handler: echo\n    summary_after_idle: 700ms\n";
    let server = TestServer::on_database_with_runtime(&db, "", agent).await;
    let mut client = server.connect_gnosari("slow-summary").await;
    let (id, _) = gnosari_turn(&mut client, json!({"message": "remember me"})).await;
    assert_eq!(
        client.recv_any_event().await["type"],
        "session_summary_scheduled"
    );
    drop(client);
    server.stop().await;

    // Stopped before the summary was due: nothing written, the due time kept.
    let (summary, due): (Option<String>, Option<i64>) = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT summary, summary_due_at FROM sessions WHERE id = ?1",
            [&id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(summary, None);
    let due = due.expect("the due time is stored");

    let restarted = TestServer::on_database_with_runtime(&db, "", agent).await;
    let summary = summary_of(&restarted, &id, None, Duration::from_secs(3)).await;
    assert_eq!(
        summary["text"],
        "Asked: remember me — Last answer: Echo: remember me"
    );
    assert!(unix_millis(summary["created_at"].as_str().unwrap()) >= due / 1_000_000);
    let pending: Option<i64> = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT summary_due_at FROM sessions WHERE id = ?1",
            [&id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(pending, None, "done: nothing left due");
    restarted.stop().await;
}

/// A WebSocket on `path` (the team endpoints), which must be accepted.
async fn connect_path(server: &TestServer, path: &str) -> Client {
    let (ws, _) = tokio_tungstenite::connect_async(server.url(path))
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    Client::new(ws, Dialect::of_path(path))
}

#[tokio::test]
async fn team_endpoints_summarise_like_their_agents() {
    let teams =
        "teams:\n  - name: crew\n    orchestrator: quick-summary\n    agents: [summarized]\n";
    let server = TestServer::with_runtime(&format!("{PROVIDERS}{teams}"), SUMMARY_AGENTS).await;
    let mut team = connect_path(&server, "/ws/team/crew").await;
    let (team_id, _) = gnosari_turn(&mut team, json!({"message": "hello team"})).await;
    assert_eq!(
        team.recv_any_event().await["type"],
        "session_summary_scheduled"
    );
    let mut member = connect_path(&server, "/ws/team/crew/agent/summarized").await;
    let (member_id, _) = gnosari_turn(&mut member, json!({"message": "hello member"})).await;
    assert_eq!(
        member.recv_any_event().await["type"],
        "session_summary_scheduled"
    );

    let summary = summary_of(&server, &team_id, None, Duration::from_secs(2)).await;
    assert_eq!(
        summary["text"],
        "Asked: hello team — Last answer: echo: hello team"
    );
    let summary = summary_of(&server, &member_id, None, Duration::from_secs(2)).await;
    assert_eq!(summary["text"], "summary by the configured summarizer");
}

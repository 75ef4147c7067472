//! Memory in Gnosari team files (`config.enable_memory`): each agent's
//! memory is its caller's, within its own team.

use serde_json::{Value, json};

use crate::credentials::ALICE_KEY;
use crate::support::TestServer;
use crate::teams::{try_connect, turn};

/// Two team files whose agents share the id `helper`, both with
/// `config.enable_memory`.
fn memory_team(id: &str) -> String {
    format!(
        "id: {id}\nconfig: {{enable_memory: true}}\nagents:\n  - id: helper\n    instructions: You help travellers with their seats.\n"
    )
}

const MEMORY_SCENARIOS: &str = r#"      remember:
        turns:
          1: {tool_calls: [{name: memory__remember, arguments: {content: "prefers window seats"}}]}
          2: "Noted: {{last_tool_result}}"
      recall:
        turns:
          1: {tool_calls: [{name: memory__recall, arguments: {query: "window seats"}}]}
          2: "Recalled: {{last_tool_result}}"
"#;

/// The JSON the team's agent quoted after `prefix` in its last words.
async fn team_says(server: &TestServer, path: &str, bearer: &str, scenario: &str) -> Value {
    let header = format!("Bearer {bearer}");
    let mut client = try_connect(server, path, &[("Authorization", &header)])
        .await
        .expect("admitted");
    let frame = json!({"message": "seats", "metadata": {"mock_scenario": scenario}});
    let events = turn(&mut client, frame).await;
    let done = events
        .iter()
        .find(|e| e["type"] == "agent_completed")
        .unwrap();
    let text = done["full_response"]
        .as_str()
        .unwrap_or_else(|| panic!("{done}"));
    let (_, quoted) = text.split_once(": ").unwrap();
    serde_json::from_str(quoted).unwrap_or_else(|_| panic!("{text}"))
}

#[tokio::test]
async fn a_team_files_agents_remember_for_their_caller_within_their_team() {
    let dir = tempfile::tempdir().unwrap();
    let mut teams = String::new();
    for id in ["one", "two"] {
        let file = dir.path().join(format!("{id}.yaml"));
        std::fs::write(&file, memory_team(id)).unwrap();
        teams.push_str(&format!(
            "  - {{file: \"{}\", provider: team-mock}}\n",
            file.display()
        ));
    }
    let top_level = format!(
        "{}\nproviders:\n  - name: team-mock\n    type: mock\n    scenarios:\n{MEMORY_SCENARIOS}teams:\n{teams}",
        crate::credentials::auth_yaml()
    );
    let server = TestServer::with_runtime(&top_level, "").await;
    let noted = team_says(&server, "/ws/team/one", ALICE_KEY, "remember").await;
    assert_eq!(noted["status"], "remembered", "{noted}");
    let found = team_says(&server, "/ws/team/one", ALICE_KEY, "recall").await;
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["memories"][0]["scope"]["agent_id"], "one/helper");
    // The other team's `helper` is another agent; Bob is another caller.
    let elsewhere = team_says(&server, "/ws/team/two", ALICE_KEY, "recall").await;
    assert_eq!(elsewhere["count"], 0, "{elsewhere}");
    let bob = crate::credentials::token("bob", 600);
    let stranger = team_says(&server, "/ws/team/one", &bob, "recall").await;
    assert_eq!(stranger["count"], 0, "{stranger}");
}

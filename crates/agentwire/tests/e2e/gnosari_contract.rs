//! The Gnosari contract as its own client example sees it. That client
//! shows only `token`s, so they must add up to `full_response` for every
//! turn of every handler (behaviour notes §5.10); a delegate's run is not
//! streamed, its answer is the call's `tool_result` (§5.18); and since the
//! example always sends `?token=…`, a credential that does not validate is
//! ignored on a public agent (§5.2), while `/ws` keeps refusing it.

use serde_json::{Value, json};

use crate::credentials::{ALICE_KEY, auth_yaml, token};
use crate::support::{Client, TestServer};

/// A mock model: by default a reply long enough to stream in several
/// chunks; under `ask`, text before a tool round (a delegation to the demo
/// agent, which streams its own reply word by word) and a last round that
/// quotes the delegate.
const MODEL: &str = r#"
providers:
  - name: scripted
    type: mock
    default_response: "A modelled answer, long enough to stream in several chunks."
    scenarios:
      ask:
        turns:
          1:
            content: "Let me ask the demo agent. "
            tool_calls:
              - name: delegate_agent
                arguments: {target_agent: demo, message: "hello"}
          2: "The demo agent said: {{last_tool_result}}"
"#;

const MODEL_AGENT: &str = "  - name: modelled
    handler: runtime
    provider: scripted
    instructions: Answer.
    delegations: [demo]
";

/// The demo agent's greeting, its answer to "hello".
const GREETING: &str = "Hello! I'm the agentwire demo agent. Ask me about the weather, or how to reset your password, and watch the tool calls stream by.";

async fn turn(client: &mut Client, frame: Value) -> Vec<Value> {
    client.send_json(frame).await;
    client.recv_gnosari_turn().await
}

/// What the contract's client displays (the tokens of the agent that
/// completed the turn, joined) and the turn's `full_response`.
fn shown_and_full_response(events: &[Value]) -> (String, String) {
    let done = events.last().unwrap();
    assert_eq!(done["type"], "agent_completed", "{events:#?}");
    let shown = events
        .iter()
        .filter(|e| e["type"] == "token" && e["agent_name"] == done["agent_name"])
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    (shown, done["full_response"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn every_handler_s_tokens_add_up_to_its_full_response() {
    let server = TestServer::with_runtime(MODEL, MODEL_AGENT).await;
    let mut cases: Vec<(&str, Value)> = Vec::new();
    for ask in [
        "what's the weather?",
        "reset my password",
        "hello",
        "tell me a joke",
        "show image",
        "play audio",
        "play video",
        "send pdf",
        "multimodal",
    ] {
        cases.push(("demo", json!({"message": ask})));
    }
    cases.push(("echo", json!({"message": "hello there"})));
    for script in [
        "echo",
        "stream",
        "chunk-done",
        "parts",
        "history",
        "server-tool",
        "client-tool",
        "binary-media",
        "interrupt",
        "session-config",
    ] {
        cases.push((
            "test-agent",
            json!({"message": "hi", "metadata": {"mock_scenario": script}}),
        ));
    }
    cases.push(("modelled", json!({"message": "hi"})));
    cases.push((
        "modelled",
        json!({"message": "hi", "metadata": {"mock_scenario": "ask"}}),
    ));

    let mut answers = Vec::new();
    for (agent, frame) in cases {
        let mut client = server.connect_gnosari(agent).await;
        let events = turn(&mut client, frame.clone()).await;
        let (shown, full_response) = shown_and_full_response(&events);
        assert_eq!(shown, full_response, "{agent} {frame}: {events:#?}");
        assert!(
            events
                .iter()
                .all(|e| e["agent_name"] == events.last().unwrap()["agent_name"]),
            "one agent answers: {events:#?}"
        );
        answers.push(full_response);
    }
    // The answers the contract's client never showed before.
    assert!(
        answers[0].contains("It's 72°F and sunny in Denver"),
        "{answers:?}"
    );
    assert!(answers[1].contains("Settings → Security"), "{answers:?}");
    assert_eq!(answers[9], "Echo: hello there");
    assert_eq!(answers[12], "chunk1done", "the reply follows its chunk");
    assert_eq!(
        answers[20],
        "A modelled answer, long enough to stream in several chunks."
    );
    assert_eq!(
        answers[21],
        format!("Let me ask the demo agent. The demo agent said: {GREETING}"),
        "the text before the tools and the last round's"
    );
}

#[tokio::test]
async fn a_delegate_s_run_is_not_streamed_and_its_answer_is_the_tool_result() {
    let server = TestServer::with_runtime(MODEL, MODEL_AGENT).await;
    let mut client = server.connect_gnosari("modelled").await;
    let events = turn(
        &mut client,
        json!({"message": "hi", "metadata": {"mock_scenario": "ask"}}),
    )
    .await;
    assert!(
        events.iter().all(|e| e["agent_name"] == "modelled"),
        "no event of the delegate's own: {events:#?}"
    );
    let call = events
        .iter()
        .position(|e| e["type"] == "tool_call")
        .expect("the delegation's call");
    assert_eq!(
        events[call],
        json!({"type": "tool_call", "tool_name": "delegate_agent", "args": {"target_agent": "demo", "message": "hello"}, "agent_name": "modelled"})
    );
    assert_eq!(
        events[call + 1],
        json!({"type": "tool_result", "tool_name": "delegate_agent", "result": GREETING, "agent_name": "modelled"}),
        "the result follows its call, with nothing between: {events:#?}"
    );
    let tokens: String = events
        .iter()
        .filter(|e| e["type"] == "token")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        tokens.matches(GREETING).count(),
        1,
        "the greeting shows once, quoted by the orchestrator: {tokens}"
    );
    let (shown, full_response) = shown_and_full_response(&events);
    assert_eq!(shown, full_response);
}

const OPEN_AGENT: &str = "  - name: open
    handler: echo
    access_level: public
";

#[tokio::test]
async fn a_bad_credential_on_a_public_agent_is_ignored_and_the_visitor_is_anonymous() {
    let server = TestServer::with_runtime(&auth_yaml(), OPEN_AGENT).await;
    let expired = token("carol", -60);
    let bad_queries = [
        // The contract's client example, as written.
        "open?token=jwt-token-here".to_owned(),
        format!("open?token={expired}"),
        "open?api_key=ak_nobody_0123456789".to_owned(),
        "open?password=guess".to_owned(),
    ];
    for query in &bad_queries {
        let mut client = server
            .try_connect_gnosari(query, &[])
            .await
            .unwrap_or_else(|refused| panic!("{query}: {refused:?}"));
        let events = turn(&mut client, json!({"message": "hi"})).await;
        assert_eq!(
            events.last().unwrap()["full_response"],
            "Echo: hi",
            "{query}"
        );
    }
    let bearer = format!("Bearer {expired}");
    for header in [
        ("Authorization", bearer.as_str()),
        ("X-AUTH-TOKEN", "ak_nobody_0123456789"),
        ("X-Access-Password", "guess"),
    ] {
        assert!(
            server.try_connect_gnosari("open", &[header]).await.is_ok(),
            "{header:?}"
        );
    }

    // Anonymous: the session resumes without a credential, and is a
    // stranger's to Alice.
    let mut visitor = server.connect_gnosari("open?token=jwt-token-here").await;
    let first = turn(&mut visitor, json!({"message": "first"})).await;
    let session = first[0]["session_id"].as_str().unwrap().to_owned();
    let mut anonymous = server.connect_gnosari("open").await;
    let resumed = turn(
        &mut anonymous,
        json!({"message": "again", "session_id": session}),
    )
    .await;
    assert_eq!(
        resumed.last().unwrap()["full_response"],
        "Echo: again",
        "{resumed:?}"
    );
    let mut alice = server
        .connect_gnosari(&format!("open?api_key={ALICE_KEY}"))
        .await;
    let refused = turn(
        &mut alice,
        json!({"message": "mine?", "session_id": session}),
    )
    .await;
    assert_eq!(refused.last().unwrap()["error"], "session not found");

    // A private agent still refuses it; `/ws` refuses it everywhere.
    let unauthorized = Some((401, "unauthorized\n".to_owned()));
    assert_eq!(
        server
            .try_connect_gnosari("echo?token=jwt-token-here", &[])
            .await
            .err(),
        unauthorized
    );
    assert_eq!(
        server
            .try_connect_with("agent=open", &[("Authorization", "Bearer jwt-token-here")])
            .await
            .err(),
        unauthorized
    );
}

//! The demo agent's keyword replies.

use crate::support::TestServer;

#[tokio::test]
async fn weather_streams_then_shows_its_simulated_tool() {
    let server = TestServer::start().await;
    let (mut client, connected) = server.connect("agent=demo").await;
    client.say("What's the weather like?").await;
    let frames = client.recv_turn().await;
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "chunk",
            "chunk",
            "chunk",
            "chunk",
            "tool_call",
            "tool_result",
            "done"
        ]
    );
    let chunks: String = frames[..4]
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert_eq!(chunks, "Checking the weather for you...");
    assert_eq!(frames[4]["tool_call"]["id"], "call_002");
    assert_eq!(frames[4]["tool_call"]["name"], "weather");
    assert_eq!(
        frames[4]["tool_call"]["arguments"]["location"],
        "Denver, CO"
    );
    assert_eq!(frames[5]["tool_result"]["id"], "call_002");
    assert_eq!(frames[5]["tool_result"]["result"]["temperature"], "72°F");
    let done = frames.last().unwrap();
    assert!(
        done["content"]
            .as_str()
            .unwrap()
            .starts_with("Checking the weather for you...")
    );
    for frame in &frames {
        assert_eq!(frame["session_id"], connected["session_id"]);
    }
}

#[tokio::test]
async fn password_looks_up_the_user() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=demo").await;
    client.say("How do I reset my password?").await;
    let frames = client.recv_turn().await;
    let call = frames.iter().find(|f| f["type"] == "tool_call").unwrap();
    assert_eq!(call["tool_call"]["id"], "call_001");
    assert_eq!(call["tool_call"]["name"], "lookup-user");
    assert_eq!(call["tool_call"]["arguments"]["email"], "user@example.com");
    let result = frames.iter().find(|f| f["type"] == "tool_result").unwrap();
    assert_eq!(result["tool_result"]["result"]["found"], true);
    let done = frames.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(done.starts_with("I can help you reset your password. Let me look up your account..."));
}

#[tokio::test]
async fn greeting_streams_word_by_word_and_done_has_the_full_text() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=demo").await;
    client.say("hello there").await;
    let frames = client.recv_turn().await;
    let (chunks, done) = frames.split_at(frames.len() - 1);
    assert!(chunks.len() > 3);
    assert_eq!(chunks[1]["content"], " ", "a word, then a space");
    let streamed: String = chunks
        .iter()
        .map(|f| f["content"].as_str().unwrap())
        .collect();
    assert_eq!(done[0]["type"], "done");
    assert_eq!(done[0]["content"], streamed.as_str());
}

#[tokio::test]
async fn anything_else_quotes_the_input() {
    let server = TestServer::start().await;
    let (mut client, _) = server.connect("agent=demo").await;
    client.say("tell me a joke").await;
    let frames = client.recv_turn().await;
    let done = frames.last().unwrap();
    assert!(
        done["content"]
            .as_str()
            .unwrap()
            .contains("\"tell me a joke\""),
        "{done}"
    );
}

/// `data` decoded as strictly as a browser's `atob`: the standard alphabet,
/// canonical padding, no stray bits.
fn strict(data: &serde_json::Value) -> Vec<u8> {
    use base64::Engine as _;
    let text = data.as_str().expect("base64 text");
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("{} characters that do not decode: {e}", text.len()))
}

#[tokio::test]
async fn every_media_part_of_every_script_decodes_strictly() {
    let server = TestServer::start().await;
    let (mut demo, _) = server.connect("agent=demo").await;
    let mut kinds = Vec::new();
    for ask in [
        "show image",
        "play audio",
        "play video",
        "send pdf",
        "multimodal",
    ] {
        demo.say(ask).await;
        let done = demo.recv_turn().await.pop().unwrap();
        assert_eq!(done["type"], "done", "{done}");
        let parts = done["parts"].as_array().expect("parts");
        let media: Vec<&serde_json::Value> = parts.iter().filter_map(|p| p.get("media")).collect();
        assert!(!media.is_empty(), "{ask}: {done}");
        for media in media {
            let bytes = strict(&media["data"]);
            assert_eq!(
                media["size_bytes"],
                bytes.len(),
                "{ask}: size_bytes is the decoded size"
            );
            kinds.push(media["mime_type"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(
        kinds,
        [
            "image/png",
            "audio/mpeg",
            "video/mp4",
            "application/pdf",
            "image/png",
            "audio/mpeg"
        ]
    );

    // The test agent's media scripts, as JSON `media_chunk`s.
    let (mut test, _) = server.connect("agent=test-agent").await;
    for (script, len) in [
        ("binary-media", 15),
        ("small-media", 1_048_575),
        ("threshold-media", 1_048_576),
        ("over-threshold-media", 1_048_577),
        ("big-media", 1_081_344),
    ] {
        test.script(script, "x").await;
        let frames = test.recv_turn().await;
        let chunks: Vec<&serde_json::Value> = frames
            .iter()
            .filter(|f| f["type"] == "media_chunk")
            .collect();
        assert!(!chunks.is_empty(), "{script}: {frames:?}");
        let decoded: usize = chunks
            .iter()
            .map(|f| strict(&f["media_chunk"]["data"]).len())
            .sum();
        assert_eq!(decoded, len, "{script}");
    }
}

//! Gnosari attachments: `POST /assets` (multipart), then a message that
//! names the asset. The stored message keeps a marker, never a URL or the
//! bytes; every refusal is an `error` event that runs no turn and stores
//! nothing. A model behind a fake OpenAI-compatible API receives the image
//! resolved afresh for every call: inline from a local store, a presigned
//! URL from S3 (moto).

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::fake_http::{Answer, FakeHttp, openai_model, openai_text, openai_tool_call};
use crate::support::{Client, HttpResponse, TestServer, http_url, s3_bucket, stored_messages};

const ALICE: &str = "ak_assets_alice_0123456789";
const BOB: &str = "ak_assets_bob_0123456789";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really a png";

fn digest(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server with local media and two API keys.
async fn server(media: &tempfile::TempDir) -> TestServer {
    server_with(&local_media(media), "", "").await
}

/// The `storage.media` lines of a local store in `media`.
fn local_media(media: &tempfile::TempDir) -> String {
    format!(
        "  media:\n    backend: local\n    path: {}\n    max_bytes: 1024\n",
        media.path().display()
    )
}

/// A server with the `storage.media` lines `media`, two API keys, the
/// top-level sections `top_level` and the extra agents `agents`.
async fn server_with(media: &str, top_level: &str, agents: &str) -> TestServer {
    let top_level = format!(
        "{media}auth:\n  api_keys:\n    - id: a\n      sha256: {}\n      subject: alice\n    - id: b\n      sha256: {}\n      subject: bob\n{top_level}",
        digest(ALICE),
        digest(BOB)
    );
    TestServer::with_runtime(&top_level, agents).await
}

/// A multipart body built by hand: the `session_id` field, then `file`.
fn multipart(session: &str, mime: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----agentwire-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"session_id\"\r\n\r\n{session}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"pic.png\"\r\nContent-Type: {mime}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(
    server: &TestServer,
    auth: &[(&str, &str)],
    session: &str,
    mime: &str,
    bytes: &[u8],
) -> HttpResponse {
    let (content_type, body) = multipart(session, mime, bytes);
    let mut headers = vec![("Content-Type", content_type.as_str())];
    headers.extend_from_slice(auth);
    server.http("POST", "/assets", &headers, &body).await
}

async fn uploaded(server: &TestServer, auth: &[(&str, &str)], session: &str) -> String {
    let response = upload(server, auth, session, "image/png", PNG).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["session_id"], session);
    assert_eq!(answer["filename"], "pic.png");
    assert_eq!(answer["mime_type"], "image/png");
    assert_eq!(answer["size_bytes"], PNG.len());
    // The answer is the one `/openapi.json` documents.
    let (_, document) = server.get("/openapi.json").await;
    let document: Value = serde_json::from_str(&document).unwrap();
    crate::functions::assert_matches(&document, "/components/schemas/Asset", &answer);
    let id = answer["asset_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(id.matches('-').count(), 4, "a UUID: {id}");
    id
}

async fn connect(server: &TestServer, agent: &str, key: &str) -> Client {
    server
        .try_connect_gnosari(agent, &[("X-AUTH-TOKEN", key)])
        .await
        .expect("upgrade accepted")
}

#[tokio::test]
async fn an_uploaded_image_reaches_the_agent_and_is_stored_as_a_marker() {
    let media = tempfile::tempdir().unwrap();
    let server = server(&media).await;
    let bearer = format!("Bearer {ALICE}");
    let asset = uploaded(&server, &[("Authorization", &bearer)], "s-att").await;

    let mut client = connect(&server, "test-agent", ALICE).await;
    client
        .send_json(json!({
            "message": "what is in this picture?", "session_id": "s-att",
            "attachments": [asset], "metadata": {"mock_scenario": "parts"}
        }))
        .await;
    let events = client.recv_gnosari_turn().await;
    assert_eq!(events[0]["type"], "agent_started", "{events:?}");
    assert_eq!(events[0]["session_id"], "s-att");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "agent_completed", "{events:?}");
    assert_eq!(done["full_response"], "I see your image");

    // The stored user message: the marker and a storage reference, no URL,
    // no bytes.
    let conn = rusqlite::Connection::open(&server.db_path).unwrap();
    let (parts, metadata): (String, String) = conn
        .query_row(
            "SELECT parts, metadata FROM messages
             WHERE session_key = (SELECT key FROM sessions WHERE id = 's-att') AND role = 'user'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let metadata: Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(metadata["gnosari_asset_id"], asset.as_str());
    assert!(parts.contains("omnia://sessions/s-att/media/"), "{parts}");
    assert!(!parts.contains("http"), "no URL is stored: {parts}");
    assert!(!parts.contains("\"data\""), "no bytes are stored: {parts}");

    // A second turn on the session runs with the marked message in its
    // history (what a model is sent of it: see the tests below).
    client
        .send_json(json!({"message": "and again?", "session_id": "s-att", "metadata": {"mock_scenario": "echo"}}))
        .await;
    let events = client.recv_gnosari_turn().await;
    assert_eq!(events.last().unwrap()["type"], "agent_completed");

    // The sessions API shows neither the marker nor the media part.
    let response = server
        .http(
            "GET",
            "/api/v1/sessions/s-att/messages",
            &[("X-AUTH-TOKEN", ALICE)],
            b"",
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());
    let text = response.text();
    assert!(!text.contains("gnosari_asset_id"), "{text}");
    assert!(!text.contains(&asset), "{text}");
    assert!(!text.contains("omnia://"), "{text}");
}

#[tokio::test]
async fn upload_failures() {
    let media = tempfile::tempdir().unwrap();
    let server = server(&media).await;
    let alice = [("X-AUTH-TOKEN", ALICE)];
    let status = |r: HttpResponse| (r.status, r.text());
    assert_eq!(
        status(upload(&server, &alice, "s-u", "text/plain", b"hello").await),
        (415, "unsupported media type\n".to_owned())
    );
    assert_eq!(
        upload(&server, &alice, "s-u", "image/png", &[7; 2048])
            .await
            .status,
        413
    );
    assert_eq!(
        upload(
            &server,
            &[("X-AUTH-TOKEN", "ak_wrong")],
            "s-u",
            "image/png",
            PNG
        )
        .await
        .status,
        401
    );
    let response = server
        .http("POST", &format!("/assets?api_key={ALICE}"), &[], b"")
        .await;
    assert_eq!(response.status, 400, "not multipart: {}", response.text());
    // `?api_key=` is a credential form too.
    let (content_type, body) = multipart("s-u", "image/png", PNG);
    let response = server
        .http(
            "POST",
            &format!("/assets?api_key={ALICE}"),
            &[("Content-Type", &content_type)],
            &body,
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text());

    // Without media storage the route is off.
    let plain = TestServer::start().await;
    let (content_type, body) = multipart("s-u", "image/png", PNG);
    let response = plain
        .http("POST", "/assets", &[("Content-Type", &content_type)], &body)
        .await;
    assert_eq!(
        (response.status, response.text()),
        (404, "media storage is not enabled\n".to_owned())
    );
}

#[tokio::test]
async fn unauthenticated_uploads_are_refused_when_not_allowed() {
    let media = tempfile::tempdir().unwrap();
    let server = TestServer::with_storage_yaml(
        "  allow_unauthenticated: false\n",
        &format!(
            "  media:\n    backend: local\n    path: {}\n",
            media.path().display()
        ),
    )
    .await;
    assert_eq!(
        upload(&server, &[], "s-x", "image/png", PNG).await.status,
        401
    );
}

#[tokio::test]
async fn bad_attachments_are_error_events_and_nothing_runs() {
    let media = tempfile::tempdir().unwrap();
    let server = server(&media).await;
    let alice_asset = uploaded(&server, &[("X-AUTH-TOKEN", ALICE)], "s-a").await;
    let other_session_asset = uploaded(&server, &[("X-AUTH-TOKEN", ALICE)], "s-other").await;
    let bob_asset = uploaded(&server, &[("X-AUTH-TOKEN", BOB)], "s-a2").await;
    let mut client = connect(&server, "test-agent", ALICE).await;
    // Frames the contract does not allow, sent as they are.
    let malformed = [
        (
            json!({"message": "m", "client_message_id": "c", "attachments": [alice_asset]}),
            "attachments require a session_id",
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s-a", "attachments": [alice_asset, alice_asset]}),
            "only one attachment per message is supported",
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s-a", "attachments": ["not-a-uuid"]}),
            "attachment is not a valid asset id",
        ),
    ];
    for (frame, error) in malformed {
        client.send_invalid_json(frame.clone()).await;
        assert_refused(&mut client, &frame, error).await;
    }
    // Well-formed frames naming assets this caller and session cannot use.
    let unusable = [
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s-a", "attachments": ["00000000-0000-4000-8000-000000000000"]}),
            "attachment not found",
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s-a", "attachments": [other_session_asset]}),
            "attachment not found",
        ),
        (
            json!({"message": "m", "client_message_id": "c", "session_id": "s-a2", "attachments": [bob_asset]}),
            "attachment not found",
        ),
    ];
    for (frame, error) in unusable {
        client.send_json(frame.clone()).await;
        assert_refused(&mut client, &frame, error).await;
    }
    assert!(
        stored_messages(&server.db_path).is_empty(),
        "nothing stored for refused messages"
    );
    // The socket stays open and usable.
    client
        .send_json(json!({"message": "still here", "session_id": "s-a", "attachments": []}))
        .await;
    let events = client.recv_gnosari_turn().await;
    assert_eq!(events.last().unwrap()["full_response"], "echo: still here");
}

/// The next event is the `error` refusing `frame` with `error`.
async fn assert_refused(client: &mut Client, frame: &Value, error: &str) {
    let event = client.recv_event().await;
    assert_eq!(event["type"], "error", "{frame}: {event}");
    assert_eq!(event["error"], error, "{frame}");
    assert_eq!(event["client_message_id"], "c", "{frame}");
}

/// A runtime agent with an OpenAI-compatible provider and the HTTP tool
/// `lookup` (see [`vision_config`]).
const VISION_AGENT: &str =
    "  - name: vision\n    handler: runtime\n    provider: fake-openai\n    tools: [lookup]\n";

/// The provider, on the fake API `model`, and the tool, on the fake API
/// `tool`, of [`VISION_AGENT`].
fn vision_config(model: &FakeHttp, tool: &FakeHttp) -> String {
    format!(
        r#"providers:
  - name: fake-openai
    type: openai
    base_url: http://{}/v1
    model: gpt-4o-mini
tools:
  - name: lookup
    type: http
    description: Looks a word up
    parameters: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
    request:
      method: GET
      url: "http://{}/lookup/{{{{q}}}}"
"#,
        model.addr, tool.addr
    )
}

/// A lookup API and a model that looks a word up, then answers, then
/// answers again.
async fn vision_fakes() -> (FakeHttp, FakeHttp) {
    let tool = FakeHttp::start(|_, _| Answer::json(r#"{"label":"cat"}"#)).await;
    let model = openai_model(vec![
        openai_tool_call("call_Lk3Qe8xV", "lookup", &json!({"q": "whiskers"})),
        openai_text("It is a cat."),
        openai_text("Still the same cat."),
    ])
    .await;
    (model, tool)
}

/// Sends the picture question with `asset` on `session` and checks the
/// turn: the tool round, then the answer. The model was asked twice.
async fn ask_about_the_picture(client: &mut Client, session: &str, asset: &str) {
    client
        .send_json(json!({
            "message": "what is in this picture?", "session_id": session, "attachments": [asset]
        }))
        .await;
    let events = client.recv_gnosari_turn().await;
    let result = events.iter().find(|e| e["type"] == "tool_result");
    assert_eq!(
        result.map(|e| &e["result"]),
        Some(&json!({"label": "cat"})),
        "{events:?}"
    );
    let done = events.last().unwrap();
    assert_eq!(done["type"], "agent_completed", "{events:?}");
    assert_eq!(done["full_response"], "It is a cat.");
}

/// The image part of the first user message the model was sent.
fn image_part(request: &Value) -> &Value {
    let user = &request["messages"][0];
    assert_eq!(user["role"], "user", "{request}");
    assert_eq!(
        user["content"][0],
        json!({"type": "text", "text": "what is in this picture?"})
    );
    &user["content"][1]
}

/// Every stored message's content, parts and metadata, as stored.
fn stored_columns(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT content || ' ' || ifnull(parts, '') || ' ' || ifnull(metadata, '') FROM messages ORDER BY seq")
        .unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn the_model_receives_the_image_inline_on_every_call_and_storage_keeps_the_marker() {
    let media = tempfile::tempdir().unwrap();
    let (model, tool) = vision_fakes().await;
    let server = server_with(
        &local_media(&media),
        &vision_config(&model, &tool),
        VISION_AGENT,
    )
    .await;
    let asset = uploaded(&server, &[("X-AUTH-TOKEN", ALICE)], "s-vision").await;
    let mut client = connect(&server, "vision", ALICE).await;
    ask_about_the_picture(&mut client, "s-vision", &asset).await;

    let encoded = base64::engine::general_purpose::STANDARD.encode(PNG);
    let image = json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{encoded}")}});
    let requests = model.requests().await;
    assert_eq!(requests.len(), 2, "the tool call, then the answer");
    for request in &requests {
        assert_eq!(request.request_line, "POST /v1/chat/completions HTTP/1.1");
        assert_eq!(
            image_part(&request.json()),
            &image,
            "every call of the tool loop"
        );
    }
    let second = requests[1].json();
    assert_eq!(
        second["messages"][1]["tool_calls"][0]["function"]["name"],
        "lookup"
    );
    assert_eq!(second["messages"][2]["role"], "tool");

    // The next turn sends the image again, resolved from the history.
    client
        .send_json(json!({"message": "are you sure?", "session_id": "s-vision"}))
        .await;
    let events = client.recv_gnosari_turn().await;
    assert_eq!(
        events.last().unwrap()["full_response"],
        "Still the same cat."
    );
    let third = model.requests().await[2].json();
    assert_eq!(image_part(&third), &image);
    let messages = third["messages"].as_array().unwrap();
    assert_eq!(
        messages.last().unwrap(),
        &json!({"role": "user", "content": "are you sure?"})
    );

    // Storage holds the marker and the reference only: no bytes, no URL.
    let rows = stored_columns(&server.db_path);
    assert_eq!(rows.len(), 6, "user, call, result, answer, user, answer");
    assert!(
        rows[0].contains("omnia://sessions/s-vision/media/"),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains(&format!("\"gnosari_asset_id\":\"{asset}\"")),
        "{}",
        rows[0]
    );
    for row in &rows {
        assert!(
            !row.contains(&encoded) && !row.contains("data:image"),
            "{row}"
        );
    }
}

#[tokio::test]
async fn assets_are_stored_on_s3_and_every_model_call_gets_a_presigned_url() {
    let Some((endpoint, bucket)) = s3_bucket().await else {
        return;
    };
    let (model, tool) = vision_fakes().await;
    let storage = format!(
        "  media:\n    backend: s3\n    endpoint: {endpoint}\n    bucket: {bucket}\n    region: us-east-1\n    max_bytes: 1024\n"
    );
    let server = server_with(&storage, &vision_config(&model, &tool), VISION_AGENT).await;
    let asset = uploaded(&server, &[("X-AUTH-TOKEN", ALICE)], "s-s3").await;
    let mut client = connect(&server, "vision", ALICE).await;
    ask_about_the_picture(&mut client, "s-s3", &asset).await;

    let media_id = asset.replace('-', "");
    let requests = model.requests().await;
    assert_eq!(requests.len(), 2, "the tool call, then the answer");
    for request in &requests {
        let body = request.json();
        let image = image_part(&body);
        assert_eq!(image["type"], "image_url", "{body}");
        let url = image["image_url"]["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("{endpoint}/{bucket}/sessions/s-s3/{media_id}?")),
            "{url}"
        );
        assert!(url.contains("X-Amz-Signature="), "{url}");
        let fetched = http_url("GET", url, &[], b"").await;
        assert_eq!(fetched.status, 200, "{}", fetched.text());
        assert!(fetched.body == PNG, "the presigned URL serves the upload");
    }
    for row in stored_columns(&server.db_path) {
        assert!(!row.contains("X-Amz") && !row.contains(&endpoint), "{row}");
    }
}

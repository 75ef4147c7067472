//! `a2a` tools: a remote agent, reached over A2A (v1.0, JSON-RPC
//! binding), as one tool the model calls with a message.
//!
//! The agent's card is fetched when the tool is first opened and checked:
//! it must offer the JSON-RPC binding at protocol version 1.0, on the
//! card's own origin (a card cannot send our credentials elsewhere). A call
//! streams (`SendStreamingMessage`) when the card says the agent streams,
//! so a long remote run is not cut by a read timeout, and reads the events
//! to the task's end; a call given up (the turn cancelled, the timeout)
//! cancels the remote task (`CancelTask`).

use std::sync::Arc;
use std::time::Duration;

use agentwire_core::{ToolBox, ToolSource, ToolSpec};
use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::DEFAULT_TIMEOUT;

/// The most of a card, or of one answer, read.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A remote A2A agent as a tool, as the config describes it. `Debug`
/// leaves out header values (credentials).
#[derive(Clone)]
pub struct A2aToolSettings {
    /// The tool's name as the model sees it.
    pub name: String,
    /// For the model; default: the card's description.
    pub description: Option<String>,
    /// The agent's base URL (its card at `<url>/.well-known/agent-card.json`),
    /// or the card's own URL (ending `.json`).
    pub url: String,
    /// Sent with every request (such as `Authorization`).
    pub headers: Vec<(String, String)>,
    /// For the whole call, the card's fetch included.
    pub timeout: Duration,
}

impl A2aToolSettings {
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> A2aToolSettings {
        A2aToolSettings {
            name: name.into(),
            description: None,
            url: url.into(),
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for A2aToolSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("A2aToolSettings")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("headers", &header_names)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Builds an A2A tool. Checks the URL and headers now; the card is
/// fetched (and checked) when the tool is first opened.
pub fn a2a_agent(settings: A2aToolSettings) -> Result<Arc<dyn ToolSource>, String> {
    let problem = |p: String| format!("a2a tool \"{}\": {p}", settings.name);
    let card_url = card_url(&settings.url).map_err(problem)?;
    let headers = header_map(&settings.headers).map_err(problem)?;
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| problem(format!("cannot build its HTTP client: {e}")))?;
    Ok(Arc::new(A2aSource {
        settings,
        card_url,
        client,
        tool: OnceCell::new(),
    }))
}

fn card_url(url: &str) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|_| "url is not a URL".to_owned())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("url must be http:// or https://".to_owned());
    }
    if parsed.path().ends_with(".json") {
        return Ok(parsed);
    }
    let base = format!("{}/", url.trim_end_matches('/'));
    Url::parse(&base)
        .and_then(|b| b.join(".well-known/agent-card.json"))
        .map_err(|_| "url is not a URL".to_owned())
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("header {name:?} is not a header name"))?;
        let mut value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("header {name:?} has a value that is not a header value"))?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    map.insert("a2a-version", HeaderValue::from_static("1.0"));
    Ok(map)
}

struct A2aSource {
    settings: A2aToolSettings,
    card_url: Url,
    client: reqwest::Client,
    /// The tool, once its card was read; a failed read is tried again at
    /// the next open.
    tool: OnceCell<Arc<A2aTool>>,
}

#[async_trait]
impl ToolSource for A2aSource {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn kind(&self) -> &'static str {
        "a2a"
    }

    async fn open(&self) -> Result<Arc<dyn ToolBox>, String> {
        let tool = self
            .tool
            .get_or_try_init(|| async {
                let card = tokio::time::timeout(self.settings.timeout, self.fetch_card())
                    .await
                    .map_err(|_| "the agent card did not come in time".to_owned())??;
                Ok::<_, String>(Arc::new(self.tool_from(card)?))
            })
            .await
            .map_err(|e| format!("a2a tool \"{}\": {e}", self.settings.name))?;
        Ok(tool.clone() as Arc<dyn ToolBox>)
    }
}

impl A2aSource {
    async fn fetch_card(&self) -> Result<Value, String> {
        let response = self
            .client
            .get(self.card_url.clone())
            .send()
            .await
            .map_err(|e| format!("cannot fetch the agent card: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!(
                "the agent card answered {}",
                response.status().as_u16()
            ));
        }
        let bytes = read_capped(response).await?;
        serde_json::from_slice(&bytes).map_err(|_| "the agent card is not JSON".to_owned())
    }

    /// The tool the card describes: its JSON-RPC 1.0 endpoint, on the
    /// card's origin.
    fn tool_from(&self, card: Value) -> Result<A2aTool, String> {
        let endpoint = card["supportedInterfaces"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| {
                i["protocolBinding"] == "JSONRPC"
                    && i["protocolVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with("1.0"))
            })
            .and_then(|i| i["url"].as_str())
            .ok_or("the agent card offers no JSON-RPC interface at A2A 1.0")?;
        let endpoint = Url::parse(endpoint).map_err(|_| "the card's interface URL is not a URL")?;
        if endpoint.origin() != self.card_url.origin() {
            return Err("the card's interface is on another origin than the card".to_owned());
        }
        let description = self
            .settings
            .description
            .clone()
            .unwrap_or_else(|| card["description"].as_str().unwrap_or_default().to_owned());
        Ok(A2aTool {
            specs: [ToolSpec {
                name: self.settings.name.clone(),
                description,
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "description": "What to ask the agent."},
                        "context_id": {"type": "string", "description": "Continue the conversation this id names (from an earlier answer)."}
                    },
                    "required": ["message"],
                }),
            }],
            endpoint,
            streaming: card["capabilities"]["streaming"] == true,
            client: self.client.clone(),
            timeout: self.settings.timeout,
        })
    }
}

async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading the answer failed: {}", e.without_url()))?
    {
        if bytes.len() + chunk.len() > MAX_BODY_BYTES {
            return Err("the answer is too large".to_owned());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

struct A2aTool {
    specs: [ToolSpec; 1],
    endpoint: Url,
    streaming: bool,
    client: reqwest::Client,
    timeout: Duration,
}

#[async_trait]
impl ToolBox for A2aTool {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    async fn call(&self, _name: &str, arguments: Value) -> Result<Value, String> {
        let message = arguments["message"].as_str().ok_or("message is required")?;
        let context = arguments["context_id"].as_str();
        let mut task = RemoteTask::new(self);
        let asked = tokio::time::timeout(self.timeout, task.ask(message, context)).await;
        match asked {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "the agent did not answer within {}",
                crate::format_duration(self.timeout)
            )),
        }
    }
}

/// One call's task at the remote agent: cancelled there if the call is
/// given up before the task ends.
struct RemoteTask<'a> {
    tool: &'a A2aTool,
    task_id: Option<String>,
    ended: bool,
    reply: String,
    context_id: Option<String>,
}

impl<'a> RemoteTask<'a> {
    fn new(tool: &'a A2aTool) -> RemoteTask<'a> {
        RemoteTask {
            tool,
            task_id: None,
            ended: false,
            reply: String::new(),
            context_id: None,
        }
    }

    async fn ask(&mut self, message: &str, context: Option<&str>) -> Result<Value, String> {
        let mut params = json!({"message": {
            "messageId": format!("agentwire-{}", uuid_like()),
            "role": "ROLE_USER",
            "parts": [{"text": message}],
        }});
        if let Some(context) = context {
            params["message"]["contextId"] = json!(context);
        }
        let method = match self.tool.streaming {
            true => "SendStreamingMessage",
            false => "SendMessage",
        };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = self
            .tool
            .client
            .post(self.tool.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| format!("the agent cannot be reached: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!(
                "the agent answered HTTP {}",
                response.status().as_u16()
            ));
        }
        match self.tool.streaming {
            true => self.read_events(response).await,
            false => {
                let answer: Value = serde_json::from_slice(&read_capped(response).await?)
                    .map_err(|_| "the agent's answer is not JSON")?;
                self.result(&answer)?;
                self.outcome()
            }
        }
    }

    /// Reads server-sent events until the stream ends.
    async fn read_events(&mut self, mut response: reqwest::Response) -> Result<Value, String> {
        let mut pending = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("the agent's stream broke: {}", e.without_url()))?
        {
            pending.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&pending) {
                let event: Vec<u8> = pending.drain(..end).collect();
                for line in event.split(|b| *b == b'\n') {
                    if let Some(data) = line.strip_prefix(b"data:") {
                        let answer: Value = serde_json::from_slice(data)
                            .map_err(|_| "the agent sent an event that is not JSON")?;
                        self.result(&answer)?;
                    }
                }
            }
            if pending.len() > MAX_BODY_BYTES {
                return Err("the agent sent an event too large".to_owned());
            }
        }
        self.outcome()
    }

    /// Takes in one JSON-RPC answer: a task, a message, or an event.
    fn result(&mut self, answer: &Value) -> Result<(), String> {
        if let Some(error) = answer.get("error") {
            let code = error["code"].as_i64().unwrap_or_default();
            return Err(format!(
                "the agent refused the message (JSON-RPC error {code})"
            ));
        }
        let result = &answer["result"];
        let (task, status, chunk) = (
            &result["task"],
            &result["statusUpdate"],
            &result["artifactUpdate"],
        );
        if let Some(id) = task["id"].as_str().or(status["taskId"].as_str()) {
            self.task_id.get_or_insert_with(|| id.to_owned());
        }
        let context = task["contextId"].as_str().or(status["contextId"].as_str());
        if let Some(context) = context {
            self.context_id.get_or_insert_with(|| context.to_owned());
        }
        for part in chunk["artifact"]["parts"].as_array().into_iter().flatten() {
            self.reply
                .push_str(part["text"].as_str().unwrap_or_default());
        }
        if let Some(message) = result.get("message") {
            self.ended = true;
            self.reply = text_of(message);
        }
        let state = task["status"]["state"]
            .as_str()
            .or(status["status"]["state"].as_str());
        match state {
            Some("TASK_STATE_COMPLETED") => {
                self.ended = true;
                if self.reply.is_empty() {
                    self.reply = text_of(&task["artifacts"][0]).to_owned();
                }
                Ok(())
            }
            Some("TASK_STATE_FAILED" | "TASK_STATE_REJECTED" | "TASK_STATE_CANCELED") => {
                self.ended = true;
                Err(format!(
                    "the agent's task ended {}",
                    state.unwrap_or_default()
                ))
            }
            Some("TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED") => {
                Err("the agent asked for input this tool cannot give".to_owned())
            }
            _ => Ok(()),
        }
    }

    fn outcome(&self) -> Result<Value, String> {
        if !self.ended {
            return Err("the agent's stream ended before its task did".to_owned());
        }
        Ok(json!({
            "reply": self.reply,
            "context_id": self.context_id,
            "task_id": self.task_id,
        }))
    }
}

impl Drop for RemoteTask<'_> {
    /// A task not ended is cancelled at the agent, in the background.
    fn drop(&mut self) {
        let (false, Some(task_id)) = (self.ended, self.task_id.take()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task_id},
        });
        let request = self
            .tool
            .client
            .post(self.tool.endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        runtime.spawn(async move {
            if let Err(e) = request.timeout(Duration::from_secs(10)).send().await {
                tracing::info!(error = %e.without_url(), "cancelling a remote A2A task failed");
            }
        });
    }
}

/// The text parts of a message or artifact, joined.
fn text_of(value: &Value) -> String {
    value["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// Where the first complete event in `bytes` ends (after its blank line).
fn find_event_end(bytes: &[u8]) -> Option<usize> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A message id unique enough for the remote agent's logs.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

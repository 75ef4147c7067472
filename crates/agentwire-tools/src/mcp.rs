//! `mcp` tools: the tools of a Model Context Protocol server, one session per
//! opened box.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::{ToolBox, ToolSource, ToolSpec};
use async_trait::async_trait;
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ContentBlock, Implementation,
    InitializeRequestParams, ProtocolVersion, ResourceContents, Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use crate::redact::Redactor;
use crate::schema::ArgumentSchema;
use crate::{DEFAULT_TIMEOUT, format_duration};

/// The variables a stdio server inherits from agentwire's environment (as the
/// MCP SDKs do); everything else it gets only from its `env`. The server's own
/// secrets (provider keys) are not handed to every MCP server.
const INHERITED_ENV: [&str; 10] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ",
];

/// Headers the streamable HTTP transport sets itself.
const RESERVED_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// How far one line of a server's stderr is logged.
const MAX_STDERR_LINE: usize = 1000;

/// How to reach an MCP server.
///
/// The `Debug` output leaves out environment and header values, which often
/// hold credentials.
#[derive(Clone)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout. It runs in its
    /// own process group, with `env` over a minimal inherited environment
    /// (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, `LANG`, `LC_ALL`,
    /// `TMPDIR`, `TZ`); its stderr is logged at `debug`.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP at `url`, sending `headers` with every request.
    /// Redirects are not followed.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpTransport::Stdio { command, args, env } => {
                let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
                f.debug_struct("Stdio")
                    .field("command", command)
                    .field("args", args)
                    .field("env", &names)
                    .finish()
            }
            McpTransport::Http { url, headers } => {
                let names: Vec<&str> = headers.iter().map(|(name, _)| name.as_str()).collect();
                let origin = reqwest::Url::parse(url)
                    .map(|url| url.origin().ascii_serialization())
                    .unwrap_or_default();
                f.debug_struct("Http")
                    .field("origin", &origin)
                    .field("headers", &names)
                    .finish()
            }
        }
    }
}

/// One MCP server, as the config describes it.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// The config's name for the server, for logs and errors.
    pub name: String,
    pub transport: McpTransport,
    /// For opening a session (start, initialize, list the tools) and for each
    /// tool call.
    pub timeout: Duration,
}

impl McpSettings {
    /// Settings with the [default timeout](DEFAULT_TIMEOUT).
    pub fn new(name: impl Into<String>, transport: McpTransport) -> McpSettings {
        McpSettings {
            name: name.into(),
            transport,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Builds the [`ToolSource`] of an MCP server. Nothing is started here: each
/// [`ToolSource::open`] starts (stdio) or connects (HTTP) one session,
/// initializes it and lists its tools; dropping the box closes the session.
///
/// Checks the settings up front and names the problem: an empty name or
/// command, an invalid URL, header or environment variable, a zero timeout.
pub fn mcp_server(settings: McpSettings) -> Result<Arc<dyn ToolSource>, String> {
    let name = settings.name.clone();
    let source =
        McpSource::new(settings).map_err(|problem| format!("mcp server \"{name}\": {problem}"))?;
    Ok(Arc::new(source))
}

enum Connect {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        url: String,
        headers: HashMap<HeaderName, HeaderValue>,
        client: reqwest::Client,
    },
}

/// Why an MCP session did not open; the text is the whole message, secrets
/// redacted.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The server's process could not be started (stdio).
    Spawn(String),
    /// The server started (or was reached) but did not initialize or list
    /// its tools.
    Protocol(String),
}

impl OpenError {
    pub(crate) fn into_message(self) -> String {
        match self {
            OpenError::Spawn(message) | OpenError::Protocol(message) => message,
        }
    }
}

pub(crate) struct McpSource {
    name: String,
    connect: Connect,
    timeout: Duration,
    redactor: Arc<Redactor>,
}

impl McpSource {
    pub(crate) fn new(settings: McpSettings) -> Result<McpSource, String> {
        let McpSettings {
            name,
            transport,
            timeout,
        } = settings;
        if name.trim().is_empty() {
            return Err("the name is empty".to_owned());
        }
        if timeout.is_zero() {
            return Err("timeout must be more than zero".to_owned());
        }
        let (connect, secrets) = match transport {
            McpTransport::Stdio { command, args, env } => {
                if command.trim().is_empty() {
                    return Err("command is empty".to_owned());
                }
                for (variable, _) in &env {
                    if variable.is_empty() || variable.contains(['=', '\0']) {
                        return Err(format!("env: \"{variable}\" is not a valid variable name"));
                    }
                }
                let secrets: Vec<String> = env.iter().map(|(_, value)| value.clone()).collect();
                (Connect::Stdio { command, args, env }, secrets)
            }
            McpTransport::Http { url, headers } => {
                let parsed = reqwest::Url::parse(&url)
                    .map_err(|error| format!("url is not a valid URL: {error}"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err("url must be http:// or https://".to_owned());
                }
                let mut secrets = Redactor::url_secrets(&url);
                let mut map = HashMap::new();
                for (header, value) in headers {
                    let header_name = HeaderName::from_bytes(header.trim().as_bytes())
                        .map_err(|_| format!("header \"{header}\" is not a valid header name"))?;
                    if RESERVED_HEADERS.contains(&header_name.as_str()) {
                        return Err(format!(
                            "header \"{header}\" is set by the MCP transport itself"
                        ));
                    }
                    // The value is not echoed: it may be a credential.
                    let header_value = HeaderValue::from_str(&value).map_err(|_| {
                        format!("header \"{header}\" has characters a header value cannot hold")
                    })?;
                    secrets.push(value);
                    map.insert(header_name, header_value);
                }
                let client = reqwest::Client::builder()
                    // A redirect would replay the session id and the
                    // headers elsewhere; don't follow any.
                    .redirect(reqwest::redirect::Policy::none())
                    // As rmcp's own client: no idle pooling, which stalls
                    // on Linux's delayed ACKs.
                    .pool_max_idle_per_host(0)
                    .build()
                    .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
                (
                    Connect::Http {
                        url,
                        headers: map,
                        client,
                    },
                    secrets,
                )
            }
        };
        Ok(McpSource {
            name,
            connect,
            timeout,
            redactor: Arc::new(Redactor::new(secrets)),
        })
    }

    /// Starts (or connects to) the server, initializes the session and
    /// lists the tools; not bounded in time (the caller bounds it).
    pub(crate) async fn start(&self) -> Result<McpToolBox, OpenError> {
        let session = self.initialize().await?;
        let tools = session.peer().list_all_tools().await.map_err(|error| {
            OpenError::Protocol(self.redactor.redact(format!(
                "could not list the tools of MCP server {}: {error}",
                self.name
            )))
        })?;
        let (specs, schemas) = tool_specs(&self.name, tools);
        Ok(McpToolBox {
            source: self.name.clone(),
            session,
            specs,
            schemas,
            timeout: self.timeout,
            redactor: self.redactor.clone(),
        })
    }

    /// Connects (or starts the server) and opens the MCP session.
    async fn initialize(&self) -> Result<Session, OpenError> {
        let name = &self.name;
        let client_info = InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("agentwire", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        match &self.connect {
            Connect::Stdio { command, args, env } => {
                let transport = self.spawn(command, args, env)?;
                client_info.serve(transport).await
            }
            Connect::Http {
                url,
                headers,
                client,
            } => {
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers.clone());
                let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
                client_info.serve(transport).await
            }
        }
        .map_err(|error| {
            OpenError::Protocol(
                self.redactor
                    .redact(format!("could not initialize MCP server {name}: {error}")),
            )
        })
    }

    /// Starts `command` with `args`, `env` over the inherited minimum, in a
    /// process group of its own; its stderr is logged.
    fn spawn(
        &self,
        command: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> Result<TokioChildProcess, OpenError> {
        let name = &self.name;
        let mut command_line = tokio::process::Command::new(command);
        command_line.args(args).env_clear();
        for variable in INHERITED_ENV {
            if let Some(value) = std::env::var_os(variable) {
                command_line.env(variable, value);
            }
        }
        command_line.envs(env.iter().map(|(k, v)| (k, v)));
        let mut wrapped = CommandWrap::from(command_line);
        // Its own process group, so that closing the session ends
        // whatever the command started (an `npx` wrapper's node);
        // killed if dropped before it is reaped.
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let (transport, stderr) = TokioChildProcess::builder(wrapped)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                OpenError::Spawn(format!(
                    "could not start MCP server {name} ({command}): {error}"
                ))
            })?;
        if let Some(stderr) = stderr {
            tokio::spawn(log_stderr(name.clone(), stderr));
        }
        Ok(transport)
    }
}

/// A session with an MCP server.
type Session = RunningService<RoleClient, InitializeRequestParams>;

/// The server's tools as the model sees them, and each one's compiled
/// argument schema (none, with a warning, when it does not compile).
fn tool_specs(
    source: &str,
    tools: Vec<Tool>,
) -> (Vec<ToolSpec>, HashMap<String, Option<ArgumentSchema>>) {
    let mut specs = Vec::with_capacity(tools.len());
    let mut schemas = HashMap::with_capacity(tools.len());
    for tool in tools {
        let parameters = Value::Object((*tool.input_schema).clone());
        let schema = match ArgumentSchema::compile(&parameters) {
            Ok(schema) => Some(schema),
            Err(problem) => {
                tracing::warn!(
                    source = %source,
                    tool = %tool.name,
                    %problem,
                    "MCP tool's input schema does not compile; its arguments go unchecked"
                );
                None
            }
        };
        let description = tool
            .description
            .map(|description| description.into_owned())
            .or(tool.title)
            .unwrap_or_default();
        schemas.insert(tool.name.to_string(), schema);
        specs.push(ToolSpec {
            name: tool.name.into_owned(),
            description,
            parameters,
        });
    }
    (specs, schemas)
}

#[async_trait]
impl ToolSource for McpSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "mcp"
    }

    async fn open(&self) -> Result<Arc<dyn ToolBox>, String> {
        let started = Instant::now();
        // On timeout the half-made session is dropped, which kills the child.
        let result = match tokio::time::timeout(self.timeout, self.start()).await {
            Ok(result) => result.map_err(OpenError::into_message),
            Err(_) => Err(format!(
                "MCP server {} did not start within {}",
                self.name,
                format_duration(self.timeout)
            )),
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(tools) => {
                tracing::info!(
                    source = %self.name,
                    tools = tools.specs.len(),
                    elapsed_ms,
                    "MCP session opened"
                );
                Ok(Arc::new(tools))
            }
            Err(error) => {
                tracing::warn!(source = %self.name, %error, elapsed_ms, "MCP session failed to open");
                Err(error)
            }
        }
    }
}

/// One MCP session and its tools. Dropping it closes the session: the
/// service task closes the transport, which ends a stdio server (stdin
/// closed, then SIGTERM, then SIGKILL to its process group).
pub(crate) struct McpToolBox {
    source: String,
    session: Session,
    specs: Vec<ToolSpec>,
    /// Per tool; `None` when the server's schema did not compile.
    schemas: HashMap<String, Option<ArgumentSchema>>,
    timeout: Duration,
    redactor: Arc<Redactor>,
}

impl McpToolBox {
    async fn run(&self, name: &str, arguments: Value) -> Result<Value, String> {
        let Some(schema) = self.schemas.get(name) else {
            return Err(format!("unknown tool \"{name}\""));
        };
        if let Some(schema) = schema {
            schema.validate(&arguments)?;
        }
        let arguments = match arguments {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            _ => return Err("the arguments must be a JSON object".to_owned()),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        // On timeout the dropped request sends `notifications/cancelled`.
        match tokio::time::timeout(self.timeout, self.session.call_tool(params)).await {
            Err(_) => Err(format!(
                "{name} timed out after {}",
                format_duration(self.timeout)
            )),
            Ok(Err(error)) => Err(self.describe(name, error)),
            Ok(Ok(result)) => outcome(name, result),
        }
    }

    fn describe(&self, name: &str, error: ServiceError) -> String {
        let message = match error {
            ServiceError::McpError(error) => format!("{name} failed: {}", error.message),
            ServiceError::TransportClosed => {
                format!("MCP server {} closed the session", self.source)
            }
            ServiceError::Timeout { .. } => {
                format!("{name} timed out after {}", format_duration(self.timeout))
            }
            other => format!("{name} failed: {other}"),
        };
        self.redactor.redact(message)
    }
}

#[async_trait]
impl ToolBox for McpToolBox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<Value, String> {
        let started = Instant::now();
        let result = self.run(name, arguments).await;
        tracing::info!(
            source = %self.source,
            tool = %name,
            ok = result.is_ok(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "MCP tool call"
        );
        result
    }

    /// The server's end of the session is gone (a stdio server exited or
    /// was killed): every later call would fail with "closed the session".
    fn is_closed(&self) -> bool {
        self.session.is_transport_closed()
    }
}

/// A `tools/call` result as the tool's outcome: `structuredContent` when
/// present, else the content as text; `isError` makes the text the error.
fn outcome(name: &str, result: CallToolResult) -> Result<Value, String> {
    let text = content_text(&result.content);
    if result.is_error == Some(true) {
        return Err(if text.is_empty() {
            format!("{name} failed")
        } else {
            text
        });
    }
    match result.structured_content {
        Some(structured) => Ok(structured),
        None => Ok(Value::String(text)),
    }
}

/// Text blocks (and embedded text resources) joined by newlines; other
/// blocks are named, not inlined.
fn content_text(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => format!("[image ({}) omitted]", image.mime_type),
            ContentBlock::Audio(audio) => format!("[audio ({}) omitted]", audio.mime_type),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, .. } => {
                    format!("[binary resource {uri} omitted]")
                }
                _ => "[resource omitted]".to_owned(),
            },
            ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
            _ => "[content omitted]".to_owned(),
        })
        .collect();
    parts.join("\n")
}

/// Logs a stdio server's stderr at `debug`, line by line, until it closes.
async fn log_stderr(source: String, stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = crate::truncate(line, MAX_STDERR_LINE);
        tracing::debug!(source = %source, "MCP server stderr: {line}");
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{EmbeddedResource, ImageContent, TextContent};
    use serde_json::json;

    use super::*;

    fn problem(settings: McpSettings) -> String {
        match mcp_server(settings) {
            Ok(_) => panic!("accepted"),
            Err(problem) => problem,
        }
    }

    fn stdio(command: &str) -> McpTransport {
        run(command, &[])
    }

    /// `command` with `args`, over stdio.
    fn run(command: &str, args: &[&str]) -> McpTransport {
        McpTransport::Stdio {
            command: command.to_owned(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            env: vec![],
        }
    }

    /// Why a source built from `settings` does not open.
    async fn open_error(settings: McpSettings) -> String {
        match mcp_server(settings).unwrap().open().await {
            Ok(_) => panic!("opened"),
            Err(error) => error,
        }
    }

    fn http(url: &str, headers: &[(&str, &str)]) -> McpTransport {
        // The client is built with the source: install what `main` would.
        let _ = rustls::crypto::ring::default_provider().install_default();
        McpTransport::Http {
            url: url.to_owned(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn settings_problems_are_named() {
        let cases = [
            (McpSettings::new("", stdio("node")), "the name is empty"),
            (McpSettings::new("m", stdio(" ")), "command is empty"),
            (
                McpSettings::new(
                    "m",
                    McpTransport::Stdio {
                        command: "node".to_owned(),
                        args: vec![],
                        env: vec![("A=B".to_owned(), "secret".to_owned())],
                    },
                ),
                "env: \"A=B\" is not a valid variable name",
            ),
            (
                McpSettings::new("m", http("nope", &[])),
                "url is not a valid URL",
            ),
            (
                McpSettings::new("m", http("ws://x.test/mcp", &[])),
                "url must be http",
            ),
            (
                McpSettings::new("m", http("https://x.test/mcp", &[("bad name", "v")])),
                "header \"bad name\" is not a valid header name",
            ),
            (
                McpSettings::new("m", http("https://x.test/mcp", &[("Mcp-Session-Id", "v")])),
                "is set by the MCP transport itself",
            ),
            (
                McpSettings::new("m", http("https://x.test/mcp", &[("X-Key", "secret\n")])),
                "header \"X-Key\" has characters",
            ),
            (
                McpSettings {
                    timeout: Duration::ZERO,
                    ..McpSettings::new("m", stdio("node"))
                },
                "timeout must be more than zero",
            ),
        ];
        for (settings, expected) in cases {
            let problem = problem(settings);
            assert!(problem.starts_with("mcp server \""), "{problem}");
            assert!(problem.contains(expected), "{problem} lacks {expected}");
            assert!(!problem.contains("secret"), "{problem}");
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let settings = McpSettings::new(
            "m",
            http(
                "https://x.test/mcp?key=sekrit",
                &[("Authorization", "Bearer sk-1")],
            ),
        );
        let debug = format!("{settings:?}");
        assert!(
            !debug.contains("sekrit") && !debug.contains("sk-1"),
            "{debug}"
        );
        assert!(
            debug.contains("Authorization") && debug.contains("x.test"),
            "{debug}"
        );
        let settings = McpSettings::new(
            "m",
            McpTransport::Stdio {
                command: "node".to_owned(),
                args: vec![],
                env: vec![("TOKEN".to_owned(), "sk-2".to_owned())],
            },
        );
        let debug = format!("{settings:?}");
        assert!(
            !debug.contains("sk-2") && debug.contains("TOKEN"),
            "{debug}"
        );
    }

    #[tokio::test]
    async fn a_missing_command_fails_to_open() {
        let missing = stdio("/nonexistent/agentwire-mcp-server");
        let error = open_error(McpSettings::new("missing", missing)).await;
        assert!(
            error.starts_with("could not start MCP server missing"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_server_that_exits_fails_to_open() {
        let error = open_error(McpSettings {
            timeout: Duration::from_secs(5),
            ..McpSettings::new("quitter", run("sh", &["-c", "echo nope >&2; exit 3"]))
        })
        .await;
        assert!(
            error.starts_with("could not initialize MCP server quitter"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        let error = open_error(McpSettings {
            timeout: Duration::from_millis(300),
            ..McpSettings::new("silent", run("sleep", &["30"]))
        })
        .await;
        assert_eq!(error, "MCP server silent did not start within 300ms");
    }

    #[tokio::test]
    async fn an_unreachable_http_server_fails_without_leaking_secrets() {
        // Port 9 (discard) on loopback: nothing listens there.
        let error = open_error(McpSettings {
            timeout: Duration::from_secs(10),
            ..McpSettings::new(
                "remote",
                http(
                    "http://127.0.0.1:9/mcp?key=sekrit-key",
                    &[("Authorization", "Bearer sk-very-secret")],
                ),
            )
        })
        .await;
        assert!(
            error.starts_with("could not initialize MCP server remote"),
            "{error}"
        );
        assert!(
            !error.contains("sekrit") && !error.contains("sk-very"),
            "{error}"
        );
    }

    #[test]
    fn results_become_values() {
        let text = |t: &str| ContentBlock::Text(TextContent::new(t));
        let mut result = CallToolResult::success(vec![text("a"), text("b")]);
        assert_eq!(outcome("t", result.clone()), Ok(json!("a\nb")));

        result.structured_content = Some(json!({"temperature": 20}));
        assert_eq!(outcome("t", result), Ok(json!({"temperature": 20})));

        let failed = CallToolResult::error(vec![text("boom")]);
        assert_eq!(outcome("t", failed), Err("boom".to_owned()));
        let failed = CallToolResult::error(vec![]);
        assert_eq!(outcome("t", failed), Err("t failed".to_owned()));
    }

    #[test]
    fn other_content_is_named_not_inlined() {
        let blocks = vec![
            ContentBlock::Image(ImageContent::new("AAAA", "image/png")),
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                "inside", "demo://x",
            ))),
        ];
        assert_eq!(content_text(&blocks), "[image (image/png) omitted]\ninside");
    }
}

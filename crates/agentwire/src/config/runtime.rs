//! `providers[]`, `tools[]` and the runtime fields of `agents[]`.

use std::collections::BTreeMap;

use agentwire_core::ToolSpec;
use agentwire_providers::{ApiKey, ProviderKind, ProviderSettings};
use agentwire_tools::{
    A2aToolSettings, ArgumentSchema, HttpToolSettings, McpSettings, McpTransport,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::ConfigDuration;
use super::{ConfigError, refuse_given};

/// A tool an agent may use.
#[derive(Debug, Clone)]
pub enum ToolConfig {
    /// Run by the client through the dialect.
    Client {
        spec: ToolSpec,
        consent_message: Option<String>,
        categories: Vec<String>,
    },
    Http(HttpToolSettingsDebug),
    Mcp(McpSettings),
    /// A remote agent over A2A.
    A2a(A2aToolSettings),
}

/// `HttpToolSettings` with a `Debug` that shows no header values.
#[derive(Clone)]
pub struct HttpToolSettingsDebug(pub HttpToolSettings);

impl std::fmt::Debug for HttpToolSettingsDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpToolSettings")
            .field("name", &self.0.name)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct NamedTool {
    pub name: String,
    pub config: ToolConfig,
}

/// What a `handler: runtime` agent needs besides its handler.
#[derive(Debug, Clone)]
pub struct RuntimeAgentConfig {
    pub instructions: Option<String>,
    /// A name from `providers[]`.
    pub provider: String,
    /// Names from `tools[]`.
    pub tools: Vec<String>,
    pub max_rounds: u32,
    /// The most stored messages the model is shown.
    pub context_messages: usize,
    pub message_metadata_template: Option<String>,
    /// Names from `agents[]` it may ask through `delegate_agent`.
    pub delegations: Vec<String>,
    /// Names from `agents[]` (runtime agents) it may hand a turn to.
    pub handoffs: Vec<String>,
    /// `memory`: its memory tools and ambient recall; `None`: no memory.
    pub memory: Option<super::memory::AgentMemoryConfig>,
    /// `pack`: a PromptPack agent's pack; `None` for an agent of
    /// `instructions`.
    pub pack: Option<super::pack::PackConfig>,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum ProviderType {
    Openai,
    Anthropic,
    Mock,
}

/// One entry of `providers[]`: a model a runtime agent (or a summarizer)
/// talks to.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    /// The name agents use in `provider` and `summarizer`: 1 to 64 ASCII
    /// letters, digits, `_` or `-`; unique.
    name: String,
    /// `openai` (the Chat Completions API: OpenAI, Ollama, vLLM, llama.cpp,
    /// LM Studio), `anthropic` (the Messages API) or `mock` (scripted replies).
    #[serde(rename = "type")]
    kind: ProviderType,
    /// The model name sent to the API (`gpt-4o-mini`, `llama3.2`); required
    /// for `openai` and `anthropic`. Default for `mock`: `mock`.
    model: Option<String>,
    /// The API's base URL (`http://localhost:11434/v1` for Ollama). Default:
    /// `https://api.openai.com/v1` (`openai`), `https://api.anthropic.com`
    /// (`anthropic`). Not for `mock`.
    base_url: Option<String>,
    /// The API key, sent as a bearer token (`x-api-key` for Anthropic).
    /// Default: none (Ollama needs none). A secret: use `${VAR}`. Not with
    /// `api_key_env`; not for `mock`.
    api_key: Option<String>,
    /// The name of an environment variable holding the API key (it must be
    /// set). Not with `api_key`; not for `mock`.
    api_key_env: Option<String>,
    /// How long to wait for the first streamed token; then
    /// `PROVIDER_TIMEOUT`. Default: `90s`.
    first_token_timeout: Option<ConfigDuration>,
    /// How long a started stream may stay silent; then `PROVIDER_STALLED`.
    /// Default: `30s`.
    idle_timeout: Option<ConfigDuration>,
    /// Retries of a request answered 429, 502, 503 or 504, or not answered
    /// at all. Default: `2`.
    max_retries: Option<u32>,
    /// `mock`: the reply of a turn no scenario scripts (alias
    /// `defaultResponse`). Not with `mock_config`.
    #[serde(alias = "defaultResponse")]
    default_response: Option<String>,
    /// `mock`: scripts by scenario id, chosen by a message's
    /// `metadata.mock_scenario` (`default` without one). Not with
    /// `mock_config`.
    scenarios: Option<BTreeMap<String, super::mock::RawScenario>>,
    /// `mock`: a PromptKit mock file (read as it is, relative to the working
    /// directory, no `${VAR}`), instead of `default_response` and `scenarios`.
    mock_config: Option<String>,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum ToolType {
    Client,
    Http,
    Mcp,
    A2a,
}

/// One entry of `tools[]`: a tool agents name in their `tools`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    /// The tool's name, as the model sees it (for `mcp`, the server's name
    /// in `agents[].tools`): 1 to 64 ASCII letters, digits, `_` or `-`;
    /// unique.
    name: String,
    /// `client` (run by the client: `tool_call` / `tool_result`), `http`
    /// (an HTTP request made by the server), `mcp` (the tools of an MCP
    /// server, over stdio or streamable HTTP) or `a2a` (a remote agent over
    /// A2A, asked with a message).
    #[serde(rename = "type")]
    kind: ToolType,
    /// What the tool does, for the model. Default: empty.
    description: Option<String>,
    /// `client`, `http`: the JSON Schema of the arguments, checked before the
    /// tool runs. Default: `{type: object, properties: {}}`.
    parameters: Option<serde_json::Value>,
    /// `client`: the question the client shows before running the tool.
    consent_message: Option<String>,
    /// `client`: categories sent with the call (`location`). Default: none.
    categories: Option<Vec<String>>,
    /// `http`: the request to make; required.
    request: Option<RawRequest>,
    /// `http`, `mcp`, `a2a`: how long a call may take; then an error result
    /// for the model (and an `a2a` task is cancelled). Default: `30s`.
    timeout: Option<ConfigDuration>,
    /// `mcp` over stdio: the program to start (`npx`). Exactly one of
    /// `command` and `url`.
    command: Option<String>,
    /// `mcp` over stdio: the program's arguments. Default: none.
    args: Option<Vec<String>>,
    /// `mcp` over stdio: environment variables for the program. Default: none.
    env: Option<BTreeMap<String, String>>,
    /// `mcp` over streamable HTTP: the server's URL. Exactly one of `command`
    /// and `url`. `a2a`: the agent's base URL (its card at
    /// `<url>/.well-known/agent-card.json`) or its card's URL; required.
    url: Option<String>,
    /// `mcp` over streamable HTTP, `a2a`: headers sent with every request
    /// (such as `Authorization`). Default: none.
    headers: Option<BTreeMap<String, String>>,
}

/// `tools[].request`: the HTTP request an `http` tool makes.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    /// The HTTP method (`GET`, `POST`).
    method: String,
    /// The URL; `{{name}}` placeholders (in its path and query) are replaced
    /// by the model's arguments.
    url: String,
    /// Request headers (placeholders allowed). Default: none.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The request body template (placeholders allowed). Default: none.
    body: Option<String>,
}

pub(super) fn validate_provider(
    index: usize,
    mut raw: RawProvider,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderSettings, ConfigError> {
    let key = |field: &str| format!("providers[{index}].{field}");
    validate_name(&key("name"), &raw.name)?;
    let kind = match raw.kind {
        ProviderType::Openai | ProviderType::Anthropic => remote_provider(&key, &raw, lookup)?,
        ProviderType::Mock => mock_provider(&key, &mut raw)?,
    };
    let mut settings = ProviderSettings::new(
        raw.name,
        raw.model.unwrap_or_else(|| "mock".to_owned()),
        kind,
    );
    if let Some(t) = raw.first_token_timeout {
        settings.first_token_timeout = t.0;
    }
    if let Some(t) = raw.idle_timeout {
        settings.idle_timeout = t.0;
    }
    if let Some(n) = raw.max_retries {
        settings.max_retries = n;
    }
    agentwire_providers::build(settings.clone())
        .map_err(|e| ConfigError::new(format!("providers[{index}]"), e))?;
    Ok(settings)
}

/// `type: openai` or `anthropic`: a model behind an API.
fn remote_provider(
    key: &dyn Fn(&str) -> String,
    raw: &RawProvider,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderKind, ConfigError> {
    let mock_fields = [
        ("default_response", raw.default_response.is_some()),
        ("scenarios", raw.scenarios.is_some()),
        ("mock_config", raw.mock_config.is_some()),
    ];
    refuse_given(key, &mock_fields, "only for `type: mock`")?;
    if raw.model.as_deref().is_none_or(str::is_empty) {
        return Err(ConfigError::new(
            key("model"),
            "required for this provider type",
        ));
    }
    let api_key = api_key(key, raw.api_key.clone(), raw.api_key_env.clone(), lookup)?;
    let base_url = raw.base_url.clone().unwrap_or_default();
    Ok(match raw.kind {
        ProviderType::Openai => ProviderKind::OpenAi { base_url, api_key },
        _ => ProviderKind::Anthropic { base_url, api_key },
    })
}

/// `type: mock`: scripts, inline or from a PromptKit file (taken from
/// `raw`).
fn mock_provider(
    key: &dyn Fn(&str) -> String,
    raw: &mut RawProvider,
) -> Result<ProviderKind, ConfigError> {
    let remote_fields = [
        ("base_url", raw.base_url.is_some()),
        ("api_key", raw.api_key.is_some()),
        ("api_key_env", raw.api_key_env.is_some()),
    ];
    refuse_given(key, &remote_fields, "does not apply to `type: mock`")?;
    let (default_response, scenarios) = match &raw.mock_config {
        Some(path) => {
            let inline = [
                ("default_response", raw.default_response.is_some()),
                ("scenarios", raw.scenarios.is_some()),
            ];
            refuse_given(
                key,
                &inline,
                "give `mock_config` or inline scripts, not both",
            )?;
            super::mock::load_file(&key("mock_config"), path)?
        }
        None => (
            raw.default_response.take(),
            super::mock::scenarios(raw.scenarios.take().unwrap_or_default()),
        ),
    };
    Ok(ProviderKind::Mock {
        default_response,
        scenarios,
    })
}

pub(super) fn api_key(
    key: &dyn Fn(&str) -> String,
    literal: Option<String>,
    env: Option<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ApiKey>, ConfigError> {
    match (literal, env) {
        (Some(_), Some(_)) => Err(ConfigError::new(
            key("api_key_env"),
            "give api_key or api_key_env, not both",
        )),
        (Some(literal), None) => Ok(Some(ApiKey::new(literal))),
        (None, Some(name)) => lookup(&name)
            .map(|value| Some(ApiKey::new(value)))
            .ok_or_else(|| {
                ConfigError::new(
                    key("api_key_env"),
                    format!("environment variable {name} is not set"),
                )
            }),
        (None, None) => Ok(None),
    }
}

pub(super) fn validate_tool(index: usize, raw: RawTool) -> Result<NamedTool, ConfigError> {
    let key = |field: &str| format!("tools[{index}].{field}");
    validate_name(&key("name"), &raw.name)?;
    let built = |e: String| ConfigError::new(format!("tools[{index}]"), e);
    let config = match raw.kind {
        ToolType::Client => client_tool(&key, &raw)?,
        ToolType::Http => http_tool(&key, &raw).map_err(|e| e.into_config_error(built))?,
        ToolType::Mcp => mcp_tool(&key, &raw).map_err(|e| e.into_config_error(built))?,
        ToolType::A2a => a2a_tool(&key, &raw).map_err(|e| e.into_config_error(built))?,
    };
    Ok(NamedTool {
        name: raw.name,
        config,
    })
}

/// Why a tool is refused: a field of it, or the tool as built.
enum ToolError {
    Field(ConfigError),
    Built(String),
}

impl ToolError {
    fn into_config_error(self, built: impl Fn(String) -> ConfigError) -> ConfigError {
        match self {
            ToolError::Field(e) => e,
            ToolError::Built(e) => built(e),
        }
    }
}

impl From<ConfigError> for ToolError {
    fn from(e: ConfigError) -> ToolError {
        ToolError::Field(e)
    }
}

/// `type: client`: run by the client through the dialect.
fn client_tool(key: &dyn Fn(&str) -> String, raw: &RawTool) -> Result<ToolConfig, ConfigError> {
    only_fields(
        key,
        raw,
        &["parameters", "consent_message", "categories", "description"],
    )?;
    let parameters = raw.parameters.clone().unwrap_or_else(empty_object_schema);
    ArgumentSchema::compile(&parameters).map_err(|e| ConfigError::new(key("parameters"), e))?;
    Ok(ToolConfig::Client {
        spec: ToolSpec {
            name: raw.name.clone(),
            description: raw.description.clone().unwrap_or_default(),
            parameters,
        },
        consent_message: raw.consent_message.clone(),
        categories: raw.categories.clone().unwrap_or_default(),
    })
}

/// `type: http`: a request the server makes.
fn http_tool(key: &dyn Fn(&str) -> String, raw: &RawTool) -> Result<ToolConfig, ToolError> {
    only_fields(
        key,
        raw,
        &["parameters", "request", "timeout", "description"],
    )?;
    let request = raw
        .request
        .as_ref()
        .ok_or_else(|| ConfigError::new(key("request"), "required for `type: http`"))?;
    let mut settings = HttpToolSettings::new(
        raw.name.clone(),
        request.method.clone(),
        request.url.clone(),
    );
    settings.description = raw.description.clone().unwrap_or_default();
    settings.parameters = raw.parameters.clone().unwrap_or_else(empty_object_schema);
    settings.headers = request.headers.clone().into_iter().collect();
    settings.body = request.body.clone();
    if let Some(t) = raw.timeout {
        settings.timeout = t.0;
    }
    agentwire_tools::http_tool(settings.clone()).map_err(ToolError::Built)?;
    Ok(ToolConfig::Http(HttpToolSettingsDebug(settings)))
}

/// `type: mcp`: an MCP server's tools, over stdio or streamable HTTP.
fn mcp_tool(key: &dyn Fn(&str) -> String, raw: &RawTool) -> Result<ToolConfig, ToolError> {
    let allowed = [
        "command",
        "args",
        "env",
        "url",
        "headers",
        "timeout",
        "description",
    ];
    only_fields(key, raw, &allowed)?;
    let transport = match (&raw.command, &raw.url) {
        (Some(command), None) => McpTransport::Stdio {
            command: command.clone(),
            args: raw.args.clone().unwrap_or_default(),
            env: raw.env.clone().unwrap_or_default().into_iter().collect(),
        },
        (None, Some(url)) => McpTransport::Http {
            url: url.clone(),
            headers: raw
                .headers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect(),
        },
        _ => {
            return Err(ConfigError::new(
                key("command"),
                "an mcp tool needs exactly one of `command` (stdio) or `url` (streamable HTTP)",
            )
            .into());
        }
    };
    let mut settings = McpSettings::new(raw.name.clone(), transport);
    if let Some(t) = raw.timeout {
        settings.timeout = t.0;
    }
    agentwire_tools::mcp_server(settings.clone()).map_err(ToolError::Built)?;
    Ok(ToolConfig::Mcp(settings))
}

/// `type: a2a`: a remote agent over A2A.
fn a2a_tool(key: &dyn Fn(&str) -> String, raw: &RawTool) -> Result<ToolConfig, ToolError> {
    only_fields(key, raw, &["url", "headers", "timeout", "description"])?;
    let url = raw
        .url
        .clone()
        .ok_or_else(|| ConfigError::new(key("url"), "an a2a tool needs the agent's `url`"))?;
    let mut settings = A2aToolSettings::new(raw.name.clone(), url);
    settings.description = raw.description.clone();
    settings.headers = raw
        .headers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    if let Some(t) = raw.timeout {
        settings.timeout = t.0;
    }
    agentwire_tools::a2a_agent(settings.clone()).map_err(ToolError::Built)?;
    Ok(ToolConfig::A2a(settings))
}

/// Fails naming the first field given that `allowed` does not list.
fn only_fields(
    key: &dyn Fn(&str) -> String,
    raw: &RawTool,
    allowed: &[&str],
) -> Result<(), ConfigError> {
    let given = [
        ("description", raw.description.is_some()),
        ("parameters", raw.parameters.is_some()),
        ("consent_message", raw.consent_message.is_some()),
        ("categories", raw.categories.is_some()),
        ("request", raw.request.is_some()),
        ("timeout", raw.timeout.is_some()),
        ("command", raw.command.is_some()),
        ("args", raw.args.is_some()),
        ("env", raw.env.is_some()),
        ("url", raw.url.is_some()),
        ("headers", raw.headers.is_some()),
    ]
    .map(|(field, given)| (field, given && !allowed.contains(&field)));
    refuse_given(key, &given, "does not apply to this tool type")
}

fn empty_object_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {}})
}

fn validate_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(
            key,
            "1 to 64 ASCII letters, digits, '_' or '-'",
        ))
    }
}

/// Checks an agent's runtime fields against its handler and the declared
/// providers and tools.
pub(super) fn validate_agent_runtime(
    index: usize,
    raw: &super::raw::Agent,
    providers: &[ProviderSettings],
    tools: &[NamedTool],
) -> Result<Option<RuntimeAgentConfig>, ConfigError> {
    let key = |field: &str| format!("agents[{index}].{field}");
    if raw.handler != super::HandlerKind::Runtime && raw.pack.is_some() {
        return Err(ConfigError::new(key("pack"), "needs `handler: runtime`"));
    }
    if raw.handler != super::HandlerKind::Runtime {
        let given = raw.instructions.is_some()
            || raw.provider.is_some()
            || raw.tools.is_some()
            || raw.max_rounds.is_some()
            || raw.context_messages.is_some()
            || raw.message_metadata_template.is_some()
            || raw.delegations.is_some()
            || raw.handoffs.is_some()
            || raw.memory.is_some();
        if !given {
            return Ok(None);
        }
        return Err(ConfigError::new(
            key("handler"),
            "instructions, provider, tools, max_rounds, context_messages, message_metadata_template, delegations, handoffs and memory need `handler: runtime`",
        ));
    }
    let provider = raw
        .provider
        .clone()
        .ok_or_else(|| ConfigError::new(key("provider"), "required for `handler: runtime`"))?;
    if !providers.iter().any(|p| p.name == provider) {
        return Err(ConfigError::new(
            key("provider"),
            format!("no provider named {provider:?} in providers[]"),
        ));
    }
    let names = raw.tools.clone().unwrap_or_default();
    for (i, name) in names.iter().enumerate() {
        if !tools.iter().any(|t| &t.name == name) {
            return Err(ConfigError::new(
                key(&format!("tools[{i}]")),
                format!("no tool named {name:?} in tools[]"),
            ));
        }
    }
    if let Some(template) = &raw.message_metadata_template {
        agentwire_runtime::MetadataTemplate::compile(template)
            .map_err(|e| ConfigError::new(key("message_metadata_template"), e))?;
    }
    let max_rounds = raw.max_rounds.unwrap_or(10);
    let context_messages = raw
        .context_messages
        .unwrap_or(agentwire_runtime::DEFAULT_CONTEXT_MESSAGES);
    let zero = [
        ("max_rounds", max_rounds == 0),
        ("context_messages", context_messages == 0),
    ];
    if let Some((field, _)) = zero.iter().find(|(_, zero)| *zero) {
        return Err(ConfigError::new(key(field), "must be greater than 0"));
    }
    let pack = match &raw.pack {
        Some(pack) => Some(agent_pack(index, raw, pack, providers, tools)?),
        None => None,
    };
    Ok(Some(RuntimeAgentConfig {
        pack,
        instructions: raw.instructions.clone(),
        provider,
        tools: names,
        max_rounds,
        context_messages,
        message_metadata_template: raw.message_metadata_template.clone(),
        delegations: raw.delegations.clone().unwrap_or_default(),
        handoffs: raw.handoffs.clone().unwrap_or_default(),
        memory: super::memory::validate(index, raw.memory.as_ref())?,
    }))
}

/// A runtime agent's `pack`, against its provider and tools (which the
/// caller checked exist).
fn agent_pack(
    index: usize,
    raw: &super::raw::Agent,
    pack: &super::pack::RawPack,
    providers: &[ProviderSettings],
    tools: &[NamedTool],
) -> Result<super::pack::PackConfig, ConfigError> {
    if raw.instructions.is_some() {
        return Err(ConfigError::new(
            format!("agents[{index}].instructions"),
            "not with `pack`: the pack's system_template is the agent's instructions",
        ));
    }
    let provider = providers
        .iter()
        .find(|p| Some(&p.name) == raw.provider.as_ref())
        .ok_or_else(|| ConfigError::new(format!("agents[{index}].provider"), "required"))?;
    let agent_tools = raw
        .tools
        .iter()
        .flatten()
        .filter_map(|name| tools.iter().find(|t| &t.name == name).cloned())
        .collect();
    super::pack::validate(
        pack,
        super::pack::AgentSide {
            index,
            provider,
            tools: agent_tools,
            requires_ai_disclosure: raw.requires_ai_disclosure,
            max_rounds: raw.max_rounds,
        },
    )
}

/// Names must be unique within a list; the error names the second.
pub(super) fn check_unique<'a>(
    list: &str,
    names: impl Iterator<Item = &'a str>,
) -> Result<(), ConfigError> {
    let mut seen: Vec<&str> = Vec::new();
    for (i, name) in names.enumerate() {
        if seen.contains(&name) {
            return Err(ConfigError::new(
                format!("{list}[{i}].name"),
                format!("duplicate name {name:?}"),
            ));
        }
        seen.push(name);
    }
    Ok(())
}

//! Builds `handler: runtime` agents: their provider, server tools, client
//! tool declarations, delegations and handoffs; and the agents of team files.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_core::{
    AgentMemory, CallerToolSource, Clock, Embedder, MemoryTier, ModelProvider, ToolSource,
};
use agentwire_providers::{OpenAiEmbeddings, ProviderSettings};
use agentwire_runtime::{
    ArgumentValidator, ClientToolDecl, Delegation, Handoff, MetadataTemplate, Roster,
    RuntimeHandler, RuntimeSettings,
};
use agentwire_tools::ArgumentSchema;
use anyhow::Context as _;

use crate::config::{Config, FileAgent, FileTool, NamedTool, RuntimeAgentConfig, ToolConfig};
use agentwire_runtime::memory::{CallMemory, MemorySettings};

use crate::system::RandomIds;
use agentwire_server::{MeasuredEmbedder, MemoryMetrics};

/// Providers and tools, built once and shared by every agent naming them.
pub(super) struct RuntimeParts {
    providers: HashMap<String, Arc<dyn ModelProvider>>,
    /// The settings of `providers`, for team files' agents, which ask the
    /// same endpoint for their own model.
    provider_settings: HashMap<String, ProviderSettings>,
    tools: HashMap<String, BuiltTool>,
    /// The agents' memory: the session store, once open, measured.
    memory: Arc<dyn AgentMemory>,
    clock: Arc<dyn Clock>,
    /// `memory.category_ttl`.
    category_ttl: Arc<std::collections::BTreeMap<String, std::time::Duration>>,
    /// `memory.embeddings`, measured.
    embedder: Option<Arc<dyn Embedder>>,
}

enum BuiltTool {
    Server(Arc<dyn ToolSource>),
    Client(Box<ClientToolDecl>),
}

/// `ArgumentValidator` over a compiled JSON Schema.
pub(super) struct SchemaValidator(pub(super) ArgumentSchema);

impl ArgumentValidator for SchemaValidator {
    fn validate(&self, arguments: &serde_json::Value) -> Result<(), String> {
        self.0.validate(arguments)
    }
}

/// `memory.embeddings`, built and measured; `None` when not configured.
fn embedder(
    config: &Config,
    metrics: &Arc<MemoryMetrics>,
) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let Some(settings) = &config.memory.embeddings else {
        return Ok(None);
    };
    let endpoint = OpenAiEmbeddings::new(settings)
        .map_err(|(key, e)| anyhow::anyhow!("memory.embeddings.{key}: {e}"))?;
    let measured = MeasuredEmbedder::new(Arc::new(endpoint), metrics.clone());
    Ok(Some(Arc::new(measured)))
}

impl RuntimeParts {
    pub(super) fn build(
        config: &Config,
        memory: Arc<dyn AgentMemory>,
        metrics: &Arc<MemoryMetrics>,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<RuntimeParts> {
        let mut providers = HashMap::new();
        let mut provider_settings = HashMap::new();
        for settings in &config.providers {
            provider_settings.insert(settings.name.clone(), settings.clone());
            let provider = agentwire_providers::build(settings.clone())
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("providers: {}", settings.name))?;
            providers.insert(settings.name.clone(), provider);
        }
        let mut tools = HashMap::new();
        for tool in &config.tools {
            tools.insert(
                tool.name.clone(),
                build_tool(tool).with_context(|| format!("tools: {}", tool.name))?,
            );
        }
        Ok(RuntimeParts {
            providers,
            provider_settings,
            tools,
            memory,
            clock,
            category_ttl: Arc::new(config.memory.category_ttl.clone()),
            embedder: embedder(config, metrics)?,
        })
    }

    /// A runtime agent's memory, when it has memory on.
    pub(super) fn memory_settings(&self, config: &RuntimeAgentConfig) -> Option<MemorySettings> {
        let memory = config.memory.as_ref()?;
        Some(MemorySettings {
            store: self.memory.clone(),
            tier: memory.tier,
            clock: self.clock.clone(),
            retrieval: memory.retrieval,
            category_ttl: self.category_ttl.clone(),
            embedder: self.embedder.clone(),
            scope_agent: None,
        })
    }

    /// The tools a voice call of agent `name` opens for its caller: its
    /// memory tools, when it has memory on.
    pub(super) fn caller_tools(
        &self,
        name: &str,
        config: &RuntimeAgentConfig,
    ) -> Vec<Arc<dyn CallerToolSource>> {
        let Some(settings) = self.memory_settings(config) else {
            return Vec::new();
        };
        let memory = CallMemory::new(settings, name, Arc::new(RandomIds));
        vec![Arc::new(memory)]
    }

    /// `memory.embeddings`, measured, when configured.
    pub(super) fn embedder(&self) -> Option<&dyn Embedder> {
        self.embedder.as_deref()
    }

    /// A configured runtime agent; its delegation and handoff targets are
    /// found by name in `roster`.
    pub(super) fn handler(
        &self,
        agent: &str,
        config: &RuntimeAgentConfig,
        roster: &Arc<Roster>,
    ) -> anyhow::Result<RuntimeHandler> {
        let provider = self
            .providers
            .get(&config.provider)
            .cloned()
            .context("provider was validated")?;
        let mut server_tools = Vec::new();
        let mut client_tools = Vec::new();
        for name in &config.tools {
            self.add_tool(name, &mut server_tools, &mut client_tools)?;
        }
        let metadata_template = config
            .message_metadata_template
            .as_deref()
            .map(MetadataTemplate::compile)
            .transpose()
            .map_err(anyhow::Error::msg)?;
        Ok(RuntimeHandler::new(RuntimeSettings {
            agent_name: agent.to_owned(),
            instructions: config.instructions.clone(),
            provider,
            server_tools,
            client_tools,
            max_rounds: config.max_rounds,
            context_messages: config.context_messages,
            metadata_template,
            delegations: delegations(config),
            handoffs: handoffs(config),
            roster: roster.clone(),
            memory: self.memory_settings(config),
            turn_instructions: None,
            reply_limit: None,
        }))
    }

    /// An agent of a team file, on the endpoint and credentials of the
    /// `providers[]` entry `provider` with the agent's own model; its
    /// targets are found by id in the team's `roster`.
    pub(super) fn file_agent(
        &self,
        provider: &str,
        agent: &FileAgent,
        roster: &Arc<Roster>,
        memory_scope: Option<String>,
    ) -> anyhow::Result<RuntimeHandler> {
        let settings = self
            .provider_settings
            .get(provider)
            .context("provider was validated")?;
        let provider = if settings.model == agent.model {
            self.providers
                .get(&settings.name)
                .cloned()
                .context("provider was validated")?
        } else {
            let mut settings = settings.clone();
            settings.model.clone_from(&agent.model);
            agentwire_providers::build(settings)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("providers: {provider} with model {}", agent.model))?
        };
        let mut server_tools = Vec::new();
        let mut client_tools = Vec::new();
        for tool in &agent.tools {
            match tool {
                FileTool::Config(name) => {
                    self.add_tool(name, &mut server_tools, &mut client_tools)?;
                }
                FileTool::Mcp(settings) => server_tools.push(
                    agentwire_tools::mcp_server(settings.clone()).map_err(anyhow::Error::msg)?,
                ),
            }
        }
        Ok(RuntimeHandler::new(RuntimeSettings {
            agent_name: agent.name.clone(),
            instructions: Some(agent.instructions.clone()),
            provider,
            server_tools,
            client_tools,
            max_rounds: agent.max_rounds,
            context_messages: agentwire_runtime::DEFAULT_CONTEXT_MESSAGES,
            metadata_template: None,
            delegations: agent.delegations.clone(),
            handoffs: agent.handoffs.clone(),
            roster: roster.clone(),
            memory: memory_scope.map(|scope_agent| MemorySettings {
                store: self.memory.clone(),
                tier: MemoryTier::CallerWithAgent,
                clock: self.clock.clone(),
                retrieval: None,
                category_ttl: self.category_ttl.clone(),
                embedder: self.embedder.clone(),
                scope_agent: Some(scope_agent),
            }),
            turn_instructions: None,
            reply_limit: None,
        }))
    }

    /// The server tools of a runtime agent (its client tools are left out).
    pub(super) fn server_tools(&self, config: &RuntimeAgentConfig) -> Vec<Arc<dyn ToolSource>> {
        config
            .tools
            .iter()
            .filter_map(|name| match self.tools.get(name) {
                Some(BuiltTool::Server(source)) => Some(source.clone()),
                _ => None,
            })
            .collect()
    }

    /// The client tools of a runtime agent.
    pub(super) fn client_tools(&self, config: &RuntimeAgentConfig) -> Vec<ClientToolDecl> {
        config
            .tools
            .iter()
            .filter_map(|name| match self.tools.get(name) {
                Some(BuiltTool::Client(decl)) => Some((**decl).clone()),
                _ => None,
            })
            .collect()
    }

    fn add_tool(
        &self,
        name: &str,
        server_tools: &mut Vec<Arc<dyn ToolSource>>,
        client_tools: &mut Vec<ClientToolDecl>,
    ) -> anyhow::Result<()> {
        match self.tools.get(name).context("tool was validated")? {
            BuiltTool::Server(source) => server_tools.push(source.clone()),
            BuiltTool::Client(decl) => client_tools.push((**decl).clone()),
        }
        Ok(())
    }
}

/// `agents[].delegations`, as the runtime takes them.
pub(super) fn delegations(config: &RuntimeAgentConfig) -> Vec<Delegation> {
    config
        .delegations
        .iter()
        .map(|target| Delegation {
            target: target.clone(),
            instructions: None,
        })
        .collect()
}

/// `agents[].handoffs`, as the runtime takes them.
pub(super) fn handoffs(config: &RuntimeAgentConfig) -> Vec<Handoff> {
    config
        .handoffs
        .iter()
        .map(|target| Handoff {
            target: target.clone(),
            description: None,
        })
        .collect()
}

fn build_tool(tool: &NamedTool) -> anyhow::Result<BuiltTool> {
    Ok(match &tool.config {
        ToolConfig::Client {
            spec,
            consent_message,
            categories,
        } => {
            let schema = ArgumentSchema::compile(&spec.parameters).map_err(anyhow::Error::msg)?;
            BuiltTool::Client(Box::new(ClientToolDecl {
                spec: spec.clone(),
                consent_message: consent_message.clone(),
                categories: categories.clone(),
                validator: Arc::new(SchemaValidator(schema)),
            }))
        }
        ToolConfig::Http(settings) => BuiltTool::Server(
            agentwire_tools::http_tool(settings.0.clone()).map_err(anyhow::Error::msg)?,
        ),
        ToolConfig::Mcp(settings) => BuiltTool::Server(
            agentwire_tools::mcp_server(settings.clone()).map_err(anyhow::Error::msg)?,
        ),
        ToolConfig::A2a(settings) => BuiltTool::Server(
            agentwire_tools::a2a_agent(settings.clone()).map_err(anyhow::Error::msg)?,
        ),
    })
}

impl RuntimeParts {
    /// The provider `providers[]` names `name`, built once and shared.
    pub(super) fn provider(&self, name: &str) -> Option<Arc<dyn ModelProvider>> {
        self.providers.get(name).cloned()
    }

    /// The server tool `tools[]` names `name`, built once and shared (an
    /// MCP server's tools, opened once per connection).
    pub(super) fn server_tool(&self, name: &str) -> Option<Arc<dyn ToolSource>> {
        match self.tools.get(name) {
            Some(BuiltTool::Server(source)) => Some(source.clone()),
            _ => None,
        }
    }
}

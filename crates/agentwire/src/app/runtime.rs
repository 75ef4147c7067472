//! Builds `handler: runtime` agents: their provider, server tools and client
//! tool declarations.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_core::{ModelProvider, ToolSource};
use agentwire_runtime::{
    ArgumentValidator, ClientToolDecl, MetadataTemplate, RuntimeHandler, RuntimeSettings,
};
use agentwire_tools::ArgumentSchema;
use anyhow::Context as _;

use crate::config::{Config, NamedTool, RuntimeAgentConfig, ToolConfig};

/// Providers and tools, built once and shared by every agent naming them.
pub(super) struct RuntimeParts {
    providers: HashMap<String, Arc<dyn ModelProvider>>,
    tools: HashMap<String, BuiltTool>,
}

enum BuiltTool {
    Server(Arc<dyn ToolSource>),
    Client(Box<ClientToolDecl>),
}

/// `ArgumentValidator` over a compiled JSON Schema.
struct SchemaValidator(ArgumentSchema);

impl ArgumentValidator for SchemaValidator {
    fn validate(&self, arguments: &serde_json::Value) -> Result<(), String> {
        self.0.validate(arguments)
    }
}

impl RuntimeParts {
    pub(super) fn build(config: &Config) -> anyhow::Result<RuntimeParts> {
        let mut providers = HashMap::new();
        for settings in &config.providers {
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
        Ok(RuntimeParts { providers, tools })
    }

    pub(super) fn handler(
        &self,
        agent: &str,
        config: &RuntimeAgentConfig,
    ) -> anyhow::Result<RuntimeHandler> {
        let provider = self
            .providers
            .get(&config.provider)
            .cloned()
            .context("provider was validated")?;
        let mut server_tools = Vec::new();
        let mut client_tools = Vec::new();
        for name in &config.tools {
            match self.tools.get(name).context("tool was validated")? {
                BuiltTool::Server(source) => server_tools.push(source.clone()),
                BuiltTool::Client(decl) => client_tools.push((**decl).clone()),
            }
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
            metadata_template,
        }))
    }
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
    })
}

//! PromptPack agents (`agents[].pack`): the runtime handler a pack gives an
//! agent. The plan (`config::pack`) says what the pack asks for, already
//! checked against the config; here it becomes a `RuntimeHandler`: the
//! provider built with the pack's parameters, each pack tool run by its
//! `tools[]` entry but shown to the model as the pack declares it, the
//! instructions rendered once (every variable fixed by the config) or per
//! turn from the message's metadata, and the `max_length` limit.
//!
//! Compile mode (`compile: per_session`) builds the same handler at every
//! session open: `compile_mode.rs`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use agentwire_core::{
    ErrorCode, Handler, Metadata, ModelProvider, SessionInit, SessionTools, ToolBox, ToolSource,
    ToolSpec, TurnFailure,
};
use agentwire_pack::{Template, VariableType};
use agentwire_providers::{ProviderSettings, Sampling};
use agentwire_runtime::memory::MemorySettings;
use agentwire_runtime::{
    ClientToolDecl, Delegation, Handoff, MetadataTemplate, PastLimit, Peer, ReplyLimit, Roster,
    RuntimeHandler, RuntimeSettings, TurnInstructions,
};
use agentwire_server::PackStatus;
use agentwire_tools::ArgumentSchema;
use agentwire_tools::sandbox::AgentSandboxes;
use anyhow::Context as _;
use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;

use super::runtime::{RuntimeParts, SchemaValidator};
use crate::config::{
    CompileMode, PackConfig, PackMode, PackPlan, PlanTool, PlanVariable, RuntimeAgentConfig,
    ToolConfig,
};

mod compile_mode;

use compile_mode::{Declarations, PerSession, record_plan};

/// A pack agent, built: its handler, the peer others delegate (or, at
/// startup, hand off) to, its session init in compile mode, and the status
/// the agents listing shows.
pub(super) struct PackAgent {
    pub(super) handler: Arc<dyn Handler>,
    pub(super) peer: Peer,
    pub(super) init: Option<Arc<dyn SessionInit>>,
    pub(super) status: Arc<PackStatus>,
}

/// A pack agent's config, and its sandboxes when it has some.
pub(super) struct PackAgentConfig<'a> {
    pub(super) name: &'a str,
    pub(super) runtime: &'a RuntimeAgentConfig,
    pub(super) pack: &'a PackConfig,
    pub(super) sandboxes: Option<Arc<AgentSandboxes>>,
}

/// The agent `name` of `pack`: built from its plan (`compile:
/// at_startup`), or set up to compile at every session open.
pub(super) fn agent(
    parts: &RuntimeParts,
    agent: PackAgentConfig<'_>,
    roster: &Arc<Roster>,
) -> anyhow::Result<PackAgent> {
    let PackAgentConfig {
        name,
        runtime: config,
        pack,
        sandboxes,
    } = agent;
    // The sandboxes' init, when the agent has one, runs after the pack's
    // and takes the declarations.
    let declarations = match &sandboxes {
        Some(_) => Declarations::Passed,
        None => Declarations::Refused,
    };
    let mut builder = PackBuilder::new(parts, name, config, pack.source.provider.clone(), roster);
    builder.session_tools = sandboxes.map(|sandboxes| sandboxes as Arc<dyn SessionTools>);
    match &pack.mode {
        PackMode::AtStartup(plan) => {
            let handler = Arc::new(builder.handler(plan)?);
            for warning in &plan.warnings {
                tracing::warn!(agent = %name, %warning, "pack warning");
            }
            let status = Arc::new(PackStatus::new(CompileMode::AtStartup.as_str()));
            status.record(|report| record_plan(report, plan));
            Ok(PackAgent {
                handler: handler.clone(),
                peer: Peer::Runtime(handler),
                init: None,
                status,
            })
        }
        PackMode::PerSession => {
            let per_session = PerSession::new(
                name,
                pack.path.clone(),
                pack.source.clone(),
                builder,
                declarations,
            );
            per_session.try_at_startup();
            let handler = per_session.handler();
            Ok(PackAgent {
                peer: Peer::Handler {
                    name: name.to_owned(),
                    handler: handler.clone(),
                },
                handler,
                init: Some(per_session.init()),
                status: per_session.status(),
            })
        }
    }
}

/// What building a pack agent's handler takes besides the plan: the
/// agent's own config, its provider and its MCP servers. Kept by a
/// compile-mode agent, which builds a handler at every session open.
pub(super) struct PackBuilder {
    agent: String,
    provider: ProviderSettings,
    /// `providers[]`' own, for a pack that gives no parameters.
    shared: Option<Arc<dyn ModelProvider>>,
    /// The provider last built and the parameters it was built with: a
    /// compile that changes none reuses it (and its connection pool).
    built: Mutex<Option<(Sampling, Arc<dyn ModelProvider>)>>,
    /// The agent's `mcp` tools, built once: their servers are opened per
    /// connection.
    mcp: HashMap<String, Arc<dyn ToolSource>>,
    context_messages: usize,
    metadata_template: Option<String>,
    delegations: Vec<Delegation>,
    handoffs: Vec<Handoff>,
    roster: Arc<Roster>,
    memory: Option<MemorySettings>,
    /// The session's own tools (its sandboxes'), offered beside the pack's.
    session_tools: Option<Arc<dyn SessionTools>>,
}

impl PackBuilder {
    pub(super) fn new(
        parts: &RuntimeParts,
        agent: &str,
        config: &RuntimeAgentConfig,
        provider: ProviderSettings,
        roster: &Arc<Roster>,
    ) -> PackBuilder {
        let mcp = config
            .tools
            .iter()
            .filter_map(|name| Some((name.clone(), parts.server_tool(name)?)))
            .collect();
        PackBuilder {
            agent: agent.to_owned(),
            shared: parts.provider(&provider.name),
            provider,
            built: Mutex::new(None),
            mcp,
            context_messages: config.context_messages,
            metadata_template: config.message_metadata_template.clone(),
            delegations: super::runtime::delegations(config),
            handoffs: super::runtime::handoffs(config),
            roster: roster.clone(),
            memory: parts.memory_settings(config),
            session_tools: None,
        }
    }

    /// The agent's provider with `sampling`.
    fn provider(&self, sampling: &Sampling) -> anyhow::Result<Arc<dyn ModelProvider>> {
        if let Some(shared) = self.shared.as_ref().filter(|_| sampling.given().is_empty()) {
            return Ok(shared.clone());
        }
        let mut built = self.built.lock();
        if let Some((made_for, provider)) = built.as_ref()
            && made_for == sampling
        {
            return Ok(provider.clone());
        }
        let mut settings = self.provider.clone();
        settings.sampling = sampling.clone();
        let provider = agentwire_providers::build(settings)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("providers: {}", self.provider.name))?;
        *built = Some((sampling.clone(), provider.clone()));
        Ok(provider)
    }

    /// The agent's handler for `plan`.
    pub(super) fn handler(&self, plan: &PackPlan) -> anyhow::Result<RuntimeHandler> {
        let (server_tools, client_tools) = self.tools(plan)?;
        let metadata_template = self
            .metadata_template
            .as_deref()
            .map(MetadataTemplate::compile)
            .transpose()
            .map_err(anyhow::Error::msg)?;
        let instructions = Instructions::of(plan);
        let handler = RuntimeHandler::new(RuntimeSettings {
            agent_name: self.agent.clone(),
            instructions: instructions.fixed(),
            provider: self.provider(&plan.sampling)?,
            server_tools,
            client_tools,
            max_rounds: plan.max_rounds,
            context_messages: self.context_messages,
            metadata_template,
            delegations: self.delegations.clone(),
            handoffs: self.handoffs.clone(),
            roster: self.roster.clone(),
            memory: self.memory.clone(),
            turn_instructions: instructions.per_turn(),
            reply_limit: plan.reply_limit.as_ref().map(|limit| ReplyLimit {
                max_characters: limit.max_characters,
                past_it: match limit.fail_on_violation {
                    true => PastLimit::Fail(limit.message.clone().unwrap_or_else(|| {
                        format!(
                            "the reply passed the agent's limit of {} characters",
                            limit.max_characters
                        )
                    })),
                    false => PastLimit::Cut,
                },
            }),
        });
        Ok(match &self.session_tools {
            Some(tools) => handler.with_session_tools(tools.clone()),
            None => handler,
        })
    }

    /// The plan's tools: client tools declared as the pack says, server
    /// tools wrapped to show the pack's specs (one source per `tools[]`
    /// entry, several pack tools sharing an MCP server's).
    fn tools(&self, plan: &PackPlan) -> anyhow::Result<(ServerTools, Vec<ClientToolDecl>)> {
        let mut client = Vec::new();
        let mut by_entry: Vec<(Arc<dyn ToolSource>, String, Vec<ToolSpec>)> = Vec::new();
        for tool in &plan.tools {
            let inner = match &tool.entry.config {
                ToolConfig::Client {
                    consent_message,
                    categories,
                    ..
                } => {
                    client.push(client_tool(tool, consent_message, categories)?);
                    continue;
                }
                ToolConfig::Http(settings) => {
                    let mut settings = settings.0.clone();
                    settings.name.clone_from(&tool.spec.name);
                    settings.description.clone_from(&tool.spec.description);
                    settings.parameters = tool.spec.parameters.clone();
                    agentwire_tools::http_tool(settings).map_err(anyhow::Error::msg)?
                }
                ToolConfig::Mcp(_) => self
                    .mcp
                    .get(&tool.entry.name)
                    .cloned()
                    .context("the agent's mcp tool was built")?,
                ToolConfig::A2a(_) => anyhow::bail!("an a2a tool was bound to a pack tool"),
            };
            match by_entry
                .iter_mut()
                .find(|(_, entry, _)| *entry == tool.entry.name)
            {
                Some((_, _, specs)) => specs.push(tool.spec.clone()),
                None => by_entry.push((inner, tool.entry.name.clone(), vec![tool.spec.clone()])),
            }
        }
        let server = by_entry
            .into_iter()
            .map(|(inner, entry, specs)| {
                Arc::new(PackSource::new(&self.agent, inner, &entry, specs)) as Arc<dyn ToolSource>
            })
            .collect();
        Ok((server, client))
    }
}

/// An agent's server tool sources, as `RuntimeSettings` takes them.
type ServerTools = Vec<Arc<dyn ToolSource>>;

fn client_tool(
    tool: &PlanTool,
    consent_message: &Option<String>,
    categories: &[String],
) -> anyhow::Result<ClientToolDecl> {
    let schema = ArgumentSchema::compile(&tool.spec.parameters).map_err(anyhow::Error::msg)?;
    Ok(ClientToolDecl {
        spec: tool.spec.clone(),
        consent_message: consent_message.clone(),
        categories: categories.to_vec(),
        validator: Arc::new(SchemaValidator(schema)),
    })
}

/// A server tool source shown as the pack declares its tools. Its name
/// (the per-connection cache's key) carries a digest of those specs, so a
/// connection that compiles an edited pack opens a box for the new specs
/// instead of reusing the old one's.
struct PackSource {
    inner: Arc<dyn ToolSource>,
    key: String,
    specs: Arc<Vec<ToolSpec>>,
    agent: String,
}

impl PackSource {
    fn new(
        agent: &str,
        inner: Arc<dyn ToolSource>,
        entry: &str,
        specs: Vec<ToolSpec>,
    ) -> PackSource {
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        for spec in &specs {
            (&spec.name, &spec.description, spec.parameters.to_string()).hash(&mut digest);
        }
        PackSource {
            inner,
            key: format!("{entry}#{:016x}", digest.finish()),
            specs: Arc::new(specs),
            agent: agent.to_owned(),
        }
    }
}

#[async_trait]
impl ToolSource for PackSource {
    fn name(&self) -> &str {
        &self.key
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn open(&self) -> Result<Arc<dyn ToolBox>, String> {
        let inner = self.inner.open().await?;
        for spec in self.specs.iter() {
            if !inner.specs().iter().any(|s| s.name == spec.name) {
                tracing::warn!(
                    agent = %self.agent,
                    tool = %spec.name,
                    source = self.inner.name(),
                    "a pack tool its tool source does not offer; calls to it fail"
                );
            }
        }
        Ok(Arc::new(PackBox {
            inner,
            specs: self.specs.clone(),
        }))
    }
}

/// An opened source, offering the pack's tools.
struct PackBox {
    inner: Arc<dyn ToolBox>,
    specs: Arc<Vec<ToolSpec>>,
}

#[async_trait]
impl ToolBox for PackBox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<Value, String> {
        if !self.inner.specs().iter().any(|s| s.name == name) {
            return Err(format!("the tool {name:?} is not available"));
        }
        self.inner.call(name, arguments).await
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// A pack agent's instructions: rendered once when the config fixes every
/// variable the template uses, else for each turn.
enum Instructions {
    Fixed(String),
    PerTurn(Arc<PackInstructions>),
}

impl Instructions {
    fn of(plan: &PackPlan) -> Instructions {
        let made = PackInstructions {
            template: plan.template.clone(),
            variables: plan.variables.clone(),
        };
        if plan.variables.iter().all(|v| v.fixed.is_some())
            && let Ok(text) = made.render(&Metadata::new())
        {
            return Instructions::Fixed(text);
        }
        Instructions::PerTurn(Arc::new(made))
    }

    fn fixed(&self) -> Option<String> {
        match self {
            Instructions::Fixed(text) => Some(text.clone()),
            Instructions::PerTurn(_) => None,
        }
    }

    fn per_turn(&self) -> Option<Arc<dyn TurnInstructions>> {
        match self {
            Instructions::Fixed(_) => None,
            Instructions::PerTurn(made) => Some(made.clone()),
        }
    }
}

/// The template, filled for a turn: each variable from the config, else
/// the message's `metadata.<name>` (of the variable's type, meeting its
/// validation), else its default; a required one with none fails the turn,
/// an optional one is empty.
struct PackInstructions {
    template: Template,
    variables: Vec<PlanVariable>,
}

impl PackInstructions {
    fn value<'m>(
        variable: &'m PlanVariable,
        metadata: &Metadata,
    ) -> Result<Cow<'m, Value>, TurnFailure> {
        if let Some(fixed) = &variable.fixed {
            return Ok(Cow::Borrowed(fixed));
        }
        let invalid = |why: String| TurnFailure::new(ErrorCode::InvalidMessage, why);
        if let Some(text) = metadata.get(&variable.name) {
            let kind = variable.kind.as_str();
            let value = variable
                .kind
                .from_text(text)
                .ok_or_else(|| invalid(format!("metadata.{} is not a {kind}", variable.name)))?;
            variable
                .schema
                .validate_without_values(&value)
                .map_err(|e| {
                    invalid(format!(
                        "metadata.{} breaks the agent's pack: {e}",
                        variable.name
                    ))
                })?;
            return Ok(Cow::Owned(value));
        }
        match (&variable.default, variable.required) {
            (Some(default), _) => Ok(Cow::Borrowed(default)),
            (None, true) => Err(invalid(format!(
                "this agent needs metadata.{} (a required variable of its pack)",
                variable.name
            ))),
            (None, false) => Ok(Cow::Owned(Value::String(String::new()))),
        }
    }
}

impl TurnInstructions for PackInstructions {
    fn render(&self, metadata: &Metadata) -> Result<String, TurnFailure> {
        let mut values = HashMap::with_capacity(self.variables.len());
        for variable in &self.variables {
            let value = PackInstructions::value(variable, metadata)?;
            values.insert(
                variable.name.as_str(),
                VariableType::render(&value).into_owned(),
            );
        }
        self.template
            .render(|name| values.get(name).map(|text| Cow::Borrowed(text.as_str())))
            .map_err(|name| {
                tracing::warn!(variable = %name, "a pack template names a variable with no value");
                TurnFailure::internal()
            })
    }
}

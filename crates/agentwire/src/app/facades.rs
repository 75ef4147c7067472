//! An agent's front doors besides the WebSocket, from its config: the
//! server's [`Facades`], with the function schemas compiled.

use std::sync::Arc;

use agentwire_core::tools::ArgumentValidator;
use agentwire_server::{A2aCard, A2aSkill, Facades, FunctionSpec, McpTool, Schema};
use agentwire_tools::ArgumentSchema;

use crate::config::AgentFacades;

pub(super) fn build(config: &AgentFacades) -> anyhow::Result<Facades> {
    Ok(Facades {
        a2a: config.a2a.as_ref().map(|a2a| A2aCard {
            description: a2a.description.clone(),
            version: a2a.version.clone(),
            skills: a2a
                .skills
                .iter()
                .map(|s| A2aSkill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                    examples: s.examples.clone(),
                })
                .collect(),
        }),
        mcp: config.mcp.as_ref().map(|mcp| McpTool {
            description: mcp.description.clone(),
            progress_interval: mcp.progress_interval,
        }),
        function: match &config.function {
            Some(function) => Some(FunctionSpec {
                input: schema(function.input_schema.as_ref())?,
                output: schema(function.output_schema.as_ref())?,
            }),
            None => None,
        },
    })
}

/// Checked at config time already: a failure here is a bug.
fn schema(document: Option<&serde_json::Value>) -> anyhow::Result<Option<Schema>> {
    let Some(document) = document else {
        return Ok(None);
    };
    let compiled = ArgumentSchema::compile(document).map_err(anyhow::Error::msg)?;
    Ok(Some(Schema {
        document: document.clone(),
        validator: Arc::new(ValueFreeValidator(compiled)),
    }))
}

/// A function's schema: its messages go to a caller (and may be logged)
/// and name where the input or the agent's output breaks the schema, never
/// a value, which can be a secret.
struct ValueFreeValidator(ArgumentSchema);

impl ArgumentValidator for ValueFreeValidator {
    fn validate(&self, value: &serde_json::Value) -> Result<(), String> {
        self.0.validate_without_values(value)
    }
}

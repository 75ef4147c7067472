//! The memory tools of a voice call: the same five tools, acting for the
//! caller and session the call was opened for (the server hands them over
//! as it hands a text turn its caller), so what a caller says in a call is
//! remembered as what they type, and recalled in either.

use std::sync::Arc;

use agentwire_core::{
    CallerToolSource, IdSource, SessionId, ToolBox, ToolOutcome, ToolSpec, TurnCaller,
};
use async_trait::async_trait;

use super::{Acting, MemorySettings, MemoryTools, specs};

/// An agent's memory tools, opened for each voice call's caller.
pub struct CallMemory {
    settings: MemorySettings,
    agent: String,
    ids: Arc<dyn IdSource>,
    specs: &'static [ToolSpec],
}

impl CallMemory {
    pub fn new(settings: MemorySettings, agent: &str, ids: Arc<dyn IdSource>) -> CallMemory {
        CallMemory {
            settings,
            agent: agent.to_owned(),
            ids,
            specs: specs::all(),
        }
    }
}

impl CallerToolSource for CallMemory {
    fn open_for(&self, caller: Arc<TurnCaller>, session: SessionId) -> Arc<dyn ToolBox> {
        Arc::new(CallMemoryBox {
            settings: self.settings.clone(),
            agent: self.agent.clone(),
            ids: self.ids.clone(),
            specs: self.specs,
            caller,
            session,
        })
    }
}

/// One call's memory tools.
struct CallMemoryBox {
    settings: MemorySettings,
    agent: String,
    ids: Arc<dyn IdSource>,
    specs: &'static [ToolSpec],
    caller: Arc<TurnCaller>,
    session: SessionId,
}

#[async_trait]
impl ToolBox for CallMemoryBox {
    fn specs(&self) -> &[ToolSpec] {
        self.specs
    }

    async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let acting = Acting {
            caller: &self.caller,
            session_id: &self.session,
            new_id: &|| self.ids.call_id(),
        };
        let tools = MemoryTools::new(&self.settings, &self.agent);
        match tools.run_for(&acting, name, &arguments).await {
            ToolOutcome::Ok(value) => Ok(value),
            ToolOutcome::Error(error) | ToolOutcome::Denied(error) => Err(error),
        }
    }
}

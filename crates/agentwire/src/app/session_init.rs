//! What an agent prepares when a session opens: each part an agent has (a
//! pack compiled for the session, its sandboxes) as one [`SessionInit`].

use std::sync::Arc;

use agentwire_core::{InitRefusal, SessionInit, SessionOpening};
use async_trait::async_trait;

/// An agent's session inits, run in order; the first refusal is the
/// answer. `None` for an agent with none: it takes no declarations.
pub(super) fn combine(inits: Vec<Arc<dyn SessionInit>>) -> Option<Arc<dyn SessionInit>> {
    match inits.len() {
        0 => None,
        1 => inits.into_iter().next(),
        _ => Some(Arc::new(InOrder(inits))),
    }
}

struct InOrder(Vec<Arc<dyn SessionInit>>);

#[async_trait]
impl SessionInit for InOrder {
    async fn open(&self, opening: SessionOpening<'_>) -> Result<(), InitRefusal> {
        for init in &self.0 {
            init.open(opening).await?;
        }
        Ok(())
    }
}

//! A sandbox instance's tools as the model sees them: named
//! `<prefix>__<tool>`, where the prefix is the handle with its `/` written
//! `_` (`workspace__list_directory`, `workspace_left__write_file`).
//!
//! The mapping is injective within a session: no name part of a handle
//! holds `__` or begins or ends with `_` (configured sandbox names are
//! checked at startup, instance names when declared), so the first `__` of
//! a tool's name ends its prefix; and a declaration whose two handles give
//! the same prefix (`a_b` and `a/b`) is refused. Names stay within the 64
//! characters of `[A-Za-z0-9_-]` that model APIs allow: an instance whose
//! tools would be named longer is refused when it starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentwire_core::{ToolBox, ToolSpec};
use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::time::Instant;

use crate::mcp::McpToolBox;

/// The longest tool name model APIs accept.
pub(crate) const MAX_TOOL_NAME: usize = 64;

/// What joins a handle's prefix to a tool's name.
const SEPARATOR: &str = "__";

/// The prefix of a handle's tools: the handle with `/` written `_`.
pub fn tool_prefix(handle: &str) -> String {
    handle.replace('/', "_")
}

/// Whether a name part of a handle keeps the tool names unambiguous: no
/// `__`, not beginning or ending with `_`.
pub(crate) fn is_unambiguous(name: &str) -> bool {
    !name.contains(SEPARATOR) && !name.starts_with('_') && !name.ends_with('_')
}

/// When an instance was last used, and how many calls it is running: the
/// idle reaper stops only an instance with none running.
#[derive(Debug)]
pub(crate) struct Activity {
    last_used: Mutex<Instant>,
    in_flight: AtomicUsize,
}

impl Activity {
    pub(crate) fn new() -> Activity {
        Activity {
            last_used: Mutex::new(Instant::now()),
            in_flight: AtomicUsize::new(0),
        }
    }

    pub(crate) fn touch(&self) {
        *self.last_used.lock() = Instant::now();
    }

    /// Whether no call has run for `ttl` and none is running.
    pub(crate) fn idle_for(&self, ttl: std::time::Duration, now: Instant) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
            && now.saturating_duration_since(*self.last_used.lock()) >= ttl
    }
}

/// Counts a call in flight for as long as it lives.
struct InFlight<'a>(&'a Activity);

impl<'a> InFlight<'a> {
    fn begin(activity: &'a Activity) -> InFlight<'a> {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        activity.touch();
        InFlight(activity)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One running instance's tools, named by its handle.
pub(crate) struct SandboxBox {
    prefix: String,
    specs: Vec<ToolSpec>,
    inner: McpToolBox,
    pub(crate) activity: Arc<Activity>,
}

impl SandboxBox {
    /// The server's tools under `handle`'s prefix; `Err` names the first
    /// tool whose name would be too long.
    pub(crate) fn new(handle: &str, inner: McpToolBox) -> Result<SandboxBox, String> {
        let prefix = format!("{}{SEPARATOR}", tool_prefix(handle));
        let mut specs = Vec::with_capacity(inner.specs().len());
        for spec in inner.specs() {
            let name = format!("{prefix}{}", spec.name);
            if name.len() > MAX_TOOL_NAME {
                return Err(format!(
                    "handle {handle:?} is too long: its tool {:?} would have a name of {} characters, more than {MAX_TOOL_NAME}",
                    spec.name,
                    name.len()
                ));
            }
            specs.push(ToolSpec {
                name,
                description: spec.description.clone(),
                parameters: spec.parameters.clone(),
            });
        }
        Ok(SandboxBox {
            prefix,
            specs,
            inner,
            activity: Arc::new(Activity::new()),
        })
    }
}

#[async_trait]
impl ToolBox for SandboxBox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<Value, String> {
        let Some(tool) = name.strip_prefix(&self.prefix) else {
            return Err(format!("unknown tool \"{name}\""));
        };
        let _in_flight = InFlight::begin(&self.activity);
        self.inner.call(tool, arguments).await
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_write_the_slash_as_an_underscore() {
        assert_eq!(tool_prefix("workspace"), "workspace");
        assert_eq!(tool_prefix("workspace/left"), "workspace_left");
    }

    #[test]
    fn ambiguous_names_are_told_apart() {
        for ok in ["files", "my_files", "a-b", "x"] {
            assert!(is_unambiguous(ok), "{ok}");
        }
        for bad in ["a__b", "_a", "a_", "__"] {
            assert!(!is_unambiguous(bad), "{bad}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_instance_is_idle_only_with_no_call_running() {
        let activity = Activity::new();
        let ttl = std::time::Duration::from_secs(10);
        assert!(!activity.idle_for(ttl, Instant::now()));
        tokio::time::advance(ttl).await;
        assert!(activity.idle_for(ttl, Instant::now()));
        let call = InFlight::begin(&activity);
        tokio::time::advance(ttl * 2).await;
        assert!(!activity.idle_for(ttl, Instant::now()), "a long call runs");
        drop(call);
        assert!(!activity.idle_for(ttl, Instant::now()), "just used");
        tokio::time::advance(ttl).await;
        assert!(activity.idle_for(ttl, Instant::now()));
    }
}

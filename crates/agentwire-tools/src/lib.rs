//! Server-side tools behind the [`ToolSource`] / [`ToolBox`] ports of
//! `agentwire-core`.
//!
//! Three kinds, all built from plain settings structs (the binary owns the
//! YAML):
//!
//! - [`http_tool`]: one tool that calls an HTTP API from a request template
//!   (method, URL, headers, body) filled with the model's arguments.
//! - [`mcp_server`]: the tools of a Model Context Protocol server, over stdio
//!   (a child process) or streamable HTTP, through the official `rmcp` SDK.
//!   Each [`ToolSource::open`] starts one MCP session; dropping the
//!   [`ToolBox`] closes it (and kills the child).
//! - [`a2a_agent`]: a remote agent over A2A (v1.0, JSON-RPC) as one tool:
//!   the model sends it a message and gets its reply; its card is fetched
//!   and checked on first use; a call given up cancels the remote task.
//!
//! - [`sandbox`]: sandboxes, an MCP server started per session (and per
//!   declared handle) with the session's mounts bound in, under bubblewrap;
//!   [`sandbox::SandboxPool`] gives each agent its `SessionInit` and
//!   `SessionTools`.
//!
//! Arguments are checked against the tool's JSON Schema before anything runs
//! ([`validate_arguments`], [`ArgumentSchema`]); a failing tool is an `Err`
//! for the model, never a panic.
//!
//! # Templates (HTTP tools)
//!
//! A placeholder is `{{name}}` (spaces inside the braces are allowed:
//! `{{ name }}`), where `name` is a top-level argument; `{{a.b}}` reaches into
//! an object argument and `{{list.0}}` into an array. How the value is written
//! depends on where the placeholder stands:
//!
//! | where | how |
//! | --- | --- |
//! | URL | percent-encoded (everything but `A-Z a-z 0-9 - . _ ~`); only in the path, query or fragment, never in the scheme or host |
//! | header value | as text |
//! | JSON body, outside a string | as JSON (`"Paris"`, `3`, `null` when absent) |
//! | JSON body, inside a string literal | as the text, JSON-escaped (`"q": "weather in {{city}}"`) |
//! | form body (`application/x-www-form-urlencoded`) | percent-encoded |
//! | other body | as text |
//!
//! Every `{{` opens a placeholder (there is no escape for a literal one), and
//! a placeholder must name an argument the schema declares under
//! `properties` (when it has that key).
//!
//! "As text": a string as it is, a number or boolean as written in JSON, an
//! absent argument or `null` as nothing, an array or object as compact JSON.
//! A body is JSON when a configured `Content-Type` says so, or, without one,
//! when it starts with `{` or `[` (and then `Content-Type: application/json`
//! is sent).
//!
//! # Logging
//!
//! Tool names, outcomes and durations only: argument values and results are
//! user data and are never logged at `info`.

mod a2a;
mod http;
mod mcp;
mod redact;
pub mod sandbox;
mod schema;
mod template;

use std::time::Duration;

pub use a2a::{A2aToolSettings, a2a_agent};
pub use agentwire_core::{ToolBox, ToolSource, ToolSpec};
pub use http::{HttpToolSettings, http_tool};
pub use mcp::{McpSettings, McpTransport, mcp_server};
pub use schema::{ArgumentSchema, validate_arguments};

/// The timeout of a tool call (and of opening an MCP session) unless the
/// settings say otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// `30s`, `1.5s`, `250ms`: a duration for messages.
fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo".to_owned(), 2), "h…");
        assert_eq!(truncate("short".to_owned(), 10), "short");
    }
}

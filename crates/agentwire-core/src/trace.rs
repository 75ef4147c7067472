//! The spans a trace is made of, as conventions every crate follows.
//!
//! Spans are `tracing` spans on [`TARGET`] at `DEBUG`. The binary exports
//! them over OTLP when `telemetry.traces` is configured, through a layer
//! whose filter takes this target alone; the log output's filter (`RUST_LOG`,
//! `info` by default) does not take them, so with traces off every span's
//! callsite is disabled and costs one check where it is created.
//!
//! Names and attributes follow OpenTelemetry's semantic conventions where
//! there is one (`gen_ai.*`, `db.*`, `error.type`), `agentwire.*` otherwise:
//!
//! - `ws.upgrade` / `ws.connection` (server): the upgrade request and the
//!   socket's life, the parent taken from the request's W3C `traceparent`;
//! - `turn` (engine): `agentwire.agent`, `agentwire.session_id`,
//!   `agentwire.turn_id`, `agentwire.outcome` (`completed` | `failed` |
//!   `cancelled`), `error.type` (the error code of a failed turn);
//! - `store.write` (engine): `db.operation.name`, `agentwire.messages`;
//! - `chat` (runtime, one per model call): `gen_ai.operation.name`,
//!   `gen_ai.provider.name`, `gen_ai.request.model`,
//!   `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
//!   `agentwire.time_to_first_token_ms`, `error.type`;
//! - `execute_tool` (runtime, one per tool call): `gen_ai.tool.name`,
//!   `agentwire.tool.side` (`client` | `http` | `mcp` | `team`),
//!   `agentwire.tool.outcome` (`ok` | `error` | `denied`).
//!
//! Never an attribute: message, prompt or reply text, tool arguments or
//! results, credentials, provider bodies.

/// The target of every trace span.
pub const TARGET: &str = "agentwire_trace";

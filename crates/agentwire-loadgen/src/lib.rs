//! agentwire-loadgen: a bounded, self-stopping load generator for agentwire
//! on loopback, and the bare baseline server it is compared with.
//!
//! - [`options`]: scenarios (`idle`, `stream`, `burst`, `soak`), their
//!   bounds, and the loopback-only rule.
//! - [`run()`]: one run against one server: connect, run, close, with the
//!   server's RSS and CPU time sampled between phases; connections beyond one
//!   process's file limit run in child processes.
//! - [`baseline`]: the same frames as agentwire, without engine, persistence
//!   or protocol checks.
//! - [`soak`]: the soak's RSS samples and its two memory figures.
//! - [`compare`]: both servers as child processes, alternating, medians and
//!   ratios.
//! - [`facades`]: a streamed turn's server CPU over the WebSocket, A2A and
//!   MCP in one sitting, and concurrent A2A streams held.
//! - [`instructions`]: instructions per streamed turn, counted by
//!   callgrind; [`budget`]: the committed budget they are checked against.
//! - [`calls`]: concurrent voice calls on the mock voice provider: CPU per
//!   call-second and RSS per call.

pub mod baseline;
pub mod budget;
pub mod calls;
mod client;
pub mod compare;
pub mod facades;
pub mod instructions;
pub mod options;
pub mod probe;
pub mod report;
mod run;
pub mod soak;
pub mod stats;

pub use client::{PER_SOURCE_ADDRESS, source_address};
pub use options::{RunOptions, Scenario};
pub use report::Report;
pub use run::{child_worker, raise_fd_limit, run};

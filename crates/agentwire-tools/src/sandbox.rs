//! Sandboxes: an MCP server (stdio) started per session and per declared
//! handle, with the session's mounts bound in, isolated by bubblewrap.
//!
//! A session declares what it needs (Omnia's `declare`, parsed by the core
//! into a [`Declaration`](agentwire_core::Declaration)); the
//! [`SandboxPool`] checks each handle against the agent's sandboxes, their
//! mount roles and the caller's grants ([`plan`]), counts instances
//! against the sandbox's caps, starts the servers ([`start`], on the
//! command line of [`command`]), and offers
//! their tools to the session's turns named by handle ([`naming`]). An
//! instance idle for its `idle_ttl` is stopped and started again on the
//! session's next turn; a session not seen for its agent's context TTL is
//! forgotten ([`pool`]).
//!
//! What a refusal says names the handle, the role and the id the caller
//! sent, never a host path or a credential; the cause goes to the log.

mod command;
mod naming;
mod plan;
mod pool;
mod start;

use std::path::PathBuf;
use std::time::Duration;

pub use command::{check_arg, find_program};
pub use naming::tool_prefix;
pub use pool::{AgentSandboxes, SandboxPool};

/// Where mounts are placed inside a bubblewrap sandbox: `<MOUNTS_DIR>/<role>/<id>`.
pub const MOUNTS_DIR: &str = "/sandbox";

/// How a sandbox's server is kept from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// bubblewrap: new namespaces, the system read-only, only the mounts
    /// writable.
    Bubblewrap,
    /// None: the server runs as the agentwire process's child, with its
    /// rights. Only where the server itself is trusted.
    None,
}

/// Whether a bubblewrap sandbox reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Its own network namespace: no interface but its own loopback.
    Isolated,
    /// The host's network.
    Shared,
}

/// Which ids a caller may mount in a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorize {
    /// The ids its credential grants (`Identity::grants`).
    Grants,
    /// Every id, for every authenticated caller.
    Any,
}

/// What a declared mount whose directory does not exist gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingDirectory {
    /// Refused (`SandboxUnavailable`).
    Refuse,
    /// Created, empty, when the instance starts.
    Create,
}

/// A kind of resource a sandbox mounts: a directory per id under `root`.
#[derive(Debug, Clone)]
pub struct MountRole {
    pub name: String,
    /// An existing directory, absolute and without symbolic links.
    pub root: PathBuf,
    pub authorize: Authorize,
    pub missing: MissingDirectory,
}

/// A sandbox's caps and timeouts.
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    /// Instances of the sandbox whose sessions have the same owner (all
    /// anonymous callers share one count).
    pub instances_per_owner: usize,
    /// Instances of the sandbox in this process.
    pub instances_per_node: usize,
    /// An instance no tool call has used for this long is stopped.
    pub idle_ttl: Duration,
    /// `RLIMIT_CPU` of the server, in seconds.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS` of the server, in bytes.
    pub memory_bytes: Option<u64>,
    /// For starting the server, its MCP handshake and its tool listing.
    pub start_timeout: Duration,
    /// For each tool call.
    pub call_timeout: Duration,
}

/// One configured sandbox. `Debug` leaves out the environment's values.
#[derive(Clone)]
pub struct SandboxSettings {
    pub name: String,
    /// The MCP server's program: a name looked up in `PATH`, or a path.
    pub command: String,
    /// Its arguments; `{mounts}` and `{mount.<role>}` are replaced by the
    /// mounts' paths as the server sees them ([`check_arg`]).
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub isolation: Isolation,
    pub network: Network,
    /// Host directories bound read-only at the same path inside a
    /// bubblewrap sandbox, besides the system's (the server's own code,
    /// when it is not under `/usr`).
    pub read_only: Vec<PathBuf>,
    pub mount_roles: Vec<MountRole>,
    pub limits: SandboxLimits,
}

impl std::fmt::Debug for SandboxSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("SandboxSettings")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &env)
            .field("isolation", &self.isolation)
            .field("network", &self.network)
            .field("read_only", &self.read_only)
            .field("mount_roles", &self.mount_roles)
            .field("limits", &self.limits)
            .finish()
    }
}

impl SandboxSettings {
    fn role(&self, name: &str) -> Option<&MountRole> {
        self.mount_roles.iter().find(|role| role.name == name)
    }
}

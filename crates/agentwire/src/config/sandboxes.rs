//! `sandboxes[]` and `agents[].sandboxes`: the MCP servers a session
//! starts for itself, with the mounts it declares.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentwire_tools::sandbox::{
    Authorize, Isolation, MissingDirectory, MountRole, Network, SandboxLimits, SandboxSettings,
    check_arg, find_program,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration::ConfigDuration;

/// One entry of `sandboxes[]`: an MCP server (stdio) that each session
/// declaring it starts for itself, with the mounts it declares bound in.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    /// The sandbox's name, as a declaration's handle names it
    /// (`<name>` or `<name>/<instance>`): 1 to 64 ASCII letters, digits,
    /// `_` or `-`, without `__` and not beginning or ending with `_` (it
    /// begins its tools' names); unique.
    name: String,
    /// The MCP server's program: a name looked up in `PATH` when a session
    /// starts it, or a path. A program that is not there refuses the
    /// declaration with `SandboxUnavailable`.
    command: String,
    /// Its arguments. `{mounts}` (a whole argument) becomes one argument
    /// per declared mount, in declared order; `{mount.<role>}` (anywhere in
    /// an argument) the first mount of that role, which every declaration
    /// must then have. Each is the mount's path as the server sees it:
    /// `/sandbox/<role>/<id>` under bubblewrap, the host's
    /// `<root>/<id>` without isolation. Default: none.
    #[serde(default)]
    args: Vec<String>,
    /// Environment variables for the server, over a minimal inherited
    /// environment (`PATH`, `HOME`, `LANG`…, as for `tools[]` of type
    /// `mcp`). Values are secrets: use `${VAR}`. Default: none.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// `bubblewrap` (bwrap, Debian's package `bubblewrap`, required at
    /// startup): the server sees the system read-only, `read_only`, a
    /// private `/tmp`, and only its mounts writable; or `none`: the server
    /// runs with agentwire's own rights, to be written explicitly (a
    /// warning is logged at startup). Default: `bubblewrap`.
    isolation: Option<RawIsolation>,
    /// With bubblewrap: `true` shares the host's network with the server;
    /// `false` gives it none but its own loopback. Without isolation the
    /// server always has the host's network, and `false` is refused.
    /// Default: `false`.
    network: Option<bool>,
    /// Host directories bound read-only at the same path inside a
    /// bubblewrap sandbox, besides the system's (`/usr`, `/bin`, `/sbin`,
    /// `/lib*`, `/etc`): where the server's code lives when it is not
    /// under `/usr` (such as an npm prefix). Each must exist. Default:
    /// none.
    #[serde(default)]
    read_only: Vec<String>,
    /// The kinds of resource a session may mount, by role name (such as
    /// `project`): a directory per id under the role's `root`. Default:
    /// none (the sandbox takes no mounts).
    #[serde(default)]
    mount_roles: BTreeMap<String, RawMountRole>,
    /// Caps, time limits and resource limits.
    #[serde(default)]
    limits: RawLimits,
}

/// `sandboxes[].isolation`.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RawIsolation {
    Bubblewrap,
    None,
}

/// `sandboxes[].mount_roles.<role>`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawMountRole {
    /// The directory holding one directory per id (`<root>/<id>`); it
    /// must exist. A mount whose directory is a symbolic link out of the
    /// root is refused as if missing.
    root: String,
    /// Which ids a caller may mount: `grants`, the ids its credential
    /// grants (`auth.jwt.grants_claim`, `auth.api_keys[].grants`); or
    /// `any`, every id, for every authenticated caller (for a
    /// single-tenant deployment, where every caller may see every
    /// project). Anonymous callers may mount nothing. Default: `grants`.
    #[serde(default)]
    authorize: RawAuthorize,
    /// Whether a mount whose directory does not exist is created (empty)
    /// when its instance starts; otherwise it is refused with
    /// `SandboxUnavailable`. Default: `false`.
    #[serde(default)]
    create: bool,
}

/// `sandboxes[].mount_roles.<role>.authorize`.
#[derive(Deserialize, Serialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "lowercase")]
enum RawAuthorize {
    #[default]
    Grants,
    Any,
}

/// `sandboxes[].limits`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
struct RawLimits {
    /// Instances of this sandbox the sessions of one owner may have at
    /// once (all anonymous callers count as one owner); one more
    /// declaration is refused with `MaxInstances`.
    instances_per_owner: usize,
    /// Instances of this sandbox this process runs at once; one more
    /// declaration is refused with `MaxInstances`.
    instances_per_node: usize,
    /// An instance no tool call has used for this long is stopped; the
    /// session's next turn starts it again.
    idle_ttl: ConfigDuration,
    /// The server's CPU time limit in seconds (`RLIMIT_CPU`, through
    /// util-linux's `prlimit`): past it the kernel ends the server.
    /// Default: none.
    cpu_seconds: Option<u64>,
    /// The server's address-space limit (`RLIMIT_AS`, through `prlimit`),
    /// in bytes or with a unit: `512MiB`, `4GiB`. Node reserves much
    /// address space: give a Node server several GiB. Default: none.
    memory: Option<RawBytes>,
    /// How long starting the server, its MCP handshake and its tool
    /// listing may take; past it the declaration is refused with
    /// `SessionInitFailed`.
    start_timeout: ConfigDuration,
    /// How long one tool call may take.
    call_timeout: ConfigDuration,
}

impl Default for RawLimits {
    fn default() -> RawLimits {
        RawLimits {
            instances_per_owner: 2,
            instances_per_node: 32,
            idle_ttl: ConfigDuration::secs(600),
            cpu_seconds: None,
            memory: None,
            start_timeout: ConfigDuration::secs(20),
            call_timeout: ConfigDuration::secs(30),
        }
    }
}

/// A size: bytes, or a number with `KiB`, `MiB`, `GiB` or `TiB`.
#[derive(Deserialize, Serialize, JsonSchema, Clone)]
#[serde(untagged)]
enum RawBytes {
    Bytes(u64),
    Text(String),
}

impl RawBytes {
    fn bytes(&self) -> Option<u64> {
        let text = match self {
            RawBytes::Bytes(bytes) => return Some(*bytes),
            RawBytes::Text(text) => text.trim(),
        };
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = text.split_at(digits);
        let shift = match unit.trim() {
            "" | "B" => 0,
            "KiB" => 10,
            "MiB" => 20,
            "GiB" => 30,
            "TiB" => 40,
            _ => return None,
        };
        number.parse::<u64>().ok()?.checked_mul(1 << shift)
    }
}

/// `sandboxes[]`, checked: names unique, directories there, bubblewrap
/// installed where it is used.
pub(super) fn validate(raw: Vec<RawSandbox>) -> Result<Vec<SandboxSettings>, ConfigError> {
    let sandboxes = raw
        .into_iter()
        .enumerate()
        .map(|(i, sandbox)| validate_sandbox(i, sandbox))
        .collect::<Result<Vec<_>, _>>()?;
    super::runtime::check_unique("sandboxes", sandboxes.iter().map(|s| s.name.as_str()))?;
    Ok(sandboxes)
}

fn validate_sandbox(index: usize, raw: RawSandbox) -> Result<SandboxSettings, ConfigError> {
    let key = |field: &str| format!("sandboxes[{index}].{field}");
    check_name(&key("name"), &raw.name)?;
    if raw.command.trim().is_empty() {
        return Err(ConfigError::new(key("command"), "must not be empty"));
    }
    if let Some(variable) = raw
        .env
        .keys()
        .find(|v| v.is_empty() || v.contains(['=', '\0']))
    {
        return Err(ConfigError::new(
            key("env"),
            format!("{variable:?} is not a valid variable name"),
        ));
    }
    let mount_roles = raw
        .mount_roles
        .into_iter()
        .map(|(name, role)| validate_role(&key(&format!("mount_roles.{name}")), name, role))
        .collect::<Result<Vec<_>, _>>()?;
    let roles: Vec<&str> = mount_roles.iter().map(|r| r.name.as_str()).collect();
    for (i, arg) in raw.args.iter().enumerate() {
        check_arg(arg, &roles).map_err(|e| ConfigError::new(key(&format!("args[{i}]")), e))?;
    }
    let isolation = match raw.isolation.unwrap_or(RawIsolation::Bubblewrap) {
        RawIsolation::None => Isolation::None,
        RawIsolation::Bubblewrap => {
            if find_program("bwrap", std::env::var_os("PATH").as_deref()).is_none() {
                return Err(ConfigError::new(
                    key("isolation"),
                    "bubblewrap is not installed (no `bwrap` on PATH): install it (Debian and Ubuntu: apt-get install bubblewrap), or write `isolation: none` to run the server unisolated",
                ));
            }
            Isolation::Bubblewrap
        }
    };
    let network = match (isolation, raw.network) {
        (Isolation::None, Some(false)) => {
            return Err(ConfigError::new(
                key("network"),
                "`isolation: none` cannot keep the server off the network; use bubblewrap",
            ));
        }
        (_, Some(true)) => Network::Shared,
        (Isolation::None, _) => Network::Shared,
        (Isolation::Bubblewrap, _) => Network::Isolated,
    };
    let read_only = (raw.read_only.iter().enumerate())
        .map(|(i, dir)| existing_dir(&key(&format!("read_only[{i}]")), dir))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SandboxSettings {
        name: raw.name,
        command: raw.command,
        args: raw.args,
        env: raw.env.into_iter().collect(),
        isolation,
        network,
        read_only,
        mount_roles,
        limits: validate_limits(&key("limits"), raw.limits)?,
    })
}

/// A sandbox's name: a handle's first part, and its tools' prefix.
fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if !(1..=64).contains(&name.len()) || !chars {
        return Err(ConfigError::new(
            key,
            "1 to 64 ASCII letters, digits, '_' or '-'",
        ));
    }
    if name.contains("__") || name.starts_with('_') || name.ends_with('_') {
        return Err(ConfigError::new(
            key,
            "may not contain \"__\" or begin or end with '_' (it begins its tools' names)",
        ));
    }
    Ok(())
}

fn validate_role(key: &str, name: String, raw: RawMountRole) -> Result<MountRole, ConfigError> {
    let chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !(1..=128).contains(&name.len()) || !chars || name.starts_with('.') {
        return Err(ConfigError::new(
            key,
            "a role's name is 1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot",
        ));
    }
    Ok(MountRole {
        root: existing_dir(&format!("{key}.root"), &raw.root)?,
        name,
        authorize: match raw.authorize {
            RawAuthorize::Grants => Authorize::Grants,
            RawAuthorize::Any => Authorize::Any,
        },
        missing: match raw.create {
            true => MissingDirectory::Create,
            false => MissingDirectory::Refuse,
        },
    })
}

/// An existing directory, as its real absolute path.
fn existing_dir(key: &str, dir: &str) -> Result<PathBuf, ConfigError> {
    match Path::new(dir).canonicalize() {
        Ok(real) if real.is_dir() => Ok(real),
        Ok(_) => Err(ConfigError::new(key, format!("{dir} is not a directory"))),
        Err(e) => Err(ConfigError::new(key, format!("{dir}: {e}"))),
    }
}

fn validate_limits(key: &str, raw: RawLimits) -> Result<SandboxLimits, ConfigError> {
    let at = |field: &str| format!("{key}.{field}");
    let zero = [
        ("instances_per_owner", raw.instances_per_owner == 0),
        ("instances_per_node", raw.instances_per_node == 0),
        ("idle_ttl", raw.idle_ttl.0.is_zero()),
        ("start_timeout", raw.start_timeout.0.is_zero()),
        ("call_timeout", raw.call_timeout.0.is_zero()),
        ("cpu_seconds", raw.cpu_seconds == Some(0)),
    ];
    if let Some((field, _)) = zero.iter().find(|(_, zero)| *zero) {
        return Err(ConfigError::new(at(field), "must be greater than 0"));
    }
    let memory_bytes = match &raw.memory {
        None => None,
        Some(memory) => match memory.bytes() {
            Some(bytes) if bytes > 0 => Some(bytes),
            _ => {
                return Err(ConfigError::new(
                    at("memory"),
                    "bytes, or a number with KiB, MiB, GiB or TiB (such as 512MiB), more than 0",
                ));
            }
        },
    };
    let limited = [
        ("cpu_seconds", raw.cpu_seconds.is_some()),
        ("memory", memory_bytes.is_some()),
    ];
    if let Some((field, _)) = limited.iter().find(|(_, given)| *given)
        && find_program("prlimit", std::env::var_os("PATH").as_deref()).is_none()
    {
        return Err(ConfigError::new(
            at(field),
            "needs prlimit, which is not on PATH: install util-linux",
        ));
    }
    Ok(SandboxLimits {
        instances_per_owner: raw.instances_per_owner,
        instances_per_node: raw.instances_per_node,
        idle_ttl: raw.idle_ttl.0,
        cpu_seconds: raw.cpu_seconds,
        memory_bytes,
        start_timeout: raw.start_timeout.0,
        call_timeout: raw.call_timeout.0,
    })
}

/// `agents[i].sandboxes`: only for `handler: runtime`, each a name from
/// `sandboxes[]`, once.
pub(super) fn validate_agent(
    index: usize,
    raw: &super::raw::Agent,
    sandboxes: &[SandboxSettings],
) -> Result<Vec<String>, ConfigError> {
    let key = |field: &str| format!("agents[{index}].{field}");
    let Some(names) = &raw.sandboxes else {
        return Ok(Vec::new());
    };
    if raw.handler != super::HandlerKind::Runtime {
        return Err(ConfigError::new(
            key("sandboxes"),
            "sandboxes need `handler: runtime`",
        ));
    }
    for (i, name) in names.iter().enumerate() {
        if !sandboxes.iter().any(|s| &s.name == name) {
            return Err(ConfigError::new(
                key(&format!("sandboxes[{i}]")),
                format!("no sandbox named {name:?} in sandboxes[]"),
            ));
        }
        if names[..i].contains(name) {
            return Err(ConfigError::new(
                key(&format!("sandboxes[{i}]")),
                format!("{name:?} is listed twice"),
            ));
        }
    }
    Ok(names.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_their_unit() {
        let bytes = |text: &str| RawBytes::Text(text.to_owned()).bytes();
        assert_eq!(bytes("512MiB"), Some(512 << 20));
        assert_eq!(bytes("4GiB"), Some(4 << 30));
        assert_eq!(bytes("1024"), Some(1024));
        assert_eq!(RawBytes::Bytes(7).bytes(), Some(7));
        for bad in ["512MB", "MiB", "1.5GiB", "-1", "99999999999TiB"] {
            assert_eq!(bytes(bad), None, "{bad}");
        }
    }
}

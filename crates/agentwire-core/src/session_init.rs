//! What an agent prepares when a session opens on a connection, before the
//! session's first turn there: the sandboxes the session declares (Omnia's
//! `declare`), a prompt pack compiled for the session.
//!
//! The engine calls [`SessionInit::open`] on the message that opens a
//! session on a connection (its first message, or one that names another
//! session). A refusal stores nothing: the session did not open, and the
//! connection's next message opens it again with whatever it declares.
//!
//! A declaration is parsed here ([`Declaration::parse`]), once, by the same
//! rules for every agent; what it names (sandboxes, mount roles, ids) is
//! checked by the agent's [`SessionInit`].

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::ids::SessionId;
use crate::memory::TurnCaller;
use crate::scope::ConnectionScope;

/// The one declaration type there is: `{"sandboxes": {...}}`.
pub const SANDBOXES: &str = "sandboxes";

/// The longest sandbox or instance name in a handle.
const MAX_NAME: usize = 64;
/// The longest mount role or id.
const MAX_MOUNT_FIELD: usize = 128;
/// The most mounts one sandbox declaration may list.
pub const MAX_MOUNTS: usize = 16;

/// How the message being submitted relates to its session on its connection.
#[derive(Debug, Clone, Copy)]
pub enum Opening<'a> {
    /// The connection's session, already open on it (or a door that
    /// declares nothing): prepared only where this process has not
    /// prepared it yet, with what it opened with.
    Continues,
    /// The message opens the session on this connection: its first
    /// message, or one that names another session. `declaration` is what it
    /// declares, unread (Omnia's `declare`; the request doors send none).
    Opens { declaration: Option<&'a Value> },
}

/// A session's declaration, parsed: the sandboxes it needs, by handle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declaration {
    /// Keyed by handle (`<sandbox>` or `<sandbox>/<instance>`), in order.
    pub sandboxes: BTreeMap<String, SandboxDeclaration>,
}

/// One sandbox a session declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxDeclaration {
    /// The configured sandbox: the handle's part before the `/`.
    pub sandbox: String,
    /// The handle's part after the `/`; `None` is the default instance.
    pub instance: Option<String>,
    /// What to bind into it, in the order declared.
    pub mounts: Vec<Mount>,
}

/// A resource bound into a sandbox: its role (a kind of resource the
/// sandbox knows, such as `project`) and its id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mount {
    pub role: String,
    pub id: String,
}

/// Why a declaration was refused: the contract's reasons, spelled as it
/// spells them in `error.details.reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The caller may not mount that id in that role.
    MountNotAuthorized,
    /// The caller or the node is at its cap of sandbox instances.
    MaxInstances,
    /// A resumed session declares something other than what it opened with.
    DeclarationMismatch,
    /// The sandbox has no mount role of that name.
    UnknownMountRole,
    /// The agent has no sandbox of that name.
    UnknownSandbox,
    /// A handle that is not `<sandbox>[/<instance>]`, or a bad mount list.
    InvalidSandboxDeclaration,
    /// The sandbox's server could not be started.
    SandboxUnavailable,
    /// A top-level key other than `sandboxes`.
    UnknownDeclarationType,
    /// The declaration is not a JSON object.
    InvalidDeclaration,
    /// The sandbox's server started but did not come up (its MCP handshake
    /// or tool listing failed).
    SessionInitFailed,
    /// The agent takes no declarations.
    SessionInitUnsupported,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::MountNotAuthorized => "MountNotAuthorized",
            RefusalReason::MaxInstances => "MaxInstances",
            RefusalReason::DeclarationMismatch => "DeclarationMismatch",
            RefusalReason::UnknownMountRole => "UnknownMountRole",
            RefusalReason::UnknownSandbox => "UnknownSandbox",
            RefusalReason::InvalidSandboxDeclaration => "InvalidSandboxDeclaration",
            RefusalReason::SandboxUnavailable => "SandboxUnavailable",
            RefusalReason::UnknownDeclarationType => "UnknownDeclarationType",
            RefusalReason::InvalidDeclaration => "InvalidDeclaration",
            RefusalReason::SessionInitFailed => "SessionInitFailed",
            RefusalReason::SessionInitUnsupported => "SessionInitUnsupported",
        }
    }
}

/// A refused declaration, as `error.details` carries it. `kind` is the
/// declaration type (`sandboxes`, or the unknown key); `handle` the
/// sandbox handle concerned. Either is empty where nothing narrower
/// applies. `message` says what was wrong; it never holds a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationRefusal {
    pub kind: String,
    pub handle: String,
    pub reason: RefusalReason,
    pub message: String,
}

impl DeclarationRefusal {
    pub fn new(
        kind: &str,
        handle: &str,
        reason: RefusalReason,
        message: impl Into<String>,
    ) -> DeclarationRefusal {
        DeclarationRefusal {
            kind: kind.to_owned(),
            handle: handle.to_owned(),
            reason,
            message: message.into(),
        }
    }

    /// A refusal about one sandbox handle.
    pub fn sandbox(
        handle: &str,
        reason: RefusalReason,
        message: impl Into<String>,
    ) -> DeclarationRefusal {
        DeclarationRefusal::new(SANDBOXES, handle, reason, message)
    }
}

/// A pack compiled for the session did not compile: the compiler's error
/// and its warnings, as plain strings (`error.details{error, warnings}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileFailure {
    pub error: String,
    pub warnings: Vec<String>,
}

/// Why a session did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitRefusal {
    #[error("the session's declaration was refused: {}", .0.reason.as_str())]
    Declaration(DeclarationRefusal),
    #[error("the agent's pack did not compile")]
    Compile(CompileFailure),
}

/// The text of `pack_compile_failed`; what failed is in its details.
pub const PACK_COMPILE_FAILED: &str = "the agent's pack did not compile";

impl InitRefusal {
    /// What `error.message` says.
    pub fn message(&self) -> &str {
        match self {
            InitRefusal::Declaration(refused) => &refused.message,
            InitRefusal::Compile(_) => PACK_COMPILE_FAILED,
        }
    }

    pub fn code(&self) -> crate::ErrorCode {
        match self {
            InitRefusal::Declaration(_) => crate::ErrorCode::SessionDeclarationRefused,
            InitRefusal::Compile(_) => crate::ErrorCode::PackCompileFailed,
        }
    }
}

impl From<DeclarationRefusal> for InitRefusal {
    fn from(refusal: DeclarationRefusal) -> InitRefusal {
        InitRefusal::Declaration(refusal)
    }
}

/// A session opening on a connection, as an agent's [`SessionInit`] sees it.
#[derive(Clone, Copy)]
pub struct SessionOpening<'a> {
    pub agent: &'a str,
    pub session: &'a SessionId,
    /// Who is calling: the owner pseudonym (`None`: anonymous).
    pub caller: &'a TurnCaller,
    /// The resource ids the caller's credential grants (its `projects`
    /// claim, an API key's `grants`); see [`crate::Identity::grants`].
    pub grants: &'a [String],
    /// The session's declaration: the opening message's for a new session,
    /// the stored one for a resumed session (they are equal, or the engine
    /// refused the message). Empty when nothing was declared.
    pub declaration: &'a Declaration,
    /// The connection's state: what is opened for the session goes here,
    /// for its turns to find.
    pub scope: &'a Arc<ConnectionScope>,
}

/// What an agent does when a session opens on a connection.
#[async_trait]
pub trait SessionInit: Send + Sync + 'static {
    /// Prepares the session, or refuses it. Called with the turn flag
    /// held, before the opening message is stored; it may take as long as
    /// starting a sandbox's server takes, and bounds that itself.
    async fn open(&self, opening: SessionOpening<'_>) -> Result<(), InitRefusal>;
}

/// The tools prepared for a session (its sandboxes'), which its turns offer
/// the model beside the agent's own. Each box names its tools by the
/// handle they came from.
#[async_trait]
pub trait SessionTools: Send + Sync + 'static {
    /// The session's tool boxes, any that ended (an idle sandbox) started
    /// again; empty for a session that declared nothing.
    async fn for_session(&self, session: &SessionId) -> Vec<Arc<dyn crate::ToolBox>>;
}

impl Declaration {
    /// Whether it declares nothing (`{}` or `{"sandboxes": {}}`).
    pub fn is_empty(&self) -> bool {
        self.sandboxes.is_empty()
    }

    /// Parses a declaration, checking in this order: an object
    /// (`InvalidDeclaration`), no key but `sandboxes`
    /// (`UnknownDeclarationType`), then each handle and its mounts
    /// (`InvalidSandboxDeclaration`).
    pub fn parse(value: &Value) -> Result<Declaration, DeclarationRefusal> {
        let Value::Object(types) = value else {
            return Err(DeclarationRefusal::new(
                "",
                "",
                RefusalReason::InvalidDeclaration,
                "declare must be a JSON object",
            ));
        };
        if let Some(unknown) = types.keys().find(|key| key.as_str() != SANDBOXES) {
            return Err(DeclarationRefusal::new(
                unknown,
                "",
                RefusalReason::UnknownDeclarationType,
                format!("unknown declaration type {unknown:?}; the only type is \"sandboxes\""),
            ));
        }
        let mut declaration = Declaration::default();
        let Some(sandboxes) = types.get(SANDBOXES) else {
            return Ok(declaration);
        };
        let Value::Object(handles) = sandboxes else {
            return Err(invalid("", "sandboxes must be an object of handles"));
        };
        for (handle, body) in handles {
            declaration
                .sandboxes
                .insert(handle.clone(), parse_sandbox(handle, body)?);
        }
        Ok(declaration)
    }
}

fn invalid(handle: &str, message: impl Into<String>) -> DeclarationRefusal {
    DeclarationRefusal::sandbox(handle, RefusalReason::InvalidSandboxDeclaration, message)
}

fn parse_sandbox(handle: &str, body: &Value) -> Result<SandboxDeclaration, DeclarationRefusal> {
    let (sandbox, instance) = match handle.split_once('/') {
        Some((sandbox, instance)) => (sandbox, Some(instance)),
        None => (handle, None),
    };
    if !is_name(sandbox) || instance.is_some_and(|instance| !is_name(instance)) {
        return Err(invalid(
            handle,
            "a handle is <sandbox> or <sandbox>/<instance>, each 1 to 64 of A-Z a-z 0-9 _ -",
        ));
    }
    let Value::Object(fields) = body else {
        return Err(invalid(handle, "a sandbox declaration must be an object"));
    };
    if let Some(unknown) = fields.keys().find(|key| key.as_str() != "mounts") {
        return Err(invalid(
            handle,
            format!("unknown field {unknown:?}; a sandbox declaration has only \"mounts\""),
        ));
    }
    let mounts = match fields.get("mounts") {
        None => Vec::new(),
        Some(Value::Array(mounts)) if mounts.len() <= MAX_MOUNTS => mounts
            .iter()
            .map(|mount| parse_mount(handle, mount))
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::Array(_)) => {
            return Err(invalid(handle, format!("at most {MAX_MOUNTS} mounts")));
        }
        Some(_) => return Err(invalid(handle, "mounts must be an array")),
    };
    let mut seen: Vec<&Mount> = mounts.iter().collect();
    seen.sort();
    if seen.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err(invalid(handle, "a mount is listed twice"));
    }
    Ok(SandboxDeclaration {
        sandbox: sandbox.to_owned(),
        instance: instance.map(str::to_owned),
        mounts,
    })
}

fn parse_mount(handle: &str, mount: &Value) -> Result<Mount, DeclarationRefusal> {
    let shape = "a mount is {\"role\": <string>, \"id\": <string>}";
    let Value::Object(fields) = mount else {
        return Err(invalid(handle, shape));
    };
    if fields.len() != 2 {
        return Err(invalid(handle, shape));
    }
    let (Some(Value::String(role)), Some(Value::String(id))) =
        (fields.get("role"), fields.get("id"))
    else {
        return Err(invalid(handle, shape));
    };
    if !is_mount_field(role) || !is_mount_field(id) {
        return Err(invalid(
            handle,
            "a mount's role and id are 1 to 128 of A-Z a-z 0-9 . _ -, not starting with a dot",
        ));
    }
    Ok(Mount {
        role: role.clone(),
        id: id.clone(),
    })
}

fn is_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An id becomes a directory name under a configured root, so it can name
/// no path: no separator, and no leading dot (`.`, `..`, hidden names).
fn is_mount_field(field: &str) -> bool {
    (1..=MAX_MOUNT_FIELD).contains(&field.len())
        && !field.starts_with('.')
        && field
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests;

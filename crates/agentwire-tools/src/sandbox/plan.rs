//! A declaration checked against the agent's sandboxes, before anything
//! starts: for each handle in order, its name (`InvalidSandboxDeclaration`
//! where it would make tool names ambiguous), the sandbox
//! (`UnknownSandbox`), each mount's role (`UnknownMountRole`) and whether
//! the caller may mount its id (`MountNotAuthorized`), the roles the
//! server's arguments need (`InvalidSandboxDeclaration`), and each mount's
//! directory (`SandboxUnavailable` when it does not exist and is not to be
//! created).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use agentwire_core::session_init::SandboxDeclaration;
use agentwire_core::{DeclarationRefusal, RefusalReason, SessionOpening};

use super::command::inside_path;
use super::naming::{is_unambiguous, tool_prefix};
use super::pool::Configured;
use super::{Authorize, MissingDirectory};

/// A mount, authorised and placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlacedMount {
    pub(super) role: String,
    pub(super) id: String,
    /// `<root>/<id>` on the host.
    pub(super) host: PathBuf,
    /// Where the server sees it.
    pub(super) inside: String,
    /// What to do when `host` does not exist when the instance starts.
    pub(super) missing: MissingDirectory,
}

/// One declared handle, checked: what its instance is started from.
#[derive(Debug)]
pub(super) struct Planned {
    pub(super) handle: String,
    pub(super) sandbox: Arc<Configured>,
    pub(super) mounts: Vec<PlacedMount>,
}

/// Checks the opening's declaration; the handles in order, ready to start.
pub(super) fn plan(
    sandboxes: &HashMap<String, Arc<Configured>>,
    agent_has: &[String],
    opening: &SessionOpening<'_>,
) -> Result<Vec<Arc<Planned>>, DeclarationRefusal> {
    let declared = &opening.declaration.sandboxes;
    let mut prefixes: HashMap<String, &str> = HashMap::new();
    let mut planned = Vec::with_capacity(declared.len());
    for (handle, declaration) in declared {
        if let Some(other) = prefixes.insert(tool_prefix(handle), handle) {
            return Err(invalid(
                handle,
                format!("handles {other:?} and {handle:?} would give their tools the same names"),
            ));
        }
        planned.push(Arc::new(plan_handle(
            sandboxes,
            agent_has,
            opening,
            handle,
            declaration,
        )?));
    }
    Ok(planned)
}

fn plan_handle(
    sandboxes: &HashMap<String, Arc<Configured>>,
    agent_has: &[String],
    opening: &SessionOpening<'_>,
    handle: &str,
    declaration: &SandboxDeclaration,
) -> Result<Planned, DeclarationRefusal> {
    if let Some(instance) = &declaration.instance
        && !is_unambiguous(instance)
    {
        return Err(invalid(
            handle,
            "an instance name may not contain \"__\" or begin or end with \"_\" (it names the instance's tools)",
        ));
    }
    let name = &declaration.sandbox;
    let sandbox = agent_has
        .iter()
        .any(|has| has == name)
        .then(|| sandboxes.get(name))
        .flatten()
        .ok_or_else(|| {
            DeclarationRefusal::sandbox(
                handle,
                RefusalReason::UnknownSandbox,
                format!("this agent has no sandbox {name:?}"),
            )
        })?;
    let mut mounts = Vec::with_capacity(declaration.mounts.len());
    for mount in &declaration.mounts {
        let Some(role) = sandbox.settings.role(&mount.role) else {
            return Err(DeclarationRefusal::sandbox(
                handle,
                RefusalReason::UnknownMountRole,
                format!("sandbox {name:?} has no mount role {:?}", mount.role),
            ));
        };
        authorize(handle, opening, role.authorize, &mount.role, &mount.id)?;
        let host = role.root.join(&mount.id);
        mounts.push(PlacedMount {
            role: mount.role.clone(),
            id: mount.id.clone(),
            inside: inside_path(sandbox.settings.isolation, &mount.role, &mount.id, &host),
            host,
            missing: role.missing,
        });
    }
    if let Some(role) = sandbox
        .required_roles
        .iter()
        .find(|role| !mounts.iter().any(|mount| &mount.role == *role))
    {
        return Err(invalid(
            handle,
            format!("sandbox {name:?} needs a mount of role {role:?}"),
        ));
    }
    for mount in &mut mounts {
        check_directory(handle, mount)?;
    }
    Ok(Planned {
        handle: handle.to_owned(),
        sandbox: sandbox.clone(),
        mounts,
    })
}

/// Whether the caller may mount `id` in a role authorised `authorize`: an
/// anonymous caller never; with `grants`, when its credential grants the id.
fn authorize(
    handle: &str,
    opening: &SessionOpening<'_>,
    authorize: Authorize,
    role: &str,
    id: &str,
) -> Result<(), DeclarationRefusal> {
    let refused = |message: String| {
        Err(DeclarationRefusal::sandbox(
            handle,
            RefusalReason::MountNotAuthorized,
            message,
        ))
    };
    if opening.caller.owner.is_none() {
        return refused(format!(
            "an anonymous caller may mount nothing: {role} {id:?} needs a credential"
        ));
    }
    match authorize {
        Authorize::Any => Ok(()),
        Authorize::Grants if opening.grants.iter().any(|grant| grant == id) => Ok(()),
        Authorize::Grants => refused(format!(
            "the caller's credential does not grant {role} {id:?}"
        )),
    }
}

/// The mount's directory, as it will be bound: an existing directory whose
/// real path stays under its root (a symbolic link out of the root is as
/// if missing), or one to create.
fn check_directory(handle: &str, mount: &mut PlacedMount) -> Result<(), DeclarationRefusal> {
    let root = mount.host.parent().map(PathBuf::from).unwrap_or_default();
    match std::fs::canonicalize(&mount.host) {
        Ok(real) if real.starts_with(&root) && real.is_dir() => {
            mount.host = real;
            Ok(())
        }
        Err(error)
            if error.kind() == std::io::ErrorKind::NotFound
                && mount.missing == MissingDirectory::Create =>
        {
            Ok(())
        }
        _ => Err(DeclarationRefusal::sandbox(
            handle,
            RefusalReason::SandboxUnavailable,
            format!(
                "{} {:?} does not exist on this server",
                mount.role, mount.id
            ),
        )),
    }
}

fn invalid(handle: &str, message: impl Into<String>) -> DeclarationRefusal {
    DeclarationRefusal::sandbox(handle, RefusalReason::InvalidSandboxDeclaration, message)
}

//! Starting one instance: its missing mount directories created where
//! the role says so, its server found and started, its MCP handshake and
//! tool listing, all within the sandbox's `start_timeout`. What fails is
//! told apart: a server that cannot be started (`SandboxUnavailable`) from
//! one that started and did not come up (`SessionInitFailed`).

use std::sync::Arc;

use agentwire_core::{DeclarationRefusal, RefusalReason, SessionId, ToolBox as _};
use tokio::time::Instant;

use super::MissingDirectory;
use super::command::{command_line, find_program};
use super::naming::SandboxBox;
use super::plan::Planned;
use crate::mcp::{McpSource, McpToolBox, OpenError};
use crate::{McpSettings, McpTransport, format_duration};

/// Starts the instance `planned` describes, for `session`.
pub(super) async fn start(
    session: &SessionId,
    planned: &Planned,
) -> Result<Arc<SandboxBox>, DeclarationRefusal> {
    let handle = planned.handle.as_str();
    create_missing(session, planned)?;
    let source = source(session, planned)?;
    let started = Instant::now();
    let opened = handshake(session, planned, &source).await?;
    let running = SandboxBox::new(handle, opened).map_err(|problem| {
        tracing::warn!(session = %session, handle, %problem, "sandbox not started");
        DeclarationRefusal::sandbox(handle, RefusalReason::InvalidSandboxDeclaration, problem)
    })?;
    tracing::info!(
        session = %session,
        handle,
        sandbox = %planned.sandbox.settings.name,
        tools = running.specs().len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "sandbox started"
    );
    Ok(Arc::new(running))
}

fn unavailable(handle: &str, message: String) -> DeclarationRefusal {
    DeclarationRefusal::sandbox(handle, RefusalReason::SandboxUnavailable, message)
}

/// Creates the mounts' directories that are missing where their role
/// creates them.
fn create_missing(session: &SessionId, planned: &Planned) -> Result<(), DeclarationRefusal> {
    let handle = planned.handle.as_str();
    for mount in &planned.mounts {
        if mount.missing == MissingDirectory::Create
            && let Err(error) = std::fs::create_dir(&mount.host)
            && error.kind() != std::io::ErrorKind::AlreadyExists
        {
            tracing::warn!(session = %session, handle, role = %mount.role, %error, "sandbox mount directory not created");
            return Err(unavailable(
                handle,
                format!("{} {:?} could not be created", mount.role, mount.id),
            ));
        }
    }
    Ok(())
}

/// The instance's MCP source: its command line, under prlimit and bwrap.
fn source(session: &SessionId, planned: &Planned) -> Result<McpSource, DeclarationRefusal> {
    let handle = planned.handle.as_str();
    let sandbox = &planned.sandbox;
    let settings = &sandbox.settings;
    let name = &settings.name;
    let Some(program) = find_program(&settings.command, std::env::var_os("PATH").as_deref()) else {
        tracing::warn!(session = %session, handle, sandbox = %name, "sandbox server program not found");
        return Err(unavailable(
            handle,
            format!("sandbox {name:?} is not installed on this server"),
        ));
    };
    let (command, args) = command_line(
        settings,
        &program,
        sandbox.prlimit.as_deref(),
        &planned.mounts,
    );
    let mcp = McpSettings {
        name: format!("sandbox {handle}"),
        transport: McpTransport::Stdio {
            command,
            args,
            env: settings.env.clone(),
        },
        timeout: settings.limits.call_timeout,
    };
    McpSource::new(mcp).map_err(|problem| {
        tracing::warn!(session = %session, handle, %problem, "sandbox settings refused");
        unavailable(handle, format!("sandbox {name:?} could not be started"))
    })
}

/// Starts the server and lists its tools within `start_timeout`; on
/// timeout the half-made session is dropped, which kills the server.
async fn handshake(
    session: &SessionId,
    planned: &Planned,
    source: &McpSource,
) -> Result<McpToolBox, DeclarationRefusal> {
    let handle = planned.handle.as_str();
    let name = &planned.sandbox.settings.name;
    let timeout = planned.sandbox.settings.limits.start_timeout;
    let failed = |message: String| {
        DeclarationRefusal::sandbox(handle, RefusalReason::SessionInitFailed, message)
    };
    match tokio::time::timeout(timeout, source.start()).await {
        Ok(Ok(opened)) => Ok(opened),
        Err(_) => {
            tracing::warn!(session = %session, handle, "sandbox server did not start in time");
            Err(failed(format!(
                "sandbox {name:?} did not start within {}",
                format_duration(timeout)
            )))
        }
        Ok(Err(OpenError::Spawn(error))) => {
            tracing::warn!(session = %session, handle, %error, "sandbox not started");
            Err(unavailable(
                handle,
                format!("sandbox {name:?} could not be started"),
            ))
        }
        Ok(Err(OpenError::Protocol(error))) => {
            tracing::warn!(session = %session, handle, %error, "sandbox server did not come up");
            Err(failed(format!(
                "sandbox {name:?} did not start: its server exited or does not speak MCP"
            )))
        }
    }
}

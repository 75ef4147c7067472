//! Compile mode (`agents[].pack.compile: per_session`): the pack file is
//! read, compiled and bound at every session open, so an author's edit
//! shows on the next session without a restart.
//!
//! The session init ([`PerSession::init`]) runs on the message that opens
//! a session on a connection: a pack that does not compile refuses it with
//! `pack_compile_failed` (`details{error, warnings}`; the socket stays
//! open and the next message tries again), one that does is built into a
//! handler kept in the connection's scope for that session. The agent's
//! handler ([`PerSession::handler`]) runs the session's: a turn that finds
//! none (a session continued on a connection that did not open it, such
//! as a request door's, or a delegated sub-turn) compiles then, and fails
//! with `pack_compile_failed` if it cannot. Every compile's outcome goes to
//! the agent's [`PackStatus`] (the agents listing, the console) and its
//! warnings to the log.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use agentwire_core::session_init::CompileFailure;
use agentwire_core::{
    DeclarationRefusal, ErrorCode, Handler, InitRefusal, RefusalReason, Reply, SessionInit,
    SessionOpening, TurnContext, TurnFailure,
};
use agentwire_runtime::RuntimeHandler;
use agentwire_server::PackStatus;
use async_trait::async_trait;
use parking_lot::Mutex;

use super::PackBuilder;
use crate::config::{PackFailure, PackPlan, PackSource};

/// The most sessions one connection keeps a compiled pack for: opening
/// another drops the oldest, whose next turn compiles again.
const SESSIONS_PER_CONNECTION: usize = 16;

/// Whether the pack init answers declarations itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::app) enum Declarations {
    /// Refuses a non-empty one (`SessionInitUnsupported`): no init after
    /// it takes declarations.
    Refused,
    /// Leaves them to an init that runs after it (the agent's sandboxes).
    Passed,
}

/// A compile-mode agent: where its pack is and how to build its handler.
pub(in crate::app) struct PerSession {
    agent: String,
    path: PathBuf,
    source: PackSource,
    builder: PackBuilder,
    status: Arc<PackStatus>,
    declarations: Declarations,
}

/// The handlers compiled for the sessions a connection opened, by agent
/// and session, the latest last.
#[derive(Default)]
struct SessionPacks {
    compiled: Mutex<VecDeque<(String, String, Arc<RuntimeHandler>)>>,
}

impl SessionPacks {
    fn get(&self, agent: &str, session: &str) -> Option<Arc<RuntimeHandler>> {
        let compiled = self.compiled.lock();
        compiled
            .iter()
            .find(|(a, s, _)| a == agent && s == session)
            .map(|(_, _, handler)| handler.clone())
    }

    fn put(&self, agent: &str, session: &str, handler: Arc<RuntimeHandler>) {
        let mut compiled = self.compiled.lock();
        compiled.retain(|(a, s, _)| !(a == agent && s == session));
        if compiled.len() == SESSIONS_PER_CONNECTION {
            compiled.pop_front();
        }
        compiled.push_back((agent.to_owned(), session.to_owned(), handler));
    }
}

impl PerSession {
    pub(in crate::app) fn new(
        agent: &str,
        path: PathBuf,
        source: PackSource,
        builder: PackBuilder,
        declarations: Declarations,
    ) -> Arc<PerSession> {
        Arc::new(PerSession {
            agent: agent.to_owned(),
            path,
            source,
            builder,
            status: Arc::new(PackStatus::new("per_session")),
            declarations,
        })
    }

    pub(in crate::app) fn status(&self) -> Arc<PackStatus> {
        self.status.clone()
    }

    pub(in crate::app) fn init(self: &Arc<Self>) -> Arc<dyn SessionInit> {
        Arc::new(PackInit(self.clone()))
    }

    pub(in crate::app) fn handler(self: &Arc<Self>) -> Arc<dyn Handler> {
        Arc::new(PackHandler(self.clone()))
    }

    /// The file's name as errors show it.
    fn file(&self) -> String {
        self.path.display().to_string()
    }

    /// The compile at startup: the server starts whatever its outcome,
    /// which the log says.
    pub(in crate::app) fn try_at_startup(&self) {
        let built = match std::fs::read_to_string(&self.path) {
            Ok(text) => self.build(&text),
            Err(e) => Err(self.unreadable(&e)),
        };
        match built {
            Ok(_) => tracing::info!(
                agent = %self.agent,
                pack = %self.file(),
                "the agent's pack compiles; compile mode compiles it again at every session open"
            ),
            Err(failure) => tracing::warn!(
                agent = %self.agent,
                pack = %self.file(),
                error = %failure.error,
                "the agent's pack does not compile yet; its sessions are refused until it does"
            ),
        }
    }

    /// Reads the file and builds the handler, recording the outcome.
    async fn compile(&self) -> Result<Arc<RuntimeHandler>, CompileFailure> {
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(path)).await;
        let text = match read {
            Ok(Ok(text)) => text,
            Ok(Err(e)) => return Err(self.unreadable(&e)),
            Err(_) => return Err(self.unreadable(&std::io::Error::other("the read was cancelled"))),
        };
        self.build(&text)
    }

    fn unreadable(&self, error: &std::io::Error) -> CompileFailure {
        let failure = CompileFailure {
            error: format!("cannot read {}: {error}", self.file()),
            warnings: Vec::new(),
        };
        self.status.record(|report| {
            report.error = Some(failure.error.clone());
            report.warnings.clear();
        });
        failure
    }

    fn build(&self, text: &str) -> Result<Arc<RuntimeHandler>, CompileFailure> {
        let built =
            crate::config::compile_pack(text, &self.file(), &self.source).and_then(|plan| {
                let handler = self.builder.handler(&plan).map_err(|e| PackFailure {
                    error: format!("{e:#}"),
                    lines: Vec::new(),
                    warnings: plan.warnings.clone(),
                })?;
                Ok((plan, handler))
            });
        match built {
            Ok((plan, handler)) => {
                self.succeeded(&plan);
                Ok(Arc::new(handler))
            }
            Err(failure) => {
                self.status.record(|report| {
                    report.error = Some(failure.error.clone());
                    report.warnings.clone_from(&failure.warnings);
                });
                Err(CompileFailure {
                    error: failure.error,
                    warnings: failure.warnings,
                })
            }
        }
    }

    fn succeeded(&self, plan: &PackPlan) {
        for warning in &plan.warnings {
            tracing::warn!(agent = %self.agent, %warning, "pack warning");
        }
        self.status.record(|report| record_plan(report, plan));
    }
}

/// A compile that succeeded, as the agents listing shows it.
pub(in crate::app) fn record_plan(report: &mut agentwire_server::PackReport, plan: &PackPlan) {
    report.id = Some(plan.id.clone());
    report.version = Some(plan.version.clone());
    report.prompt = Some(plan.prompt.clone());
    report.ai_disclosure = plan.ai_disclosure;
    report.error = None;
    report.warnings.clone_from(&plan.warnings);
}

struct PackInit(Arc<PerSession>);

#[async_trait]
impl SessionInit for PackInit {
    async fn open(&self, opening: SessionOpening<'_>) -> Result<(), InitRefusal> {
        let agent = &self.0;
        if agent.declarations == Declarations::Refused
            && let Some(handle) = opening.declaration.sandboxes.keys().next()
        {
            return Err(DeclarationRefusal::sandbox(
                handle,
                RefusalReason::SessionInitUnsupported,
                "this agent takes no declarations",
            )
            .into());
        }
        let handler = agent.compile().await.map_err(|failure| {
            tracing::info!(
                agent = %agent.agent,
                session = %opening.session,
                "session refused: the agent's pack did not compile"
            );
            InitRefusal::Compile(failure)
        })?;
        opening.scope.get_or_init(SessionPacks::default).put(
            &agent.agent,
            opening.session.as_str(),
            handler,
        );
        Ok(())
    }
}

struct PackHandler(Arc<PerSession>);

#[async_trait]
impl Handler for PackHandler {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        let agent = &self.0;
        let packs = turn.scope.get_or_init(SessionPacks::default);
        let session = turn.session_id.as_str();
        let handler = match packs.get(&agent.agent, session) {
            Some(handler) => handler,
            None => {
                let handler = agent.compile().await.map_err(|failure| {
                    TurnFailure::new(ErrorCode::PackCompileFailed, failure.error)
                })?;
                packs.put(&agent.agent, session, handler.clone());
                handler
            }
        };
        handler.run(turn).await
    }

    fn history_window(&self) -> usize {
        self.0.builder.context_messages
    }
}

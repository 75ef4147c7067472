//! Rejoin: a connection comes back to a session it followed, at the log
//! position it had read up to; and the grace that keeps a session (with its
//! log) in memory a while for a client that went away.

use std::time::Duration;

use super::{Agent, Engine, SessionLease, SubmitError};
use agentwire_core::ids::SessionId;
use agentwire_core::log::{Epoch, LogReader};

/// A connection coming back to a session it followed before, at the log
/// position it had read up to.
pub struct RejoinRequest<'a> {
    pub agent: &'a Agent,
    pub namespace: &'a str,
    /// The caller's pseudonymous owner, `None` for an anonymous caller.
    pub owner: Option<&'a str>,
    /// Whether an anonymous caller may come back to an anonymous session.
    pub anonymous: AnonymousRejoin,
    pub session: &'a str,
    /// The log's epoch and the seq of the last entry the client had; `None`
    /// when it could not say (nothing can be replayed then).
    pub position: Option<(Epoch, u64)>,
}

/// Whether an anonymous caller may rejoin an anonymous session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnonymousRejoin {
    /// Never: nobody can prove an anonymous session is theirs (the
    /// sockets).
    Refused,
    /// By the session's id alone, which the caller was given and which is
    /// the only proof there is (A2A's task ids, for unauthenticated
    /// deployments).
    ById,
}

/// Where a rejoined connection reads its session's log.
pub struct Rejoined {
    pub session: SessionLease,
    /// The log's epoch and head now, for the client's next rejoin.
    pub epoch: Epoch,
    pub head: u64,
    /// From the start of the turn that holds the client's next entry
    /// ([`agentwire_core::log::SessionLog::rejoin_reader`]) when `replayed`; else from the head,
    /// live only: the log does not reach back to the client's position
    /// (another epoch, or trimmed), so it reloads the history from the
    /// store instead.
    pub reader: LogReader,
    pub replayed: bool,
}

/// How long a session whose client went away before reading the end of its
/// turn stays in memory after that (with its log), so the client can rejoin
/// and read it.
pub const REJOIN_GRACE: Duration = Duration::from_secs(120);

impl Engine {
    /// Attaches a connection to a session it followed before (issue #13):
    /// the same checks as a resume (agent, owner, `context_ttl`), and for
    /// an anonymous caller only as [`AnonymousRejoin`] allows.
    pub async fn rejoin(&self, req: RejoinRequest<'_>) -> Result<Rejoined, SubmitError> {
        let id = SessionId::parse(req.session)?;
        if req.owner.is_none() && req.anonymous == AnonymousRejoin::Refused {
            return Err(SubmitError::Expired { requested: id });
        }
        let lease = self
            .attach(&id, req.agent, req.namespace, req.owner, false)
            .await?;
        // Where logs are shared, the turn may have run (or run now) on
        // another replica: this one's log catches up first.
        lease.catch_up().await?;
        if let Some((epoch, after)) = req.position
            && epoch == lease.session.log.epoch()
        {
            lease.backfill_for_rejoin(after).await?;
        }
        lease.follow_foreign_turn();
        let log = &lease.session.log;
        let replay = match req.position {
            Some((epoch, after)) if epoch == log.epoch() => log.rejoin_reader(after),
            _ => None,
        };
        let replayed = replay.is_some();
        let head = log.readable_head();
        let reader = replay.unwrap_or_else(|| log.reader_after(head));
        Ok(Rejoined {
            epoch: log.epoch(),
            head,
            reader,
            replayed,
            session: lease,
        })
    }
}

impl SessionLease {
    /// The turn running on the session now, here or (mirrored, after a
    /// [`Engine::rejoin`]) on another replica.
    pub fn running_turn(&self) -> Option<agentwire_core::log::TurnId> {
        self.session.log.running()
    }

    /// The seq of the session log's latest entry.
    pub fn log_head(&self) -> u64 {
        self.session.log.readable_head()
    }

    /// A reader of the running turn from its first entry, while the log
    /// still holds it: what a follower that had nothing of the turn reads.
    pub fn running_turn_reader(&self) -> Option<LogReader> {
        let turn = self.session.log.running()?;
        self.session.log.rejoin_reader(turn.0.checked_sub(1)?)
    }

    /// Keeps the session in memory for `grace` from now, whoever owns it:
    /// a client that continues it with its next request (the request
    /// doors: A2A, MCP, REST) finds it live instead of loaded from the
    /// store again. Needs a tokio runtime; without one it does nothing.
    pub fn hold_for(&self, grace: Duration) {
        let held = self.clone_lease();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep(grace).await;
                drop(held);
            });
        }
    }

    /// Keeps the session, and so its log, in memory for [`REJOIN_GRACE`]
    /// more, when its owner could rejoin it; anonymous sessions never
    /// rejoin, so theirs go at once. Needs a tokio runtime; without one (a
    /// runtime shutting down) the session goes at once.
    pub fn keep_for_rejoin(self) {
        if self.session.record.owner.is_none() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep(REJOIN_GRACE).await;
                drop(self);
            });
        }
    }
}

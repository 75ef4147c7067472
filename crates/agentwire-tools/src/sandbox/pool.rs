//! The instances running in this process, by session and handle.
//!
//! A session the pool has opened is remembered (its checked declaration
//! and owner) until it has not been seen for its agent's context TTL, so an
//! instance stopped when idle, or whose server died, is started again on
//! the session's next turn. Caps count instances running or starting: per
//! sandbox, those of sessions with the same owner, and all of them.
//!
//! The engine runs one opening or turn of a session at a time, so a
//! session's instances are started by one task at a time; the reaper only
//! stops instances, never starts them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use agentwire_core::{
    DeclarationRefusal, InitRefusal, RefusalReason, SessionId, SessionInit, SessionOpening,
    SessionTools, ToolBox,
};
use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::SandboxSettings;
use super::command::{find_program, roles_named};
use super::naming::SandboxBox;
use super::plan::{Planned, plan};
use super::start::start;

/// A configured sandbox, as the pool runs it.
#[derive(Debug)]
pub(super) struct Configured {
    pub(super) settings: SandboxSettings,
    /// The roles the server's arguments name (`{mount.<role>}`): a
    /// declaration must mount each.
    pub(super) required_roles: Vec<String>,
    /// `prlimit`, found at startup, when the sandbox has CPU or memory limits.
    pub(super) prlimit: Option<PathBuf>,
}

/// Every sandbox instance of this process.
pub struct SandboxPool {
    sandboxes: HashMap<String, Arc<Configured>>,
    state: Arc<Mutex<State>>,
    /// Wakes the reaper when it is to look more often.
    sooner: Arc<tokio::sync::Notify>,
    reaper: tokio::task::JoinHandle<()>,
}

struct State {
    sessions: HashMap<SessionId, Tracked>,
    /// How often the reaper looks: a quarter of the shortest idle or
    /// context TTL, within [`REAP_EVERY`].
    reap_every: Duration,
}

/// The least and the most time between two runs of the reaper.
const REAP_EVERY: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(60));

impl State {
    /// Looks at least a quarter of `ttl` apart.
    fn reap_within(&mut self, ttl: Duration) {
        self.reap_every = self.reap_every.min(ttl / 4).max(REAP_EVERY.0);
    }
}

/// A session the pool opened.
struct Tracked {
    owner: Option<String>,
    context_ttl: Duration,
    last_seen: Instant,
    handles: Vec<Slot>,
}

struct Slot {
    planned: Arc<Planned>,
    state: SlotState,
}

enum SlotState {
    Stopped,
    Starting,
    Running(Arc<SandboxBox>),
}

impl SlotState {
    fn counts(&self) -> bool {
        !matches!(self, SlotState::Stopped)
    }
}

/// What a failed start does to the others of the same batch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnFailure {
    /// Stops the batch's instances and refuses (a session opening: all or
    /// nothing).
    Refuse,
    /// Leaves the instance out and starts the rest (a turn: best effort).
    LeaveOut,
}

/// Why an instance stopped, for the log.
#[derive(Clone, Copy)]
enum Stop {
    Idle,
    Exited,
    Forgotten,
    Refused,
    Shutdown,
}

impl Stop {
    fn as_str(self) -> &'static str {
        match self {
            Stop::Idle => "idle",
            Stop::Exited => "exited",
            Stop::Forgotten => "session forgotten",
            Stop::Refused => "opening refused",
            Stop::Shutdown => "server stopping",
        }
    }
}

impl SandboxPool {
    /// The pool of `sandboxes`, its idle reaper started (on the current
    /// tokio runtime). `Err` names a sandbox whose limits need `prlimit`
    /// where there is none.
    pub fn new(sandboxes: Vec<SandboxSettings>) -> Result<Arc<SandboxPool>, String> {
        let path = std::env::var_os("PATH");
        let mut configured = HashMap::with_capacity(sandboxes.len());
        for settings in sandboxes {
            let limits = &settings.limits;
            let prlimit = if limits.cpu_seconds.is_some() || limits.memory_bytes.is_some() {
                Some(find_program("prlimit", path.as_deref()).ok_or_else(|| {
                    format!(
                        "sandbox {:?}: its limits need prlimit (util-linux), which is not on PATH",
                        settings.name
                    )
                })?)
            } else {
                None
            };
            let mut required_roles: Vec<String> = Vec::new();
            for role in settings
                .args
                .iter()
                .flat_map(|arg| roles_named(arg))
                .flatten()
            {
                if !required_roles.iter().any(|r| r == role) {
                    required_roles.push(role.to_owned());
                }
            }
            configured.insert(
                settings.name.clone(),
                Arc::new(Configured {
                    settings,
                    required_roles,
                    prlimit,
                }),
            );
        }
        let mut state = State {
            sessions: HashMap::new(),
            reap_every: REAP_EVERY.1,
        };
        for sandbox in configured.values() {
            state.reap_within(sandbox.settings.limits.idle_ttl);
        }
        let state = Arc::new(Mutex::new(state));
        let sooner = Arc::new(tokio::sync::Notify::new());
        let reaper = tokio::spawn(reap(Arc::downgrade(&state), sooner.clone()));
        Ok(Arc::new(SandboxPool {
            sandboxes: configured,
            state,
            sooner,
            reaper,
        }))
    }

    /// What agent `agent` opens and offers: the sandboxes it names, its
    /// sessions remembered for `context_ttl` after they were last seen.
    pub fn for_agent(
        self: &Arc<SandboxPool>,
        agent: &str,
        sandboxes: Vec<String>,
        context_ttl: Duration,
    ) -> Arc<AgentSandboxes> {
        self.state.lock().reap_within(context_ttl);
        self.sooner.notify_one();
        Arc::new(AgentSandboxes {
            pool: self.clone(),
            agent: agent.to_owned(),
            sandboxes,
            context_ttl,
        })
    }

    /// Stops every instance and forgets every session: when the server stops.
    pub fn shutdown(&self) {
        let sessions = std::mem::take(&mut self.state.lock().sessions);
        for (session, tracked) in sessions {
            for slot in tracked.handles {
                log_stop(&session, &slot, Stop::Shutdown);
            }
        }
    }

    /// Instances running or starting: of `sandbox` in this process, and of
    /// those whose session's owner is `owner`.
    fn count(state: &State, sandbox: &str, owner: Option<&str>) -> (usize, usize) {
        let mut node = 0;
        let mut owned = 0;
        for tracked in state.sessions.values() {
            for slot in &tracked.handles {
                if slot.planned.sandbox.settings.name == sandbox && slot.state.counts() {
                    node += 1;
                    if tracked.owner.as_deref() == owner {
                        owned += 1;
                    }
                }
            }
        }
        (node, owned)
    }

    /// Marks the session's stopped (or dead) instances starting, within the
    /// caps; the ones marked, by index. At a cap: `OnFailure::Refuse`
    /// unmarks the batch and refuses, `LeaveOut` leaves that one stopped.
    fn reserve(
        &self,
        session: &SessionId,
        on_failure: OnFailure,
    ) -> Result<Vec<(usize, Arc<Planned>)>, DeclarationRefusal> {
        let mut state = self.state.lock();
        let Some(tracked) = state.sessions.get_mut(session) else {
            return Ok(Vec::new());
        };
        let mut dead = Vec::new();
        for slot in &mut tracked.handles {
            if let SlotState::Running(running) = &slot.state
                && running.is_closed()
            {
                log_stop(session, slot, Stop::Exited);
                dead.push(std::mem::replace(&mut slot.state, SlotState::Stopped));
            }
        }
        let owner = tracked.owner.clone();
        let wanted: Vec<usize> = (tracked.handles.iter().enumerate())
            .filter(|(_, slot)| matches!(slot.state, SlotState::Stopped))
            .map(|(index, _)| index)
            .collect();
        let mut reserved: Vec<(usize, Arc<Planned>)> = Vec::with_capacity(wanted.len());
        for index in wanted {
            let planned = state.sessions[session].handles[index].planned.clone();
            if let Err(refusal) = self.within_caps(&state, &planned, owner.as_deref()) {
                match on_failure {
                    OnFailure::LeaveOut => {
                        tracing::warn!(session = %session, handle = %planned.handle, "sandbox not restarted: at its instance cap");
                        continue;
                    }
                    OnFailure::Refuse => {
                        let tracked = state.sessions.get_mut(session).expect("looked up above");
                        for (index, _) in reserved {
                            tracked.handles[index].state = SlotState::Stopped;
                        }
                        return Err(refusal);
                    }
                }
            }
            let tracked = state.sessions.get_mut(session).expect("looked up above");
            tracked.handles[index].state = SlotState::Starting;
            reserved.push((index, planned));
        }
        drop(state);
        drop(dead);
        Ok(reserved)
    }

    fn within_caps(
        &self,
        state: &State,
        planned: &Planned,
        owner: Option<&str>,
    ) -> Result<(), DeclarationRefusal> {
        let settings = &planned.sandbox.settings;
        let (node, owned) = Self::count(state, &settings.name, owner);
        let limits = &settings.limits;
        let message = if owned >= limits.instances_per_owner {
            format!(
                "the caller is at its limit of instances of sandbox {:?} ({})",
                settings.name, limits.instances_per_owner
            )
        } else if node >= limits.instances_per_node {
            format!(
                "this server is at its limit of instances of sandbox {:?} ({})",
                settings.name, limits.instances_per_node
            )
        } else {
            return Ok(());
        };
        Err(DeclarationRefusal::sandbox(
            &planned.handle,
            RefusalReason::MaxInstances,
            message,
        ))
    }

    /// Starts the session's instances that are not running; its running
    /// ones' boxes, in declared order.
    async fn ensure_running(
        &self,
        session: &SessionId,
        on_failure: OnFailure,
    ) -> Result<Vec<Arc<SandboxBox>>, DeclarationRefusal> {
        let reserved = self.reserve(session, on_failure)?;
        let mut started = Vec::with_capacity(reserved.len());
        for (position, (index, planned)) in reserved.iter().enumerate() {
            let outcome = start(session, planned).await;
            let mut state = self.state.lock();
            let Some(tracked) = state.sessions.get_mut(session) else {
                // Forgotten meanwhile (the server is stopping): drop it.
                return Ok(Vec::new());
            };
            match outcome {
                Ok(running) => {
                    tracked.handles[*index].state = SlotState::Running(running);
                    started.push(*index);
                }
                Err(refusal) => {
                    tracked.handles[*index].state = SlotState::Stopped;
                    if on_failure == OnFailure::Refuse {
                        for (index, _) in &reserved[position + 1..] {
                            tracked.handles[*index].state = SlotState::Stopped;
                        }
                        for index in started {
                            log_stop(session, &tracked.handles[index], Stop::Refused);
                            tracked.handles[index].state = SlotState::Stopped;
                        }
                        return Err(refusal);
                    }
                }
            }
        }
        let mut state = self.state.lock();
        let Some(tracked) = state.sessions.get_mut(session) else {
            return Ok(Vec::new());
        };
        tracked.last_seen = Instant::now();
        Ok(tracked
            .handles
            .iter()
            .filter_map(|slot| match &slot.state {
                SlotState::Running(running) => Some(running.clone()),
                _ => None,
            })
            .collect())
    }

    /// Opens the session's planned handles. A session new to the pool is
    /// remembered and its instances started, all or none: a refusal
    /// forgets it. One the pool knows (opened on another connection, or
    /// before its instances went idle) is only seen: its turns start again
    /// what stopped, as far as the caps allow, and it is never refused for
    /// a slot its own idle instance gave up.
    async fn open(
        &self,
        session: &SessionId,
        owner: Option<String>,
        context_ttl: Duration,
        planned: Vec<Arc<Planned>>,
    ) -> Result<(), DeclarationRefusal> {
        let created = {
            let mut state = self.state.lock();
            match state.sessions.get_mut(session) {
                Some(tracked) => {
                    tracked.last_seen = Instant::now();
                    false
                }
                None => {
                    let handles = planned
                        .into_iter()
                        .map(|planned| Slot {
                            planned,
                            state: SlotState::Stopped,
                        })
                        .collect();
                    state.sessions.insert(
                        session.clone(),
                        Tracked {
                            owner,
                            context_ttl,
                            last_seen: Instant::now(),
                            handles,
                        },
                    );
                    true
                }
            }
        };
        if !created {
            return Ok(());
        }
        match self.ensure_running(session, OnFailure::Refuse).await {
            Ok(_) => Ok(()),
            Err(refusal) => {
                let forgotten = self.state.lock().sessions.remove(session);
                drop(forgotten);
                Err(refusal)
            }
        }
    }

    /// The session's instances' boxes, any that stopped started again.
    async fn tools(&self, session: &SessionId) -> Vec<Arc<dyn ToolBox>> {
        match self.ensure_running(session, OnFailure::LeaveOut).await {
            Ok(boxes) => boxes
                .into_iter()
                .map(|running| running as Arc<dyn ToolBox>)
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

impl Drop for SandboxPool {
    fn drop(&mut self) {
        self.reaper.abort();
    }
}

fn log_stop(session: &SessionId, slot: &Slot, why: Stop) {
    if matches!(slot.state, SlotState::Running(_)) {
        tracing::info!(session = %session, handle = %slot.planned.handle, reason = why.as_str(), "sandbox stopped");
    }
}

/// Now and then: stops the instances idle for their sandbox's `idle_ttl`
/// (or whose server exited) and forgets the sessions not seen for their
/// context TTL; ends with the pool.
async fn reap(state: Weak<Mutex<State>>, sooner: Arc<tokio::sync::Notify>) {
    let mut every = REAP_EVERY.0;
    loop {
        if tokio::time::timeout(every, sooner.notified()).await.is_ok() {
            if let Some(state) = state.upgrade() {
                every = state.lock().reap_every;
            }
            continue;
        }
        let Some(state) = state.upgrade() else {
            return;
        };
        let mut locked = state.lock();
        every = locked.reap_every;
        let stopped = stop_expired(&mut locked, Instant::now());
        drop(locked);
        // Dropped outside the lock: dropping a box closes its session.
        drop(stopped);
    }
}

fn stop_expired(state: &mut State, now: Instant) -> Vec<SlotState> {
    let mut stopped = Vec::new();
    state.sessions.retain(|session, tracked| {
        if now.saturating_duration_since(tracked.last_seen) >= tracked.context_ttl {
            for slot in tracked.handles.drain(..) {
                log_stop(session, &slot, Stop::Forgotten);
                stopped.push(slot.state);
            }
            return false;
        }
        for slot in &mut tracked.handles {
            let why = match &slot.state {
                SlotState::Running(running) if running.is_closed() => Stop::Exited,
                SlotState::Running(running)
                    if running
                        .activity
                        .idle_for(slot.planned.sandbox.settings.limits.idle_ttl, now) =>
                {
                    Stop::Idle
                }
                _ => continue,
            };
            log_stop(session, slot, why);
            stopped.push(std::mem::replace(&mut slot.state, SlotState::Stopped));
        }
        true
    });
    stopped
}

/// One agent's sandboxes: its [`SessionInit`] (a session's declaration
/// checked and its instances started) and its [`SessionTools`].
pub struct AgentSandboxes {
    pool: Arc<SandboxPool>,
    agent: String,
    sandboxes: Vec<String>,
    context_ttl: Duration,
}

#[async_trait]
impl SessionInit for AgentSandboxes {
    async fn open(&self, opening: SessionOpening<'_>) -> Result<(), InitRefusal> {
        if opening.declaration.is_empty() {
            return Ok(());
        }
        let planned = plan(&self.pool.sandboxes, &self.sandboxes, &opening).inspect_err(|refusal| {
            tracing::info!(agent = %self.agent, session = %opening.session, handle = %refusal.handle, reason = refusal.reason.as_str(), "sandbox declaration refused");
        })?;
        let owner = opening.caller.owner.clone();
        self.pool
            .open(opening.session, owner, self.context_ttl, planned)
            .await
            .inspect_err(|refusal| {
                tracing::info!(agent = %self.agent, session = %opening.session, handle = %refusal.handle, reason = refusal.reason.as_str(), "sandbox declaration refused");
            })
            .map_err(InitRefusal::from)
    }
}

#[async_trait]
impl SessionTools for AgentSandboxes {
    async fn for_session(&self, session: &SessionId) -> Vec<Arc<dyn ToolBox>> {
        self.pool.tools(session).await
    }
}

#[cfg(test)]
mod tests;

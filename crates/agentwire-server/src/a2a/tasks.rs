//! Finding a task, wherever it is: `GetTask` and `ListTasks`.
//!
//! A task's id is `<session>~<seq>`: the session and the `seq` of the
//! user message its turn answers. Ended, it is read from the store (the
//! question and the records after it, up to the next question); running,
//! from the session's log, on any replica ([`Engine::rejoin`] mirrors a
//! turn another one runs).

use agentwire_a2a::message::{self, ListParams};
use agentwire_a2a::rpc::{ErrorKind, RpcError};
use agentwire_a2a::task::Writer;
use agentwire_a2a::task::{Artifact, Message, Part, Role, Status, Task, TaskState};
use agentwire_a2a::turn::{REPLY_ARTIFACT, TaskStream};
use agentwire_core::{
    Epoch, MessageBody, ReplyEnd, SessionCursor, SessionId, SessionRecord, StoredMessage, Timestamp,
};
use agentwire_engine::{AnonymousRejoin, RejoinRequest, Rejoined, SessionLease};
use axum::response::Response;
use serde_json::{Value, json};

use super::Call;

/// The stored messages read per page while looking for a task's end.
const PAGE: usize = 64;
/// The sessions read per page while listing tasks.
const SESSIONS_PAGE: usize = 50;

/// A task's name: its session and the `seq` of its question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TaskRef {
    pub(super) session: SessionId,
    pub(super) seq: u64,
}

impl TaskRef {
    pub(super) fn parse(id: &str) -> Option<TaskRef> {
        let (session, seq) = id.rsplit_once('~')?;
        Some(TaskRef {
            session: SessionId::parse(session).ok()?,
            seq: seq.parse().ok()?,
        })
    }

    pub(super) fn id(&self) -> String {
        format!("{}~{}", self.session, self.seq)
    }
}

/// A task as found.
pub(super) enum Found {
    /// Its turn has ended: the task as the store has it.
    Ended(Task),
    /// Its turn runs: the task so far, and the session it runs on.
    Running(Task, SessionLease),
}

fn not_found() -> RpcError {
    RpcError::new(ErrorKind::TaskNotFound)
}

/// The RFC 3339 text of `at`.
pub(super) fn timestamp(at: Timestamp) -> String {
    at.to_utc().to_string()
}

/// Finds task `id` for the caller: another caller's, another agent's and
/// a malformed id are all not found. An anonymous caller finds anonymous
/// tasks by id: the id, with its session's random id, is the only proof
/// there is (deployments that need more configure `auth`).
pub(super) async fn find(call: &Call, id: &str) -> Result<Found, RpcError> {
    let task = TaskRef::parse(id).ok_or_else(not_found)?;
    let record = owned_session(call, &task.session).await?;
    let records = turn_records(call, &task).await?;
    let question = records
        .first()
        .filter(|m| m.seq == task.seq && is_question(m));
    if let Some(question) = question
        && let Some(ended) = ended_task(&task, &record, question, &records[1..])
    {
        return Ok(Found::Ended(ended));
    }
    let lease = rejoin(call, &task.session).await?;
    if lease.running_turn().is_some() && !records.iter().skip(1).any(is_question) {
        let running = running_task(call, &task, &lease);
        return Ok(Found::Running(running, lease));
    }
    match question {
        // Its turn left no record: the replica running it stopped.
        Some(question) => Ok(Found::Ended(lost_task(&task, question))),
        None => Err(not_found()),
    }
}

/// The session, if it is the caller's and this agent's.
async fn owned_session(call: &Call, session: &SessionId) -> Result<SessionRecord, RpcError> {
    let owner = call.owner();
    let record = call
        .state
        .engine()
        .store()
        .load_session(session)
        .await
        .map_err(|e| internal(&e))?
        .ok_or_else(not_found)?;
    let ours = record.owner.as_deref() == owner && record.agent == call.agent.agent.name;
    ours.then_some(record).ok_or_else(not_found)
}

fn internal(error: &dyn std::fmt::Display) -> RpcError {
    tracing::error!(%error, "reading a task failed");
    RpcError::new(ErrorKind::Internal)
}

/// The question at `task.seq` (if stored) and what follows it, up to and
/// including the next question.
async fn turn_records(call: &Call, task: &TaskRef) -> Result<Vec<StoredMessage>, RpcError> {
    let store = call.state.engine().store();
    let mut records = Vec::new();
    let mut after = task.seq.checked_sub(1);
    loop {
        let page = store
            .load_messages_after(&task.session, after, PAGE)
            .await
            .map_err(|e| internal(&e))?;
        let full = page.len() == PAGE;
        after = page.last().map(|m| m.seq);
        for message in page {
            let next_question = message.seq > task.seq && is_question(&message);
            records.push(message);
            if next_question {
                return Ok(records);
            }
        }
        if !full {
            return Ok(records);
        }
    }
}

fn is_question(message: &StoredMessage) -> bool {
    matches!(message.body, MessageBody::User { .. })
}

/// Attaches the caller to the session: its log, here or mirrored.
pub(super) async fn rejoin(call: &Call, session: &SessionId) -> Result<SessionLease, RpcError> {
    Ok(rejoin_at(call, session, None).await?.session)
}

/// Attaches the caller to the session's log from `position` (the last
/// entry the client had), replayed when the log still reaches back to it.
pub(super) async fn rejoin_at(
    call: &Call,
    session: &SessionId,
    position: Option<(Epoch, u64)>,
) -> Result<Rejoined, RpcError> {
    call.state
        .engine()
        .rejoin(RejoinRequest {
            agent: &call.agent.agent,
            namespace: "default",
            owner: call.owner(),
            anonymous: AnonymousRejoin::ById,
            session: session.as_str(),
            position,
        })
        .await
        .map_err(|_| not_found())
}

/// The task of a turn that has ended, from its records; `None` when they
/// hold no end (the turn runs, or was lost).
fn ended_task(
    task: &TaskRef,
    record: &SessionRecord,
    question: &StoredMessage,
    after: &[StoredMessage],
) -> Option<Task> {
    let id = task.id();
    let context = record.id.to_string();
    let message = |seq: u64, role: Role, parts: Vec<Part>, metadata: Option<Value>| Message {
        message_id: format!("{id}-{seq}"),
        context_id: context.clone(),
        task_id: id.clone(),
        role,
        parts,
        metadata,
    };
    let records = after.iter().take_while(|m| !is_question(m));
    let (end, state) = records.into_iter().find_map(|m| match &m.body {
        MessageBody::Reply { end, .. } => Some((m, reply_state(*end))),
        MessageBody::Failure { .. } => Some((m, TaskState::Failed)),
        _ => None,
    })?;
    let (reply, metadata) = match &end.body {
        MessageBody::Failure { code, message } => {
            (message.clone(), Some(json!({"error_code": code.as_str()})))
        }
        body => (body.text().unwrap_or_default().to_owned(), None),
    };
    let answer = message(
        end.seq,
        Role::Agent,
        vec![Part::Text(reply.clone())],
        metadata,
    );
    let asked = message(question.seq, Role::User, question_parts(question), None);
    let artifacts = match (state, reply.is_empty()) {
        (TaskState::Completed, false) => vec![Artifact {
            artifact_id: REPLY_ARTIFACT.to_owned(),
            name: None,
            parts: vec![Part::Text(reply)],
        }],
        _ => Vec::new(),
    };
    Some(Task {
        id,
        context_id: context,
        status: Status {
            state,
            message: Some(answer.clone()),
            timestamp: timestamp(end.created_at),
        },
        artifacts,
        history: vec![asked, answer],
        metadata: None,
    })
}

fn reply_state(end: ReplyEnd) -> TaskState {
    match end {
        ReplyEnd::Complete => TaskState::Completed,
        ReplyEnd::Cancelled | ReplyEnd::Interrupted => TaskState::Canceled,
    }
}

fn question_parts(question: &StoredMessage) -> Vec<Part> {
    vec![Part::Text(
        question.body.text().unwrap_or_default().to_owned(),
    )]
}

/// A question whose turn left no end: the replica running it went away.
fn lost_task(task: &TaskRef, question: &StoredMessage) -> Task {
    let id = task.id();
    let message = Message {
        message_id: format!("{id}-lost"),
        context_id: task.session.to_string(),
        task_id: id.clone(),
        role: Role::Agent,
        parts: vec![Part::Text("the turn ended without an answer".to_owned())],
        metadata: Some(json!({"error_code": "INTERNAL_ERROR"})),
    };
    Task {
        id,
        context_id: task.session.to_string(),
        status: Status {
            state: TaskState::Failed,
            message: Some(message),
            timestamp: timestamp(question.created_at),
        },
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
    }
}

/// The running task as its log has it so far: working, or waiting on a
/// client tool call, with the reply streamed until now.
fn running_task(call: &Call, task: &TaskRef, lease: &SessionLease) -> Task {
    let now = timestamp(call.state.engine().clock().now());
    let mut snapshot = working(task, &now);
    let Some(mut reader) = lease.running_turn_reader() else {
        return snapshot;
    };
    let mut stream = TaskStream::new(task.id(), task.session.to_string(), reader.epoch());
    let mut events = Vec::new();
    while let Ok(Some(entry)) = reader.try_next() {
        stream.push(&entry, &now, &mut events);
    }
    for event in &events {
        snapshot.apply(event);
    }
    snapshot
}

/// A task just started, or running with nothing to show yet.
pub(super) fn working(task: &TaskRef, now: &str) -> Task {
    Task {
        id: task.id(),
        context_id: task.session.to_string(),
        status: Status {
            state: TaskState::Working,
            message: None,
            timestamp: now.to_owned(),
        },
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
    }
}

/// `historyLength`: the last `n` messages; `includeArtifacts` false drops
/// them (`ListTasks`).
fn trim(task: &mut Task, history: Option<u32>) {
    if let Some(n) = history {
        let keep = (n as usize).min(task.history.len());
        task.history.drain(..task.history.len() - keep);
    }
}

/// `GetTask`.
pub(super) async fn get(call: Call, params: Value) -> Response {
    let (id, history) = match message::task_id(&params) {
        Ok(parsed) => parsed,
        Err(e) => return call.error(e),
    };
    match find(&call, &id).await {
        Ok(Found::Ended(mut task) | Found::Running(mut task, _)) => {
            trim(&mut task, history);
            call.result(Writer(call.version).task(&task))
        }
        Err(e) => call.error(e),
    }
}

/// `ListTasks`: the caller's tasks with this agent, most recently updated
/// first, a page at a time (`pageToken` is where the last page ended:
/// `<updated millis>~<task id>`). Every session of the caller's is read:
/// a listing costs what the caller's sessions with this agent hold.
pub(super) async fn list(call: Call, params: Value) -> Response {
    let params = match message::list_params(&params) {
        Ok(params) => params,
        Err(e) => return call.error(e),
    };
    let filter = match params.status.as_deref() {
        Some(name) => match TaskState::parse(name) {
            Some(state) => Some(state),
            None => return call.error(RpcError::invalid_params("status names no task state")),
        },
        None => None,
    };
    let after = match params.page_token.as_deref().map(PageToken::parse) {
        Some(None) => return call.error(RpcError::invalid_params("pageToken is not one of ours")),
        Some(Some(token)) => Some(token),
        None => None,
    };
    match listed(&call, &params, filter, after.as_ref()).await {
        Ok(page) => call.result(page_json(&call, &params, page)),
        Err(e) => call.error(e),
    }
}

/// Where a page ended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PageToken {
    updated: i64,
    id: String,
}

impl PageToken {
    fn parse(text: &str) -> Option<PageToken> {
        let (updated, id) = text.split_once('~')?;
        Some(PageToken {
            updated: updated.parse().ok()?,
            id: id.to_owned(),
        })
    }

    fn of(task: &Listed) -> String {
        format!("{}~{}", task.updated, task.task.id)
    }

    /// Whether `task` comes after this token in the listing's order.
    fn precedes(&self, task: &Listed) -> bool {
        (task.updated, task.task.id.as_str()) < (self.updated, self.id.as_str())
    }
}

/// A task and when it was last updated, in Unix milliseconds.
struct Listed {
    task: Task,
    updated: i64,
}

struct Page {
    tasks: Vec<Listed>,
    more: bool,
    /// The tasks that match the filters, on every page.
    total: usize,
}

/// Every task of the caller's with this agent that matches the filters,
/// newest update first, then the page after `after`.
async fn listed(
    call: &Call,
    params: &ListParams,
    filter: Option<TaskState>,
    after: Option<&PageToken>,
) -> Result<Page, RpcError> {
    let mut found: Vec<Listed> = Vec::new();
    for record in listed_sessions(call, params.context_id.as_deref()).await? {
        let tasks = session_tasks(call, &record).await?;
        found.extend(
            tasks
                .into_iter()
                .filter(|t| filter.is_none_or(|f| t.task.status.state == f)),
        );
    }
    found.sort_by(|a, b| (b.updated, &b.task.id).cmp(&(a.updated, &a.task.id)));
    let total = found.len();
    let mut page: Vec<Listed> = found
        .into_iter()
        .filter(|t| after.is_none_or(|a| a.precedes(t)))
        .collect();
    let more = page.len() > params.page_size as usize;
    page.truncate(params.page_size as usize);
    Ok(Page {
        tasks: page,
        more,
        total,
    })
}

/// The sessions a listing reads: the one `context` names (the caller's,
/// or an anonymous caller's by its id), or every session of the caller's
/// with this agent (none for an anonymous caller, who has no sessions to
/// list).
async fn listed_sessions(
    call: &Call,
    context: Option<&str>,
) -> Result<Vec<SessionRecord>, RpcError> {
    if let Some(context) = context {
        let Ok(id) = SessionId::parse(context) else {
            return Ok(Vec::new());
        };
        return match owned_session(call, &id).await {
            Ok(record) => Ok(vec![record]),
            Err(e) if e.kind == ErrorKind::TaskNotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        };
    }
    let Some(owner) = call.owner() else {
        return Ok(Vec::new());
    };
    let mut records = Vec::new();
    let mut cursor: Option<SessionCursor> = None;
    loop {
        let sessions = call
            .state
            .engine()
            .store()
            .list_sessions(owner, cursor.as_ref(), SESSIONS_PAGE)
            .await
            .map_err(|e| internal(&e))?;
        let last_page = sessions.len() < SESSIONS_PAGE;
        for overview in sessions {
            let record = overview.record;
            cursor = Some(SessionCursor {
                last_active_at: record.last_active_at,
                id: record.id.clone(),
            });
            if record.agent == call.agent.agent.name {
                records.push(record);
            }
        }
        if last_page {
            return Ok(records);
        }
    }
}

/// Every task of one session, from its stored messages; the last one
/// found running when its turn still runs.
async fn session_tasks(call: &Call, record: &SessionRecord) -> Result<Vec<Listed>, RpcError> {
    let messages = call
        .state
        .engine()
        .store()
        .load_messages(&record.id)
        .await
        .map_err(|e| internal(&e))?;
    let questions: Vec<usize> = (0..messages.len())
        .filter(|&i| is_question(&messages[i]))
        .collect();
    let mut tasks = Vec::with_capacity(questions.len());
    for (n, &at) in questions.iter().enumerate() {
        let end = questions.get(n + 1).copied().unwrap_or(messages.len());
        let question = &messages[at];
        let task = TaskRef {
            session: record.id.clone(),
            seq: question.seq,
        };
        let listed = match ended_task(&task, record, question, &messages[at + 1..end]) {
            Some(ended) => ended,
            None => match find(call, &task.id()).await? {
                Found::Ended(task) | Found::Running(task, _) => task,
            },
        };
        let updated = messages[end - 1].created_at.unix_millis();
        tasks.push(Listed {
            task: listed,
            updated,
        });
    }
    Ok(tasks)
}

fn page_json(call: &Call, params: &ListParams, page: Page) -> Value {
    let writer = Writer(call.version);
    let next = match (page.more, page.tasks.last()) {
        (true, Some(last)) => PageToken::of(last),
        _ => String::new(),
    };
    let total = page.total;
    let tasks: Vec<Value> = page
        .tasks
        .into_iter()
        .map(|mut listed| {
            trim(&mut listed.task, params.history_length);
            if !params.include_artifacts {
                listed.task.artifacts.clear();
            }
            writer.task(&listed.task)
        })
        .collect();
    json!({
        "tasks": tasks,
        "nextPageToken": next,
        "pageSize": params.page_size,
        "totalSize": total,
    })
}

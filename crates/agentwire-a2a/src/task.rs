//! What the server answers: tasks, messages and stream events, as neutral
//! values written in the request's version.

use serde_json::{Value, json};

use crate::Version;

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
}

impl TaskState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Whether a stream ends here: a terminal state, or one that waits on
    /// the client.
    pub fn ends_stream(self) -> bool {
        self.is_terminal() || self == TaskState::InputRequired
    }

    pub fn name(self, version: Version) -> &'static str {
        match (version, self) {
            (Version::V1_0, TaskState::Submitted) => "TASK_STATE_SUBMITTED",
            (Version::V1_0, TaskState::Working) => "TASK_STATE_WORKING",
            (Version::V1_0, TaskState::InputRequired) => "TASK_STATE_INPUT_REQUIRED",
            (Version::V1_0, TaskState::Completed) => "TASK_STATE_COMPLETED",
            (Version::V1_0, TaskState::Failed) => "TASK_STATE_FAILED",
            (Version::V1_0, TaskState::Canceled) => "TASK_STATE_CANCELED",
            (Version::V1_0, TaskState::Rejected) => "TASK_STATE_REJECTED",
            (Version::V0_3, TaskState::Submitted) => "submitted",
            (Version::V0_3, TaskState::Working) => "working",
            (Version::V0_3, TaskState::InputRequired) => "input-required",
            (Version::V0_3, TaskState::Completed) => "completed",
            (Version::V0_3, TaskState::Failed) => "failed",
            (Version::V0_3, TaskState::Canceled) => "canceled",
            (Version::V0_3, TaskState::Rejected) => "rejected",
        }
    }

    /// The state a `ListTasks` filter names, in either version's spelling.
    pub fn parse(name: &str) -> Option<TaskState> {
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Canceled,
            TaskState::Rejected,
        ]
        .into_iter()
        .find(|s| s.name(Version::V1_0) == name || s.name(Version::V0_3) == name)
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

/// One part of a message or artifact the server writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Data(Value),
    File {
        url: String,
        media_type: String,
        filename: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub message_id: String,
    pub context_id: String,
    pub task_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub state: TaskState,
    pub message: Option<Message>,
    /// RFC 3339, UTC.
    pub timestamp: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub artifact_id: String,
    pub name: Option<String>,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: Status,
    pub artifacts: Vec<Artifact>,
    pub history: Vec<Message>,
    pub metadata: Option<Value>,
}

/// One event of a stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Task(Task),
    Status {
        task_id: String,
        context_id: String,
        status: Status,
        metadata: Option<Value>,
    },
    Artifact {
        task_id: String,
        context_id: String,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
        metadata: Option<Value>,
    },
}

impl Event {
    /// Whether the stream ends after this event.
    pub fn ends_stream(&self) -> bool {
        match self {
            Event::Task(task) => task.status.state.ends_stream(),
            Event::Status { status, .. } => status.state.ends_stream(),
            Event::Artifact { .. } => false,
        }
    }
}

impl Task {
    /// The task as it stands after `event`: its status replaced, reply
    /// chunks appended to their artifact.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Task(task) => *self = task.clone(),
            Event::Status { status, .. } => self.status = status.clone(),
            Event::Artifact {
                artifact, append, ..
            } => self.add_artifact(artifact, *append),
        }
    }

    fn add_artifact(&mut self, artifact: &Artifact, append: bool) {
        let existing = self
            .artifacts
            .iter_mut()
            .find(|a| a.artifact_id == artifact.artifact_id);
        match existing {
            Some(existing) if append => {
                for part in &artifact.parts {
                    match (existing.parts.last_mut(), part) {
                        (Some(Part::Text(text)), Part::Text(more)) => text.push_str(more),
                        _ => existing.parts.push(part.clone()),
                    }
                }
            }
            Some(existing) => *existing = artifact.clone(),
            None => self.artifacts.push(artifact.clone()),
        }
    }
}

/// A reply chunk's fields, borrowed for [`Writer::event_text`].
struct TextChunk<'a> {
    task_id: &'a str,
    context_id: &'a str,
    artifact_id: &'a str,
    text: &'a str,
    append: bool,
    last_chunk: bool,
    metadata: Option<&'a Value>,
}

/// Writes the neutral values in one version's JSON.
#[derive(Debug, Clone, Copy)]
pub struct Writer(pub Version);

impl Writer {
    pub fn part(self, part: &Part) -> Value {
        match (self.0, part) {
            (Version::V1_0, Part::Text(text)) => json!({"text": text}),
            (Version::V1_0, Part::Data(data)) => json!({"data": data}),
            (
                Version::V1_0,
                Part::File {
                    url,
                    media_type,
                    filename,
                },
            ) => {
                let mut part = json!({"url": url, "mediaType": media_type});
                if let Some(name) = filename {
                    part["filename"] = json!(name);
                }
                part
            }
            (Version::V0_3, Part::Text(text)) => json!({"kind": "text", "text": text}),
            (Version::V0_3, Part::Data(data)) => json!({"kind": "data", "data": data}),
            (
                Version::V0_3,
                Part::File {
                    url,
                    media_type,
                    filename,
                },
            ) => {
                let mut file = json!({"uri": url, "mimeType": media_type});
                if let Some(name) = filename {
                    file["name"] = json!(name);
                }
                json!({"kind": "file", "file": file})
            }
        }
    }

    fn parts(self, parts: &[Part]) -> Value {
        Value::Array(parts.iter().map(|p| self.part(p)).collect())
    }

    pub fn message(self, message: &Message) -> Value {
        let role = match (self.0, message.role) {
            (Version::V1_0, Role::User) => "ROLE_USER",
            (Version::V1_0, Role::Agent) => "ROLE_AGENT",
            (Version::V0_3, Role::User) => "user",
            (Version::V0_3, Role::Agent) => "agent",
        };
        let mut value = json!({
            "messageId": message.message_id,
            "contextId": message.context_id,
            "taskId": message.task_id,
            "role": role,
            "parts": self.parts(&message.parts),
        });
        if let Some(metadata) = &message.metadata {
            value["metadata"] = metadata.clone();
        }
        if self.0 == Version::V0_3 {
            value["kind"] = json!("message");
        }
        value
    }

    pub fn status(self, status: &Status) -> Value {
        let mut value = json!({
            "state": status.state.name(self.0),
            "timestamp": status.timestamp,
        });
        if let Some(message) = &status.message {
            value["message"] = self.message(message);
        }
        value
    }

    pub fn artifact(self, artifact: &Artifact) -> Value {
        let mut value = json!({
            "artifactId": artifact.artifact_id,
            "parts": self.parts(&artifact.parts),
        });
        if let Some(name) = &artifact.name {
            value["name"] = json!(name);
        }
        value
    }

    /// A task; `history` and `artifacts` only when there are any.
    pub fn task(self, task: &Task) -> Value {
        let mut value = json!({
            "id": task.id,
            "contextId": task.context_id,
            "status": self.status(&task.status),
        });
        if !task.artifacts.is_empty() {
            value["artifacts"] =
                Value::Array(task.artifacts.iter().map(|a| self.artifact(a)).collect());
        }
        if !task.history.is_empty() {
            value["history"] = Value::Array(task.history.iter().map(|m| self.message(m)).collect());
        }
        if let Some(metadata) = &task.metadata {
            value["metadata"] = metadata.clone();
        }
        if self.0 == Version::V0_3 {
            value["kind"] = json!("task");
        }
        value
    }

    /// A `SendMessage` result: v1.0 wraps it (`{"task": …}`), v0.3 does not.
    pub fn send_result(self, task: &Task) -> Value {
        match self.0 {
            Version::V1_0 => json!({"task": self.task(task)}),
            Version::V0_3 => self.task(task),
        }
    }

    /// A stream event: v1.0 a `StreamResponse` (`task`, `statusUpdate`,
    /// `artifactUpdate`), v0.3 the object itself with its `kind`.
    pub fn event(self, event: &Event) -> Value {
        match event {
            Event::Task(task) => self.send_result(task),
            Event::Status {
                task_id,
                context_id,
                status,
                metadata,
            } => {
                let mut value = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "status": self.status(status),
                });
                if let Some(metadata) = metadata {
                    value["metadata"] = metadata.clone();
                }
                self.wrap(
                    value,
                    "statusUpdate",
                    "status-update",
                    Some(status.state.ends_stream()),
                )
            }
            Event::Artifact {
                task_id,
                context_id,
                artifact,
                append,
                last_chunk,
                metadata,
            } => {
                let mut value = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "artifact": self.artifact(artifact),
                    "append": append,
                    "lastChunk": last_chunk,
                });
                if let Some(metadata) = metadata {
                    value["metadata"] = metadata.clone();
                }
                self.wrap(value, "artifactUpdate", "artifact-update", None)
            }
        }
    }

    /// A stream event as the JSON-RPC result with `id`, as text. A reply
    /// chunk (most of a stream's events) is written directly, without a
    /// `Value` tree; the rest through [`Writer::event`].
    pub fn event_text(self, id: &Value, event: &Event) -> String {
        match event {
            Event::Artifact {
                task_id,
                context_id,
                artifact,
                append,
                last_chunk,
                metadata,
            } if artifact.name.is_none()
                && matches!(artifact.parts.as_slice(), [Part::Text(_)]) =>
            {
                let [Part::Text(text)] = artifact.parts.as_slice() else {
                    unreachable!("matched above")
                };
                let chunk = TextChunk {
                    task_id,
                    context_id,
                    artifact_id: &artifact.artifact_id,
                    text,
                    append: *append,
                    last_chunk: *last_chunk,
                    metadata: metadata.as_ref(),
                };
                self.text_chunk(id, &chunk)
            }
            _ => crate::rpc::result(id, self.event(event)),
        }
    }

    fn text_chunk(self, id: &Value, chunk: &TextChunk<'_>) -> String {
        let quoted = |s: &str| serde_json::to_string(s).expect("strings serialize");
        let part = match self.0 {
            Version::V1_0 => format!(r#"{{"text":{}}}"#, quoted(chunk.text)),
            Version::V0_3 => format!(r#"{{"kind":"text","text":{}}}"#, quoted(chunk.text)),
        };
        let metadata = match chunk.metadata {
            Some(m) => format!(r#","metadata":{m}"#),
            None => String::new(),
        };
        let body = format!(
            r#""taskId":{},"contextId":{},"artifact":{{"artifactId":{},"parts":[{part}]}},"append":{},"lastChunk":{}{metadata}"#,
            quoted(chunk.task_id),
            quoted(chunk.context_id),
            quoted(chunk.artifact_id),
            chunk.append,
            chunk.last_chunk,
        );
        let result = match self.0 {
            Version::V1_0 => format!(r#"{{"artifactUpdate":{{{body}}}}}"#),
            Version::V0_3 => format!(r#"{{{body},"kind":"artifact-update"}}"#),
        };
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
    }

    /// v1.0 names the event by its key; v0.3 by `kind`, with `final` on a
    /// status update.
    fn wrap(self, mut value: Value, key: &str, kind: &str, last: Option<bool>) -> Value {
        match self.0 {
            Version::V1_0 => json!({ key: value }),
            Version::V0_3 => {
                value["kind"] = json!(kind);
                if let Some(last) = last {
                    value["final"] = json!(last);
                }
                value
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: TaskState) -> Status {
        Status {
            state,
            message: None,
            timestamp: "2026-12-06T10:00:00Z".into(),
        }
    }

    #[test]
    fn a_status_update_in_each_version() {
        let event = Event::Status {
            task_id: "t".into(),
            context_id: "c".into(),
            status: status(TaskState::Completed),
            metadata: None,
        };
        let v1 = Writer(Version::V1_0).event(&event);
        assert_eq!(
            v1["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let v03 = Writer(Version::V0_3).event(&event);
        assert_eq!(v03["kind"], "status-update");
        assert_eq!(v03["final"], true);
        assert_eq!(v03["status"]["state"], "completed");
    }

    #[test]
    fn a_chunk_written_directly_is_the_chunk_written_as_a_value() {
        let event = Event::Artifact {
            task_id: "s~1".into(),
            context_id: "s".into(),
            artifact: Artifact {
                artifact_id: "reply".into(),
                name: None,
                parts: vec![Part::Text("a \"quoted\"\n line".into())],
            },
            append: true,
            last_chunk: false,
            metadata: Some(serde_json::json!({"agentwire.position": "00ab-7"})),
        };
        for version in [Version::V1_0, Version::V0_3] {
            let writer = Writer(version);
            let id = Value::from(9);
            let direct: Value = serde_json::from_str(&writer.event_text(&id, &event)).unwrap();
            let tree: Value =
                serde_json::from_str(&crate::rpc::result(&id, writer.event(&event))).unwrap();
            assert_eq!(direct, tree, "{version:?}");
        }
    }

    #[test]
    fn states_parse_in_either_spelling() {
        assert_eq!(
            TaskState::parse("TASK_STATE_INPUT_REQUIRED"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(
            TaskState::parse("input-required"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(TaskState::parse("input_required"), None);
    }
}

//! The WebSocket dialects' AsyncAPI documents (`api/websocket/`) as
//! validators. Every text frame a [`super::Client`] sends or receives, and
//! every binary frame it receives, is checked against its dialect's
//! document, so a frame the documents do not describe fails the test that
//! saw it, and the documents stay true. (The binary frames tests send are
//! often malformed on purpose, so they go unchecked.)
//!
//! A document's operations say which way each message goes (`receive`:
//! client to server, `send`: server to client); a frame is matched to the
//! messages of its direction by its `type`, or, without one, to the
//! messages that have none (Gnosari's user message).

use std::sync::OnceLock;

use serde_json::Value;

use super::repo_root;
use binary::OmniFrame;

mod binary;

/// Which document describes a connection's frames; known when it connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `/ws` (and the console's `/console/ws`).
    Omnia,
    /// `/ws/agent/…` and `/ws/team/…`.
    Gnosari,
}

/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ClientToServer,
    ServerToClient,
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::ClientToServer => "client → server",
            Direction::ServerToClient => "server → client",
        })
    }
}

impl Dialect {
    /// The dialect a WebSocket URL or path speaks.
    pub fn of_path(path_or_url: &str) -> Dialect {
        match path_or_url.contains("/ws/agent/") || path_or_url.contains("/ws/team/") {
            true => Dialect::Gnosari,
            false => Dialect::Omnia,
        }
    }

    /// The document's file name under `api/websocket/`.
    pub fn document_name(self) -> &'static str {
        match self {
            Dialect::Omnia => "omnia.asyncapi.yaml",
            Dialect::Gnosari => "gnosari.asyncapi.yaml",
        }
    }

    /// The document's text, as committed.
    pub fn document_text(self) -> String {
        let path = repo_root().join("api/websocket").join(self.document_name());
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The dialect's compiled document, built once per test binary: the
    /// validators cost far more to build than to run.
    pub fn contract(self) -> &'static Contract {
        static OMNIA: OnceLock<Contract> = OnceLock::new();
        static GNOSARI: OnceLock<Contract> = OnceLock::new();
        let cell = match self {
            Dialect::Omnia => &OMNIA,
            Dialect::Gnosari => &GNOSARI,
        };
        cell.get_or_init(|| Contract::compile(self.document_name(), &self.document_text()))
    }
}

/// A document's messages, each with its payload's validator.
pub struct Contract {
    name: &'static str,
    client_to_server: Vec<MessageSchema>,
    server_to_client: Vec<MessageSchema>,
    /// The binary frame the server sends, where the document has one.
    server_binary: Option<OmniFrame>,
}

/// One JSON message of a document.
struct MessageSchema {
    /// Its pointer in the document, to name it in a failure.
    pointer: String,
    /// The `type` its payload requires, if it names one.
    kind: Option<String>,
    validator: jsonschema::Validator,
}

impl Contract {
    /// Compiles the document `text` (YAML), called `name` in failures.
    ///
    /// # Panics
    ///
    /// If the document does not parse, names a message that does not
    /// resolve, or holds a schema that does not compile.
    pub fn compile(name: &'static str, text: &str) -> Contract {
        let document: Value = serde_saphyr::from_str(text)
            .unwrap_or_else(|e| panic!("{name} is not valid YAML: {e}"));
        assert_eq!(
            document["asyncapi"], "3.0.0",
            "{name}: an AsyncAPI 3.0.0 document"
        );
        let mut contract = Contract {
            name,
            client_to_server: Vec::new(),
            server_to_client: Vec::new(),
            server_binary: None,
        };
        let operations = document["operations"]
            .as_object()
            .unwrap_or_else(|| panic!("{name} has no operations"));
        for (id, operation) in operations {
            let direction = match operation["action"].as_str() {
                Some("receive") => Direction::ClientToServer,
                Some("send") => Direction::ServerToClient,
                other => panic!("{name}: operation {id} has action {other:?}"),
            };
            for reference in operation["messages"].as_array().into_iter().flatten() {
                let (pointer, message) = resolve(&document, reference, name);
                if !is_json(message) {
                    if direction == Direction::ServerToClient {
                        let (_, frame) = resolve(&document, &message["x-omni-frame"], name);
                        contract.server_binary = Some(OmniFrame::compile(&document, frame, name));
                    }
                    continue;
                }
                let messages = contract.messages_mut(direction);
                if !messages.iter().any(|m| m.pointer == pointer) {
                    messages.push(MessageSchema::compile(&document, pointer, message, name));
                }
            }
        }
        contract
    }

    fn messages_mut(&mut self, direction: Direction) -> &mut Vec<MessageSchema> {
        match direction {
            Direction::ClientToServer => &mut self.client_to_server,
            Direction::ServerToClient => &mut self.server_to_client,
        }
    }

    fn messages(&self, direction: Direction) -> &[MessageSchema] {
        match direction {
            Direction::ClientToServer => &self.client_to_server,
            Direction::ServerToClient => &self.server_to_client,
        }
    }

    /// The `type`s the document's messages going `direction` name.
    pub fn kinds(&self, direction: Direction) -> Vec<&str> {
        self.messages(direction)
            .iter()
            .filter_map(|m| m.kind.as_deref())
            .collect()
    }

    /// `Ok` when the text frame `text` going `direction` is one of the
    /// document's messages; `Err` says why not.
    pub fn check(&self, direction: Direction, text: &str) -> Result<(), String> {
        let frame: Value =
            serde_json::from_str(text).map_err(|e| format!("the frame is not JSON: {e}"))?;
        let kind = frame.get("type").and_then(Value::as_str);
        let candidates: Vec<&MessageSchema> = self
            .messages(direction)
            .iter()
            .filter(|m| m.kind.as_deref() == kind)
            .collect();
        if candidates.is_empty() {
            return Err(match kind {
                Some(kind) => format!(
                    "no message of type {kind:?} in {} for {direction}",
                    self.name
                ),
                None => format!("no message without a type in {} for {direction}", self.name),
            });
        }
        let mut failures = Vec::new();
        for candidate in candidates {
            match candidate.violations(&frame) {
                None => return Ok(()),
                Some(violations) => failures.push(format!("{}: {violations}", candidate.pointer)),
            }
        }
        Err(failures.join("\n"))
    }

    /// `Ok` when `bytes`, a binary frame from the server, is the document's
    /// binary message; `Err` says why not.
    pub fn check_server_binary(&self, bytes: &[u8]) -> Result<(), String> {
        match &self.server_binary {
            Some(frame) => frame.check(bytes),
            None => Err(format!(
                "{} has no binary message from the server",
                self.name
            )),
        }
    }

    /// Panics, naming what is wrong, unless [`Contract::check_server_binary`]
    /// accepts `bytes`.
    pub fn assert_server_binary_described(&self, bytes: &[u8]) {
        if let Err(why) = self.check_server_binary(bytes) {
            panic!("a binary frame {} does not describe: {why}", self.name);
        }
    }

    /// Panics, naming the frame, its direction and what is wrong with it,
    /// unless [`Contract::check`] accepts it.
    pub fn assert_described(&self, direction: Direction, text: &str) {
        if let Err(why) = self.check(direction, text) {
            panic!(
                "a frame {} does not describe ({direction}):\n  frame: {}\n  {why}",
                self.name,
                shortened(text)
            );
        }
    }
}

impl MessageSchema {
    /// The validator of `message`'s payload: the whole document with a root
    /// `$ref` to the payload, so its `$ref`s into `#/components/schemas`
    /// resolve within the document.
    fn compile(document: &Value, pointer: String, message: &Value, name: &str) -> MessageSchema {
        let payload_pointer = format!("{pointer}/payload");
        assert!(
            message.get("payload").is_some(),
            "{name}: {pointer} has no payload"
        );
        let (_, payload) = resolve(document, &message["payload"], name);
        let kind = payload["properties"]["type"]["const"]
            .as_str()
            .map(str::to_owned);
        let mut root = document.clone();
        root["$ref"] = Value::String(format!("#{payload_pointer}"));
        // AsyncAPI's schema format is a superset of draft 7.
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("{name}: {pointer}'s payload does not compile: {e}"));
        MessageSchema {
            pointer,
            kind,
            validator,
        }
    }

    /// What is wrong with `frame`, or `None` when it matches.
    fn violations(&self, frame: &Value) -> Option<String> {
        let listed: Vec<String> = self
            .validator
            .iter_errors(frame)
            .map(|e| {
                let place = e.instance_path().to_string();
                let place = if place.is_empty() { "(root)" } else { &place };
                format!("{place}: {e}")
            })
            .collect();
        (!listed.is_empty()).then(|| listed.join("; "))
    }
}

/// Follows `value`'s `$ref`s (`#/…` pointers into `document`) to what they
/// name: its pointer and its value.
fn resolve<'d>(document: &'d Value, mut value: &'d Value, name: &str) -> (String, &'d Value) {
    let mut pointer = String::new();
    while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
        let target = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{name}: {reference} is not a reference into the document"));
        pointer = target.to_owned();
        value = document
            .pointer(target)
            .unwrap_or_else(|| panic!("{name}: {reference} names nothing"));
    }
    (pointer, value)
}

/// Whether `message` is JSON (else a binary OMNI frame, [`OmniFrame`]).
fn is_json(message: &Value) -> bool {
    message
        .get("contentType")
        .and_then(Value::as_str)
        .is_none_or(|content_type| content_type == "application/json")
}

/// A frame short enough to read in a failure.
fn shortened(text: &str) -> String {
    const MAX: usize = 2000;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;

//! The JSON-RPC 2.0 envelope: a request decoded, a response or an error
//! written, the method named in the request's version.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Version;

/// The methods, whatever their name in the request's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreatePushConfig,
    GetPushConfig,
    ListPushConfigs,
    DeletePushConfig,
    GetExtendedAgentCard,
}

impl Method {
    /// The method `name` names in `version`; v0.3 has no `ListTasks` and
    /// v1.0 no slash names.
    pub fn parse(name: &str, version: Version) -> Option<Method> {
        let method = match version {
            Version::V1_0 => match name {
                "SendMessage" => Method::SendMessage,
                "SendStreamingMessage" => Method::SendStreamingMessage,
                "GetTask" => Method::GetTask,
                "ListTasks" => Method::ListTasks,
                "CancelTask" => Method::CancelTask,
                "SubscribeToTask" => Method::SubscribeToTask,
                "CreateTaskPushNotificationConfig" => Method::CreatePushConfig,
                "GetTaskPushNotificationConfig" => Method::GetPushConfig,
                "ListTaskPushNotificationConfigs" => Method::ListPushConfigs,
                "DeleteTaskPushNotificationConfig" => Method::DeletePushConfig,
                "GetExtendedAgentCard" => Method::GetExtendedAgentCard,
                _ => return None,
            },
            Version::V0_3 => match name {
                "message/send" => Method::SendMessage,
                "message/stream" => Method::SendStreamingMessage,
                "tasks/get" => Method::GetTask,
                "tasks/list" => Method::ListTasks,
                "tasks/cancel" => Method::CancelTask,
                "tasks/resubscribe" => Method::SubscribeToTask,
                "tasks/pushNotificationConfig/set" => Method::CreatePushConfig,
                "tasks/pushNotificationConfig/get" => Method::GetPushConfig,
                "tasks/pushNotificationConfig/list" => Method::ListPushConfigs,
                "tasks/pushNotificationConfig/delete" => Method::DeletePushConfig,
                "agent/getAuthenticatedExtendedCard" => Method::GetExtendedAgentCard,
                _ => return None,
            },
        };
        Some(method)
    }

    /// Whether the answer is a stream of server-sent events.
    pub fn streams(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }
}

/// A decoded request: its id (echoed as sent), method and parameters.
#[derive(Debug)]
pub struct Request {
    pub id: Value,
    pub method: Method,
    pub params: Value,
}

/// The error codes of the JSON-RPC binding (§5.4, §9.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    ExtendedAgentCardNotConfigured,
    VersionNotSupported,
    /// JSON-RPC's implementation-defined server error (-32000): the server
    /// refused the request for a reason of its own, named by
    /// [`RpcError::reason`] in agentwire's error code vocabulary.
    Server,
}

impl ErrorKind {
    pub fn code(self) -> i32 {
        match self {
            ErrorKind::Parse => -32700,
            ErrorKind::InvalidRequest => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::Internal => -32603,
            ErrorKind::TaskNotFound => -32001,
            ErrorKind::TaskNotCancelable => -32002,
            ErrorKind::PushNotificationNotSupported => -32003,
            ErrorKind::UnsupportedOperation => -32004,
            ErrorKind::ContentTypeNotSupported => -32005,
            ErrorKind::ExtendedAgentCardNotConfigured => -32007,
            ErrorKind::VersionNotSupported => -32009,
            ErrorKind::Server => -32000,
        }
    }

    /// The standard message (§9.5 and §5.4).
    pub fn message(self) -> &'static str {
        match self {
            ErrorKind::Parse => "Invalid JSON payload",
            ErrorKind::InvalidRequest => "Request payload validation error",
            ErrorKind::MethodNotFound => "Method not found",
            ErrorKind::InvalidParams => "Invalid parameters",
            ErrorKind::Internal => "Internal error",
            ErrorKind::TaskNotFound => "Task not found",
            ErrorKind::TaskNotCancelable => "Task cannot be canceled",
            ErrorKind::PushNotificationNotSupported => "Push Notification is not supported",
            ErrorKind::UnsupportedOperation => "This operation is not supported",
            ErrorKind::ContentTypeNotSupported => "Incompatible content types",
            ErrorKind::ExtendedAgentCardNotConfigured => "Extended agent card not configured",
            ErrorKind::VersionNotSupported => "A2A version not supported",
            ErrorKind::Server => "Server error",
        }
    }

    /// The `google.rpc.ErrorInfo` reason of A2A's own errors.
    fn reason(self) -> Option<&'static str> {
        Some(match self {
            ErrorKind::TaskNotFound => "TASK_NOT_FOUND",
            ErrorKind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorKind::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ErrorKind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorKind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            ErrorKind::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ErrorKind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            _ => return None,
        })
    }
}

/// An error answer: its kind and, for invalid parameters, what is wrong
/// (a fixed text of ours, never the client's bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub kind: ErrorKind,
    pub detail: Option<&'static str>,
    /// A [`ErrorKind::Server`] error's code (`TURN_IN_PROGRESS`).
    pub reason: Option<&'static str>,
}

impl RpcError {
    pub fn new(kind: ErrorKind) -> RpcError {
        RpcError {
            kind,
            detail: None,
            reason: None,
        }
    }

    pub fn invalid_params(detail: &'static str) -> RpcError {
        RpcError {
            kind: ErrorKind::InvalidParams,
            detail: Some(detail),
            reason: None,
        }
    }

    /// A refusal of the server's own: `reason` is its error code,
    /// `message` its fixed text.
    pub fn server(reason: &'static str, message: &'static str) -> RpcError {
        RpcError {
            kind: ErrorKind::Server,
            detail: Some(message),
            reason: Some(reason),
        }
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
}

/// Decodes a request body in `version`. On failure, the id to answer with
/// (`null` when it could not be read) and the error.
pub fn decode(body: &[u8], version: Version) -> Result<Request, (Value, RpcError)> {
    let envelope: Envelope<'_> = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err((Value::Null, RpcError::new(ErrorKind::Parse)));
        }
        Err(_) => return Err((Value::Null, RpcError::new(ErrorKind::InvalidRequest))),
    };
    let id = envelope.id.unwrap_or(Value::Null);
    let valid_id = matches!(id, Value::String(_) | Value::Number(_));
    if envelope.jsonrpc != Some("2.0") || !valid_id {
        return Err((id, RpcError::new(ErrorKind::InvalidRequest)));
    }
    let Some(Value::String(name)) = envelope.method else {
        return Err((id, RpcError::new(ErrorKind::InvalidRequest)));
    };
    let Some(method) = Method::parse(&name, version) else {
        return Err((id, RpcError::new(ErrorKind::MethodNotFound)));
    };
    let params = envelope.params.unwrap_or(Value::Object(Default::default()));
    if !params.is_object() {
        return Err((id, RpcError::invalid_params("params must be an object")));
    }
    Ok(Request { id, method, params })
}

#[derive(Serialize)]
struct ResultBody<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: T,
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn result<T: Serialize>(id: &Value, result: T) -> String {
    serde_json::to_string(&ResultBody {
        jsonrpc: "2.0",
        id,
        result,
    })
    .expect("results serialize")
}

/// `{"jsonrpc":"2.0","id":…,"error":{code, message, data?}}`, with a
/// `google.rpc.ErrorInfo` for A2A's own errors and a `BadRequest`
/// description for invalid parameters.
pub fn error(id: &Value, error: &RpcError) -> String {
    let message = match error.kind {
        ErrorKind::Server => error.detail.unwrap_or(error.kind.message()),
        _ => error.kind.message(),
    };
    let mut body = serde_json::json!({
        "code": error.kind.code(),
        "message": message,
    });
    let data = match (error.kind.reason(), error.detail) {
        _ if error.kind == ErrorKind::Server => Some(serde_json::json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": error.reason.unwrap_or("INTERNAL_ERROR"),
            "domain": "agentwire.dev",
        }])),
        (Some(reason), _) => Some(serde_json::json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "a2a-protocol.org",
        }])),
        (None, Some(detail)) => Some(serde_json::json!([{
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"description": detail}],
        }])),
        (None, None) => None,
    };
    if let Some(data) = data {
        body["data"] = data;
    }
    serde_json::to_string(&serde_json::json!({"jsonrpc": "2.0", "id": id, "error": body}))
        .expect("errors serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_version_s_own() {
        assert_eq!(
            Method::parse("SendMessage", Version::V1_0),
            Some(Method::SendMessage)
        );
        assert_eq!(Method::parse("SendMessage", Version::V0_3), None);
        assert_eq!(
            Method::parse("tasks/resubscribe", Version::V0_3),
            Some(Method::SubscribeToTask)
        );
        assert_eq!(Method::parse("message/send", Version::V1_0), None);
    }

    #[test]
    fn envelopes_that_are_not_requests_are_told_apart() {
        let parse = decode(b"{not json", Version::V1_0).unwrap_err();
        assert_eq!(parse.1.kind, ErrorKind::Parse);
        let no_version = decode(br#"{"id":1,"method":"GetTask"}"#, Version::V1_0).unwrap_err();
        assert_eq!(
            (no_version.0, no_version.1.kind),
            (Value::from(1), ErrorKind::InvalidRequest)
        );
        let unknown = decode(
            br#"{"jsonrpc":"2.0","id":"a","method":"Nope"}"#,
            Version::V1_0,
        )
        .unwrap_err();
        assert_eq!(unknown.1.kind, ErrorKind::MethodNotFound);
        let bad_params = decode(
            br#"{"jsonrpc":"2.0","id":2,"method":"GetTask","params":[1]}"#,
            Version::V1_0,
        )
        .unwrap_err();
        assert_eq!(bad_params.1.kind, ErrorKind::InvalidParams);
        let ok = decode(
            br#"{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"t"}}"#,
            Version::V1_0,
        )
        .unwrap();
        assert_eq!(ok.method, Method::GetTask);
    }

    #[test]
    fn a2a_errors_carry_their_reason() {
        let text = error(&Value::from(3), &RpcError::new(ErrorKind::TaskNotFound));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(v["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["id"], 3);
    }
}

//! The JSON-RPC 2.0 envelope of one Streamable HTTP POST: a request, a
//! notification or a response, decoded; results, errors and
//! notifications written.

use serde::Deserialize;
use serde_json::{Value, json};

/// One message a client POSTs.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A client's answer to a request of ours (an elicitation): its
    /// `result`, or `None` for an error.
    Response {
        id: Value,
        result: Option<Value>,
    },
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn parse_error() -> RpcError {
        RpcError::new(-32700, "parse error")
    }

    pub fn invalid_request() -> RpcError {
        RpcError::new(-32600, "invalid request")
    }

    pub fn method_not_found() -> RpcError {
        RpcError::new(-32601, "method not found")
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, message)
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(-32603, message)
    }

    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<String>,
    id: Option<Value>,
    method: Option<String>,
    #[serde(default)]
    params: Value,
    result: Option<Value>,
    error: Option<Value>,
}

/// Decodes one POST body. A batch (an array) is an invalid request: the
/// protocol dropped batches in 2025-06-18. On an error, the id to answer
/// with (`null` when it cannot be read).
pub fn decode(body: &[u8]) -> Result<Incoming, (Value, RpcError)> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| (Value::Null, RpcError::parse_error()))?;
    let invalid = |id: Option<Value>| (id.unwrap_or(Value::Null), RpcError::invalid_request());
    if !value.is_object() {
        return Err(invalid(None));
    }
    let envelope: Envelope = serde_json::from_value(value).map_err(|_| invalid(None))?;
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid(envelope.id));
    }
    let id_ok = |id: &Value| id.is_string() || id.is_i64() || id.is_u64();
    match (envelope.id, envelope.method) {
        (Some(id), Some(method)) if id_ok(&id) => Ok(Incoming::Request {
            id,
            method,
            params: envelope.params,
        }),
        (Some(id), Some(_)) => Err(invalid(Some(id))),
        (None, Some(method)) => Ok(Incoming::Notification {
            method,
            params: envelope.params,
        }),
        (Some(id), None) if envelope.result.is_some() || envelope.error.is_some() => {
            Ok(Incoming::Response {
                id,
                result: envelope.result,
            })
        }
        (id, None) => Err(invalid(id)),
    }
}

/// A result for the request `id`.
pub fn result(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error for the request `id`.
pub fn error(id: &Value, error: &RpcError) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": error.code, "message": error.message},
    })
    .to_string()
}

/// A request of ours to the client.
pub fn request(id: &Value, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A notification.
pub fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let request = decode(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert_eq!(
            request,
            Incoming::Request {
                id: json!(7),
                method: "tools/list".into(),
                params: Value::Null
            }
        );
        let note = decode(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let response = decode(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#).unwrap();
        assert_eq!(
            response,
            Incoming::Response {
                id: json!("x"),
                result: Some(json!({}))
            }
        );
    }

    #[test]
    fn malformed_bodies_get_the_standard_errors() {
        assert_eq!(decode(b"{").unwrap_err().1.code, -32700);
        assert_eq!(decode(b"[]").unwrap_err().1.code, -32600);
        let (id, e) = decode(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).unwrap_err();
        assert_eq!((id, e.code), (json!(3), -32600));
        let (id, e) = decode(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#).unwrap_err();
        assert_eq!((id, e.code), (json!({"a":1}), -32600));
    }
}

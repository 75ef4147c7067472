//! The protocol versions served and the `initialize` handshake.
//!
//! agentwire speaks 2025-11-25, and the handshake versions before it that
//! differ from it in nothing it uses. The stateless 2026-07-28 form is
//! not advertised (`server/discover` is not a method here), but what it
//! changes for a client that skips the handshake is served: a request
//! without `initialize` or `Mcp-Session-Id` is answered like any other.

use serde_json::{Value, json};

/// The newest version, offered to a client that asks for one we lack.
pub const LATEST: &str = "2025-11-25";

/// Every version a client may negotiate or name in `MCP-Protocol-Version`.
pub const SUPPORTED: [&str; 3] = [LATEST, "2025-06-18", "2025-03-26"];

/// The version to answer `initialize` with: the client's when we speak
/// it, else the latest (the client then decides whether to go on).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    SUPPORTED
        .iter()
        .find(|v| Some(**v) == requested)
        .copied()
        .unwrap_or(LATEST)
}

/// Whether an `MCP-Protocol-Version` header may be served: absent (the
/// transport then assumes 2025-03-26) or one we speak.
pub fn header_supported(header: Option<&str>) -> bool {
    header.is_none_or(|v| SUPPORTED.contains(&v.trim()))
}

/// What the server says of itself in the handshake.
pub struct ServerInfo<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub instructions: &'a str,
}

/// The `initialize` result: tools (a fixed list for a caller, hence no
/// `listChanged`), and logging, whose level is accepted and, as nothing
/// is logged to the client, changes nothing.
pub fn initialize_result(params: &Value, info: &ServerInfo<'_>) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": {
            "tools": {"listChanged": false},
            "logging": {},
        },
        "serverInfo": {"name": info.name, "version": info.version},
        "instructions": info.instructions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_version_is_echoed_and_an_unknown_one_gets_the_latest() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2024-11-05")), LATEST);
        assert_eq!(negotiate(None), LATEST);
        assert!(header_supported(None));
        assert!(header_supported(Some("2025-03-26")));
        assert!(!header_supported(Some("1999-01-01")));
    }
}

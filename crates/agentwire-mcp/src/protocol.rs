//! The protocol versions served, the `initialize` handshake and the
//! stateless form's `server/discover`.
//!
//! agentwire speaks 2025-11-25, and the handshake versions before it that
//! differ from it in nothing it uses; and the stateless 2026-07-28 form
//! (SEP-2575, SEP-2567) in what a tool server needs of it: no handshake,
//! no session, `server/discover`, `resultType` on results and caching
//! directives on lists.

use serde_json::{Value, json};

/// The newest version, offered to a client that asks for one we lack.
pub const LATEST: &str = "2025-11-25";

/// Every version a client may negotiate in the handshake.
pub const SUPPORTED: [&str; 3] = [LATEST, "2025-06-18", "2025-03-26"];

/// The stateless version: no handshake, each request on its own.
pub const STATELESS: &str = "2026-07-28";

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
    header.is_none_or(|v| SUPPORTED.contains(&v.trim()) || v.trim() == STATELESS)
}

/// Which form of the protocol a request is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and before: the handshake, sessions, the back channel.
    Handshake,
    /// 2026-07-28: every request stands alone.
    Stateless,
}

impl Era {
    /// The era an `MCP-Protocol-Version` header names.
    pub fn of(header: Option<&str>) -> Era {
        match header.map(str::trim) {
            Some(STATELESS) => Era::Stateless,
            _ => Era::Handshake,
        }
    }

    /// A result as the era writes it: the stateless form requires
    /// `resultType` (`complete`: we never answer with `input_required`).
    pub fn result(self, mut result: Value) -> Value {
        if self == Era::Stateless
            && let Some(object) = result.as_object_mut()
        {
            object.insert("resultType".into(), json!("complete"));
        }
        result
    }

    /// A list's result as the era writes it: the stateless form requires
    /// caching directives, here "do not cache, not shared" (what a caller
    /// sees depends on its credential).
    pub fn list(self, mut result: Value) -> Value {
        if self == Era::Stateless
            && let Some(object) = result.as_object_mut()
        {
            object.insert("ttlMs".into(), json!(0));
            object.insert("cacheScope".into(), json!("private"));
        }
        self.result(result)
    }
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

/// The `server/discover` result: the versions, and what `initialize`
/// would say.
pub fn discover_result(info: &ServerInfo<'_>) -> Value {
    let mut versions = vec![STATELESS];
    versions.extend(SUPPORTED);
    json!({
        "supportedVersions": versions,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": info.name, "version": info.version},
        "instructions": info.instructions,
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
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
        assert!(header_supported(Some(STATELESS)));
    }

    #[test]
    fn the_stateless_form_types_its_results() {
        assert_eq!(Era::of(Some("2026-07-28")), Era::Stateless);
        assert_eq!(Era::of(None), Era::Handshake);
        let list = Era::Stateless.list(json!({"tools": []}));
        assert_eq!(list["resultType"], "complete");
        assert_eq!(list["ttlMs"], 0);
        assert_eq!(
            Era::Handshake.list(json!({"tools": []})),
            json!({"tools": []})
        );
    }
}

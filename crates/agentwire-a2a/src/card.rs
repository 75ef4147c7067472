//! The agent card (`/.well-known/agent-card.json`), in each generation's
//! shape: v1.0's ([`AgentCard::to_json`], exactly the fields the v1.0
//! schema allows, listing the endpoint for both protocol versions) and
//! v0.3's ([`AgentCard::to_json_v0_3`], with `url`, `preferredTransport`
//! and `protocolVersion`) for clients of that generation alone.

use serde_json::{Value, json};

use crate::POSITION_EXTENSION;

/// What a card says.
pub struct AgentCard<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub version: &'a str,
    /// The JSON-RPC endpoint.
    pub url: &'a str,
    pub skills: Vec<Skill<'a>>,
    pub push_notifications: bool,
    /// Callers present `Authorization: Bearer`.
    pub bearer: Bearer,
}

pub struct Skill<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub description: &'a str,
    pub tags: &'a [String],
    pub examples: &'a [String],
}

/// Whether the card declares the bearer scheme, and requires it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bearer {
    /// No credential is recognised.
    None,
    /// Recognised; the agent is public, so not required.
    Accepted,
    Required,
}

/// The media types a turn takes and gives.
const INPUT_MODES: [&str; 4] = [
    "text/plain",
    "application/json",
    "image/*",
    "application/pdf",
];
const OUTPUT_MODES: [&str; 1] = ["text/plain"];

impl AgentCard<'_> {
    pub fn to_json(&self) -> Value {
        let interface = |version: &str| json!({"url": self.url, "protocolBinding": "JSONRPC", "protocolVersion": version});
        let skills: Vec<Value> = self
            .skills
            .iter()
            .map(|s| {
                json!({"id": s.id, "name": s.name, "description": s.description,
                    "tags": s.tags, "examples": s.examples})
            })
            .collect();
        let mut card = json!({
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "supportedInterfaces": [interface("1.0"), interface("0.3")],
            "capabilities": {
                "streaming": true,
                "pushNotifications": self.push_notifications,
                "extensions": [{
                    "uri": POSITION_EXTENSION,
                    "description": "Every streamed event carries its position in the session's turn log (metadata agentwire.position, and the SSE event id); SubscribeToTask with Last-Event-ID replays the events after it, then the live ones.",
                    "required": false,
                }],
            },
            "defaultInputModes": INPUT_MODES,
            "defaultOutputModes": OUTPUT_MODES,
            "skills": skills,
        });
        if self.bearer != Bearer::None {
            card["securitySchemes"] = json!({"bearer": {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "An API key or a JWT, as configured under auth",
            }}});
        }
        if self.bearer == Bearer::Required {
            card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
        }
        card
    }

    /// The card as v0.3 wrote it.
    pub fn to_json_v0_3(&self) -> Value {
        let mut card = self.to_json();
        let object = card.as_object_mut().expect("a card is an object");
        object.remove("supportedInterfaces");
        object.remove("securitySchemes");
        object.remove("securityRequirements");
        object.insert("url".into(), json!(self.url));
        object.insert("preferredTransport".into(), json!("JSONRPC"));
        object.insert("protocolVersion".into(), json!("0.3.0"));
        if self.bearer != Bearer::None {
            object.insert(
                "securitySchemes".into(),
                json!({"bearer": {"type": "http", "scheme": "bearer"}}),
            );
        }
        if self.bearer == Bearer::Required {
            object.insert("security".into(), json!([{"bearer": []}]));
        }
        card
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_has_what_the_tck_requires() {
        let tags = vec!["chat".to_owned()];
        let card = AgentCard {
            name: "helper",
            description: "d",
            version: "1.0.0",
            url: "http://127.0.0.1:1/a2a/helper",
            skills: vec![Skill {
                id: "helper",
                name: "helper",
                description: "d",
                tags: &tags,
                examples: &[],
            }],
            push_notifications: false,
            bearer: Bearer::Required,
        }
        .to_json();
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(card["skills"][0]["tags"][0], "chat");
        assert_eq!(card["capabilities"]["streaming"], true);
        assert!(card["securityRequirements"].is_array());
        assert!(card.get("url").is_none(), "v1.0 allows no other fields");
    }
}

//! The sessions API (`/api/v1/sessions`), for `/sessions` and `/resume`,
//! and the memories API (`/api/v1/memories`), for `/memories` and
//! `/forget`.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use crate::ChatOptions;

/// Everything but the characters a query value may carry as they are.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// How many of a resumed session's last messages are printed.
const HISTORY_SHOWN: usize = 20;

/// Pages of 500 read at most while looking for a session's last messages.
const HISTORY_PAGES: usize = 20;

/// How many memories `/memories` prints of the agent's, and of the shared.
const MEMORIES_SHOWN: usize = 50;

/// How many characters of a memory's content `/memories` prints.
const CONTENT_SHOWN: usize = 60;

pub(crate) fn query_escape(value: &str) -> String {
    utf8_percent_encode(value, QUERY_VALUE).to_string()
}

/// `http(s)://host:port[/prefix]` of the server the socket URL names.
fn api_base(options: &ChatOptions) -> String {
    let url = options.url.trim_end_matches('/');
    let url = url.strip_suffix("/ws").unwrap_or(url);
    if let Some(rest) = url.strip_prefix("ws://") {
        format!("http://{rest}")
    } else if let Some(rest) = url.strip_prefix("wss://") {
        format!("https://{rest}")
    } else {
        url.to_owned()
    }
}

/// Sends a request with the caller's credential: the status and the body.
async fn send(
    options: &ChatOptions,
    method: reqwest::Method,
    path_and_query: &str,
) -> Result<(reqwest::StatusCode, String), String> {
    let url = format!("{}{path_and_query}", api_base(options));
    let mut request = reqwest::Client::new().request(method, &url);
    if let Some(token) = &options.token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| e.without_url().to_string())?;
    Ok((status, body))
}

/// `HTTP 404 memory not found`: the status and the API's `error` (or the
/// status's reason when the body has none, as a proxy's page has not).
fn failure(status: reqwest::StatusCode, body: &str) -> String {
    let json: Value = serde_json::from_str(body).unwrap_or_default();
    let error = json["error"]
        .as_str()
        .or_else(|| status.canonical_reason())
        .unwrap_or_default();
    format!("HTTP {} {error}", status.as_u16())
        .trim_end()
        .to_owned()
}

async fn get(options: &ChatOptions, path_and_query: &str) -> Result<Value, String> {
    let (status, body) = send(options, reqwest::Method::GET, path_and_query).await?;
    if !status.is_success() {
        return Err(failure(status, &body));
    }
    serde_json::from_str(&body).map_err(|_| format!("HTTP {status}: the body is not JSON"))
}

/// One line per session, newest first: `ID  AGENT  LAST ACTIVE  SUMMARY`.
pub(crate) async fn sessions(options: &ChatOptions) -> Result<Vec<String>, String> {
    let page = get(options, "/api/v1/sessions?limit=20").await?;
    let sessions = page["sessions"].as_array().cloned().unwrap_or_default();
    Ok(sessions
        .iter()
        .map(|session| {
            let summary: String = session["summary"]["text"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(60)
                .collect();
            format!(
                "{}  {}  {}  {summary}",
                session["id"].as_str().unwrap_or_default(),
                session["agent"].as_str().unwrap_or_default(),
                session["last_active_at"].as_str().unwrap_or_default(),
            )
            .trim_end()
            .to_owned()
        })
        .collect())
}

/// The session's last messages as `you: …` / `agent: …` / `[tool …]` lines.
pub(crate) async fn messages(options: &ChatOptions, session: &str) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut after: Option<u64> = None;
    for _ in 0..HISTORY_PAGES {
        let mut path = format!(
            "/api/v1/sessions/{}/messages?limit=500",
            query_escape(session)
        );
        if let Some(after) = after {
            path.push_str(&format!("&after={after}"));
        }
        let page = get(options, &path).await?;
        for message in page["messages"].as_array().into_iter().flatten() {
            lines.push(history_line(message));
        }
        if lines.len() > HISTORY_SHOWN {
            lines.drain(..lines.len() - HISTORY_SHOWN);
        }
        match page["next_after"].as_u64() {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(lines)
}

fn history_line(message: &Value) -> String {
    let content = &message["content"];
    match message["role"].as_str().unwrap_or_default() {
        "user" => format!("you: {}", content.as_str().unwrap_or_default()),
        "assistant" => format!("agent: {}", content.as_str().unwrap_or_default()),
        "tool" if content["call"].is_object() => format!(
            "[tool {} {}]",
            content["call"]["name"].as_str().unwrap_or_default(),
            content["call"]["arguments"]
        ),
        "tool" => format!("[tool result {}]", content["result"]["value"]),
        role => format!("{role}: {content}"),
    }
}

/// The memories of the chat's agent, then the caller's shared ones (the
/// `caller` tier, which has no agent), each newest first: one line each.
/// With `--memory-facet`, those of that facet only.
pub(crate) async fn memories(options: &ChatOptions) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut more = false;
    for agent in [options.agent.as_str(), ""] {
        let mut path = format!(
            "/api/v1/memories?agent={}&limit={MEMORIES_SHOWN}",
            query_escape(agent)
        );
        if let Some(facet) = &options.memory_facet {
            path.push_str(&format!("&memory_facet={}", query_escape(facet)));
        }
        let page = get(options, &path).await?;
        let memories = page["memories"].as_array().cloned().unwrap_or_default();
        lines.extend(memories.iter().map(|memory| memory_line(memory, options)));
        more |= !page["next_offset"].is_null();
    }
    if more {
        lines.push(format!(
            "(the newest {MEMORIES_SHOWN} of each kind; GET /api/v1/memories has the rest)"
        ));
    }
    Ok(lines)
}

/// `ID  TYPE  UPDATED  CONTENT`: the content on one line, shortened; the
/// type says `shared` for the caller tier, and the facet when the chat did
/// not name one.
fn memory_line(memory: &Value, options: &ChatOptions) -> String {
    let text = |key: &str| memory[key].as_str().unwrap_or_default().to_owned();
    let mut notes = Vec::new();
    if memory["tier"] == "caller" {
        notes.push("shared".to_owned());
    }
    let facet = text("memory_facet");
    if options.memory_facet.is_none() && !facet.is_empty() {
        notes.push(format!("facet {facet}"));
    }
    let mut kind = text("type");
    if !notes.is_empty() {
        kind = format!("{kind} ({})", notes.join(", "));
    }
    let updated = text("updated_at");
    let updated = if updated.is_empty() {
        text("created_at")
    } else {
        updated
    };
    format!(
        "{}  {kind}  {}  {}",
        text("id"),
        whole_seconds(&updated),
        one_line(&text("content"), CONTENT_SHOWN)
    )
}

/// An RFC 3339 time without its fraction of a second.
fn whole_seconds(time: &str) -> String {
    match (time.find('.'), time.rfind(['Z', '+', '-'])) {
        (Some(dot), Some(zone)) if dot < zone => format!("{}{}", &time[..dot], &time[zone..]),
        _ => time.to_owned(),
    }
}

/// `text` on one line (each run of white space a space), at most `chars`
/// characters: a longer one ends with `…`.
fn one_line(text: &str, chars: usize) -> String {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= chars {
        return words;
    }
    let kept: String = words.chars().take(chars.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// Deletes the caller's memory `id` for good: whether there was one.
pub(crate) async fn forget(options: &ChatOptions, id: &str) -> Result<bool, String> {
    let path = format!("/api/v1/memories/{}", query_escape(id));
    let (status, body) = send(options, reqwest::Method::DELETE, &path).await?;
    if status.is_success() {
        return Ok(true);
    }
    let error = failure(status, &body);
    if error == "HTTP 404 memory not found" {
        return Ok(false);
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{api_base, memory_line, one_line, query_escape, whole_seconds};
    use crate::ChatOptions;

    fn options(url: &str) -> ChatOptions {
        ChatOptions {
            url: url.into(),
            agent: "a".into(),
            token: None,
            session: None,
            memory_facet: None,
        }
    }

    #[test]
    fn the_api_lives_beside_the_socket() {
        assert_eq!(api_base(&options("ws://h:1")), "http://h:1");
        assert_eq!(api_base(&options("wss://h/prefix/ws")), "https://h/prefix");
        assert_eq!(api_base(&options("http://h:1/")), "http://h:1");
        assert_eq!(query_escape("a b&c"), "a%20b%26c");
    }

    #[test]
    fn a_memory_is_one_readable_line() {
        let memory = json!({
            "id": "m1", "tier": "caller_agent", "agent": "a", "type": "preference",
            "content": "prefers\n  window   seats",
            "created_at": "2026-07-24T16:47:30.5Z", "updated_at": "2026-07-25T08:00:01.25Z",
        });
        assert_eq!(
            memory_line(&memory, &options("ws://h")),
            "m1  preference  2026-07-25T08:00:01Z  prefers window seats"
        );
        let shared = json!({
            "id": "m2", "tier": "caller", "memory_facet": "project-x", "type": "general",
            "content": "x".repeat(100), "created_at": "2026-07-24T16:47:30Z",
        });
        let line = memory_line(&shared, &options("ws://h"));
        let expected = format!(
            "m2  general (shared, facet project-x)  2026-07-24T16:47:30Z  {}…",
            "x".repeat(59)
        );
        assert_eq!(line, expected);
        let faceted = ChatOptions {
            memory_facet: Some("project-x".into()),
            ..options("ws://h")
        };
        assert!(memory_line(&shared, &faceted).starts_with("m2  general (shared)  "));
    }

    #[test]
    fn times_lose_their_fraction_and_text_its_line_breaks() {
        assert_eq!(
            whole_seconds("2026-07-24T16:47:30.5Z"),
            "2026-07-24T16:47:30Z"
        );
        assert_eq!(
            whole_seconds("2026-07-24T16:47:30Z"),
            "2026-07-24T16:47:30Z"
        );
        assert_eq!(
            whole_seconds("2026-07-24T16:47:30.123+02:00"),
            "2026-07-24T16:47:30+02:00"
        );
        assert_eq!(whole_seconds(""), "");
        assert_eq!(one_line("a\n\tb  c", 10), "a b c");
        assert_eq!(one_line("héllo wörld", 6), "héllo…");
        assert_eq!(one_line("abcdef", 6), "abcdef");
    }
}

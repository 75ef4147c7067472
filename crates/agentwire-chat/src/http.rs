//! The sessions API (`/api/v1/sessions`), for `/sessions` and `/resume`.

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

async fn get(options: &ChatOptions, path_and_query: &str) -> Result<Value, String> {
    let url = format!("{}{path_and_query}", api_base(options));
    let mut request = reqwest::Client::new().get(&url);
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
    let json: Value = serde_json::from_str(&body).map_err(|_| format!("HTTP {status}"))?;
    if !status.is_success() {
        let error = json["error"].as_str().unwrap_or_default();
        return Err(format!("HTTP {} {error}", status.as_u16())
            .trim_end()
            .to_owned());
    }
    Ok(json)
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

#[cfg(test)]
mod tests {
    use super::{api_base, query_escape};
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
}

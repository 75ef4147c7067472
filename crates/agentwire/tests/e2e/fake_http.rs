//! In-process HTTP servers standing in for what the server calls out to: a
//! model API streaming OpenAI's Chat Completions format byte for byte, and
//! the HTTP APIs behind tools. Each reads whole requests (head and
//! `Content-Length` body) off real sockets, records them, and answers one
//! request per connection.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// A request as the fake received it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `POST /v1/chat/completions HTTP/1.1`.
    pub request_line: String,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "request body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// What the fake answers (always `200`).
pub struct Answer {
    pub content_type: &'static str,
    pub body: String,
}

impl Answer {
    pub fn json(body: &str) -> Answer {
        Answer {
            content_type: "application/json",
            body: body.to_owned(),
        }
    }
}

type Responder = dyn Fn(usize, &Seen) -> Answer + Send + Sync;

pub struct FakeHttp {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FakeHttp {
    /// Answers the `n`-th request (from 0) with `answer(n, request)`.
    pub async fn start(
        answer: impl Fn(usize, &Seen) -> Answer + Send + Sync + 'static,
    ) -> FakeHttp {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Responder> = Arc::new(answer);
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve_one(stream, log.clone(), answer.clone()));
            }
        });
        FakeHttp { addr, seen }
    }

    /// Every request received so far, in order.
    pub async fn requests(&self) -> Vec<Seen> {
        self.seen.lock().await.clone()
    }
}

async fn serve_one(mut stream: TcpStream, log: Arc<Mutex<Vec<Seen>>>, answer: Arc<Responder>) {
    let Some(seen) = read_request(&mut stream).await else {
        return;
    };
    let n = {
        let mut log = log.lock().await;
        log.push(seen.clone());
        log.len() - 1
    };
    let Answer { content_type, body } = answer(n, &seen);
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads one whole request (head and `Content-Length` body) off `stream`.
pub async fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
        raw.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, value)| value.trim().parse().unwrap());
    let mut body = raw.split_off(head_end + 4);
    while body.len() < length {
        let n = stream.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&buffer[..n]);
    }
    Some(Seen {
        request_line: head.lines().next().unwrap_or_default().to_owned(),
        body,
    })
}

/// An OpenAI-compatible model API (`POST /v1/chat/completions`, streamed)
/// that answers the `n`-th request with `replies[n]`, the last repeating.
pub async fn openai_model(replies: Vec<String>) -> FakeHttp {
    FakeHttp::start(move |n, _| Answer {
        content_type: "text/event-stream; charset=utf-8",
        body: replies[n.min(replies.len() - 1)].clone(),
    })
    .await
}

/// A model API that streams one answer forever, a word every 50 ms, until
/// its client goes away; `closed` fires once it has (a read saw the end, or
/// a write failed). One connection.
pub async fn openai_endless() -> (SocketAddr, tokio::sync::oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed, closed_seen) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        if read_request(&mut stream).await.is_some() {
            stream_until_closed(&mut stream).await;
        }
        let _ = closed.send(());
    });
    (addr, closed_seen)
}

async fn stream_until_closed(stream: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let first = delta(
        "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}",
        "null",
    );
    if stream.write_all(head.as_bytes()).await.is_err()
        || stream.write_all(first.as_bytes()).await.is_err()
    {
        return;
    }
    let word = delta(&format!("{{\"content\":{}}}", json!("word ")), "null");
    let mut buffer = [0u8; 256];
    loop {
        tokio::select! {
            read = stream.read(&mut buffer) => {
                if matches!(read, Ok(0) | Err(_)) {
                    return;
                }
            }
            () = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                if stream.write_all(word.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// An HTTP API that takes one request and never answers: `asked` fires
/// when the request has arrived, `closed` when its client went away.
pub async fn hanging_http() -> (
    SocketAddr,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Receiver<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (asked, asked_seen) = tokio::sync::oneshot::channel();
    let (closed, closed_seen) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        if read_request(&mut stream).await.is_some() {
            let _ = asked.send(());
            let mut buffer = [0u8; 256];
            while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
        }
        let _ = closed.send(());
    });
    (addr, asked_seen, closed_seen)
}

/// One `chat.completion.chunk` event as OpenAI streams it.
fn chunk(choices: &str, usage: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\
\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\
\"system_fingerprint\":\"fp_06737a9306\",\"choices\":[{choices}],\"usage\":{usage}}}\n\n"
    )
}

/// One choice delta (`delta` is its JSON) with `finish` as its finish reason.
pub fn delta(delta: &str, finish: &str) -> String {
    chunk(
        &format!("{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}"),
        "null",
    )
}

/// The stream's end: the finish reason, the usage chunk and `[DONE]`.
fn finish(reason: &str) -> String {
    let usage = "{\"prompt_tokens\":19,\"completion_tokens\":10,\"total_tokens\":29,\
\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":\
{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}";
    let mut end = delta("{}", &format!("\"{reason}\""));
    end.push_str(&chunk("", usage));
    end.push_str("data: [DONE]\n\n");
    end
}

/// A streamed answer of `text`, in two deltas.
pub fn openai_text(text: &str) -> String {
    let mut t = delta(
        "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}",
        "null",
    );
    let (head, tail) = halves(text);
    for piece in [head, tail] {
        t.push_str(&delta(&format!("{{\"content\":{}}}", json!(piece)), "null"));
    }
    t.push_str(&finish("stop"));
    t
}

/// A streamed call of the tool `name` with `arguments`, its arguments
/// split across two deltas.
pub fn openai_tool_call(id: &str, name: &str, arguments: &Value) -> String {
    let mut t = delta(
        "{\"role\":\"assistant\",\"content\":null,\"refusal\":null}",
        "null",
    );
    let arguments = arguments.to_string();
    let (head, tail) = halves(&arguments);
    t.push_str(&delta(
        &format!(
            "{{\"tool_calls\":[{{\"index\":0,\"id\":\"{id}\",\"type\":\"function\",\"function\":{{\"name\":\"{name}\",\"arguments\":{}}}}}]}}",
            json!(head)
        ),
        "null",
    ));
    t.push_str(&delta(
        &format!(
            "{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{}}}}}]}}",
            json!(tail)
        ),
        "null",
    ));
    t.push_str(&finish("tool_calls"));
    t
}

/// `text` cut in two at the character boundary nearest its middle, so the
/// client has to join deltas.
fn halves(text: &str) -> (&str, &str) {
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.split_at(cut)
}

//! `agentwire chat`: a line-oriented terminal client of the Omnia dialect.
//!
//! It is an ordinary client of `/ws?agent=…`, `/api/v1/sessions` and
//! `/api/v1/memories`, so it works against any server that speaks the
//! dialect, and it is how a user reaches an agent without hand-typing JSON
//! frames. Replies stream to standard output as their chunks arrive; tool
//! calls are shown as lines in brackets; a client tool asks `[y/n]` on
//! standard input. Lines typed while a turn runs wait for it to end (so a
//! script's lines pair with the turns they follow), except the answer to a
//! tool question, `/cancel` and `/quit`, which act at once.
//!
//! Standard input and output are parameters ([`run`]), so the same loop is
//! driven by a terminal, by pipes, or by a test.

mod frames;
mod http;
mod input;

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use frames::TurnEnd;
use frames::{Frame, ToolCall};
use input::{Command, Input};

/// How long a `tool_call` waits for the server's own `tool_result` before
/// it is taken as the client's to run. The Omnia dialect marks neither
/// kind: only demo and scripted handlers show server tools, and they send
/// the result straight after the call, so a short wait tells them apart
/// without a user noticing it.
const SERVER_RESULT_GRACE: Duration = Duration::from_millis(300);

/// How long to wait for the `connected` frame after the upgrade.
const CONNECTED_TIMEOUT: Duration = Duration::from_secs(10);

/// What the user asked for on the command line.
#[derive(Clone, Debug)]
pub struct ChatOptions {
    /// The server's base URL: `ws://HOST:PORT` (or `wss://`, `http(s)://`),
    /// optionally with a path prefix; `/ws` is appended unless it is there.
    pub url: String,
    pub agent: String,
    /// Sent as `Authorization: Bearer` on the socket and the sessions and
    /// memories APIs.
    pub token: Option<String>,
    /// A session to resume from the first message on.
    pub session: Option<String>,
    /// The connection's `memory_facet` (the upgrade parameter), and the
    /// facet `/memories` lists; `None` names none.
    pub memory_facet: Option<String>,
}

/// How a chat ended, for the exit status.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The REPL ended (`/quit` or end of input), or `--once`'s turn ended
    /// with `done`.
    Finished,
    /// `--once`'s turn ended with an `error` frame or was cancelled.
    TurnFailed,
    /// The server could not be reached, refused the upgrade, or broke the
    /// dialect; the message says which.
    Unreachable(String),
}

/// Runs the REPL until `/quit` or the end of `input`.
pub async fn run<I, O>(options: ChatOptions, input: I, output: O) -> Outcome
where
    I: AsyncBufRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin,
{
    Chat::start(options, input, output, false)
        .await
        .repl()
        .await
}

/// Runs the REPL with a `you> ` prompt before each line: for a terminal.
pub async fn run_interactive<I, O>(options: ChatOptions, input: I, output: O) -> Outcome
where
    I: AsyncBufRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin,
{
    Chat::start(options, input, output, true).await.repl().await
}

/// Sends `text` as one message, prints the reply and returns whether the
/// turn succeeded. Client tools still ask on `input`.
pub async fn once<I, O>(options: ChatOptions, text: &str, input: I, output: O) -> Outcome
where
    I: AsyncBufRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin,
{
    let interactive = false;
    let mut chat = Chat::start(options, input, output, interactive).await;
    if let Some(outcome) = chat.failed.take() {
        return outcome;
    }
    match chat.turn(text).await {
        Ok(TurnEnd::Done) => Outcome::Finished,
        Ok(TurnEnd::Cancelled | TurnEnd::Error { .. }) => Outcome::TurnFailed,
        Err(outcome) => outcome,
    }
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What woke a running turn up.
/// A turn as its frames arrive.
#[derive(Default)]
struct Turn {
    reply: frames::Reply,
    /// A tool call waiting for the server's own result, and until when.
    unresolved: Option<(ToolCall, tokio::time::Instant)>,
}

enum TurnEvent {
    Frame(Result<Frame, String>),
    /// A line typed while the turn runs; `None` once input has ended.
    Line(Option<String>),
    /// A tool call's wait for the server's own result is over.
    GraceOver,
}

struct Chat<O> {
    options: ChatOptions,
    output: O,
    input: Input,
    /// Lines typed while a turn ran, in order, for after it.
    deferred: VecDeque<String>,
    socket: Option<Socket>,
    /// The session the next message joins: the connection's, or one the
    /// user resumed.
    session: Option<String>,
    cancel_supported: bool,
    interactive: bool,
    /// Set when the first connection failed, so `once` and `repl` report it.
    failed: Option<Outcome>,
}

impl<O: AsyncWrite + Unpin> Chat<O> {
    async fn start<I>(options: ChatOptions, input: I, output: O, interactive: bool) -> Self
    where
        I: AsyncBufRead + Unpin + Send + 'static,
    {
        let session = options.session.clone();
        let mut chat = Chat {
            options,
            output,
            input: Input::spawn(input),
            deferred: VecDeque::new(),
            socket: None,
            session,
            cancel_supported: false,
            interactive,
            failed: None,
        };
        if let Err(outcome) = chat.connect().await {
            chat.failed = Some(outcome);
        }
        chat
    }

    async fn repl(mut self) -> Outcome {
        if let Some(outcome) = self.failed.take() {
            return outcome;
        }
        let greeting = format!(
            "(agent {}, session {}; /help lists the commands)",
            self.options.agent,
            self.session.as_deref().unwrap_or("none")
        );
        self.println(&greeting).await;
        loop {
            if self.interactive {
                self.print("you> ").await;
            }
            let Some(line) = self.next_line().await else {
                return Outcome::Finished;
            };
            let result = match input::parse(&line) {
                Command::Empty => continue,
                Command::Quit => return Outcome::Finished,
                Command::Message(text) => self.turn(&text).await.map(drop),
                Command::New => {
                    self.session = None;
                    self.reconnect().await
                }
                Command::Resume(id) => self.resume(&id).await,
                Command::Sessions => self.sessions().await,
                Command::Memories => self.memories().await,
                Command::Forget(id) => self.forget(&id).await,
                Command::Cancel => {
                    self.println("(no turn is running)").await;
                    Ok(())
                }
                Command::Help => {
                    self.println(input::HELP).await;
                    Ok(())
                }
                Command::Usage(usage) => {
                    self.println(usage).await;
                    Ok(())
                }
                Command::Unknown(command) => {
                    self.println(&format!("unknown command {command}; /help lists them"))
                        .await;
                    Ok(())
                }
            };
            if let Err(outcome) = result {
                return outcome;
            }
        }
    }

    /// A deferred line first, then the next one typed.
    async fn next_line(&mut self) -> Option<String> {
        match self.deferred.pop_front() {
            Some(line) => Some(line),
            None => self.input.next().await,
        }
    }

    fn ws_url(&self) -> String {
        let base = self.options.url.trim_end_matches('/');
        let base = if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else {
            base.to_owned()
        };
        let endpoint = if base.ends_with("/ws") {
            base
        } else {
            format!("{base}/ws")
        };
        // stream=2 asks for positions and cancel; a server that does not
        // know it ignores an unknown parameter.
        let mut url = format!(
            "{endpoint}?agent={}&stream=2",
            http::query_escape(&self.options.agent)
        );
        if let Some(facet) = &self.options.memory_facet {
            url.push_str(&format!("&memory_facet={}", http::query_escape(facet)));
        }
        url
    }

    async fn connect(&mut self) -> Result<(), Outcome> {
        let url = self.ws_url();
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| Outcome::Unreachable(format!("{url}: {e}")))?;
        if let Some(token) = &self.options.token {
            let value = format!("Bearer {token}").parse().map_err(|_| {
                Outcome::Unreachable("the token is not a valid header value".into())
            })?;
            request.headers_mut().insert("authorization", value);
        }
        let (mut socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| Outcome::Unreachable(format!("cannot connect to {url}: {e}")))?;
        let connected = tokio::time::timeout(CONNECTED_TIMEOUT, next_frame(&mut socket))
            .await
            .map_err(|_| Outcome::Unreachable("no `connected` frame from the server".into()))?
            .map_err(Outcome::Unreachable)?;
        let Frame::Connected {
            session_id,
            cancel_supported,
        } = connected
        else {
            return Err(Outcome::Unreachable(format!(
                "the server's first frame is not `connected`: {connected:?}"
            )));
        };
        self.cancel_supported = cancel_supported;
        if self.session.is_none() {
            self.session = session_id;
        }
        self.socket = Some(socket);
        Ok(())
    }

    async fn reconnect(&mut self) -> Result<(), Outcome> {
        if let Some(mut socket) = self.socket.take() {
            let _ = socket.close(None).await;
        }
        self.connect().await?;
        let session = self.session.clone().unwrap_or_default();
        self.println(&format!("(session {session})")).await;
        Ok(())
    }

    async fn send(&mut self, frame: Value) -> Result<(), Outcome> {
        let socket = self
            .socket
            .as_mut()
            .ok_or_else(|| Outcome::Unreachable("not connected".into()))?;
        socket
            .send(Message::text(frame.to_string()))
            .await
            .map_err(|e| Outcome::Unreachable(format!("the connection dropped: {e}")))
    }

    /// Sends one message and prints its reply up to the turn's end.
    async fn turn(&mut self, text: &str) -> Result<TurnEnd, Outcome> {
        let mut message = json!({"type": "message", "content": text});
        if let Some(session) = &self.session {
            message["session_id"] = json!(session);
        }
        self.send(message).await?;
        let mut turn = Turn::default();
        loop {
            let grace_until = turn.unresolved.as_ref().map(|(_, until)| *until);
            match self.next_event(grace_until).await? {
                TurnEvent::Frame(frame) => {
                    let frame = frame.map_err(Outcome::Unreachable)?;
                    if let Some(end) = self.on_frame(frame, &mut turn).await? {
                        return Ok(end);
                    }
                }
                TurnEvent::Line(None) => {}
                TurnEvent::Line(Some(line)) => match input::parse(&line) {
                    Command::Cancel => self.cancel().await?,
                    Command::Quit => return Err(Outcome::Finished),
                    _ => self.deferred.push_back(line),
                },
                TurnEvent::GraceOver => {
                    if let Some((call, _)) = turn.unresolved.take() {
                        self.client_tool(&call).await?;
                    }
                }
            }
        }
    }

    /// What comes first while a turn runs: a frame, a typed line, or the
    /// end of a tool call's wait for its server result (`grace_until`).
    async fn next_event(
        &mut self,
        grace_until: Option<tokio::time::Instant>,
    ) -> Result<TurnEvent, Outcome> {
        let socket = self
            .socket
            .as_mut()
            .ok_or_else(|| Outcome::Unreachable("not connected".into()))?;
        let grace = async {
            match grace_until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        Ok(tokio::select! {
            frame = next_frame(socket) => TurnEvent::Frame(frame),
            line = self.input.next(), if !self.input.is_closed() => TurnEvent::Line(line),
            () = grace => TurnEvent::GraceOver,
        })
    }

    /// Prints a frame of the turn and answers what it asks; the turn's end
    /// at its last frame.
    async fn on_frame(
        &mut self,
        frame: Frame,
        turn: &mut Turn,
    ) -> Result<Option<TurnEnd>, Outcome> {
        match frame {
            Frame::Chunk(text) => {
                turn.reply.streamed.push_str(&text);
                self.print(&text).await;
            }
            Frame::UserTranscript(text) => self.println(&format!("(you said) {text}")).await,
            Frame::ToolCall(call) => {
                self.tool_line(&format!("[tool {} {}]", call.name, call.arguments))
                    .await;
                // Acknowledged at once, as the contract's dashboard
                // does: the ack timeout is short and the question may
                // wait for a person. A server tool's id is ignored.
                self.send(json!({"type": "tool_call_ack", "tool_call_ack": {"call_id": call.id}}))
                    .await?;
                if let Some((earlier, _)) = turn.unresolved.take() {
                    self.client_tool(&earlier).await?;
                }
                turn.unresolved = Some((call, tokio::time::Instant::now() + SERVER_RESULT_GRACE));
            }
            Frame::ToolResult { id, outcome } => {
                if turn
                    .unresolved
                    .as_ref()
                    .is_some_and(|(call, _)| call.id == id)
                {
                    turn.unresolved = None;
                }
                self.tool_line(&format!("[tool result {outcome}]")).await;
            }
            Frame::Done(done) => return Ok(Some(self.on_done(&done, turn).await)),
            Frame::Error { code, message } => {
                if !turn.reply.streamed.is_empty() {
                    self.println("").await;
                }
                self.println(&format!("error {code}: {message}")).await;
                return Ok(Some(TurnEnd::Error { code, message }));
            }
            Frame::GoingAway => {
                self.println("\n(the server is shutting down)").await;
            }
            Frame::Connected { .. } | Frame::Other => {}
        }
        Ok(None)
    }

    /// Prints the end of the reply: what `done` has beyond the streamed
    /// text, its media, and whether it was cancelled.
    async fn on_done(&mut self, done: &frames::Done, turn: &mut Turn) -> TurnEnd {
        if let Some((call, _)) = turn.unresolved.take() {
            self.tool_line(&format!("[tool {} was not answered]", call.name))
                .await;
        }
        let rest = turn.reply.rest_of(done);
        self.print(&rest).await;
        self.println("").await;
        for part in &done.media {
            self.println(&format!("[{part}]")).await;
        }
        if done.cancelled {
            self.println("[cancelled]").await;
            return TurnEnd::Cancelled;
        }
        TurnEnd::Done
    }

    async fn cancel(&mut self) -> Result<(), Outcome> {
        if !self.cancel_supported {
            self.println("(this server does not support cancel)").await;
            return Ok(());
        }
        self.send(json!({"type": "cancel"})).await
    }

    /// Asks whether to run a client tool and sends the answer: `y` asks for
    /// the result (JSON, or text; an empty line answers
    /// `{"approved": true}`), anything else declines it.
    async fn client_tool(&mut self, call: &ToolCall) -> Result<(), Outcome> {
        let question = match &call.consent_message {
            Some(consent) => format!("? {consent} ({}) [y/n] ", call.name),
            None => format!("? run {} here? [y/n] ", call.name),
        };
        self.print(&question).await;
        let answer = self.answer_line().await;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return self
                .send(json!({"type": "tool_call_nack",
                    "tool_call_nack": {"call_id": call.id, "reason": "declined by the user"}}))
                .await;
        }
        self.print("result> ").await;
        let result = self.answer_line().await;
        let result = match result.trim() {
            "" => json!({"approved": true}),
            text => serde_json::from_str(text).unwrap_or_else(|_| json!(text)),
        };
        self.send(
            json!({"type": "tool_result", "tool_result": {"call_id": call.id, "result": result}}),
        )
        .await
    }

    /// The line answering a question: typed ahead (deferred) or typed now.
    /// The end of input declines.
    async fn answer_line(&mut self) -> String {
        let line = self.next_line().await.unwrap_or_default();
        if !self.interactive {
            // Piped answers are not echoed by a terminal.
            self.println(&line).await;
        }
        line
    }

    async fn resume(&mut self, id: &str) -> Result<(), Outcome> {
        self.session = Some(id.to_owned());
        match http::messages(&self.options, id).await {
            Ok(history) => {
                self.println(&format!("(resumed {id}; {} messages)", history.len()))
                    .await;
                for line in history {
                    self.println(&line).await;
                }
            }
            Err(e) => {
                self.println(&format!("(resumed {id}; no history: {e})"))
                    .await
            }
        }
        Ok(())
    }

    async fn sessions(&mut self) -> Result<(), Outcome> {
        match http::sessions(&self.options).await {
            Ok(lines) if lines.is_empty() => self.println("(no sessions)").await,
            Ok(lines) => {
                for line in lines {
                    self.println(&line).await;
                }
            }
            Err(e) => self.println(&format!("(cannot list sessions: {e})")).await,
        }
        Ok(())
    }

    async fn memories(&mut self) -> Result<(), Outcome> {
        match http::memories(&self.options).await {
            Ok(lines) if lines.is_empty() => self.println("(no memories)").await,
            Ok(lines) => {
                for line in lines {
                    self.println(&line).await;
                }
            }
            Err(e) => self.println(&format!("(cannot list memories: {e})")).await,
        }
        Ok(())
    }

    async fn forget(&mut self, id: &str) -> Result<(), Outcome> {
        let line = match http::forget(&self.options, id).await {
            Ok(true) => format!("forgotten {id}"),
            Ok(false) => format!("no memory {id}"),
            Err(e) => format!("(cannot forget {id}: {e})"),
        };
        self.println(&line).await;
        Ok(())
    }

    /// A tool line on a line of its own, even in the middle of a reply.
    async fn tool_line(&mut self, text: &str) {
        self.println(&format!("\n{text}")).await;
    }

    async fn println(&mut self, text: &str) {
        self.print(text).await;
        self.print("\n").await;
    }

    /// Writes and flushes, so a streamed chunk shows as it arrives. A
    /// closed output (the reader went away) is not an error worth more
    /// than stopping to write.
    async fn print(&mut self, text: &str) {
        let _ = self.output.write_all(text.as_bytes()).await;
        let _ = self.output.flush().await;
    }
}

/// The next JSON text frame, classified; pings are answered by tungstenite.
async fn next_frame(socket: &mut Socket) -> Result<Frame, String> {
    loop {
        match socket.next().await {
            None => return Err("the server closed the connection".into()),
            Some(Err(e)) => return Err(format!("the connection dropped: {e}")),
            Some(Ok(Message::Text(text))) => {
                return frames::classify(text.as_str())
                    .map_err(|e| format!("the server sent a frame that is not JSON: {e}"));
            }
            Some(Ok(Message::Close(frame))) => {
                let reason = frame
                    .map(|f| format!("{} {}", u16::from(f.code), f.reason))
                    .unwrap_or_default();
                return Err(format!("the server closed the connection {reason}")
                    .trim_end()
                    .to_owned());
            }
            Some(Ok(_)) => continue,
        }
    }
}

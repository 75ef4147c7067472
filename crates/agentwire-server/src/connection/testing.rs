//! Test-only: a connection without a server, as axum's
//! `examples/testing-websockets` does. The socket is a pair of channels
//! ([`ChannelTransport`]); a [`TestClient`] holds the other ends, sends JSON
//! text frames and reads the server's frames back. [`Harness`] is a server's
//! state around an engine on the memory store, with a fixed clock and
//! counting ids (so frames are exact, timestamps and ids included), and one
//! agent answered by [`Scripted`]: each dialect's tests spawn their
//! connection's future on it and drive it through the channels.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agentwire_core::testing::{CountingIds, FixedClock};
use agentwire_core::{
    AccessLevel, ClientToolRequest, Handler, Identity, IdentityOrigin, Reply, Timestamp,
    ToolOutcome, TurnContext, TurnFailure,
};
use agentwire_engine::{Agent, Engine};
use agentwire_store::MemoryStore;
use async_trait::async_trait;
use futures_util::{Sink, Stream};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::abuse::AbuseLimits;
use crate::identity::Caller;
use crate::lifecycle::{self, ConnectionSlot};
use crate::websocket::{Message, Transport, WebSocket};
use crate::{AgentEntry, AppState, IdentitySettings, Limits, ServerSettings, WebSocketSettings};

/// The agent every test talks to.
pub(crate) const AGENT: &str = "test-agent";

/// What the fixed clock always says: 2026-01-01T00:00:00Z.
pub(crate) const NOW: Timestamp = Timestamp(1_767_225_600_000_000_000);

/// [`NOW`] as both dialects write it.
pub(crate) const NOW_TEXT: &str = "2026-01-01T00:00:00Z";

/// How long a test waits for a frame before it fails. Under paused time
/// this only passes when nothing else is left to happen.
const RECV_TIMEOUT: Duration = Duration::from_secs(30);

/// The server's side of the socket: client frames from a channel, server
/// frames into another. Always ready to take a frame; the closing
/// handshake's transport steps do nothing.
pub(crate) struct ChannelTransport {
    incoming: mpsc::UnboundedReceiver<Result<Message, tungstenite::Error>>,
    outgoing: mpsc::UnboundedSender<Message>,
}

impl Stream for ChannelTransport {
    type Item = Result<Message, tungstenite::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.incoming.poll_recv(cx)
    }
}

impl Sink<Message> for ChannelTransport {
    type Error = tungstenite::Error;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        self.outgoing
            .send(item)
            .map_err(|_| tungstenite::Error::ConnectionClosed)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
}

impl Transport for ChannelTransport {
    async fn shutdown(&mut self) {}

    async fn discard_until_eof(&mut self) {}
}

/// The client's ends of a connection, and the connection's task.
pub(crate) struct TestClient {
    to_server: mpsc::UnboundedSender<Result<Message, tungstenite::Error>>,
    from_server: mpsc::UnboundedReceiver<Message>,
    connection: JoinHandle<()>,
}

impl TestClient {
    /// Spawns the connection `run` makes of the server's side of a fresh
    /// channel socket.
    pub(crate) fn connect<F>(run: impl FnOnce(WebSocket<ChannelTransport>) -> F) -> TestClient
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (to_server, incoming) = mpsc::unbounded_channel();
        let (outgoing, from_server) = mpsc::unbounded_channel();
        let socket = WebSocket::new(ChannelTransport { incoming, outgoing });
        TestClient {
            to_server,
            from_server,
            connection: tokio::spawn(run(socket)),
        }
    }

    /// Sends `frame` as a text frame.
    pub(crate) fn send(&self, frame: &Value) {
        self.send_text(&frame.to_string());
    }

    pub(crate) fn send_text(&self, text: &str) {
        let sent = self.to_server.send(Ok(Message::Text(text.into())));
        assert!(sent.is_ok(), "the connection stopped reading");
    }

    /// Sends `bytes` as a binary frame.
    pub(crate) fn send_binary(&self, bytes: Vec<u8>) {
        let sent = self.to_server.send(Ok(Message::Binary(bytes.into())));
        assert!(sent.is_ok(), "the connection stopped reading");
    }

    /// The next frame the server sent that is not a ping or a pong.
    pub(crate) async fn next_frame(&mut self) -> Message {
        loop {
            let frame = tokio::time::timeout(RECV_TIMEOUT, self.from_server.recv())
                .await
                .expect("no frame from the server in time")
                .expect("the connection ended without a close frame");
            if !matches!(frame, Message::Ping(_) | Message::Pong(_)) {
                return frame;
            }
        }
    }

    /// The next text frame, parsed.
    pub(crate) async fn recv(&mut self) -> Value {
        match self.next_frame().await {
            Message::Text(text) => serde_json::from_str(text.as_str()).expect("a JSON frame"),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    /// The next `n` text frames, parsed.
    pub(crate) async fn recv_n(&mut self, n: usize) -> Vec<Value> {
        let mut frames = Vec::with_capacity(n);
        for _ in 0..n {
            frames.push(self.recv().await);
        }
        frames
    }

    /// The server's close frame, as code and reason; the connection's task
    /// then ends.
    pub(crate) async fn recv_close(mut self) -> (u16, String) {
        let close = match self.next_frame().await {
            Message::Close(Some(frame)) => (u16::from(frame.code), frame.reason.to_string()),
            other => panic!("expected a close frame, got {other:?}"),
        };
        // The client goes away: the server stops waiting for its Close.
        drop(self.to_server);
        tokio::time::timeout(RECV_TIMEOUT, self.connection)
            .await
            .expect("the connection ends after its close")
            .expect("the connection's task did not panic");
        close
    }

    /// Asserts the server sends nothing (but pings) while everything else
    /// that can happen before `quiet` passes happens.
    pub(crate) async fn expect_silence(&mut self, quiet: Duration) {
        let deadline = tokio::time::Instant::now() + quiet;
        loop {
            match tokio::time::timeout_at(deadline, self.from_server.recv()).await {
                Err(_) => return,
                Ok(Some(Message::Ping(_) | Message::Pong(_))) => {}
                Ok(frame) => panic!("expected silence, got {frame:?}"),
            }
        }
    }

    /// The client closes: the connection ends without a frame of its own.
    pub(crate) async fn close(mut self) {
        self.send_message(Message::Close(None));
        tokio::time::timeout(RECV_TIMEOUT, self.connection)
            .await
            .expect("the connection ends on the client's close")
            .expect("the connection's task did not panic");
        while let Ok(frame) = self.from_server.try_recv() {
            assert!(
                matches!(frame, Message::Ping(_) | Message::Pong(_)),
                "unexpected frame after the client's close: {frame:?}"
            );
        }
    }

    fn send_message(&mut self, message: Message) {
        let sent = self.to_server.send(Ok(message));
        assert!(sent.is_ok(), "the connection stopped reading");
    }
}

/// The turns [`Scripted`] runs, chosen by the message's text.
pub(crate) mod script {
    /// Streams "Hello", " ", "world" and answers "Hello world".
    pub(crate) const STREAM: &str = "stream";
    /// Streams "partial", then waits for the test's [`super::Harness::release`]
    /// (or the turn's cancel) and answers "partial".
    pub(crate) const HOLD: &str = "hold";
    /// Asks the client for `get_location` and answers with the outcome:
    /// `located: <result>`, or `no location: <reason>`.
    pub(crate) const TOOL: &str = "tool";
}

/// The test handler: [`script`]s by the message's text; anything else is
/// echoed (`echo: <text>`).
pub(crate) struct Scripted {
    /// [`script::HOLD`] waits for a permit.
    gate: Arc<Semaphore>,
}

/// The pause after each streamed delta: under paused time it ends only once
/// the connection has read and sent everything before it, so no reader
/// ever finds deltas to merge.
const DELTA_PAUSE: Duration = Duration::from_millis(10);

#[async_trait]
impl Handler for Scripted {
    async fn run(&self, turn: &TurnContext) -> Result<Reply, TurnFailure> {
        let text = turn.input.text.as_str();
        match text {
            script::STREAM => {
                for delta in ["Hello", " ", "world"] {
                    turn.events().text_delta(delta).await;
                    tokio::time::sleep(DELTA_PAUSE).await;
                }
                Ok(Reply::text("Hello world"))
            }
            script::HOLD => {
                turn.events().text_delta("partial").await;
                tokio::select! {
                    permit = self.gate.acquire() => {
                        permit.expect("the gate stays open").forget();
                        Ok(Reply::text("partial"))
                    }
                    () = turn.cancel.cancelled() => Err(TurnFailure::internal()),
                }
            }
            script::TOOL => {
                let request = ClientToolRequest {
                    id: turn.new_call_id(),
                    name: "get_location".to_owned(),
                    arguments: json!({"precision": "city"}),
                    consent_message: Some("Share your city?".to_owned()),
                    categories: vec!["location".to_owned()],
                };
                Ok(Reply::text(match turn.call_client_tool(request).await {
                    ToolOutcome::Ok(result) => format!("located: {result}"),
                    ToolOutcome::Error(reason) | ToolOutcome::Denied(reason) => {
                        format!("no location: {reason}")
                    }
                }))
            }
            _ => Ok(Reply::text(format!("echo: {text}"))),
        }
    }
}

/// A server's state for one test, and the gate of [`script::HOLD`].
pub(crate) struct Harness {
    pub(crate) state: Arc<AppState>,
    gate: Arc<Semaphore>,
}

impl Harness {
    /// Generous limits; `limits` adjusts them for the test.
    pub(crate) fn new(limits: impl FnOnce(&mut Limits)) -> Harness {
        Harness::build(limits, |state| state)
    }

    /// [`Harness::new`]'s server linked to other replicas by `links`.
    pub(crate) fn linked(links: crate::call::ReplicaLinks) -> Harness {
        Harness::build(|_| {}, |state| state.with_replicas(links))
    }

    fn build(
        limits: impl FnOnce(&mut Limits),
        finish: impl FnOnce(AppState) -> AppState,
    ) -> Harness {
        let gate = Arc::new(Semaphore::new(0));
        let engine = Engine::new(
            Arc::new(MemoryStore::new()),
            Arc::new(FixedClock(NOW)),
            Arc::new(CountingIds::default()),
        );
        let agent = Arc::new(Agent {
            name: AGENT.to_owned(),
            context_ttl: Duration::from_secs(3600),
            ack_timeout: Duration::from_secs(60),
            client_tool_timeout: Duration::from_secs(60),
            handler: Arc::new(Scripted { gate: gate.clone() }),
            session_init: None,
        });
        let entry = AgentEntry {
            agent,
            shows_server_tools: true,
            access_level: AccessLevel::Public,
            password_argon2: None,
            memory_facet: None,
            memory_tier: None,
            requires_ai_disclosure: None,
            voice: None,
            facades: Default::default(),
            pack: None,
        };
        let agents = [(AGENT.to_owned(), Arc::new(entry))].into_iter().collect();
        let mut settings = ServerSettings {
            allowed_origins: Vec::new(),
            allow_unauthenticated: true,
            limits: generous_limits(),
            screening: None,
            console: false,
            websocket: WebSocketSettings::default(),
        };
        limits(&mut settings.limits);
        let identity = IdentitySettings {
            authenticator: None,
            pseudonym_key: None,
        };
        let state = finish(AppState::new(engine, agents, settings, None, identity));
        Harness {
            state: Arc::new(state),
            gate,
        }
    }

    /// The test agent as the server lists it.
    pub(crate) fn agent(&self) -> Arc<AgentEntry> {
        self.state.agent(AGENT).expect("the test agent").clone()
    }

    /// A counted connection, as an upgrade takes one.
    pub(crate) fn slot(&self) -> ConnectionSlot {
        let hold = self
            .state
            .abuse()
            .open_connection(None)
            .unwrap_or_else(|_| panic!("no address, no limit"));
        lifecycle::try_open(&self.state, hold).expect("below the connection limit")
    }

    /// Lets one waiting (or the next) [`script::HOLD`] turn answer.
    pub(crate) fn release(&self) {
        self.gate.add_permits(1);
    }
}

/// Limits no test reaches unless it means to; the keepalive far off.
fn generous_limits() -> Limits {
    Limits {
        max_connections: 100,
        messages_per_second: 1000,
        message_burst: 1000,
        media_bytes_per_second: 1 << 30,
        media_burst_bytes: 1 << 30,
        max_payload_bytes: 1 << 20,
        inbound_bytes_in_flight: 1 << 26,
        ping_interval: Duration::from_secs(3600),
        pong_timeout: Duration::from_secs(7200),
        drain_timeout: Duration::from_secs(30),
        abuse: AbuseLimits {
            auth_failures_per_address_per_minute: 0,
            auth_failures_per_agent_per_minute: 0,
            max_connections_per_address: None,
            turns_per_minute_per_caller: None,
        },
        max_calls: 10,
        call_park_window: Duration::from_secs(30),
    }
}

/// A caller without a credential.
pub(crate) fn anonymous() -> Caller {
    Caller::default()
}

/// A caller `owner` whose token expires `expires_in` after [`NOW`]: the
/// connection stops using it `min(30 s, half of it)` before.
pub(crate) fn token_caller(owner: &str, expires_in: Duration) -> Caller {
    Caller {
        owner: Some(owner.to_owned()),
        identity: Some(Identity {
            subject: owner.to_owned(),
            origin: IdentityOrigin::Jwt,
            expires_at: Some(NOW.plus(expires_in)),
            session_claim: None,
            allowed_agents: None,
            grants: Vec::new(),
        }),
        address: None,
    }
}

/// `frame` with the log position `seq` (`stream=2`), as both dialects write
/// it.
pub(crate) fn at(mut frame: Value, seq: u64) -> Value {
    frame["seq"] = json!(seq);
    frame
}

/// What a test connection asks for: plain frames, or log positions
/// (`stream=2`: `seq`, cancel, rejoin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frames {
    Plain,
    Positions,
}

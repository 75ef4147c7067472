//! The suite's WebSocket client, its frames held to the dialects'
//! AsyncAPI documents (`contract`).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::FRAME_TIMEOUT;
use super::contract::{Dialect, Direction};

/// The suite's WebSocket client. Every text frame it sends or receives, and
/// every binary frame it receives, is held to its dialect's AsyncAPI document ([`contract::Contract`]; the
/// dialect is fixed when it connects): a frame the document does not
/// describe fails the test at once. A frame a test breaks on purpose, to
/// see the server refuse it, is sent with [`Client::send_invalid_text`] or
/// [`Client::send_invalid_json`].
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    dialect: Dialect,
}

impl Client {
    /// A client on the open socket `ws`, which speaks `dialect`.
    pub fn new(ws: WebSocketStream<MaybeTlsStream<TcpStream>>, dialect: Dialect) -> Client {
        Client { ws, dialect }
    }

    pub async fn send_json(&mut self, value: Value) {
        self.send_text(&value.to_string()).await;
    }

    pub async fn send_text(&mut self, text: &str) {
        self.send_message(Message::text(text)).await.expect("send");
    }

    /// Sends `text` without checking it against the document: a frame that
    /// is malformed on purpose (not JSON, an unknown type, a field missing
    /// or of the wrong type, a limit broken).
    pub async fn send_invalid_text(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.expect("send");
    }

    /// [`Client::send_invalid_text`] of `value`.
    pub async fn send_invalid_json(&mut self, value: Value) {
        self.send_invalid_text(&value.to_string()).await;
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.send_message(Message::binary(bytes))
            .await
            .expect("send");
    }

    /// Sends `message`; a text frame must be one the document describes.
    pub async fn send_message(&mut self, message: Message) -> Result<(), WsError> {
        if let Message::Text(text) = &message {
            self.dialect
                .contract()
                .assert_described(Direction::ClientToServer, text.as_str());
        }
        self.ws.send(message).await
    }

    /// Starts the closing handshake (`None`: a Close without a code).
    pub async fn close(&mut self, frame: Option<CloseFrame>) -> Result<(), WsError> {
        self.ws.close(frame).await
    }

    /// The next message off the socket, as the stream gives it (`None` once
    /// it has ended); a text frame must be one the document describes.
    pub async fn next_message(&mut self) -> Option<Result<Message, WsError>> {
        let next = self.ws.next().await;
        match &next {
            Some(Ok(Message::Text(text))) => self
                .dialect
                .contract()
                .assert_described(Direction::ServerToClient, text.as_str()),
            Some(Ok(Message::Binary(bytes))) => self
                .dialect
                .contract()
                .assert_server_binary_described(bytes),
            _ => {}
        }
        next
    }

    /// Sends `value`; `false` once the connection is gone.
    pub async fn try_send(&mut self, value: Value) -> bool {
        let text = serde_json::to_string(&value).unwrap();
        self.send_message(Message::Text(text.into())).await.is_ok()
    }

    /// The next JSON text frame, or `None` once the connection is gone.
    pub async fn try_recv(&mut self) -> Option<Value> {
        loop {
            match tokio::time::timeout(FRAME_TIMEOUT, self.next_message()).await {
                Ok(Some(Ok(Message::Text(text)))) => {
                    return Some(
                        serde_json::from_str(text.as_str()).expect("server frames are JSON"),
                    );
                }
                Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
                Ok(Some(Ok(other))) => panic!("expected a text frame, got {other:?}"),
                Ok(None | Some(Err(_))) => return None,
                Err(_) => panic!("no frame within {FRAME_TIMEOUT:?}"),
            }
        }
    }

    pub async fn say(&mut self, content: &str) {
        self.send_json(serde_json::json!({"type": "message", "content": content}))
            .await;
    }

    /// Sends a message that picks the test handler's script.
    pub async fn script(&mut self, scenario: &str, content: &str) {
        self.send_json(serde_json::json!({
            "type": "message", "content": content, "metadata": {"mock_scenario": scenario}
        }))
        .await;
    }

    /// The next JSON text frame, skipping pings and pongs.
    pub async fn recv(&mut self) -> Value {
        self.recv_within(FRAME_TIMEOUT).await
    }

    /// [`Client::recv`], waiting up to `wait` for each frame: for work that
    /// is slow under load (a sandbox's server starting).
    pub async fn recv_within(&mut self, wait: Duration) -> Value {
        let text = self.recv_text_within(wait).await;
        let value: Value = serde_json::from_str(&text).expect("server frames are JSON");
        assert!(
            value["timestamp"].is_string(),
            "every server frame has a timestamp: {value}"
        );
        value
    }

    /// The next text frame exactly as it was sent, skipping pings and pongs.
    pub async fn recv_text(&mut self) -> String {
        self.recv_text_within(FRAME_TIMEOUT).await
    }

    async fn recv_text_within(&mut self, wait: Duration) -> String {
        loop {
            let message = tokio::time::timeout(wait, self.next_message())
                .await
                .expect("a frame within the timeout")
                .expect("socket open")
                .expect("frame readable");
            match message {
                Message::Text(text) => return text.as_str().to_owned(),
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// The next JSON text frame, skipping pings and pongs, as it is: the
    /// Gnosari dialect's events carry no timestamp. Skips the
    /// `session_summary_scheduled` event that follows every completed
    /// Gnosari turn; [`Client::recv_any_event`] returns it.
    pub async fn recv_event(&mut self) -> Value {
        loop {
            let event = self.recv_any_event().await;
            if event["type"] != "session_summary_scheduled" {
                return event;
            }
        }
    }

    /// The next JSON text frame, skipping pings and pongs, whatever it is.
    pub async fn recv_any_event(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(FRAME_TIMEOUT, self.next_message())
                .await
                .expect("a frame within the timeout")
                .expect("socket open")
                .expect("frame readable");
            match message {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).expect("server frames are JSON");
                }
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// Gnosari events up to and including the turn's `agent_completed` or
    /// `error`.
    pub async fn recv_gnosari_turn(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let event = self.recv_event().await;
            let terminal = event["type"] == "agent_completed" || event["type"] == "error";
            events.push(event);
            if terminal {
                return events;
            }
        }
    }

    /// Frames up to and including the turn's terminal `done` or `error`.
    pub async fn recv_turn(&mut self) -> Vec<Value> {
        let mut frames = Vec::new();
        loop {
            let frame = self.recv().await;
            let terminal = frame["type"] == "done" || frame["type"] == "error";
            frames.push(frame);
            if terminal {
                return frames;
            }
        }
    }

    /// Asserts no text frame arrives within `wait`.
    pub async fn expect_silence(&mut self, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.next_message()).await {
                Err(_) => return,
                Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
                Ok(other) => panic!("expected silence, got {other:?}"),
            }
        }
    }

    /// Reads until the server closes; returns its close frame, if it sent one.
    pub async fn expect_close(&mut self, within: Duration) -> Option<CloseFrame> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.next_message()).await {
                Err(_) => panic!("socket still open after {within:?}"),
                Ok(None) | Ok(Some(Err(_))) => return None,
                Ok(Some(Ok(Message::Close(frame)))) => return frame,
                Ok(Some(Ok(_))) => continue,
            }
        }
    }
}

//! Opening one provider session: the WebSocket upgrade with the key, then
//! `session.created`, our `session.update` and `session.updated`, each
//! within the connect timeout. A failure is classified here and told in
//! words that carry no body, message or key.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentwire_core::realtime::{CallError, CallFailure};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::header::AUTHORIZATION;

use super::{Shared, Socket, wire};

/// Opens a provider session in a task of its own, so that a panic inside the
/// connection (rustls without a crypto provider installed) is an error.
pub(super) fn spawn_session(shared: &Arc<Shared>, update: &Arc<str>) -> Opening {
    let (shared, update) = (shared.clone(), update.clone());
    tokio::spawn(async move { shared.handshake(&update).await })
}

pub(super) type Opening = JoinHandle<Result<Socket, CallError>>;

pub(super) async fn joined(shared: &Shared, handle: Opening) -> Result<Socket, CallError> {
    handle.await.unwrap_or_else(|_| {
        Err(shared.error(
            CallFailure::Internal,
            "connect: the connection task failed (no TLS crypto provider?)",
        ))
    })
}

impl Shared {
    pub(super) fn error(&self, failure: CallFailure, what: impl fmt::Display) -> CallError {
        let model = &self.settings.model;
        CallError::new(failure, format!("openai realtime ({model}): {what}"))
    }

    pub(super) fn count_unknown(&self) {
        self.unknown.fetch_add(1, Ordering::Relaxed);
        tracing::debug!("openai realtime: an unknown event was ignored");
    }

    fn request(&self) -> Result<Request, CallError> {
        let mut request = self
            .endpoint
            .as_str()
            .into_client_request()
            .map_err(|_| self.error(CallFailure::Unreachable, "connect: invalid URL"))?;
        request
            .headers_mut()
            .insert(AUTHORIZATION, self.auth.clone());
        Ok(request)
    }

    /// Connects and configures one provider session.
    async fn handshake(&self, update: &str) -> Result<Socket, CallError> {
        let timeout = self.settings.connect_timeout;
        let request = self.request()?;
        let connect = tokio_tungstenite::connect_async_with_config(request, None, true);
        let (mut socket, _) = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| self.error(CallFailure::Timeout, "connect: timed out"))?
            .map_err(|e| {
                let what = format_args!("connect: {}", wire::describe(&e));
                self.error(CallFailure::Unreachable, what)
            })?;
        self.wait_for(&mut socket, "session.created").await?;
        let sent = tokio::time::timeout(timeout, socket.send(Message::text(update))).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let what = format_args!("session.update: {}", wire::describe(&e));
                return Err(self.error(CallFailure::Closed, what));
            }
            Err(_) => return Err(self.error(CallFailure::Timeout, "session.update: timed out")),
        }
        self.wait_for(&mut socket, "session.updated").await?;
        tracing::debug!("openai realtime: session open");
        Ok(socket)
    }

    /// Reads until an event of type `wanted`, within the connect timeout.
    async fn wait_for(&self, socket: &mut Socket, wanted: &str) -> Result<(), CallError> {
        let wait = async {
            loop {
                let text = match socket.next().await {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(frame))) => {
                        let code = frame.map(|f| u16::from(f.code));
                        return Err((CallFailure::Closed, wire::closed(code)));
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err((CallFailure::Closed, wire::describe(&e))),
                    None => return Err((CallFailure::Closed, "connection closed".to_owned())),
                };
                let Ok(event) = serde_json::from_str::<Value>(&text) else {
                    self.count_unknown();
                    continue;
                };
                match event["type"].as_str() {
                    Some(kind) if kind == wanted => return Ok(()),
                    Some("error") => {
                        return Err((CallFailure::ProviderError, wire::provider_error(&event)));
                    }
                    _ => {}
                }
            }
        };
        match tokio::time::timeout(self.settings.connect_timeout, wait).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err((failure, why))) => {
                Err(self.error(failure, format_args!("waiting for {wanted}: {why}")))
            }
            Err(_) => Err(self.error(
                CallFailure::Timeout,
                format_args!("waiting for {wanted}: timed out"),
            )),
        }
    }
}

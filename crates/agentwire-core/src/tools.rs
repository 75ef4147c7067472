//! Client-side tool calls: the tools an agent asks its client to run
//! ([`ClientToolDecl`]), and the broker between the caller that waits for
//! the client's answer (a turn, a voice call) and the connection that
//! receives it.
//!
//! One broker per live session (and one per voice call), so a call can be
//! answered only on a socket that holds it (its own, or one its owner
//! rejoined or resumed with); ids are minted by the engine's `IdSource`, so
//! they cannot be guessed. A call is answered by the client (`tool_result`,
//! or `tool_call_nack`) or expires: unacknowledged within `ack_timeout`, or
//! acknowledged but unanswered within `client_tool_timeout`. An expired
//! call is denied and the caller goes on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::model::ToolSpec;
use crate::turn::ToolOutcome;

/// Validates a tool's arguments against its schema; the message goes to the model.
pub trait ArgumentValidator: Send + Sync {
    fn validate(&self, arguments: &serde_json::Value) -> Result<(), String>;
}

/// A tool the client runs, as declared in the config.
#[derive(Clone)]
pub struct ClientToolDecl {
    pub spec: ToolSpec,
    pub consent_message: Option<String>,
    pub categories: Vec<String>,
    pub validator: Arc<dyn ArgumentValidator>,
}

/// What a client says about a pending call.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAnswer {
    /// Received; working on it. Moves the call from the ack wait to the result wait.
    Ack,
    /// Declined, with the client's reason.
    Nack(String),
    /// The tool ran: its result, or its failure.
    Result(Result<serde_json::Value, String>),
}

/// Pending client tool calls of one session.
#[derive(Default)]
pub struct ClientToolBroker {
    pending: Mutex<HashMap<String, mpsc::Sender<ClientAnswer>>>,
}

/// How many answers a call buffers: an ack and a result, with room to spare.
const ANSWER_QUEUE: usize = 4;

impl ClientToolBroker {
    pub fn new() -> Arc<ClientToolBroker> {
        Arc::new(ClientToolBroker::default())
    }

    /// Delivers `answer` to the call `call_id`. `false` when no such call is
    /// pending on this session (unknown, answered, or expired).
    pub fn answer(&self, call_id: &str, answer: ClientAnswer) -> bool {
        let pending = self.pending.lock();
        match pending.get(call_id) {
            Some(tx) => {
                // A client that floods one call with answers loses the extras.
                let _ = tx.try_send(answer);
                true
            }
            None => false,
        }
    }

    /// Whether `call_id` still waits for the client's answer.
    pub fn is_pending(&self, call_id: &str) -> bool {
        self.pending.lock().contains_key(call_id)
    }

    /// Takes answers to `call_id` from now until the returned call is
    /// dropped. Register before the client is asked, so an answer that
    /// comes at once is not refused.
    pub fn expect(self: &Arc<Self>, call_id: &str) -> PendingClientCall {
        PendingClientCall {
            answers: self.register(call_id),
            broker: self.clone(),
            call_id: call_id.to_owned(),
        }
    }

    pub(crate) fn register(&self, call_id: &str) -> mpsc::Receiver<ClientAnswer> {
        let (tx, rx) = mpsc::channel(ANSWER_QUEUE);
        self.pending.lock().insert(call_id.to_owned(), tx);
        rx
    }

    pub(crate) fn forget(&self, call_id: &str) {
        self.pending.lock().remove(call_id);
    }
}

/// A client call the broker takes answers for; dropped, it takes no more.
pub struct PendingClientCall {
    broker: Arc<ClientToolBroker>,
    call_id: String,
    answers: mpsc::Receiver<ClientAnswer>,
}

impl PendingClientCall {
    /// Waits out the call's two phases (see the module's doc).
    pub async fn end(mut self, ack_timeout: Duration, result_timeout: Duration) -> ClientCallEnd {
        await_answer(&mut self.answers, ack_timeout, result_timeout).await
    }

    /// Waits out the call's first phase: `Ok` once the client acknowledged
    /// it, else how it ended (answered at once, or not acknowledged in
    /// time). [`PendingClientCall::answered`] waits out the second.
    pub async fn acknowledged(&mut self, ack_timeout: Duration) -> Result<(), ClientCallEnd> {
        await_ack(&mut self.answers, ack_timeout).await
    }

    /// Waits out the call's second phase, after its acknowledgement.
    pub async fn answered(&mut self, result_timeout: Duration) -> ClientCallEnd {
        await_result(&mut self.answers, result_timeout).await
    }
}

impl Drop for PendingClientCall {
    fn drop(&mut self) {
        self.broker.forget(&self.call_id);
    }
}

/// How a client call ended, from the caller's side.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientCallEnd {
    Answered(ToolOutcome),
    /// No answer in time; the reason is what the client and the record see.
    Expired(String),
}

/// Waits out the two phases of a client call.
async fn await_answer(
    answers: &mut mpsc::Receiver<ClientAnswer>,
    ack_timeout: Duration,
    result_timeout: Duration,
) -> ClientCallEnd {
    match await_ack(answers, ack_timeout).await {
        Ok(()) => await_result(answers, result_timeout).await,
        Err(end) => end,
    }
}

/// The first phase: `Ok` once acknowledged.
async fn await_ack(
    answers: &mut mpsc::Receiver<ClientAnswer>,
    ack_timeout: Duration,
) -> Result<(), ClientCallEnd> {
    match tokio::time::timeout(ack_timeout, answers.recv()).await {
        Err(_) | Ok(None) => Err(ClientCallEnd::Expired(format!(
            "client did not acknowledge the tool call within {}",
            human(ack_timeout)
        ))),
        Ok(Some(ClientAnswer::Ack)) => Ok(()),
        Ok(Some(answer)) => Err(ClientCallEnd::Answered(outcome(answer))),
    }
}

/// The second phase: the answer to an acknowledged call.
async fn await_result(
    answers: &mut mpsc::Receiver<ClientAnswer>,
    result_timeout: Duration,
) -> ClientCallEnd {
    let result = tokio::time::timeout(result_timeout, async {
        loop {
            match answers.recv().await {
                Some(ClientAnswer::Ack) => continue,
                Some(answer) => return Some(outcome(answer)),
                None => return None,
            }
        }
    })
    .await;
    match result {
        Ok(Some(outcome)) => ClientCallEnd::Answered(outcome),
        Err(_) | Ok(None) => ClientCallEnd::Expired(format!(
            "client did not answer the tool call within {}",
            human(result_timeout)
        )),
    }
}

fn outcome(answer: ClientAnswer) -> ToolOutcome {
    match answer {
        ClientAnswer::Nack(reason) => ToolOutcome::Denied(reason),
        ClientAnswer::Result(Ok(value)) => ToolOutcome::Ok(value),
        ClientAnswer::Result(Err(error)) => ToolOutcome::Error(error),
        ClientAnswer::Ack => unreachable!("acks are consumed by the caller"),
    }
}

/// `5s`, `250ms`: how the config writes durations.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn unacknowledged_calls_expire_after_the_ack_timeout() {
        let broker = ClientToolBroker::new();
        let mut rx = broker.register("c1");
        let end = await_answer(&mut rx, Duration::from_secs(5), Duration::from_secs(60)).await;
        assert_eq!(
            end,
            ClientCallEnd::Expired("client did not acknowledge the tool call within 5s".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn acknowledged_calls_get_the_longer_timeout() {
        let broker = ClientToolBroker::new();
        let mut rx = broker.register("c1");
        assert!(broker.answer("c1", ClientAnswer::Ack));
        let waiting = tokio::spawn(async move {
            await_answer(&mut rx, Duration::from_secs(5), Duration::from_secs(60)).await
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(broker.answer("c1", ClientAnswer::Result(Ok(serde_json::json!(1)))));
        assert_eq!(
            waiting.await.unwrap(),
            ClientCallEnd::Answered(ToolOutcome::Ok(serde_json::json!(1)))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn acknowledged_then_silent_expires_after_the_result_timeout() {
        let broker = ClientToolBroker::new();
        let mut rx = broker.register("c1");
        broker.answer("c1", ClientAnswer::Ack);
        let end = await_answer(&mut rx, Duration::from_secs(5), Duration::from_millis(1500)).await;
        assert_eq!(
            end,
            ClientCallEnd::Expired("client did not answer the tool call within 1500ms".into())
        );
    }

    #[tokio::test]
    async fn nacks_deny_and_unknown_ids_are_refused() {
        let broker = ClientToolBroker::new();
        let mut rx = broker.register("c1");
        assert!(!broker.answer("other", ClientAnswer::Ack));
        broker.answer("c1", ClientAnswer::Nack("no".into()));
        let end = await_answer(&mut rx, Duration::from_secs(5), Duration::from_secs(5)).await;
        assert_eq!(
            end,
            ClientCallEnd::Answered(ToolOutcome::Denied("no".into()))
        );
        broker.forget("c1");
        assert!(!broker.answer("c1", ClientAnswer::Ack));
    }
}

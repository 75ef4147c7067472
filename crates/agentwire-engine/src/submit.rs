//! Accepting a user message: its session resolved, the message added to
//! the live history, the turn started on the session's log and spawned.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::oneshot;
use tracing::Instrument;

use super::ledger::TurnCalls;
use super::turn_task::{run_turn, turn_span};
use super::write::QuestionWrite;
use super::{
    Agent, Engine, Fence, SessionLease, SubmitError, SubmitRequest, SummaryNotice, TurnHandle,
};
use agentwire_core::ids::SessionId;
use agentwire_core::ledger::CallRecorder;
use agentwire_core::memory::TurnCaller;
use agentwire_core::scope::ConnectionScope;
use agentwire_core::session::{MessageBody, StoredMessage, Via};
use agentwire_core::turn::{TurnContext, TurnInput, TurnSetup};

impl Engine {
    /// Accepts a user message: resolves its session, stores the message and
    /// starts the turn.
    pub async fn submit(&self, req: SubmitRequest<'_>) -> Result<TurnHandle, SubmitError> {
        let (target, own) = req.target()?;
        let lease = self
            .attach(&target, req.agent, req.namespace, req.owner, own)
            .await?;
        lease.begin_turn()?;
        if let Err(refusal) = lease.open_for(&req).await {
            lease.end_turn();
            return Err(refusal.into());
        }
        let publishing = lease.publishing_slot().await;
        let fence = lease.acquire_turn_lease().await?;
        let span = turn_span(&req.agent.name, lease.id());
        let now = self.inner.clock.now();
        let input = TurnInput {
            text: agentwire_core::content::into_effective_text(req.content, &req.parts),
            parts: req.parts,
            metadata: req.metadata,
        };
        let user_message = StoredMessage {
            session_id: target,
            seq: 0,
            body: MessageBody::User {
                text: input.text.clone(),
                parts: input.parts.clone(),
                attachment: req.attachment,
            },
            via: Via::Text,
            metadata: input.metadata.clone(),
            created_at: now,
        };
        // The message is in the live history at once; its write waits a
        // moment to go with the turn's records (`write`), so the model is
        // not kept waiting for a commit and a short turn costs one write.
        // The turn's records wait for it, so `done` still means stored.
        let appended = lease
            .begin_append(vec![user_message])
            .instrument(span.clone())
            .await;
        let (history, question_write) = match appended {
            Ok(appended) => appended,
            Err(e) => {
                lease.release_turn_lease(fence).await;
                lease.end_turn();
                return Err(e.into());
            }
        };
        let question_write = QuestionWrite::defer(question_write, span.clone());
        let caller = Arc::new(TurnCaller {
            owner: req.owner.map(str::to_owned),
            memory_facet: req.memory_facet.map(str::to_owned),
        });
        let started = StartedTurn {
            agent: req.agent,
            scope: req.scope,
            caller,
            fence,
            publishing,
            question_write,
            span,
        };
        Ok(self.start_turn(lease, input, history, started))
    }

    /// Starts the turn of an accepted message on its session's log and
    /// spawns its task.
    fn start_turn(
        &self,
        lease: SessionLease,
        input: TurnInput,
        history: Arc<Vec<StoredMessage>>,
        started: StartedTurn<'_>,
    ) -> TurnHandle {
        let StartedTurn {
            agent,
            scope,
            caller,
            fence,
            publishing,
            question_write,
            span,
        } = started;
        // The question is the live history's last message: just admitted.
        let question_seq = history.last().map_or(0, |m| m.seq);
        let log = &lease.session.log;
        let published = log.head();
        let writer = log.start_turn(&agent.name, Some(question_seq));
        if let Some(slot) = publishing {
            lease.publish(fence, published, writer.turn(), slot);
        }
        span.record("agentwire.turn_id", writer.turn().0);
        let reader = log.reader_after(writer.turn().0 - 1);
        let cancel = self.inner.turns_cancel.child_token();
        {
            let mut state = lease.session.state.lock();
            state.own_turn = Some(writer.turn());
            state.turn_cancel = Some((writer.turn(), cancel.clone()));
        }
        let (summary_tx, summary_rx) = oneshot::channel();
        let turn = TurnContext::new(TurnSetup {
            session_id: lease.id().clone(),
            input,
            history: history.clone(),
            cancel,
            scope: scope.clone(),
            caller,
            writer,
            client_tools: lease.session.client_tools.clone(),
            ids: self.inner.ids.clone(),
            ack_timeout: agent.ack_timeout,
            result_timeout: agent.client_tool_timeout,
            media: self.inner.media.clone(),
            calls: lease.call_recorder(question_seq, &question_write),
        });
        drop(history);
        let turn_lease = lease.clone_lease();
        tokio::spawn(
            run_turn(
                agent.handler.clone(),
                turn,
                turn_lease,
                fence,
                question_write,
                summary_tx,
            )
            .instrument(span),
        );
        TurnHandle {
            session: lease,
            events: reader,
            question_seq,
            summary: SummaryNotice(summary_rx),
        }
    }
}

impl SessionLease {
    /// Where the turn answering `question` records its calls as they move:
    /// where logs are shared, the store's ledger (`ledger`).
    fn call_recorder(
        &self,
        question: u64,
        question_write: &QuestionWrite,
    ) -> Option<Arc<dyn CallRecorder>> {
        if !self.shares_logs() {
            return None;
        }
        Some(Arc::new(TurnCalls {
            store: self.inner.store.clone(),
            clock: self.inner.clock.clone(),
            session: self.id().clone(),
            turn: question,
            fence: self.session.state.lock().write_fence,
            question: question_write.flush_handle(),
            question_stored: AtomicBool::new(false),
        }))
    }
}

impl SubmitRequest<'_> {
    /// The session the message is for, and whether it is the connection's
    /// own (the one it is on, or the one it announced).
    fn target(&self) -> Result<(SessionId, bool), SubmitError> {
        Ok(match self.requested {
            None => (self.current.clone(), true),
            Some(id) if id == self.current.as_str() => (self.current.clone(), true),
            Some(id) if id == self.minted.as_str() => (self.minted.clone(), true),
            Some(id) => (SessionId::parse(id)?, false),
        })
    }
}

/// What an accepted message's turn starts with, past the store.
struct StartedTurn<'a> {
    agent: &'a Arc<Agent>,
    scope: &'a Arc<ConnectionScope>,
    caller: Arc<TurnCaller>,
    fence: Fence,
    publishing: Option<tokio::sync::OwnedMutexGuard<()>>,
    question_write: QuestionWrite,
    span: tracing::Span,
}

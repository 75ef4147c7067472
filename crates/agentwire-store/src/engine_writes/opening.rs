//! A session's declaration against a real store: what a session opened
//! with is stored with it, a refused opening stores nothing, and a restarted
//! process prepares a resumed session again with what it opened with.

use agentwire_core::{
    Declaration, DeclarationRefusal, InitRefusal, Opening, RefusalReason, SessionInit,
    SessionOpening,
};
use agentwire_engine::SubmitError;
use serde_json::{Value, json};

use super::*;

/// Records every session it prepares; refuses a declaration of a handle
/// named `full`.
#[derive(Default)]
struct RecordingInit {
    prepared: parking_lot::Mutex<Vec<(String, Declaration)>>,
}

#[async_trait]
impl SessionInit for RecordingInit {
    async fn open(&self, opening: SessionOpening<'_>) -> Result<(), InitRefusal> {
        if opening.declaration.sandboxes.contains_key("full") {
            let refused = DeclarationRefusal::sandbox("full", RefusalReason::MaxInstances, "full");
            return Err(refused.into());
        }
        let session = opening.session.as_str().to_owned();
        self.prepared
            .lock()
            .push((session, opening.declaration.clone()));
        Ok(())
    }
}

/// One process: an engine over `store` whose agent prepares sessions
/// through `init`.
struct Process {
    engine: Engine,
    agent: Arc<Agent>,
    scope: Arc<ConnectionScope>,
    /// Kept between turns as a connection keeps it: the session stays live.
    lease: parking_lot::Mutex<Option<SessionLease>>,
}

impl Process {
    fn start(store: Arc<dyn SessionStore>, init: Arc<RecordingInit>) -> Process {
        let engine = Engine::new(
            store,
            Arc::new(FixedClock(Timestamp(1_000))),
            Arc::new(CountingIds::default()),
        );
        let agent = Arc::new(Agent {
            name: "echo".to_owned(),
            context_ttl: Duration::from_secs(60),
            ack_timeout: Duration::from_secs(1),
            client_tool_timeout: Duration::from_secs(1),
            handler: Arc::new(HistoryEcho {
                window: DEFAULT_HISTORY_WINDOW,
                answer: joined,
            }),
            session_init: Some(init),
        });
        Process {
            engine,
            agent,
            scope: ConnectionScope::new(),
            lease: parking_lot::Mutex::new(None),
        }
    }

    /// A message on `session`, read to its terminal; `Err` when refused.
    async fn send(&self, session: &SessionId, opening: Opening<'_>) -> Result<(), SubmitError> {
        let handle = self
            .engine
            .submit(SubmitRequest {
                agent: &self.agent,
                namespace: "default",
                owner: None,
                memory_facet: None,
                current: session,
                minted: session,
                requested: None,
                content: Some("hi".to_owned()),
                parts: Vec::new(),
                attachment: None,
                metadata: Metadata::new(),
                scope: &self.scope,
                opening,
                grants: &[],
            })
            .await?;
        let mut events = handle.events;
        while !events.next().await.expect("entries").event.is_terminal() {}
        *self.lease.lock() = Some(handle.session);
        Ok(())
    }
}

fn opens(declaration: &Value) -> Opening<'_> {
    Opening::Opens {
        declaration: Some(declaration),
    }
}

pub(crate) async fn a_declaration_is_stored_and_prepared_again_after_a_restart(make: MakeStore) {
    let Some((store, _guard)) = make().await else {
        return;
    };
    let init = Arc::new(RecordingInit::default());
    let first = Process::start(store.clone(), init.clone());
    let session = first.engine.mint_session_id();

    // Refused: nothing is stored, and the session can still open.
    let full = json!({"sandboxes": {"full": {}}});
    let refused = first.send(&session, opens(&full)).await;
    assert!(
        matches!(&refused, Err(SubmitError::Init(InitRefusal::Declaration(r))) if r.reason == RefusalReason::MaxInstances),
        "{refused:?}"
    );
    assert_eq!(store.load_session(&session).await.unwrap(), None);

    let declared = json!({"sandboxes": {"work": {"mounts": [{"role": "project", "id": "p1"}]}}});
    first.send(&session, opens(&declared)).await.unwrap();
    let stored = store.load_session(&session).await.unwrap().unwrap();
    assert_eq!(stored.declaration, Some(declared.clone()));
    // Later messages on the open session prepare nothing again.
    first.send(&session, Opening::Continues).await.unwrap();
    assert_eq!(init.prepared.lock().len(), 1);

    // Another process resumes it without a declaration: prepared once,
    // with what it opened with.
    let second = Process::start(store.clone(), init.clone());
    second.send(&session, Opening::Continues).await.unwrap();
    second.send(&session, Opening::Continues).await.unwrap();
    let prepared = init.prepared.lock().clone();
    assert_eq!(prepared.len(), 2);
    assert_eq!(prepared[1], prepared[0]);
    assert_eq!(prepared[1].1, Declaration::parse(&declared).unwrap());

    // Opening it again with the same declaration is fine; another is not.
    second.send(&session, opens(&declared)).await.unwrap();
    let other = json!({"sandboxes": {"work": {"mounts": [{"role": "project", "id": "p2"}]}}});
    let mismatch = second.send(&session, opens(&other)).await;
    assert!(
        matches!(&mismatch, Err(SubmitError::Init(InitRefusal::Declaration(r))) if r.reason == RefusalReason::DeclarationMismatch && r.handle == "work"),
        "{mismatch:?}"
    );
}

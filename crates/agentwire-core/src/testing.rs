//! Test doubles for the core's ports, shared by the workspace's tests
//! (feature `testing`; the core's own tests get them without it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;

use crate::ids::{IdSource, SessionId};
use crate::media::{
    Download, MediaBody, MediaError, MediaId, MediaInfo, MediaStore, StorageRef, UploadSpec,
    UploadTicket,
};
use crate::session::{
    SessionCursor, SessionOverview, SessionRecord, SessionSummary, StoredMessage,
};
use crate::store::{SessionStore, StoreError};
use crate::time::{Clock, Timestamp};

/// A clock that always says the same instant.
pub struct FixedClock(pub Timestamp);

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }
}

/// Ids `s0`, `call-1`, `s2`, …: predictable, one counter for both kinds;
/// log epochs 1, 2, … from a counter of their own.
#[derive(Default)]
pub struct CountingIds {
    ids: AtomicU64,
    epochs: AtomicU64,
}

impl IdSource for CountingIds {
    fn session_id(&self) -> SessionId {
        SessionId::minted(format!("s{}", self.ids.fetch_add(1, Ordering::Relaxed)))
    }

    fn call_id(&self) -> String {
        format!("call-{}", self.ids.fetch_add(1, Ordering::Relaxed))
    }

    fn log_epoch(&self) -> u64 {
        self.epochs.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// How [`DownloadsOnly`] answers the `n`th download (counted from 1).
pub type Serve = dyn Fn(&StorageRef, u64) -> Result<Download, MediaError> + Send + Sync;

/// A media store that only serves downloads, each answered by
/// `serve(storage_ref, n)` with `n` counting downloads from 1 (as a
/// presigning store mints a new URL each time); everything else is
/// [`MediaError::NotFound`].
pub struct DownloadsOnly {
    serve: Box<Serve>,
    downloads: AtomicU64,
}

impl DownloadsOnly {
    pub fn new(
        serve: impl Fn(&StorageRef, u64) -> Result<Download, MediaError> + Send + Sync + 'static,
    ) -> DownloadsOnly {
        DownloadsOnly {
            serve: Box::new(serve),
            downloads: AtomicU64::new(0),
        }
    }

    /// Downloads served so far.
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl MediaStore for DownloadsOnly {
    async fn prepare_upload(&self, _: &UploadSpec) -> Result<UploadTicket, MediaError> {
        Err(MediaError::NotFound)
    }
    async fn write_upload(
        &self,
        _: &MediaId,
        _: Option<u64>,
        _: MediaBody,
    ) -> Result<MediaInfo, MediaError> {
        Err(MediaError::NotFound)
    }
    async fn put(&self, _: &UploadSpec, _: MediaBody) -> Result<MediaInfo, MediaError> {
        Err(MediaError::NotFound)
    }
    async fn confirm_upload(&self, _: &MediaId) -> Result<MediaInfo, MediaError> {
        Err(MediaError::NotFound)
    }
    async fn info(&self, _: &StorageRef) -> Result<MediaInfo, MediaError> {
        Err(MediaError::NotFound)
    }
    async fn download(&self, storage_ref: &StorageRef) -> Result<Download, MediaError> {
        let n = self.downloads.fetch_add(1, Ordering::SeqCst) + 1;
        (self.serve)(storage_ref, n)
    }
}

/// What a media store knows of a 4-byte PNG at `storage_ref`.
pub fn png_info(storage_ref: &StorageRef) -> MediaInfo {
    MediaInfo {
        storage_ref: storage_ref.clone(),
        filename: "pic.png".into(),
        mime_type: "image/png".into(),
        size_bytes: 4,
        created_at: Timestamp(0),
        expires_at: None,
        owner: None,
    }
}

/// One turn with every kind of entry a dialect encodes differently: text,
/// a server tool's call and result, a client tool answered and one the
/// client let time out (its denial is shown), a delegation (the delegate's
/// text and tool are not the reply's), media, and the reply. For the wire
/// crates' rejoin tests: a client cut off after any entry must see the
/// same frames as one that never was.
pub fn multi_event_turn() -> (String, Vec<crate::turn::TurnEvent>) {
    use crate::turn::{MediaChunk, Reply, ToolCall, ToolOutcome, ToolSide, TurnEvent};
    let call = |id: &str, name: &str, side: ToolSide| {
        TurnEvent::ToolCall(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: serde_json::json!({ "q": id }),
            side,
            consent_message: None,
            categories: Vec::new(),
        })
    };
    let result = |id: &str, outcome: ToolOutcome, side: ToolSide| TurnEvent::ToolResult {
        id: id.to_owned(),
        outcome,
        side,
    };
    let delta = |text: &str| TurnEvent::TextDelta(text.to_owned());
    let switch = |name: &str, delegated: bool| TurnEvent::AgentSwitched {
        name: name.to_owned(),
        delegated,
    };
    let events = vec![
        delta("Let me "),
        delta("look. "),
        call("s1", "weather", ToolSide::Server),
        result(
            "s1",
            ToolOutcome::Ok(serde_json::json!({"c": 21})),
            ToolSide::Server,
        ),
        call("c1", "get_location", ToolSide::Client),
        result(
            "c1",
            ToolOutcome::Ok(serde_json::json!("Lisbon")),
            ToolSide::Client,
        ),
        call("c2", "get_timezone", ToolSide::Client),
        result(
            "c2",
            ToolOutcome::Denied("timed out".to_owned()),
            ToolSide::Client,
        ),
        call("d1", "delegate_agent", ToolSide::Server),
        switch("researcher", true),
        delta("internal notes"),
        call("s2", "search", ToolSide::Server),
        result(
            "s2",
            ToolOutcome::Error("offline".to_owned()),
            ToolSide::Server,
        ),
        delta(" more notes"),
        switch("assistant", false),
        result(
            "d1",
            ToolOutcome::Ok(serde_json::json!("21 C")),
            ToolSide::Server,
        ),
        TurnEvent::Media(MediaChunk {
            media_id: "m1".to_owned(),
            mime_type: "audio/wav".to_owned(),
            sequence: 0,
            is_last: true,
            data: b"RIFF".to_vec(),
        }),
        delta("It is "),
        delta("21 C."),
        TurnEvent::Completed(Reply::text("Let me look. It is 21 C.")),
    ];
    ("assistant".to_owned(), events)
}

/// The switch a test holds to make one adapter fail on demand: while it is
/// on, every call of a [`FailingSessionStore`] or [`FailingMediaStore`]
/// built with it fails as if the backend were unreachable. One per server
/// instance, so tests running side by side do not interfere. Clones share
/// the switch.
#[derive(Clone, Default)]
pub struct FaultSwitch(Arc<FaultState>);

#[derive(Default)]
struct FaultState {
    on: AtomicBool,
    /// Calls of a [`FailingMediaStore`] wait while set.
    stalled: AtomicBool,
    released: tokio::sync::Notify,
    tripped: AtomicU64,
    /// How many calls of each operation reached the real adapter.
    passed: parking_lot::Mutex<Vec<(&'static str, u64)>>,
}

impl FaultSwitch {
    pub fn new() -> FaultSwitch {
        FaultSwitch::default()
    }

    /// Calls fail from now on.
    pub fn fail(&self) {
        self.0.on.store(true, Ordering::SeqCst);
    }

    /// Calls of a [`FailingMediaStore`] hang from now on, until
    /// [`FaultSwitch::recover`]: a backend that takes the request and does
    /// not answer.
    pub fn stall(&self) {
        self.0.stalled.store(true, Ordering::SeqCst);
    }

    /// Calls reach the real adapter again (stalled ones go on).
    pub fn recover(&self) {
        self.0.on.store(false, Ordering::SeqCst);
        self.0.stalled.store(false, Ordering::SeqCst);
        self.0.released.notify_waiters();
    }

    /// Waits while the switch stalls calls.
    async fn unstalled(&self) {
        loop {
            let released = self.0.released.notified();
            if !self.0.stalled.load(Ordering::SeqCst) {
                return;
            }
            released.await;
        }
    }

    pub fn is_failing(&self) -> bool {
        self.0.on.load(Ordering::SeqCst)
    }

    /// How many calls have failed because of the switch.
    pub fn tripped(&self) -> u64 {
        self.0.tripped.load(Ordering::SeqCst)
    }

    /// How many calls of `operation` (a port method's name) reached the
    /// real adapter: what a test counts round trips by.
    pub fn passed(&self, operation: &str) -> u64 {
        let passed = self.0.passed.lock();
        passed
            .iter()
            .find(|(name, _)| *name == operation)
            .map_or(0, |(_, calls)| *calls)
    }

    /// `Err(reason)` while the switch is on (counted), naming `operation`;
    /// else the call is counted as passed.
    fn check(&self, operation: &'static str) -> Result<(), String> {
        if self.is_failing() {
            self.0.tripped.fetch_add(1, Ordering::SeqCst);
            return Err(format!("injected fault: {operation}"));
        }
        let mut passed = self.0.passed.lock();
        match passed.iter_mut().find(|(name, _)| *name == operation) {
            Some((_, calls)) => *calls += 1,
            None => passed.push((operation, 1)),
        }
        Ok(())
    }
}

/// A session store that delegates to `inner`, except while its
/// [`FaultSwitch`] is on: then every call fails with
/// [`StoreError::Unavailable`] before reaching `inner`, as a store whose
/// backend is down does. Holds and releases always reach `inner`.
pub struct FailingSessionStore {
    inner: Arc<dyn SessionStore>,
    switch: FaultSwitch,
}

impl FailingSessionStore {
    pub fn new(inner: Arc<dyn SessionStore>, switch: FaultSwitch) -> FailingSessionStore {
        FailingSessionStore { inner, switch }
    }

    fn check(&self, operation: &'static str) -> Result<(), StoreError> {
        self.switch
            .check(operation)
            .map_err(StoreError::Unavailable)
    }
}

#[async_trait]
impl SessionStore for FailingSessionStore {
    async fn create_session(&self, record: &SessionRecord) -> Result<(), StoreError> {
        self.check("create_session")?;
        self.inner.create_session(record).await
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        self.check("load_session")?;
        self.inner.load_session(id).await
    }

    async fn append_messages(&self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        self.check("append_messages")?;
        self.inner.append_messages(messages).await
    }

    async fn append_turn_fenced(
        &self,
        messages: &[StoredMessage],
        summary_due: Option<Timestamp>,
        fence: crate::live::Fence,
    ) -> Result<(), StoreError> {
        self.check("append_turn_fenced")?;
        self.inner
            .append_turn_fenced(messages, summary_due, fence)
            .await
    }

    async fn fence_session(
        &self,
        id: &SessionId,
        fence: crate::live::Fence,
    ) -> Result<(), StoreError> {
        self.check("fence_session")?;
        self.inner.fence_session(id, fence).await
    }

    async fn record_call(
        &self,
        step: &crate::ledger::CallMove<'_>,
        fence: Option<crate::live::Fence>,
    ) -> Result<(), StoreError> {
        self.check("record_call")?;
        self.inner.record_call(step, fence).await
    }

    async fn load_messages(&self, id: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.check("load_messages")?;
        self.inner.load_messages(id).await
    }

    async fn load_recent_messages(
        &self,
        id: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.check("load_recent_messages")?;
        self.inner.load_recent_messages(id, limit).await
    }

    async fn load_messages_after(
        &self,
        id: &SessionId,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.check("load_messages_after")?;
        self.inner.load_messages_after(id, after, limit).await
    }

    fn hold_session(&self, id: &SessionId) {
        self.inner.hold_session(id);
    }

    fn release_session(&self, id: &SessionId) {
        self.inner.release_session(id);
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.check("ping")?;
        self.inner.ping().await
    }

    async fn list_sessions(
        &self,
        owner: &str,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<Vec<SessionOverview>, StoreError> {
        self.check("list_sessions")?;
        self.inner.list_sessions(owner, after, limit).await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.check("delete_session")?;
        self.inner.delete_session(id).await
    }

    async fn load_summary(&self, id: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        self.check("load_summary")?;
        self.inner.load_summary(id).await
    }

    async fn schedule_summary(&self, id: &SessionId, due: Timestamp) -> Result<(), StoreError> {
        self.check("schedule_summary")?;
        self.inner.schedule_summary(id, due).await
    }

    async fn pending_summaries(&self) -> Result<Vec<(SessionId, Timestamp)>, StoreError> {
        self.check("pending_summaries")?;
        self.inner.pending_summaries().await
    }

    async fn store_summary(
        &self,
        id: &SessionId,
        summary: &SessionSummary,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        self.check("store_summary")?;
        self.inner.store_summary(id, summary, handled_due).await
    }

    async fn claim_summary(
        &self,
        id: &SessionId,
        due: Timestamp,
        now: Timestamp,
        until: Timestamp,
    ) -> Result<bool, StoreError> {
        self.check("claim_summary")?;
        self.inner.claim_summary(id, due, now, until).await
    }

    async fn clear_summary_due(
        &self,
        id: &SessionId,
        handled_due: Timestamp,
    ) -> Result<(), StoreError> {
        self.check("clear_summary_due")?;
        self.inner.clear_summary_due(id, handled_due).await
    }
}

/// A media store that delegates to `inner`, except while its
/// [`FaultSwitch`] is on: then every call fails with
/// [`MediaError::Unavailable`] before reaching `inner`, as a store whose
/// backend is unreachable does.
pub struct FailingMediaStore {
    inner: Arc<dyn MediaStore>,
    switch: FaultSwitch,
}

impl FailingMediaStore {
    pub fn new(inner: Arc<dyn MediaStore>, switch: FaultSwitch) -> FailingMediaStore {
        FailingMediaStore { inner, switch }
    }

    async fn check(&self, operation: &'static str) -> Result<(), MediaError> {
        self.switch.unstalled().await;
        self.switch
            .check(operation)
            .map_err(MediaError::Unavailable)
    }
}

#[async_trait]
impl MediaStore for FailingMediaStore {
    async fn prepare_upload(&self, spec: &UploadSpec) -> Result<UploadTicket, MediaError> {
        self.check("prepare_upload").await?;
        self.inner.prepare_upload(spec).await
    }

    async fn write_upload(
        &self,
        upload: &MediaId,
        content_length: Option<u64>,
        body: MediaBody,
    ) -> Result<MediaInfo, MediaError> {
        self.check("write_upload").await?;
        self.inner.write_upload(upload, content_length, body).await
    }

    async fn put(&self, spec: &UploadSpec, body: MediaBody) -> Result<MediaInfo, MediaError> {
        self.check("put").await?;
        self.inner.put(spec, body).await
    }

    async fn confirm_upload(&self, upload: &MediaId) -> Result<MediaInfo, MediaError> {
        self.check("confirm_upload").await?;
        self.inner.confirm_upload(upload).await
    }

    async fn info(&self, storage_ref: &StorageRef) -> Result<MediaInfo, MediaError> {
        self.check("info").await?;
        self.inner.info(storage_ref).await
    }

    async fn download(&self, storage_ref: &StorageRef) -> Result<Download, MediaError> {
        self.check("download").await?;
        self.inner.download(storage_ref).await
    }
}

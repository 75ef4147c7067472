//! Test doubles for the core's ports, shared by the workspace's tests
//! (feature `testing`; the core's own tests get them without it).

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use crate::ids::{IdSource, SessionId};
use crate::media::{
    Download, MediaBody, MediaError, MediaId, MediaInfo, MediaStore, StorageRef, UploadSpec,
    UploadTicket,
};
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

//! The agentwire core: sessions, turns, the events a turn emits, the turn
//! log they are written to, and the ports the engine (`agentwire-engine`)
//! talks through.
//!
//! # Layout
//!
//! - [`ids`]: session and tool-call identifiers.
//! - [`auth`]: the [`Authenticator`] port and the [`Identity`] it establishes.
//! - [`time`]: [`Timestamp`] and the [`Clock`] port.
//! - [`content`]: message content (text and media parts) and metadata.
//! - [`error`]: [`ErrorCode`], the error vocabulary shared by every dialect.
//! - [`session`]: what the store keeps: [`SessionRecord`] and [`StoredMessage`].
//! - [`turn`]: [`TurnInput`], [`TurnEvent`] and the [`Handler`] port a turn runs on.
//! - [`tools`]: the [`ClientToolBroker`] between a turn and the client that runs its tools.
//! - [`store`]: the [`SessionStore`] port.
//! - [`ledger`]: the tool-call ledger's moves ([`CallMove`]) and the
//!   [`CallRecorder`] a turn reports them to.
//! - [`session_init`]: what an agent prepares when a session opens (a
//!   declaration's sandboxes, a pack compiled for the session): the
//!   [`SessionInit`] port and the parsed [`Declaration`].
//! - [`model`]: the [`ModelProvider`] port and the server-side [`ToolBox`] port.
//! - [`realtime`]: the [`realtime::RealtimeProvider`] port a voice call
//!   runs on, and the events and input of its [`realtime::CallLink`].
//! - [`media`]: the [`MediaStore`] port and its ids ([`MediaId`], [`StorageRef`]).
//! - [`memory`]: agent memory across sessions: the [`AgentMemory`] port and
//!   the [`MemoryScope`] only the server builds.
//! - [`assets`]: the [`MediaResolver`], which turns stored media into what one
//!   model call sends (inline data or a fresh presigned URL).
//! - [`screening`]: the prompt-injection [`PromptScreen`] for visitor messages.
//! - [`live`]: the [`TurnLeases`] port: who runs each session's turn
//!   across replicas; and the [`live::SharedLogs`] port: turn logs and
//!   controls the replicas share.
//! - [`log`]: a session's turn log: every event numbered `(epoch, seq)`, one
//!   [`TurnWriter`] per turn, any number of [`LogReader`]s. It is here, not
//!   in the engine, because a [`Handler`] writes to it through its
//!   [`EventSink`] with no dynamic dispatch per event.
//! - [`trace`]: the spans a trace is made of (names, attributes, target).
//! - [`summary`]: the [`Summarizer`] port and the [`SummaryPolicy`].
//!
//! # Invariants
//!
//! The core does no IO and knows no wire format: nothing here is `Serialize`
//! or `Deserialize` (serde is not a dependency; `serde_json::Value` is, as
//! the data of tool arguments and results), and every JSON shape belongs to
//! the crate that writes it: a dialect crate for the wire, the store's codec
//! for rows, `agentwire-live` for the replica log (`scripts/check-deps.sh`
//! checks it). Time comes from [`Clock`], identifiers from [`IdSource`],
//! storage from [`SessionStore`].

pub mod assets;
pub mod auth;
pub mod content;
pub mod error;
pub mod ids;
pub mod ledger;
pub mod live;
pub mod log;
pub mod media;
pub mod memory;
pub mod model;
pub mod realtime;
pub mod scope;
pub mod screening;
pub mod session;
pub mod session_init;
pub mod store;
pub mod summary;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod tools;
pub mod trace;
pub mod turn;

pub use assets::MediaResolver;
pub use auth::{
    AccessLevel, AgentAuth, AuthError, Authenticator, Credentials, Identity, IdentityOrigin,
};
pub use content::{ContentPart, MediaContent, Metadata, PartKind};
pub use error::ErrorCode;
pub use ids::{IdSource, InvalidSessionId, SessionId};
pub use ledger::{CallMove, CallRecorder, CallState, TurnCancelled};
pub use live::{Acquired, Fence, LiveError, TurnLease, TurnLeases};
pub use log::{Epoch, Lagged, LogEntry, LogReader, SessionLog, TurnId, TurnWriter};
pub use media::{
    Download, InvalidMediaId, InvalidStorageRef, MediaBody, MediaBytes, MediaError, MediaId,
    MediaInfo, MediaStore, StorageRef, UploadSpec, UploadTarget, UploadTicket,
};
pub use memory::{
    About, AgentMemory, EmbedError, Embedder, Fact, Likeness, Memory, MemoryError, MemoryScope,
    MemoryTier, NewMemory, Owned, Recall, Remembered, Similar, TierCounts, TurnCaller,
};
pub use model::{
    CallerToolSource, ModelMessage, ModelProvider, ModelReply, ModelRequest, ModelToolCall,
    ProviderError, ProviderErrorKind, TextSink, ToolBox, ToolSource, ToolSpec, Usage,
};
pub use scope::ConnectionScope;
pub use screening::PromptScreen;
pub use session::{
    DEFAULT_HISTORY_WINDOW, MessageBody, MessageRole, ReplyEnd, SessionCursor, SessionOverview,
    SessionRecord, SessionSummary, StoredMessage, Via, context_window,
};
pub use session_init::{
    Declaration, DeclarationRefusal, InitRefusal, Opening, RefusalReason, SessionInit,
    SessionOpening, SessionTools,
};
pub use store::{SessionStore, StoreError};
pub use summary::{Summarizer, SummaryPolicy};
pub use time::{Clock, Timestamp, UtcDateTime};
pub use tools::{
    ArgumentValidator, ClientAnswer, ClientCallEnd, ClientToolBroker, ClientToolDecl,
    PendingClientCall,
};
pub use turn::{
    AudioFormat, ClientToolRequest, EndingTurn, EventSink, Handler, INTERNAL_ERROR_TEXT,
    MediaChunk, Reply, TURN_CANCELLED, TURN_INTERRUPTED, ToolCall, ToolOutcome, ToolSide,
    TurnContext, TurnEvent, TurnFailure, TurnInput, TurnSetup,
};

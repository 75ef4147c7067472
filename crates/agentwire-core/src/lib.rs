//! The agentwire engine core: sessions, turns, the events a turn emits and the
//! ports the engine talks through.
//!
//! # Layout
//!
//! - [`ids`]: session and tool-call identifiers.
//! - [`time`]: [`Timestamp`] and the [`Clock`] port.
//! - [`content`]: message content (text and media parts) and metadata.
//! - [`error`]: [`ErrorCode`], the error vocabulary shared by every dialect.
//! - [`session`]: what the store keeps: [`SessionRecord`] and [`StoredMessage`].
//! - [`turn`]: [`TurnInput`], [`TurnEvent`] and the [`Handler`] port a turn runs on.
//! - [`store`]: the [`SessionStore`] port.
//! - [`engine`]: the [`Engine`], which owns live sessions, the one-turn-per-session
//!   rule, resumption and persistence of every accepted message.
//!
//! # Invariants
//!
//! The core does no IO and knows no wire format: nothing here is `Serialize`,
//! and every JSON shape belongs to a dialect crate. Time comes from [`Clock`],
//! identifiers from [`IdSource`], storage from [`SessionStore`].

pub mod content;
pub mod engine;
pub mod error;
pub mod ids;
pub mod session;
pub mod store;
pub mod time;
pub mod turn;

pub use content::{ContentPart, MediaContent, Metadata, PartKind};
pub use engine::{Agent, Engine, SessionLease, SubmitError, SubmitRequest, TurnHandle};
pub use error::ErrorCode;
pub use ids::{IdSource, InvalidSessionId, SessionId};
pub use session::{MessageRole, SessionRecord, StoredMessage};
pub use store::{SessionStore, StoreError};
pub use time::{Clock, Timestamp};
pub use turn::{
    EventSink, Handler, Reply, ToolCall, ToolOutcome, ToolSide, TurnContext, TurnEvent,
    TurnFailure, TurnInput,
};

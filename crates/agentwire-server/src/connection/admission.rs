//! The one admission path of every front door: each check a client's work
//! passes before it runs, in one order, in one place.
//!
//! Two stages, because a dialect may hold what it accepted before it runs
//! (Gnosari answers frames in order, queued behind the running turn):
//!
//! - **A frame arrives** ([`Admission::text`], [`Admission::media`],
//!   [`Admission::control`]), before it is decoded: the connection's frame
//!   rate (or media bytes per second), then the server's inbound byte
//!   budget. The [`InboundPermit`] goes with the work until it ends.
//! - **A message is to start a turn** ([`Admission::turn`]): the caller's
//!   credential deadline, the connection's busy rule, the caller's turns
//!   per minute (across replicas), the media the message refers to (on the
//!   session the turn runs on, named once), then `Engine::submit`.
//!
//! A dialect decodes a frame into a [`TurnIntent`], tells a [`Refusal`] in
//! its own words, and keeps its own policy for a busy connection: Omnia
//! refuses ([`Busy::TurnRunning`]), Gnosari queues and asks again when the
//! turn before has ended. A request/response front door makes one
//! [`Admission`] per request and calls the same two stages.
//!
//! Architecture invariant: no dialect calls a limiter, the inbound budget
//! or `Engine::submit` itself (`scripts/check-deps.sh` checks).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentwire_core::InitRefusal;
use agentwire_core::media::media_session_id;
use agentwire_core::{
    ConnectionScope, ContentPart, ErrorCode, MediaContent, MediaError, MediaId, Metadata, Opening,
    PartKind, SessionId, StorageRef,
};
use agentwire_engine::{Agent, SubmitError, SubmitRequest, TurnHandle};

use super::link::CredentialClock;
use crate::budget::{self, Held, InboundPermit};
use crate::identity::Caller;
use crate::rate::TokenBucket;
use crate::socket::TURN_IN_PROGRESS;
use crate::{AppState, Limits};

/// The metadata key a stored message keeps its attachment's id under (the
/// stores' row layout): the server's, so a client's key of that name is
/// dropped and no client can mark a message as attaching anything.
const ATTACHMENT_KEY: &str = "gnosari_asset_id";

/// A connection's (or a request's) side of admission: its rates.
pub(crate) struct Admission {
    /// Client frames per second.
    frames: TokenBucket,
    /// Binary media bytes per second.
    media: TokenBucket,
}

/// Why admission refused: the dialect tells it in its words
/// ([`Refusal::code`], [`Refusal::text`]).
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Past the connection's frames per second.
    FrameRate,
    /// Past the connection's media bytes per second.
    MediaRate,
    /// The server's inbound byte budget is spent ([`budget::BUSY`]).
    Busy,
    /// The caller's credential is past its deadline.
    CredentialExpired,
    /// The connection runs a turn already and its dialect refuses another.
    TurnInProgress,
    /// Past the caller's turns per minute; a request's front door says
    /// when to come back (`Retry-After`).
    TurnRate { retry_after_secs: u64 },
    /// A media reference the message may not use.
    Media(MediaRefusal),
    /// The engine did not take the message.
    Submit(SubmitError),
}

/// Why a media reference was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MediaRefusal {
    /// Malformed, unknown, expired, or another caller's.
    Unknown,
    /// A reference into another session than the turn's.
    OtherSession,
    /// The media store failed (logged where it happened).
    Unavailable,
}

/// Whether the connection runs a turn when it asks for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Busy {
    Idle,
    /// Refused with [`Refusal::TurnInProgress`].
    TurnRunning,
}

/// A message that asks for a turn, decoded by its dialect.
pub(crate) struct TurnIntent<'a> {
    pub(crate) agent: &'a Arc<Agent>,
    pub(crate) namespace: &'a str,
    pub(crate) caller: &'a Caller,
    /// The connection's `memory_facet` (Omnia's upgrade parameter).
    pub(crate) memory_facet: Option<&'a str>,
    pub(crate) credential: &'a CredentialClock,
    pub(crate) busy: Busy,
    /// The session the connection is on now, and the one it announced.
    pub(crate) current: &'a SessionId,
    pub(crate) minted: &'a SessionId,
    /// The `session_id` the message named, if any.
    pub(crate) requested: Option<&'a str>,
    pub(crate) content: Option<String>,
    /// The message's parts; each `storage_ref` in them must be a live item
    /// of the turn's session.
    pub(crate) parts: Vec<ContentPart>,
    /// An uploaded item to attach as a part: it must be the caller's, in
    /// the turn's session.
    pub(crate) attach: Option<MediaId>,
    pub(crate) metadata: Metadata,
    pub(crate) scope: &'a Arc<ConnectionScope>,
    /// Whether the message opens its session on the connection, with what
    /// it declares (Omnia's `declare`).
    pub(crate) opening: Opening<'a>,
}

impl Admission {
    pub(crate) fn new(limits: &Limits) -> Admission {
        Admission {
            frames: TokenBucket::for_messages(limits),
            media: TokenBucket::new(limits.media_bytes_per_second, limits.media_burst_bytes),
        }
    }

    /// A text frame of `len` bytes: one of the connection's frames, then its
    /// bytes from the server's budget.
    pub(crate) fn text(&mut self, state: &AppState, len: usize) -> Result<InboundPermit, Refusal> {
        self.control()?;
        budget::take(state, len, Held::Message).ok_or(Refusal::Busy)
    }

    /// A binary media frame of `len` bytes: the connection's media bytes
    /// per second, then the server's budget.
    pub(crate) fn media(&mut self, state: &AppState, len: usize) -> Result<InboundPermit, Refusal> {
        if !self.media.try_take_n(len as u64) {
            return Err(Refusal::MediaRate);
        }
        budget::take(state, len, Held::Media).ok_or(Refusal::Busy)
    }

    /// A frame that holds nothing once answered (a cancel, a frame refused
    /// for its kind): one of the connection's frames.
    pub(crate) fn control(&mut self) -> Result<(), Refusal> {
        match self.frames.try_take() {
            true => Ok(()),
            false => Err(Refusal::FrameRate),
        }
    }

    /// Work that is not a turn but needs a live credential (an upload).
    pub(crate) fn credential(credential: &CredentialClock) -> Result<(), Refusal> {
        match credential.expired_now() {
            true => Err(Refusal::CredentialExpired),
            false => Ok(()),
        }
    }

    /// The turn `intent` asks for, once every check has passed: counted,
    /// and running.
    pub(crate) async fn turn(
        state: &AppState,
        intent: TurnIntent<'_>,
    ) -> Result<TurnHandle, Refusal> {
        Admission::credential(intent.credential)?;
        if intent.busy == Busy::TurnRunning {
            return Err(Refusal::TurnInProgress);
        }
        turn_allowed(state, intent.caller).await?;
        let TurnIntent {
            mut parts,
            attach,
            mut metadata,
            ..
        } = intent;
        let session = intent.requested.unwrap_or(intent.current.as_str());
        check_storage_refs(state, session, &parts)
            .await
            .map_err(Refusal::Media)?;
        metadata.remove(ATTACHMENT_KEY);
        if let Some(asset) = &attach {
            parts.push(attachment(state, session, intent.caller, asset).await?);
        }
        let request = SubmitRequest {
            agent: intent.agent,
            namespace: intent.namespace,
            owner: intent.caller.owner.as_deref(),
            memory_facet: intent.memory_facet,
            current: intent.current,
            minted: intent.minted,
            requested: intent.requested,
            content: intent.content,
            parts,
            attachment: attach,
            metadata,
            scope: intent.scope,
            opening: intent.opening,
            grants: intent
                .caller
                .identity
                .as_ref()
                .map_or(&[], |identity| &identity.grants),
        };
        let handle = state
            .engine()
            .submit(request)
            .await
            .map_err(Refusal::of_engine)?;
        state.metrics().turns_total.fetch_add(1, Ordering::Relaxed);
        Ok(handle)
    }
}

/// Whether `caller` may start another turn now
/// (`server.limits.turns_per_minute_per_caller`, counted across the replicas
/// when they share live state); a refusal is counted.
async fn turn_allowed(state: &AppState, caller: &Caller) -> Result<(), Refusal> {
    let (owner, address) = (caller.owner.as_deref(), caller.address);
    match state.abuse().take_turn(owner, address).await {
        Ok(()) => Ok(()),
        Err(refused) => {
            state.metrics().count_abuse_refusal(refused.limit);
            Err(Refusal::TurnRate {
                retry_after_secs: refused.retry_after_secs,
            })
        }
    }
}

/// Every `storage_ref` of the message's parts must be a reference into
/// `session`, to an item that exists and has not expired.
async fn check_storage_refs(
    state: &AppState,
    session: &str,
    parts: &[ContentPart],
) -> Result<(), MediaRefusal> {
    let refs = parts
        .iter()
        .filter_map(|part| part.media.as_ref()?.storage_ref.as_deref());
    for text in refs {
        let storage_ref = StorageRef::parse(text).map_err(|_| MediaRefusal::Unknown)?;
        if storage_ref.session.as_str() != session {
            return Err(MediaRefusal::OtherSession);
        }
        let store = &state.media().ok_or(MediaRefusal::Unknown)?.store;
        store.info(&storage_ref).await.map_err(media_refusal)?;
    }
    Ok(())
}

/// The stored part for item `id` of `session`, uploaded by this caller.
/// Unknown, another session's and another owner's items get the same
/// answer, so ids cannot be probed. The part names the item by
/// `storage_ref` only: each turn resolves it afresh
/// (`agentwire_core::assets`).
async fn attachment(
    state: &AppState,
    session: &str,
    caller: &Caller,
    id: &MediaId,
) -> Result<ContentPart, Refusal> {
    let unknown = || Refusal::Media(MediaRefusal::Unknown);
    let media = state.media().ok_or_else(unknown)?;
    let session = media_session_id(session).map_err(|_| unknown())?;
    let storage_ref = StorageRef::new(session, id.clone());
    let info = media
        .store
        .info(&storage_ref)
        .await
        .map_err(|e| Refusal::Media(media_refusal(e)))?;
    if info.owner != caller.owner {
        return Err(unknown());
    }
    let kind = match info.mime_type.starts_with("image/") {
        true => PartKind::Image,
        false => PartKind::File,
    };
    Ok(ContentPart::media(
        kind,
        MediaContent {
            storage_ref: Some(storage_ref.to_string()),
            mime_type: info.mime_type,
            filename: Some(info.filename),
            size_bytes: Some(info.size_bytes),
            ..MediaContent::default()
        },
    ))
}

/// A media store error as a refusal; an unavailable store is logged here.
fn media_refusal(error: MediaError) -> MediaRefusal {
    match error {
        MediaError::Unavailable(detail) => {
            tracing::error!(error = %detail, "reading media metadata failed");
            MediaRefusal::Unavailable
        }
        _ => MediaRefusal::Unknown,
    }
}

impl Refusal {
    /// The engine's refusal; a store or live-state failure is logged here
    /// (the client is told it without detail).
    pub(crate) fn of_engine(error: SubmitError) -> Refusal {
        if let SubmitError::Store(_) | SubmitError::Live(_) = &error {
            tracing::error!(error = %error, "accepting a message failed");
        }
        Refusal::Submit(error)
    }

    /// The error code both dialects send.
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Refusal::FrameRate | Refusal::MediaRate | Refusal::Busy | Refusal::TurnRate { .. } => {
                ErrorCode::RateLimited
            }
            Refusal::CredentialExpired => ErrorCode::CredentialExpired,
            Refusal::TurnInProgress => ErrorCode::TurnInProgress,
            Refusal::Media(MediaRefusal::Unavailable) => ErrorCode::Internal,
            Refusal::Media(_) => ErrorCode::InvalidMessage,
            Refusal::Submit(e) => submit_code(e),
        }
    }

    /// The text both dialects send, where they agree; `None` for what each
    /// words itself (media references, an expired session) and for
    /// internal failures, whose text is [`INTERNAL`].
    pub(crate) fn shared_text(&self) -> Option<&'static str> {
        Some(match self {
            Refusal::FrameRate => RATE_LIMITED,
            Refusal::MediaRate => "media rate limit exceeded",
            Refusal::Busy => budget::BUSY,
            Refusal::CredentialExpired => "credential expired",
            Refusal::TurnInProgress => TURN_IN_PROGRESS,
            Refusal::TurnRate { .. } => TURN_RATE_LIMITED,
            Refusal::Media(MediaRefusal::Unavailable) => INTERNAL,
            Refusal::Media(_) => return None,
            Refusal::Submit(SubmitError::TurnInProgress { .. }) => TURN_IN_PROGRESS,
            Refusal::Submit(SubmitError::Store(_) | SubmitError::Live(_)) => INTERNAL,
            Refusal::Submit(
                SubmitError::Expired { .. }
                | SubmitError::InvalidSessionId(_)
                | SubmitError::Init(_),
            ) => {
                return None;
            }
        })
    }

    /// Why the session did not open, when that is the refusal.
    pub(crate) fn init(&self) -> Option<&InitRefusal> {
        match self {
            Refusal::Submit(SubmitError::Init(refusal)) => Some(refusal),
            _ => None,
        }
    }

    /// The session a refusal of the engine names, when it names one.
    pub(crate) fn session(&self) -> Option<&SessionId> {
        match self {
            Refusal::Submit(SubmitError::Expired { requested }) => Some(requested),
            Refusal::Submit(SubmitError::TurnInProgress { session }) => Some(session),
            _ => None,
        }
    }

    /// The text of a refusal, with the dialect's words for an expired
    /// session and for a media reference.
    pub(crate) fn text(&self, words: &DialectWords) -> String {
        if let Some(text) = self.shared_text() {
            return text.to_owned();
        }
        match self {
            Refusal::Media(MediaRefusal::OtherSession) => words.media_other_session.to_owned(),
            Refusal::Media(_) => words.media_unknown.to_owned(),
            Refusal::Submit(SubmitError::InvalidSessionId(e)) => e.to_string(),
            Refusal::Submit(SubmitError::Init(refusal)) => refusal.message().to_owned(),
            _ => words.session_expired.to_owned(),
        }
    }
}

/// What a dialect says where the dialects differ.
pub(crate) struct DialectWords {
    /// A session past its `context_ttl` (or another's).
    pub(crate) session_expired: &'static str,
    /// A media reference that is unknown, or another caller's.
    pub(crate) media_unknown: &'static str,
    /// A media reference into another session.
    pub(crate) media_other_session: &'static str,
}

/// A store or live-state failure (logged by [`Refusal::of_engine`]) is
/// told as an internal error without detail.
fn submit_code(error: &SubmitError) -> ErrorCode {
    match error {
        SubmitError::Expired { .. } => ErrorCode::SessionExpired,
        SubmitError::TurnInProgress { .. } => ErrorCode::TurnInProgress,
        SubmitError::InvalidSessionId(_) => ErrorCode::InvalidMessage,
        SubmitError::Init(refusal) => refusal.code(),
        SubmitError::Store(_) | SubmitError::Live(_) => ErrorCode::Internal,
    }
}

/// What both dialects tell a caller past its frame rate (`RATE_LIMITED`).
pub(crate) const RATE_LIMITED: &str = "rate limit exceeded";

/// What both dialects tell a caller past its turn rate (`RATE_LIMITED`).
pub(crate) const TURN_RATE_LIMITED: &str = "turn rate limit exceeded";

/// The text of an internal error, on both dialects.
pub(crate) const INTERNAL: &str = agentwire_core::INTERNAL_ERROR_TEXT;

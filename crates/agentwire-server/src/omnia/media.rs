//! Media on the socket: `upload_request` → `upload_ready` (the check of the
//! `storage_ref`s a message names is admission's: `connection::admission`).
//!
//! An upload request waits on the media store (a record written, a URL
//! presigned: S3 round trips, retried for up to 10 s when it is down), so
//! it is answered off the connection's loop: a connection's requests go to
//! an uploader task of its own, answered one after another (in the order
//! asked, as clients match them), while the connection goes on streaming.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentwire_core::{ErrorCode, MediaError, SessionId, UploadSpec, UploadTarget, UploadTicket};
use agentwire_omnia::{self as omnia, UploadRequest};
use tokio::sync::mpsc;

use crate::{AppState, MediaService};

/// Upload requests a connection may have waiting for the store.
const PENDING_UPLOADS: usize = 8;
/// `RATE_LIMITED`: that many are waiting already.
pub(crate) const UPLOADS_PENDING: &str = "too many upload requests pending";

/// A connection's uploader: where its upload requests go.
pub(crate) struct Uploads {
    requests: mpsc::Sender<(SessionId, Option<UploadRequest>)>,
    /// Requests asked and not yet answered (the one being answered too).
    pending: Arc<AtomicUsize>,
}

impl Uploads {
    /// Starts the uploader; its answers come out of the receiver, in the
    /// order the requests were made. It ends with the connection (the
    /// sender dropped, or the receiver).
    pub(crate) fn start(state: Arc<AppState>) -> (Uploads, mpsc::Receiver<String>) {
        let (requests, mut asked) = mpsc::channel(PENDING_UPLOADS);
        let (answers, answered) = mpsc::channel(PENDING_UPLOADS);
        let pending = Arc::new(AtomicUsize::new(0));
        let answering = pending.clone();
        tokio::spawn(async move {
            while let Some((session, request)) = asked.recv().await {
                let frame = answer_upload_request(&state, &session, request).await;
                answering.fetch_sub(1, Ordering::AcqRel);
                if answers.send(frame).await.is_err() {
                    return;
                }
            }
        });
        (Uploads { requests, pending }, answered)
    }

    /// Queues a request for `session`; `false` when [`PENDING_UPLOADS`]
    /// are waiting for their answer already.
    pub(crate) fn ask(&self, session: SessionId, request: Option<UploadRequest>) -> bool {
        let taken = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < PENDING_UPLOADS).then_some(n + 1)
            });
        // Room in the queue: no more than PENDING_UPLOADS are ever in it.
        taken.is_ok() && self.requests.try_send((session, request)).is_ok()
    }
}

/// The frame answering an `upload_request`, in the reference's validation
/// order (§2.4.2): storage enabled, then the fields, then the store. The frame
/// carries the connection's current session, which the upload belongs to.
pub(crate) async fn answer_upload_request(
    state: &AppState,
    session: &SessionId,
    request: Option<UploadRequest>,
) -> String {
    let error = |code: ErrorCode, message: &str| {
        state.metrics().count_error(code);
        omnia::encode_error(
            Some(session.as_str()),
            code,
            message,
            state.engine().clock().now(),
        )
    };
    let Some(media) = state.media() else {
        return error(ErrorCode::MediaNotEnabled, "media storage is not enabled");
    };
    let Some(request) = request else {
        return error(
            ErrorCode::InvalidMessage,
            "upload_request field is required",
        );
    };
    if request.filename.is_empty() {
        return error(ErrorCode::InvalidMessage, "filename is required");
    }
    if request.mime_type.is_empty() {
        return error(ErrorCode::InvalidMessage, "mime_type is required");
    }
    let Ok(size_bytes @ 1..) = u64::try_from(request.size_bytes) else {
        return error(ErrorCode::InvalidMessage, "size_bytes must be positive");
    };
    let spec = UploadSpec {
        session: session.clone(),
        filename: request.filename,
        mime_type: request.mime_type,
        size_bytes,
        owner: None,
    };
    match media.store.prepare_upload(&spec).await {
        Ok(ticket) => {
            let (url, storage_ref) = (media.upload_url(&ticket), ticket.storage_ref.to_string());
            omnia::encode_upload_ready(
                session.as_str(),
                &ready(&ticket, &url, &storage_ref),
                state.engine().clock().now(),
            )
        }
        Err(e) => {
            if let MediaError::Unavailable(detail) = &e {
                tracing::error!(error = %detail, "preparing an upload failed");
            }
            error(ErrorCode::UploadFailed, "failed to prepare upload")
        }
    }
}

/// The wire view of a ticket, shared with `POST /media/request-upload`.
pub(crate) fn ready<'a>(
    ticket: &'a UploadTicket,
    url: &'a str,
    storage_ref: &'a str,
) -> omnia::UploadReady<'a> {
    omnia::UploadReady {
        upload_id: ticket.upload_id.as_str(),
        upload_url: url,
        storage_ref,
        expires_at: ticket.expires_at,
        method: Some(ticket.method),
        headers: &ticket.headers,
    }
}

impl MediaService {
    /// Where the client PUTs the bytes: this server's upload route under the
    /// public base URL, or the store's presigned URL.
    pub(crate) fn upload_url(&self, ticket: &UploadTicket) -> String {
        match &ticket.target {
            UploadTarget::Server => {
                format!("{}/media/upload/{}", self.public_base_url, ticket.upload_id)
            }
            UploadTarget::Direct { url } => url.clone(),
        }
    }
}

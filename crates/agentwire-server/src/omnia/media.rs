//! Media on the socket: `upload_request` → `upload_ready`, and the check that
//! every `storage_ref` a message names belongs to its session and exists.

use agentwire_core::{
    ContentPart, ErrorCode, MediaError, SessionId, StorageRef, UploadSpec, UploadTarget,
    UploadTicket,
};
use agentwire_omnia::{self as omnia, UploadRequest};

use crate::{AppState, MediaService};

/// The frame answering an `upload_request`, in the reference's validation
/// order (§2.4.2): storage enabled, then the fields, then the store. The frame
/// carries the connection's current session, which the upload belongs to.
pub(crate) async fn answer_upload_request(
    state: &AppState,
    session: &SessionId,
    request: Option<UploadRequest>,
) -> String {
    let error = |code: ErrorCode, message: &str| {
        state.metrics.count_error(code);
        omnia::encode_error(
            Some(session.as_str()),
            code,
            message,
            state.engine.clock().now(),
        )
    };
    let Some(media) = &state.media else {
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
                state.engine.clock().now(),
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

/// Checks the `storage_ref` of every media part of a message for `session`
/// (the one the message names, or the connection's): it must be a reference
/// into that session, to an item that exists and has not expired. `Err` is
/// the error to answer; the message is then not processed.
pub(crate) async fn check_storage_refs(
    state: &AppState,
    session: &str,
    parts: &[ContentPart],
) -> Result<(), (ErrorCode, &'static str)> {
    const UNKNOWN: (ErrorCode, &str) = (ErrorCode::InvalidMessage, "unknown storage_ref");
    const FOREIGN: (ErrorCode, &str) = (
        ErrorCode::InvalidMessage,
        "storage_ref belongs to another session",
    );
    let refs = parts
        .iter()
        .filter_map(|part| part.media.as_ref()?.storage_ref.as_deref());
    for text in refs {
        let storage_ref = StorageRef::parse(text).map_err(|_| UNKNOWN)?;
        if storage_ref.session.as_str() != session {
            return Err(FOREIGN);
        }
        let store = &state.media.as_ref().ok_or(UNKNOWN)?.store;
        match store.info(&storage_ref).await {
            Ok(_) => {}
            Err(MediaError::Unavailable(detail)) => {
                tracing::error!(error = %detail, "reading media metadata failed");
                return Err((ErrorCode::Internal, "internal server error"));
            }
            Err(_) => return Err(UNKNOWN),
        }
    }
    Ok(())
}

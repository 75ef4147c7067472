//! Gnosari attachments as a turn sees them. A stored user message that
//! carried an attachment keeps only a marker: its metadata holds
//! [`ASSET_METADATA_KEY`] and its media part names the item by
//! `storage_ref`, never by URL. Each turn resolves those parts afresh into
//! inline base64 `data` read through the [`MediaStore`]; the resolved bytes
//! live only in the turn's memory and are never stored.

use std::sync::Arc;

use base64::Engine as _;
use futures_util::StreamExt;

use crate::content::{ContentPart, Metadata};
use crate::media::{Download, MediaStore, StorageRef};
use crate::session::StoredMessage;
use crate::turn::TurnContext;

/// The metadata key of the stored marker (the asset id, in UUID form).
pub const ASSET_METADATA_KEY: &str = "gnosari_asset_id";

/// Items larger than this stay unresolved (the model sees a note instead).
pub const MAX_INLINE_BYTES: u64 = 5 * 1024 * 1024;

/// Resolves the marked parts of the turn's input and history in place.
pub(crate) async fn resolve(media: &Arc<dyn MediaStore>, turn: &mut TurnContext) {
    if is_marked(&turn.input.metadata) {
        resolve_parts(media, &mut turn.input.parts).await;
    }
    if turn
        .history
        .iter()
        .any(|m| is_marked(&m.metadata) && needs_data(&m.parts))
    {
        let history: &mut Vec<StoredMessage> = Arc::make_mut(&mut turn.history);
        for message in history.iter_mut().filter(|m| is_marked(&m.metadata)) {
            resolve_parts(media, &mut message.parts).await;
        }
    }
}

fn is_marked(metadata: &Metadata) -> bool {
    metadata.contains_key(ASSET_METADATA_KEY)
}

fn needs_data(parts: &[ContentPart]) -> bool {
    parts.iter().any(|p| {
        p.media
            .as_ref()
            .is_some_and(|m| m.data.is_none() && m.storage_ref.is_some())
    })
}

async fn resolve_parts(media: &Arc<dyn MediaStore>, parts: &mut [ContentPart]) {
    for part in parts {
        let Some(content) = part.media.as_mut() else {
            continue;
        };
        if content.data.is_some() {
            continue;
        }
        let Some(storage_ref) = content
            .storage_ref
            .as_deref()
            .and_then(|r| StorageRef::parse(r).ok())
        else {
            continue;
        };
        match read(media, &storage_ref).await {
            Ok(Resolved::Bytes(bytes)) => {
                content.data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
            Ok(Resolved::Url(url)) => content.url = Some(url),
            Err(reason) => {
                tracing::warn!(%storage_ref, %reason, "attachment left unresolved");
            }
        }
    }
}

/// An item's bytes, or (for a store that presigns) a fresh short-lived URL.
enum Resolved {
    Bytes(Vec<u8>),
    Url(String),
}

async fn read(media: &Arc<dyn MediaStore>, storage_ref: &StorageRef) -> Result<Resolved, String> {
    match media
        .download(storage_ref)
        .await
        .map_err(|e| e.to_string())?
    {
        Download::Redirect { url, .. } => Ok(Resolved::Url(url)),
        Download::Body { info, mut body } => {
            if info.size_bytes > MAX_INLINE_BYTES {
                return Err("too large to inline".to_owned());
            }
            let mut bytes = Vec::with_capacity(usize::try_from(info.size_bytes).unwrap_or(0));
            while let Some(chunk) = body.next().await {
                bytes.extend_from_slice(chunk.map_err(|e| e.to_string())?.as_ref());
                if bytes.len() as u64 > MAX_INLINE_BYTES {
                    return Err("too large to inline".to_owned());
                }
            }
            Ok(Resolved::Bytes(bytes))
        }
    }
}

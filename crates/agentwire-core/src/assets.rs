//! Stored media as a model sees it. A stored message names its media by
//! `storage_ref` only, never by URL or bytes (an attachment also by its id:
//! [`crate::MessageBody::User`]'s `attachment`). A [`MediaResolver`] turns
//! those references into inline base64 `data` read through the
//! [`MediaStore`] (or, for a store that presigns, a fresh short-lived URL)
//! for **one model call**: the runtime resolves a copy of each request just
//! before it sends it and drops the copy after, so every call gets fresh
//! URLs and the bytes never outlive the call (nor reach the session store).

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine as _;
use futures_util::StreamExt;

use crate::content::ContentPart;
use crate::media::{Download, MediaStore, StorageRef};
use crate::model::{ModelMessage, ModelRequest};

/// Items larger than this stay unresolved (the model sees a note instead).
pub const MAX_INLINE_BYTES: u64 = 5 * 1024 * 1024;

/// Resolves the stored media of model requests through a [`MediaStore`].
/// Cheap to clone.
#[derive(Clone)]
pub struct MediaResolver {
    store: Arc<dyn MediaStore>,
}

impl MediaResolver {
    pub fn new(store: Arc<dyn MediaStore>) -> MediaResolver {
        MediaResolver { store }
    }

    /// `request` with every user media part that names a stored item and
    /// carries no data resolved afresh; `request` itself, untouched, when
    /// no part needs it. An item that cannot be resolved (gone, expired,
    /// over [`MAX_INLINE_BYTES`]) is left as it is and logged.
    pub async fn resolve<'r, 'h>(
        &self,
        request: &'r ModelRequest<'h>,
    ) -> Cow<'r, ModelRequest<'h>> {
        let needed = request.messages.iter().any(|m| match m {
            ModelMessage::User { parts, .. } => parts.iter().any(|p| stored_ref(p).is_some()),
            _ => false,
        });
        if !needed {
            return Cow::Borrowed(request);
        }
        let mut resolved = request.clone();
        for message in &mut resolved.messages {
            if let ModelMessage::User { parts, .. } = message
                && parts.iter().any(|p| stored_ref(p).is_some())
            {
                for part in parts.to_mut() {
                    self.resolve_part(part).await;
                }
            }
        }
        Cow::Owned(resolved)
    }

    async fn resolve_part(&self, part: &mut ContentPart) {
        let Some(storage_ref) = stored_ref(part) else {
            return;
        };
        let Some(content) = part.media.as_mut() else {
            return;
        };
        match self.read(&storage_ref).await {
            Ok(Resolved::Bytes(bytes)) => {
                content.data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
            Ok(Resolved::Url(url)) => content.url = Some(url),
            Err(reason) => {
                tracing::warn!(%storage_ref, %reason, "stored media left unresolved");
            }
        }
    }

    async fn read(&self, storage_ref: &StorageRef) -> Result<Resolved, String> {
        match self
            .store
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
}

/// The stored item a media part names and still needs resolving: a valid
/// `storage_ref` and no inline data (data wins over every other source).
fn stored_ref(part: &ContentPart) -> Option<StorageRef> {
    let media = part.media.as_ref()?;
    if media.data.is_some() {
        return None;
    }
    StorageRef::parse(media.storage_ref.as_deref()?).ok()
}

/// An item's bytes, or (for a store that presigns) a fresh short-lived URL.
enum Resolved {
    Bytes(Vec<u8>),
    Url(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::{MediaContent, PartKind};
    use crate::media::{MediaBytes, MediaError};
    use crate::testing::{DownloadsOnly, png_info};

    const PNG: &str = "omnia://sessions/s/media/0123456789abcdef0123456789abcdef";
    const REMOTE: &str = "omnia://sessions/s/media/fedcba9876543210fedcba9876543210";

    /// Serves `PNG` as bytes and `REMOTE` as a presigned URL numbered by
    /// the download, as a presigning store mints a new one each time;
    /// anything else is not found.
    fn items() -> Arc<DownloadsOnly> {
        Arc::new(DownloadsOnly::new(|storage_ref, n| {
            match storage_ref.to_string().as_str() {
                PNG => {
                    let chunks = [
                        Ok(MediaBytes::new(&b"\x89P"[..])),
                        Ok(MediaBytes::new(&b"NG"[..])),
                    ];
                    Ok(Download::Body {
                        info: png_info(storage_ref),
                        body: futures_util::stream::iter(chunks).boxed(),
                    })
                }
                REMOTE => Ok(Download::Redirect {
                    info: png_info(storage_ref),
                    url: format!("https://bucket.test/item?signature={n}"),
                }),
                _ => Err(MediaError::NotFound),
            }
        }))
    }

    fn image(storage_ref: &str) -> ContentPart {
        ContentPart::media(
            PartKind::Image,
            MediaContent {
                storage_ref: Some(storage_ref.into()),
                mime_type: "image/png".into(),
                ..MediaContent::default()
            },
        )
    }

    fn request(parts: Vec<ContentPart>) -> ModelRequest<'static> {
        ModelRequest {
            messages: vec![ModelMessage::User {
                text: "look".into(),
                parts: parts.into(),
            }],
            ..ModelRequest::default()
        }
    }

    fn media_of(request: &ModelRequest<'_>) -> Vec<MediaContent> {
        let ModelMessage::User { parts, .. } = &request.messages[0] else {
            panic!("a user message");
        };
        parts.iter().filter_map(|p| p.media.clone()).collect()
    }

    #[tokio::test]
    async fn each_resolution_reads_afresh_and_leaves_the_request_as_it_was() {
        let items = items();
        let resolver = MediaResolver::new(items.clone());
        let missing = "omnia://sessions/s/media/00000000000000000000000000000000";
        let original = request(vec![image(PNG), image(REMOTE), image(missing)]);

        let first = resolver.resolve(&original).await;
        let media = media_of(&first);
        assert_eq!(
            media[0].data.as_deref(),
            Some("iVBORw=="),
            "base64 of the bytes"
        );
        assert_eq!(
            media[1].url.as_deref(),
            Some("https://bucket.test/item?signature=2")
        );
        assert_eq!(
            (media[2].data.as_ref(), media[2].url.as_ref()),
            (None, None)
        );
        let second = resolver.resolve(&original).await;
        assert_eq!(
            media_of(&second)[1].url.as_deref(),
            Some("https://bucket.test/item?signature=5"),
            "a fresh URL for every call"
        );
        assert!(
            media_of(&original)
                .iter()
                .all(|m| m.data.is_none() && m.url.is_none()),
            "the request keeps its references only"
        );
    }

    #[tokio::test]
    async fn requests_without_stored_media_are_borrowed_untouched() {
        let items = items();
        let resolver = MediaResolver::new(items.clone());
        let mut inline = image(PNG);
        inline.media.as_mut().unwrap().data = Some("AAAA".into());
        let original = request(vec![ContentPart::text("hi"), inline]);
        assert!(matches!(
            resolver.resolve(&original).await,
            Cow::Borrowed(_)
        ));
        assert_eq!(items.downloads(), 0);
    }
}

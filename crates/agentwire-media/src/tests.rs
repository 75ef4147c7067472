//! The local backend against a real directory, with a clock the tests move.

use std::sync::atomic::{AtomicI64, Ordering};

use agentwire_core::SessionId;
use futures_util::stream;

use super::*;

struct TestClock(AtomicI64);

impl TestClock {
    fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_nanos() as i64, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

const LIMITS: MediaLimits = MediaLimits {
    max_bytes: 1024,
    ttl: Duration::from_secs(60),
};

fn store() -> (tempfile::TempDir, Arc<TestClock>, ObjectMediaStore) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(AtomicI64::new(1_700_000_000_000_000_000)));
    let store = ObjectMediaStore::local(&dir.path().join("media"), LIMITS, clock.clone()).unwrap();
    (dir, clock, store)
}

fn spec(size: u64) -> UploadSpec {
    UploadSpec {
        session: SessionId::parse("sess-1").unwrap(),
        filename: "photo.jpg".into(),
        mime_type: "image/jpeg".into(),
        size_bytes: size,
        owner: None,
    }
}

fn body(chunks: &[&'static [u8]]) -> MediaBody {
    let chunks: Vec<_> = chunks.iter().map(|c| Ok(MediaBytes::new(*c))).collect();
    stream::iter(chunks).boxed()
}

async fn read_all(download: Download) -> Vec<u8> {
    let Download::Body { mut body, .. } = download else {
        panic!("local downloads are bodies");
    };
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(chunk.unwrap().as_ref());
    }
    out
}

/// The store under `dir` holds session `sess-1`'s item `media`, its bytes
/// and its metadata, and nothing else.
fn assert_only_item(dir: &std::path::Path, media: &str) {
    assert_eq!(
        files(&dir.join("media")),
        [
            format!("sessions/sess-1/{media}"),
            format!("sessions/sess-1/{media}.meta")
        ]
    );
}

/// Every file under `dir`, relative.
fn files(dir: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn upload_then_info_and_download_survive_a_reopen() {
    let (dir, clock, store) = store();
    let ticket = store.prepare_upload(&spec(10)).await.unwrap();
    assert_eq!(ticket.target, UploadTarget::Server);
    assert_eq!(ticket.upload_id, ticket.storage_ref.media);
    assert_eq!(ticket.method, "PUT");
    assert_eq!(
        ticket.headers,
        [("Content-Type".to_owned(), "image/jpeg".to_owned())]
    );
    assert_eq!(ticket.expires_at, clock.now().plus(LIMITS.ttl));

    let info = store
        .write_upload(&ticket.upload_id, Some(10), body(&[b"hello", b" you!"]))
        .await
        .unwrap();
    assert_eq!(info.size_bytes, 10);
    assert_eq!(info.filename, "photo.jpg");
    assert_eq!(info.created_at, clock.now());
    assert_eq!(info.expires_at, Some(clock.now().plus(LIMITS.ttl)));

    // A second store on the same directory sees the same item.
    let reopened =
        ObjectMediaStore::local(&dir.path().join("media"), LIMITS, clock.clone()).unwrap();
    assert_eq!(reopened.info(&ticket.storage_ref).await.unwrap(), info);
    let bytes = read_all(reopened.download(&ticket.storage_ref).await.unwrap()).await;
    assert_eq!(bytes, b"hello you!");
    assert_only_item(dir.path(), ticket.storage_ref.media.as_str());
}

#[tokio::test]
async fn an_upload_id_is_used_once() {
    let (_dir, _clock, store) = store();
    let ticket = store.prepare_upload(&spec(3)).await.unwrap();
    store
        .write_upload(&ticket.upload_id, None, body(&[b"abc"]))
        .await
        .unwrap();
    let again = store
        .write_upload(&ticket.upload_id, None, body(&[b"abc"]))
        .await;
    assert!(matches!(again, Err(MediaError::UploadFailed)), "{again:?}");
}

#[tokio::test]
async fn oversized_bodies_store_nothing() {
    let (dir, _clock, store) = store();
    let ticket = store.prepare_upload(&spec(4)).await.unwrap();
    // Declared by Content-Length: refused before reading.
    let r = store
        .write_upload(&ticket.upload_id, Some(5), body(&[b"12345"]))
        .await;
    assert!(matches!(r, Err(MediaError::TooLarge)), "{r:?}");
    // Discovered while streaming.
    let r = store
        .write_upload(&ticket.upload_id, None, body(&[b"123", b"45"]))
        .await;
    assert!(matches!(r, Err(MediaError::TooLarge)), "{r:?}");
    assert!(matches!(
        store.info(&ticket.storage_ref).await,
        Err(MediaError::NotFound)
    ));
    // Only the pending record is left; a correct body still succeeds.
    assert_eq!(
        files(&dir.path().join("media")),
        [format!("uploads/{}.json", ticket.upload_id)]
    );
    store
        .write_upload(&ticket.upload_id, Some(4), body(&[b"1234"]))
        .await
        .unwrap();
}

#[tokio::test]
async fn requests_over_the_limit_or_with_bad_types_are_refused() {
    let (_dir, _clock, store) = store();
    assert!(matches!(
        store.prepare_upload(&spec(1025)).await,
        Err(MediaError::TooLarge)
    ));
    let bad_mime = UploadSpec {
        mime_type: "not a type".into(),
        ..spec(1)
    };
    assert!(matches!(
        store.prepare_upload(&bad_mime).await,
        Err(MediaError::UnsupportedMediaType)
    ));
}

#[tokio::test]
async fn empty_and_broken_bodies_fail_the_upload() {
    let (_dir, _clock, store) = store();
    let ticket = store.prepare_upload(&spec(4)).await.unwrap();
    let r = store.write_upload(&ticket.upload_id, None, body(&[])).await;
    assert!(matches!(r, Err(MediaError::UploadFailed)), "{r:?}");
    let broken = stream::iter([
        Ok(MediaBytes::new(&b"12"[..])),
        Err(std::io::Error::other("reset")),
    ])
    .boxed();
    let r = store.write_upload(&ticket.upload_id, None, broken).await;
    assert!(matches!(r, Err(MediaError::UploadFailed)), "{r:?}");
}

#[tokio::test]
async fn uploads_and_items_expire() {
    let (dir, clock, store) = store();
    let late = store.prepare_upload(&spec(1)).await.unwrap();
    let ticket = store.prepare_upload(&spec(1)).await.unwrap();
    store
        .write_upload(&ticket.upload_id, None, body(&[b"x"]))
        .await
        .unwrap();
    clock.advance(LIMITS.ttl);
    let r = store
        .write_upload(&late.upload_id, None, body(&[b"x"]))
        .await;
    assert!(matches!(r, Err(MediaError::UploadFailed)), "{r:?}");
    assert!(matches!(
        store.info(&ticket.storage_ref).await,
        Err(MediaError::Expired)
    ));
    assert!(matches!(
        store.download(&ticket.storage_ref).await,
        Err(MediaError::Expired)
    ));
    // The bytes and the stale upload record are gone; the metadata stays so
    // the item still reads as expired.
    let mid = ticket.storage_ref.media.as_str();
    assert_eq!(
        files(&dir.path().join("media")),
        [format!("sessions/sess-1/{mid}.meta")]
    );
    assert!(matches!(
        store.info(&ticket.storage_ref).await,
        Err(MediaError::Expired)
    ));
}

#[tokio::test]
async fn unknown_items_and_the_direct_upload_route_are_not_found() {
    let (_dir, _clock, store) = store();
    let missing =
        StorageRef::parse("omnia://sessions/sess-1/media/0123456789abcdef0123456789abcdef")
            .unwrap();
    assert!(matches!(
        store.info(&missing).await,
        Err(MediaError::NotFound)
    ));
    assert!(matches!(
        store.download(&missing).await,
        Err(MediaError::NotFound)
    ));
    assert!(matches!(
        store.confirm_upload(&missing.media).await,
        Err(MediaError::NotFound)
    ));
}

#[tokio::test]
async fn dot_named_sessions_stay_inside_the_directory() {
    let (dir, _clock, store) = store();
    // `..` is refused by the id rules; names made of dots and colons are
    // valid session ids and must land inside the store.
    for session in ["...", "a:b", "._."] {
        let spec = UploadSpec {
            session: SessionId::parse(session).unwrap(),
            ..spec(1)
        };
        let ticket = store.prepare_upload(&spec).await.unwrap();
        store
            .write_upload(&ticket.upload_id, None, body(&[b"x"]))
            .await
            .unwrap();
        assert_eq!(store.info(&ticket.storage_ref).await.unwrap().size_bytes, 1);
    }
    for file in files(dir.path()) {
        assert!(file.starts_with("media/sessions/"), "{file}");
    }
}

#[tokio::test]
async fn put_stores_a_received_body_at_once() {
    let (dir, clock, store) = store();
    let spec = UploadSpec {
        owner: Some("owner-1".into()),
        ..spec(10)
    };
    let info = store.put(&spec, body(&[b"hello", b" you!"])).await.unwrap();
    assert_eq!(info.size_bytes, 10);
    assert_eq!(info.owner.as_deref(), Some("owner-1"));
    assert_eq!(info.expires_at, Some(clock.now().plus(LIMITS.ttl)));
    assert_eq!(store.info(&info.storage_ref).await.unwrap(), info);
    let bytes = read_all(store.download(&info.storage_ref).await.unwrap()).await;
    assert_eq!(bytes, b"hello you!");
    // No pending upload is left behind: the item and its metadata only.
    assert_only_item(dir.path(), info.storage_ref.media.as_str());
}

#[tokio::test]
async fn put_refuses_what_an_upload_would_and_stores_nothing() {
    let (dir, _clock, store) = store();
    let over_declared = store.put(&spec(4), body(&[b"123", b"45"])).await;
    assert!(
        matches!(over_declared, Err(MediaError::TooLarge)),
        "{over_declared:?}"
    );
    let over_limit = store.put(&spec(1025), body(&[b"x"])).await;
    assert!(
        matches!(over_limit, Err(MediaError::TooLarge)),
        "{over_limit:?}"
    );
    let empty = store.put(&spec(4), body(&[])).await;
    assert!(matches!(empty, Err(MediaError::UploadFailed)), "{empty:?}");
    let bad_mime = UploadSpec {
        mime_type: "not a type".into(),
        ..spec(1)
    };
    let refused = store.put(&bad_mime, body(&[b"x"])).await;
    assert!(
        matches!(refused, Err(MediaError::UnsupportedMediaType)),
        "{refused:?}"
    );
    assert!(files(&dir.path().join("media")).is_empty());
}

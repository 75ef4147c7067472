//! For the fuzz targets (`fuzz/`): the `POST /assets` form reader over a
//! request built in memory, without a socket or a store. Not an API.

use axum::body::Body;
use axum::extract::multipart::Multipart;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;

/// An asset upload's form as `POST /assets` reads it.
#[derive(Debug)]
pub struct AssetForm {
    pub filename: String,
    pub mime_type: String,
    pub bytes: Vec<u8>,
    pub session_id: String,
}

/// Reads `body` sent with `content_type` as `POST /assets` does, the file
/// capped at `max_bytes`: the form, or the refusal's status and text.
pub async fn asset_form(
    content_type: &str,
    body: Vec<u8>,
    max_bytes: u64,
) -> Result<AssetForm, (u16, &'static str)> {
    let request = Request::builder()
        .method("POST")
        .uri("/assets")
        .header(CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .map_err(|_| (0, "not a request"))?;
    let multipart = Multipart::from_request(request, &()).await;
    let (file, session) = crate::gnosari::assets::read_form(multipart, max_bytes)
        .await
        .map_err(|refusal| (refusal.status.as_u16(), refusal.message))?;
    Ok(AssetForm {
        filename: file.filename,
        mime_type: file.mime_type,
        bytes: file.bytes,
        session_id: session.as_str().to_owned(),
    })
}

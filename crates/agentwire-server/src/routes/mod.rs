//! The HTTP routes beside the sockets: the caller's sessions
//! (`/api/v1/sessions*`), the media routes (`/media/*`) and the operator's
//! (`/healthz`, `/readyz`, `/metrics`).

pub(crate) mod media;
pub(crate) mod ops;
pub(crate) mod sessions;

//! The HTTP routes beside the sockets: the dialects' AsyncAPI documents
//! (`/api/asyncapi/*.yaml`), the caller's sessions
//! (`/api/v1/sessions*`) and memories (`/api/v1/memories*`), the agents (`/api/v1/agents`), the media routes
//! (`/media/*`), the web console (`/`, `/console/*`) and the operator's
//! (`/healthz`, `/readyz`, `/metrics`).

pub(crate) mod agents;
pub(crate) mod api;
pub(crate) mod asyncapi;
pub(crate) mod console;
pub(crate) mod media;
pub(crate) mod memories;
pub(crate) mod ops;
pub(crate) mod sessions;

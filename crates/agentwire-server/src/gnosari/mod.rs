//! The Gnosari chat dialect on `/ws/agent/{agent}`, `/ws/team/{team}` and
//! `/ws/team/{team}/agent/{agent}`, and its `POST /assets` upload.

pub(crate) mod assets;
pub(crate) mod connection;
pub(crate) mod upgrade;

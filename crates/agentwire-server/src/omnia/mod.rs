//! The Omnia agent-facade dialect on `/ws?agent=…`: its upgrade checks,
//! the connection's side of the protocol, and `upload_request` with the
//! `storage_ref` check on the socket.

pub(crate) mod connection;
pub(crate) mod media;
pub(crate) mod upgrade;

//! The authenticator end to end: real RS256, ES256 and EdDSA tokens signed
//! with keys generated here, verified against a JWKS served by an in-process
//! identity provider (directly and through OIDC discovery) or read from a
//! file; HS256; API keys; passwords.
//!
//! One test binary, by topic:
//!
//! - [`jwt`]: verifying tokens: algorithms, key sources, signatures, claims;
//! - [`jwks`]: fetching, caching and refusing key sets;
//! - [`api_keys`]: API keys;
//! - [`grants`]: the resource ids a credential grants;
//! - [`passwords`]: agent passwords;
//! - [`refresh`]: refreshing a session with a JWT;
//! - [`support`]: the clock, keys, identity provider and helpers they share.

mod api_keys;
mod grants;
mod jwks;
mod jwt;
mod passwords;
mod refresh;
mod support;

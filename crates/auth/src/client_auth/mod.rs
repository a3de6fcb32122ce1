//! Clients that log in: the proxy as an OAuth 2.1 protected resource (`auth` in
//! `mcp_config.json`). `metadata` is the RFC 9728 document and the `WWW-Authenticate`
//! challenge, `keys` the issuer's signing keys (discovery, JWKS cache, refetch on rotation),
//! `token` the check of one access token and the [`Identity`] it carries.

mod keys;
mod metadata;
mod token;

pub use metadata::{WELL_KNOWN_PATH, challenge, document, resource_url};
pub use token::{Identity, Rejection, Verifier};

#[cfg(test)]
mod tests;

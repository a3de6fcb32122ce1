//! Who may do what, and what is never shown: the credential store (`credentials`: OAuth
//! tokens and `${secret:NAME}` values in the OS keyring or a 0600 file), clients that log
//! in with an access token (`client_auth`: the protected-resource metadata, the issuer's keys,
//! the check of one JWT into an [`Identity`](client_auth::Identity)), the listener's loopback
//! and bearer-token rule (`access`), and the masking of secrets wherever mcpproxy shows
//! something (`masking`). `crypto` makes `ring` the process's one crypto library (TLS and
//! JWT signatures): [`install_crypto_providers`].
//!
//! The OAuth *client* login to upstream servers is not here: it is built on the MCP
//! library's authorization manager and lives with the upstream sessions it serves, so this
//! crate depends on no MCP library (nor on wasmtime, axum or the journal).

pub mod access;
pub mod client_auth;
pub mod credentials;
mod crypto;
pub mod masking;

pub use crypto::install_crypto_providers;

//! Logging in to upstream servers that ask for it: OAuth 2.1 as the MCP authorization
//! specification describes it, built on rmcp's `auth` (discovery of the protected resource
//! and authorization server metadata, client registration, PKCE, the `iss` checks, token
//! refresh).
//!
//! Parts: `vault` (a server's tokens in the credential store, bound to the server's URL),
//! `login` (a login in progress: the authorization URL out, the redirect back in),
//! `session` (the HTTP client an upstream session sends its requests through, with the
//! stored tokens, refreshed before they expire), `challenge` (what a `401`/`403` asked
//! for, and the authorization server's refusals of a stored login), `error`.

mod challenge;
mod error;
mod login;
mod session;
mod vault;

pub use challenge::{Challenge, ChallengeSlot, Refusal, Watched, upstream_http_client};
pub use error::OAuthError;
pub use login::{LoginTarget, Logins};
pub use session::authorized_client;
pub use vault::{forget, forget_refused};

#[cfg(test)]
mod tests;

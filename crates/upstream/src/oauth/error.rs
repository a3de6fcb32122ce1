//! What can go wrong while logging in to an upstream server, in words that say what to do.

use rmcp::transport::AuthError;

use mcpproxy_auth::credentials::CredentialError;

/// A failed login, token refresh or logout. No variant carries a token or a secret.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error(
        "server '{server}' has OAuth turned off ('oauth': {{\"enabled\": false}}); remove that to let mcpproxy log in"
    )]
    Disabled { server: String },
    #[error(
        "server '{server}' is reached by 'command', not 'url': only HTTP servers log in with OAuth"
    )]
    NotHttp { server: String },
    #[error(
        "no login to '{server}' is in progress (it may have expired after {minutes} minutes); start one with `mcpproxy upstream login {server}`"
    )]
    NoLoginPending { server: String, minutes: u64 },
    #[error(
        "the redirect does not belong to a login in progress (its 'state' does not match); start again with `mcpproxy upstream login {server}`"
    )]
    StateMismatch { server: String },
    #[error("the authorization server refused the login: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        error: String,
        description: Option<String>,
    },
    #[error(
        "server '{server}' still asks for scope {scope} after {logins} logins that were granted it: its authorization server does not give what the server wants, and another login would loop. Check the account's permissions there; `mcpproxy upstream logout {server}` starts over"
    )]
    StepUpLoop {
        server: String,
        scope: String,
        logins: u32,
    },
    #[error("{0}")]
    Flow(String),
    #[error("cannot keep the login: {0}")]
    Store(#[from] CredentialError),
}

impl OAuthError {
    /// rmcp's error for a step of the flow, with what the step was.
    pub fn flow(step: &str, error: AuthError) -> Self {
        Self::Flow(format!("{step}: {}", describe(&error)))
    }
}

/// rmcp's error as a person reads it (the variants whose text alone does not say enough).
fn describe(error: &AuthError) -> String {
    let text = mcpproxy_support::quote(&error.to_string());
    match error {
        AuthError::NoAuthorizationSupport => format!(
            "the server does not say where to log in (no protected resource or authorization server metadata): {text}"
        ),
        _ => text,
    }
}

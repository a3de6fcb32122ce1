//! Logging in to an upstream server that asks for it, from the running proxy: start a login
//! ([`Upstreams::begin_login`]: the authorization URL to open), finish it with the browser's
//! redirect ([`Upstreams::finish_login`]: tokens stored, the server reconnected at once), or
//! forget the tokens ([`Upstreams::logout`]). The OAuth flow itself is `crate::oauth`'s.

use crate::oauth::{LoginTarget, OAuthError};
use mcpproxy_config::Transport;

use super::{State, Upstream, Upstreams};

/// Why a login could not be started or finished.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("{0}")]
    UnknownServer(String),
    #[error(transparent)]
    OAuth(#[from] OAuthError),
}

impl LoginError {
    /// Whether the server named does not exist (a `404`, not a failed login).
    pub fn is_unknown_server(&self) -> bool {
        matches!(self, Self::UnknownServer(_))
    }
}

impl Upstreams {
    fn login_server(&self, name: &str) -> Result<std::sync::Arc<Upstream>, LoginError> {
        self.get(name).ok_or_else(|| {
            LoginError::UnknownServer(format!(
                "unknown server '{name}'; `mcpproxy upstream list` shows the configured ones"
            ))
        })
    }

    /// Starts a login to server `name` whose browser redirect comes back to
    /// `redirect_uri`; the authorization URL to open.
    pub async fn begin_login(&self, name: &str, redirect_uri: &str) -> Result<String, LoginError> {
        let upstream = self.login_server(name)?;
        let Transport::Http { url: binding, .. } = &upstream.config.transport else {
            return Err(OAuthError::NotHttp {
                server: name.to_owned(),
            }
            .into());
        };
        let resolved = super::references::resolve(&upstream.config.transport, &self.credentials)
            .map_err(OAuthError::Flow)?;
        let Transport::Http { url, .. } = &resolved.transport else {
            return Err(OAuthError::NotHttp {
                server: name.to_owned(),
            }
            .into());
        };
        let challenge = upstream.challenge.get();
        let secret = upstream.client_secret().map_err(OAuthError::Flow)?;
        let target = LoginTarget {
            server: name,
            binding,
            url,
            oauth: &upstream.config.oauth,
            client_secret: secret.as_ref().map(|s| s.expose()),
            challenge: challenge.as_ref(),
        };
        let url = self
            .logins
            .begin(&target, &self.credentials, redirect_uri)
            .await?;
        if matches!(upstream.state(), State::LoginRequired(_)) {
            upstream.state.send_replace(State::Authenticating);
        }
        Ok(url)
    }

    /// Finishes server `name`'s login with the URL the browser was redirected to; the
    /// server then reconnects with its new tokens.
    pub async fn finish_login(&self, name: &str, redirect: &str) -> Result<(), LoginError> {
        let upstream = self.login_server(name)?;
        let finished = self.logins.finish(name, redirect).await;
        if let Err(e) = finished {
            if matches!(upstream.state(), State::Authenticating) {
                upstream
                    .state
                    .send_replace(State::LoginRequired(login_hint(name, &e.to_string())));
            }
            return Err(e.into());
        }
        upstream.challenge.clear();
        upstream.login_done.notify_one();
        // A session that is up (a step-up while connected) starts again with the new token.
        if matches!(upstream.state(), State::Ready) {
            self.restart(name).await;
        }
        Ok(())
    }

    /// The server whose login waits for a redirect carrying this `state`.
    pub async fn login_by_state(&self, state: &str) -> Option<String> {
        self.logins.by_state(state).await.map(|(server, _)| server)
    }

    /// Forgets server `name`'s tokens; whether it had any. Its session, if any, goes on
    /// until the server refuses it.
    pub async fn logout(&self, name: &str) -> Result<bool, LoginError> {
        self.login_server(name)?;
        self.logins.reset(name).await;
        let store = self.credentials.clone();
        let server = name.to_owned();
        let forgot = tokio::task::spawn_blocking(move || crate::oauth::forget(&store, &server))
            .await
            .map_err(|e| LoginError::OAuth(OAuthError::Flow(e.to_string())))?
            .map_err(OAuthError::from)?;
        Ok(forgot)
    }
}

/// The detail of [`State::LoginRequired`]: why, and the command that fixes it.
pub(super) fn login_hint(server: &str, why: &str) -> String {
    format!("{why}; run `mcpproxy upstream login {server}`")
}

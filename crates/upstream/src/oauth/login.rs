//! A login in progress ([`PendingLogin`]) and the logins of a running mcpproxy ([`Logins`]):
//! [`Logins::begin`] discovers where the server's users log in, registers mcpproxy there
//! if it must, and gives the authorization URL to open; [`Logins::finish`] takes the
//! redirect back (code, state, `iss`), checks it, exchanges the code for tokens and keeps
//! them in the credential store.
//!
//! The client registration follows the order the MCP authorization specification gives:
//! the `client_id` of the server's `oauth` config, else a Client ID Metadata Document (its
//! `client_metadata_url`, when the authorization server supports them), else dynamic client
//! registration, at every login and with the authorization server the protected resource
//! metadata names then: a stored registration is never reused, so one an authorization
//! server forgot, or one made with another authorization server, is never presented to it.
//! The scopes asked for: the config's, else, after a `403 insufficient_scope`,
//! the scopes granted before together with the ones the server asked for, else what the
//! server's challenge names, else its `scopes_supported`, else none.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rmcp::transport::auth::{
    AuthorizationCallback, AuthorizationManager, AuthorizationRequest, CredentialStore as _,
    OAuthState,
};
use tokio::sync::Mutex;

use super::challenge::Challenge;
use super::error::OAuthError;
use super::vault::TokenVault;
use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::OAuthConfig;

/// How many logins in a row may answer a server that keeps asking for scopes it was
/// already granted (`403 insufficient_scope`): past that, a login is refused, not looped.
const MAX_REPEATED_STEP_UPS: u32 = 2;

/// How long a login may wait for its redirect.
const LOGIN_TTL: Duration = Duration::from_secs(10 * 60);

/// The client name mcpproxy registers under when the config gives none.
const CLIENT_NAME: &str = "mcpproxy";

/// What a login needs to know about the server.
pub struct LoginTarget<'a> {
    pub server: &'a str,
    /// The server's URL as the config writes it: what the tokens are bound to.
    pub binding: &'a str,
    /// The URL with its `${env:}`/`${secret:}` references resolved.
    pub url: &'a str,
    pub oauth: &'a OAuthConfig,
    /// The resolved `oauth.client_secret`.
    pub client_secret: Option<&'a str>,
    /// The server's last challenge, when it gave one.
    pub challenge: Option<&'a Challenge>,
}

/// One login waiting for its redirect.
pub(super) struct PendingLogin {
    state: OAuthState,
    /// The `state` parameter of the authorization URL: the redirect must bring it back.
    csrf: String,
    redirect_uri: String,
    started: Instant,
}

/// The logins in progress, one per server (a new one replaces the old).
#[derive(Default)]
pub struct Logins {
    pending: Mutex<HashMap<String, PendingLogin>>,
    /// Per server, the logins in a row started for scopes it had already granted.
    repeated_step_ups: Mutex<HashMap<String, u32>>,
}

impl Logins {
    /// Starts a login to `target` whose redirect comes back to `redirect_uri`; the URL to
    /// open in a browser.
    pub async fn begin(
        &self,
        target: &LoginTarget<'_>,
        store: &CredentialStore,
        redirect_uri: &str,
    ) -> Result<String, OAuthError> {
        if target.oauth.disabled {
            return Err(OAuthError::Disabled {
                server: target.server.to_owned(),
            });
        }
        let vault = TokenVault::new(store.clone(), target.server, target.binding);
        let granted = match vault.load().await {
            Ok(Some(credentials)) => credentials.granted_scopes,
            _ => Vec::new(),
        };
        self.count_step_up(target, &granted).await?;
        // rmcp's authorization manager builds an HTTP client of its own.
        mcpproxy_auth::install_crypto_providers();
        let mut manager = AuthorizationManager::new(target.url)
            .await
            .map_err(|e| OAuthError::flow("cannot prepare the login", e))?;
        manager.set_credential_store(vault);
        let request = request_for(target, redirect_uri, &granted);
        let mut state = OAuthState::Unauthorized(manager);
        state
            .start_authorization(request)
            .await
            .map_err(|e| OAuthError::flow("cannot start the login", e))?;
        let url = state
            .get_authorization_url()
            .await
            .map_err(|e| OAuthError::flow("cannot make the authorization URL", e))?;
        let csrf = reqwest::Url::parse(&url)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .ok_or_else(|| OAuthError::Flow("the authorization URL has no 'state'".into()))?;
        let mut pending = self.pending.lock().await;
        pending.retain(|_, login| login.started.elapsed() < LOGIN_TTL);
        pending.insert(
            target.server.to_owned(),
            PendingLogin {
                state,
                csrf,
                redirect_uri: redirect_uri.to_owned(),
                started: Instant::now(),
            },
        );
        Ok(url)
    }

    /// Refuses a login that would answer, once more, a server asking for scopes it was
    /// already granted: its authorization server never grants what it wants, and logging
    /// in again would loop.
    pub(super) async fn count_step_up(
        &self,
        target: &LoginTarget<'_>,
        granted: &[String],
    ) -> Result<(), OAuthError> {
        let mut repeats = self.repeated_step_ups.lock().await;
        let asked = target
            .challenge
            .filter(|c| c.insufficient_scope)
            .and_then(Challenge::scope);
        let repeated = asked.as_deref().is_some_and(|asked| {
            !granted.is_empty()
                && asked
                    .split_whitespace()
                    .all(|s| granted.iter().any(|g| g == s))
        });
        if !repeated {
            repeats.remove(target.server);
            return Ok(());
        }
        let count = repeats.entry(target.server.to_owned()).or_default();
        if *count >= MAX_REPEATED_STEP_UPS {
            return Err(OAuthError::StepUpLoop {
                server: target.server.to_owned(),
                scope: mcpproxy_support::quote(asked.as_deref().unwrap_or_default()),
                logins: *count + 1,
            });
        }
        *count += 1;
        Ok(())
    }

    /// Forgets what the logins of `server` counted (its tokens were forgotten).
    pub async fn reset(&self, server: &str) {
        self.repeated_step_ups.lock().await.remove(server);
        self.pending.lock().await.remove(server);
    }

    /// Finishes `server`'s login with the URL the browser was redirected to: checks its
    /// `state` and `iss`, exchanges the code, and stores the tokens.
    pub async fn finish(&self, server: &str, redirect: &str) -> Result<(), OAuthError> {
        let Some(mut login) = self.pending.lock().await.remove(server) else {
            return Err(OAuthError::NoLoginPending {
                server: server.to_owned(),
                minutes: LOGIN_TTL.as_secs() / 60,
            });
        };
        if login.started.elapsed() >= LOGIN_TTL {
            return Err(OAuthError::NoLoginPending {
                server: server.to_owned(),
                minutes: LOGIN_TTL.as_secs() / 60,
            });
        }
        let parsed = reqwest::Url::parse(redirect)
            .map_err(|e| OAuthError::Flow(format!("the redirect is not a URL: {e}")))?;
        let query: HashMap<String, String> = parsed.query_pairs().into_owned().collect();
        if let Some(error) = query.get("error") {
            return Err(OAuthError::Refused {
                error: mcpproxy_support::quote(error),
                description: query
                    .get("error_description")
                    .map(|d| mcpproxy_support::quote(d)),
            });
        }
        if query.get("state") != Some(&login.csrf) {
            return Err(OAuthError::StateMismatch {
                server: server.to_owned(),
            });
        }
        let callback = AuthorizationCallback::from_redirect_url(redirect)
            .map_err(|e| OAuthError::flow("the redirect is not one of a login", e))?;
        login
            .state
            .handle_callback_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|e| OAuthError::flow("the authorization server's answer was refused", e))?;
        tracing::info!(server, "logged in");
        Ok(())
    }

    /// The server whose login waits for a redirect with this `state`, and its redirect URI.
    pub async fn by_state(&self, state: &str) -> Option<(String, String)> {
        self.pending
            .lock()
            .await
            .iter()
            .find(|(_, login)| login.csrf == state)
            .map(|(server, login)| (server.clone(), login.redirect_uri.clone()))
    }
}

/// The authorization request for `target`.
pub(super) fn request_for(
    target: &LoginTarget<'_>,
    redirect_uri: &str,
    granted: &[String],
) -> AuthorizationRequest {
    let oauth = target.oauth;
    let mut request = AuthorizationRequest::new(redirect_uri)
        .with_client_name(oauth.client_name.as_deref().unwrap_or(CLIENT_NAME));
    if let Some(id) = &oauth.client_id {
        request = request.with_preregistered_client(id);
        if let Some(secret) = target.client_secret {
            request = request.with_client_secret(secret);
        }
    }
    if let Some(url) = &oauth.client_metadata_url {
        request = request.with_client_metadata_url(url);
    }
    // A refusal of the stored login alone has no header: discovery starts from the URL.
    if let Some(challenge) = target.challenge.filter(|c| !c.header.is_empty()) {
        request = request.with_challenge(&challenge.header);
    }
    let step_up = target
        .challenge
        .filter(|c| c.insufficient_scope)
        .and_then(Challenge::scope);
    if !oauth.scopes.is_empty() {
        request.with_scopes(oauth.scopes.iter().cloned())
    } else if let Some(asked) = step_up {
        let mut scopes: Vec<String> = granted.to_vec();
        for scope in asked.split_whitespace() {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_owned());
            }
        }
        request.with_scopes(scopes)
    } else {
        request.with_initial_scope_selection()
    }
}

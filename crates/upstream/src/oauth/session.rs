//! The HTTP client an upstream session sends its requests through when the server has a
//! stored login: rmcp's [`AuthClient`] with the server's tokens, which adds the bearer token
//! to every request, refreshes it before it expires, and on a rejected token refreshes once
//! and retries. When the refresh fails the request fails with the server's challenge, and
//! the upstream goes to "login required"; so it does when the authorization server refuses
//! the refresh for good (`invalid_client`, `unauthorized_client`, `invalid_grant`: it forgot
//! the registration or the grant), which the session's [`Watched`] client notes.

use std::sync::Arc;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{AuthorizationManager, CredentialStore as _, OAuthClientConfig};

use super::challenge::{ChallengeSlot, Watched};
use super::error::OAuthError;
use super::vault::{TokenVault, has_login};
use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config::OAuthConfig;

/// The redirect URI given with a pre-registered client's secret when only tokens are
/// refreshed (no authorization request is made with it).
const NO_REDIRECT: &str = "http://127.0.0.1/unused";

/// The client for `server`'s session at `url`: with its stored tokens when it has a login
/// bound to `binding` (the server's URL as the config writes it), `None` when it has none
/// (requests then go without a token, and a `401` says a login is needed). `url` is the
/// URL with its references resolved; `client_secret` the resolved `oauth.client_secret`.
/// What the server and its authorization server refuse is left in `slot`.
pub async fn authorized_client(
    server: &str,
    binding: &str,
    url: &str,
    oauth: &OAuthConfig,
    client_secret: Option<&str>,
    store: &CredentialStore,
    slot: &Arc<ChallengeSlot>,
) -> Result<Option<Watched<AuthClient<reqwest::Client>>>, OAuthError> {
    if oauth.disabled {
        return Ok(None);
    }
    let known = {
        let (store, server, binding) = (store.clone(), server.to_owned(), binding.to_owned());
        tokio::task::spawn_blocking(move || has_login(&store, &server, &binding))
            .await
            .unwrap_or(false)
    };
    if !known {
        return Ok(None);
    }
    // rmcp's authorization manager builds an HTTP client of its own.
    mcpproxy_auth::install_crypto_providers();
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| OAuthError::flow("cannot prepare the login", e))?;
    let vault = TokenVault::new(store.clone(), server, binding).reporting_to(slot.clone());
    let client_id = match vault.load().await {
        Ok(Some(credentials)) => credentials.client_id,
        Ok(None) => return Ok(None),
        Err(e) => return Err(OAuthError::flow("cannot read the stored login", e)),
    };
    manager.set_credential_store(vault);
    let restored = manager
        .initialize_from_store()
        .await
        .map_err(|e| OAuthError::flow("cannot read the authorization server's metadata", e))?;
    if !restored {
        return Ok(None);
    }
    if let (Some(id), Some(secret)) = (&oauth.client_id, client_secret) {
        let client = OAuthClientConfig::new(id.clone(), NO_REDIRECT).with_client_secret(secret);
        manager
            .configure_client(client)
            .map_err(|e| OAuthError::flow("cannot use the configured client", e))?;
    }
    let client = AuthClient::new(super::challenge::upstream_http_client(), manager);
    Ok(Some(
        Watched::new(client, slot.clone()).with_login(&client_id),
    ))
}

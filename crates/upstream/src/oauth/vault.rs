//! A server's tokens in the credential store, under `oauth/<server>`: rmcp's
//! [`StoredCredentials`] (client id, token response, granted scopes, issuer) together with
//! the URL they were issued for. A record for another URL is not this server's: tokens are
//! never sent to a URL they were not issued for (an edit of `url` needs a new login).
//!
//! rmcp asks for the credentials before every request; the vault answers from memory and
//! goes to the store only to load once and to write what changed.
//!
//! A login the authorization server refuses for good (`invalid_grant` at a refresh, told by
//! rmcp; `invalid_client` and `unauthorized_client`, seen by the session's client) is
//! forgotten: its tokens and its registration are no use, and the next login registers anew.

use std::sync::Arc;

use rmcp::transport::AuthError;
use rmcp::transport::auth::{CredentialStore as RmcpCredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::challenge::{ChallengeSlot, Refusal};
use mcpproxy_auth::credentials::{CredentialError, CredentialStore};

/// The credential store key of a server's login.
fn key(server: &str) -> String {
    format!("oauth/{server}")
}

/// What is stored for one server.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The server URL the tokens were issued for.
    url: String,
    credentials: StoredCredentials,
}

/// The stored login of `server` for `url`, if there is one.
fn load(
    store: &CredentialStore,
    server: &str,
    url: &str,
) -> Result<Option<StoredCredentials>, CredentialError> {
    let Some(text) = store.get(&key(server))? else {
        return Ok(None);
    };
    match serde_json::from_str::<Record>(text.expose()) {
        Ok(record) if record.url == url => Ok(Some(record.credentials)),
        Ok(_) => Ok(None),
        Err(e) => {
            tracing::warn!(
                server,
                "the stored login is unreadable ({e}); it is ignored: log in again"
            );
            Ok(None)
        }
    }
}

/// Whether `server` has stored tokens for `url`.
pub(super) fn has_login(store: &CredentialStore, server: &str, url: &str) -> bool {
    matches!(load(store, server, url), Ok(Some(c)) if c.token_response.is_some())
}

/// Forgets `server`'s tokens; whether there were any.
pub fn forget(store: &CredentialStore, server: &str) -> Result<bool, CredentialError> {
    store.delete(&key(server))
}

/// Forgets `server`'s login when it is still the one of client `client_id` (the login the
/// authorization server refused; one made since is kept); whether it was.
pub fn forget_refused(
    store: &CredentialStore,
    server: &str,
    client_id: &str,
) -> Result<bool, CredentialError> {
    let Some(text) = store.get(&key(server))? else {
        return Ok(false);
    };
    match serde_json::from_str::<Record>(text.expose()) {
        Ok(record) if record.credentials.client_id == client_id => store.delete(&key(server)),
        _ => Ok(false),
    }
}

/// rmcp's credential store for one server, on top of mcpproxy's.
pub(super) struct TokenVault {
    store: CredentialStore,
    server: String,
    url: String,
    /// What was last loaded or saved: `None` until the first load.
    cached: Mutex<Option<Option<StoredCredentials>>>,
    /// Where a refusal of the login's refresh is told (a session's vault).
    refusals: Option<Arc<ChallengeSlot>>,
}

impl TokenVault {
    pub(super) fn new(store: CredentialStore, server: &str, url: &str) -> Self {
        Self {
            store,
            server: server.to_owned(),
            url: url.to_owned(),
            cached: Mutex::new(None),
            refusals: None,
        }
    }

    /// Tells `slot` when the authorization server refuses the login's refresh token.
    pub(super) fn reporting_to(mut self, slot: Arc<ChallengeSlot>) -> Self {
        self.refusals = Some(slot);
        self
    }

    /// Runs a credential store operation off the async threads (a file or a keyring call).
    async fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&CredentialStore, &str, &str) -> Result<T, CredentialError> + Send + 'static,
    ) -> Result<T, AuthError> {
        let store = self.store.clone();
        let server = self.server.clone();
        let url = self.url.clone();
        tokio::task::spawn_blocking(move || op(&store, &server, &url))
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }
}

#[async_trait::async_trait]
impl RmcpCredentialStore for TokenVault {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let mut cached = self.cached.lock().await;
        if let Some(credentials) = cached.as_ref() {
            return Ok(credentials.clone());
        }
        let loaded = self.blocking(load).await?;
        *cached = Some(loaded.clone());
        Ok(loaded)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut cached = self.cached.lock().await;
        let record = Record {
            url: self.url.clone(),
            credentials: credentials.clone(),
        };
        let text = serde_json::to_string(&record)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        self.blocking(move |store, server, _| store.set(&key(server), &text))
            .await?;
        *cached = Some(Some(credentials));
        Ok(())
    }

    /// The authorization server answered the refresh `invalid_grant`: the tokens are
    /// forgotten (unless a login replaced them meanwhile) and the session's slot is told.
    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let mut cached = self.cached.lock().await;
        if let (Some(slot), Some(refusal)) = (
            &self.refusals,
            Refusal::named("invalid_grant", &credentials.client_id),
        ) {
            slot.refuse(refusal);
        }
        let refused = |c: &StoredCredentials| {
            c.client_id == credentials.client_id
                && c.token_received_at == credentials.token_received_at
        };
        let stored = self.blocking(load).await?;
        if stored.as_ref().is_some_and(refused) {
            self.blocking(|store, server, _| store.delete(&key(server)).map(|_| ()))
                .await?;
            *cached = Some(None);
        }
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let mut cached = self.cached.lock().await;
        self.blocking(|store, server, _| store.delete(&key(server)).map(|_| ()))
            .await?;
        *cached = Some(None);
        Ok(())
    }
}

//! MCP sessions with bounds: at most `max_sessions` in all and `max_sessions_per_client`
//! from one client address, each closed after `session_idle` without traffic. Wraps rmcp's
//! in-memory session manager. The client's address reaches `create_session` through a
//! task-local the `/mcp` middleware sets around the request ([`with_client`]).
//!
//! The middleware asks [`BoundedSessions::admit`] before an `initialize` reaches rmcp, so a
//! refused client gets a clear `503`; `create_session` checks again under the lock, so
//! concurrent requests cannot overshoot the bounds.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

tokio::task_local! {
    static CLIENT: IpAddr;
}

/// Runs `future` (one `/mcp` request) with `client` as the address sessions are counted
/// against.
pub async fn with_client<F: Future>(client: IpAddr, future: F) -> F::Output {
    CLIENT.scope(client, future).await
}

/// The address a session is counted against when the request carried none (a router
/// used without the listener, as in tests).
const UNKNOWN_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// How many sessions may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBounds {
    pub max_sessions: usize,
    pub max_sessions_per_client: usize,
    /// A session without traffic for this long is closed.
    pub idle: Duration,
}

/// Why a session was not opened, or what rmcp's manager reported.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Full(String),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// Who holds which session.
#[derive(Debug, Default)]
struct Ledger {
    by_session: HashMap<SessionId, IpAddr>,
    by_client: HashMap<IpAddr, usize>,
}

/// rmcp's in-memory sessions, bounded in number overall and per client address.
pub struct BoundedSessions {
    inner: LocalSessionManager,
    bounds: SessionBounds,
    ledger: Mutex<Ledger>,
}

impl BoundedSessions {
    pub fn new(bounds: SessionBounds) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(bounds.idle);
        Self {
            inner,
            bounds,
            ledger: Mutex::new(Ledger::default()),
        }
    }

    /// Open sessions, over all clients.
    pub fn open(&self) -> usize {
        self.ledger().by_session.len()
    }

    /// `Ok` when `client` may open one more session now; otherwise why not and what to do.
    pub fn admit(&self, client: IpAddr) -> Result<(), String> {
        self.check(&self.ledger(), client)
    }

    fn check(&self, ledger: &Ledger, client: IpAddr) -> Result<(), String> {
        if ledger.by_session.len() >= self.bounds.max_sessions {
            return Err(format!(
                "mcpproxy has {} MCP sessions open, its limit (http.max_sessions): close unused \
                 sessions (clients do when they exit) or raise the limit; idle sessions close \
                 after {} s",
                self.bounds.max_sessions,
                self.bounds.idle.as_secs()
            ));
        }
        let held = ledger.by_client.get(&client).copied().unwrap_or(0);
        if held >= self.bounds.max_sessions_per_client {
            return Err(format!(
                "{client} has {held} MCP sessions open, the limit for one client address \
                 (http.max_sessions_per_client): close unused sessions or raise the limit; idle \
                 sessions close after {} s",
                self.bounds.idle.as_secs()
            ));
        }
        Ok(())
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // The ledger holds counts only; a panic elsewhere cannot leave it half-written.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn release(&self, id: &SessionId) {
        let mut ledger = self.ledger();
        if let Some(client) = ledger.by_session.remove(id)
            && let Some(held) = ledger.by_client.get_mut(&client)
        {
            *held -= 1;
            if *held == 0 {
                ledger.by_client.remove(&client);
            }
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let client = CLIENT.try_with(|c| *c).unwrap_or(UNKNOWN_CLIENT);
        self.check(&self.ledger(), client)
            .map_err(SessionError::Full)?;
        let (id, transport) = self.inner.create_session().await?;
        let taken = {
            let mut ledger = self.ledger();
            self.check(&ledger, client).inspect(|()| {
                ledger.by_session.insert(id.clone(), client);
                *ledger.by_client.entry(client).or_insert(0) += 1;
            })
        };
        if let Err(full) = taken {
            // Another request took the last slot while this one was being created.
            let _ = self.inner.close_session(&id).await;
            return Err(SessionError::Full(full));
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.release(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(total: usize, per_client: usize) -> SessionBounds {
        SessionBounds {
            max_sessions: total,
            max_sessions_per_client: per_client,
            idle: Duration::from_secs(60),
        }
    }

    #[tokio::test]
    async fn sessions_are_bounded_per_client_and_in_all() {
        let sessions = BoundedSessions::new(bounds(3, 2));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let (a1, _t1) = with_client(a, sessions.create_session()).await.unwrap();
        let (_a2, _t2) = with_client(a, sessions.create_session()).await.unwrap();
        let err = with_client(a, sessions.create_session())
            .await
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("http.max_sessions_per_client"),
            "{err}"
        );
        assert!(sessions.admit(a).is_err());
        assert!(sessions.admit(b).is_ok());
        let (_b1, _t3) = with_client(b, sessions.create_session()).await.unwrap();
        let err = sessions.admit(b).unwrap_err();
        assert!(err.contains("http.max_sessions)"), "{err}");
        assert_eq!(sessions.open(), 3);

        sessions.close_session(&a1).await.unwrap();
        assert_eq!(sessions.open(), 2);
        assert!(sessions.admit(a).is_ok());
        with_client(a, sessions.create_session()).await.unwrap();
    }
}

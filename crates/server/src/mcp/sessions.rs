//! MCP sessions with bounds: at most `max_sessions` in all and `max_sessions_per_client`
//! from one client address (the client key; all local clients share `127.0.0.1`), each
//! closed after `session_idle` without traffic. Wraps rmcp's in-memory session manager. The
//! client's address reaches `create_session` through a task-local the `/mcp` middleware sets
//! around the request ([`with_client`]).
//!
//! A bound reached does not lock anyone out while sessions sit idle. An `initialize` past a
//! bound closes an idle session (one with no request in flight) to make room:
//!
//! - past `max_sessions_per_client`: the idle session of the same client key unused the
//!   longest;
//! - past `max_sessions` alone: the idle session unused the longest of the client key
//!   holding the most sessions, if it holds more than the newcomer will; else the
//!   newcomer's own idle session unused the longest. A flood from one key so never pushes
//!   out a key with fewer sessions, and every other key gets its share.
//!
//! Only when no session may be closed (every one of them has a request in flight) is the
//! `initialize` refused, with a clear `503`. A closed session's client gets `404` on its
//! next request and initializes again, as MCP clients do.
//!
//! The middleware asks [`BoundedSessions::admit`] before an `initialize` reaches rmcp, so a
//! refused client gets a clear `503`; `create_session` decides again under the lock (making
//! room there), so concurrent requests cannot overshoot the bounds.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
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

/// One open session.
#[derive(Debug)]
struct Held {
    client: IpAddr,
    /// Requests of the session in flight (its `initialize` counts until answered).
    in_flight: usize,
    /// When it was last used, on the ledger's clock; its key in `idle` while idle.
    used: u64,
}

/// Who holds which session, and which sessions are idle, oldest use first.
#[derive(Debug, Default)]
struct Ledger {
    by_session: HashMap<SessionId, Held>,
    by_client: HashMap<IpAddr, usize>,
    /// Per client, its idle sessions by when they were last used.
    idle: HashMap<IpAddr, BTreeMap<u64, SessionId>>,
    /// A counter, not a clock: orders uses.
    clock: u64,
}

impl Ledger {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn held(&self, client: IpAddr) -> usize {
        self.by_client.get(&client).copied().unwrap_or(0)
    }

    /// The idle session of `client` unused the longest.
    fn oldest_idle(&self, client: IpAddr) -> Option<&SessionId> {
        self.idle.get(&client)?.values().next()
    }

    fn set_idle(&mut self, client: IpAddr, used: u64, id: SessionId) {
        self.idle.entry(client).or_default().insert(used, id);
    }

    fn unset_idle(&mut self, client: IpAddr, used: u64) {
        if let Some(idle) = self.idle.get_mut(&client) {
            idle.remove(&used);
            if idle.is_empty() {
                self.idle.remove(&client);
            }
        }
    }

    /// Opens `id` for `client`, busy until its `initialize` is answered.
    fn insert(&mut self, id: SessionId, client: IpAddr) {
        let used = self.tick();
        self.by_session.insert(
            id,
            Held {
                client,
                in_flight: 1,
                used,
            },
        );
        *self.by_client.entry(client).or_insert(0) += 1;
    }

    /// Forgets `id`; `false` when it was not open.
    fn remove(&mut self, id: &SessionId) -> bool {
        let Some(held) = self.by_session.remove(id) else {
            return false;
        };
        if held.in_flight == 0 {
            self.unset_idle(held.client, held.used);
        }
        if let Some(count) = self.by_client.get_mut(&held.client) {
            *count -= 1;
            if *count == 0 {
                self.by_client.remove(&held.client);
            }
        }
        true
    }

    /// A request of `id` starts.
    fn begin(&mut self, id: &SessionId) {
        let used = self.tick();
        let Some(held) = self.by_session.get_mut(id) else {
            return;
        };
        let (client, was) = (held.client, held.used);
        held.in_flight += 1;
        held.used = used;
        if held.in_flight == 1 {
            self.unset_idle(client, was);
        }
    }

    /// A request of `id` ended.
    fn end(&mut self, id: &SessionId) {
        let used = self.tick();
        let Some(held) = self.by_session.get_mut(id) else {
            return;
        };
        held.in_flight = held.in_flight.saturating_sub(1);
        held.used = used;
        if held.in_flight == 0 {
            let client = held.client;
            self.set_idle(client, used, id.clone());
        }
    }

    /// `id` was used without a request (a notification, a response, a stream opened).
    fn touch(&mut self, id: &SessionId) {
        let used = self.tick();
        let Some(held) = self.by_session.get_mut(id) else {
            return;
        };
        let (client, was, idle) = (held.client, held.used, held.in_flight == 0);
        held.used = used;
        if idle {
            self.unset_idle(client, was);
            self.set_idle(client, used, id.clone());
        }
    }
}

/// What opening one more session for a client takes.
#[derive(Debug, PartialEq, Eq)]
enum Room {
    Free,
    /// Closing this idle session first.
    Evict(SessionId),
}

/// rmcp's in-memory sessions, bounded in number overall and per client address.
pub struct BoundedSessions {
    inner: Arc<LocalSessionManager>,
    bounds: SessionBounds,
    ledger: Arc<Mutex<Ledger>>,
}

/// Marks a request of a session in flight until dropped (with the request's stream).
struct InFlight {
    ledger: Arc<Mutex<Ledger>>,
    id: SessionId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.ledger).end(&self.id);
    }
}

use mcpproxy_support::lock;

impl BoundedSessions {
    pub fn new(bounds: SessionBounds) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(bounds.idle);
        Self {
            inner: Arc::new(inner),
            bounds,
            ledger: Arc::default(),
        }
    }

    /// Open sessions, over all clients (`mcpproxy_sessions{kind="http"}`).
    pub fn open(&self) -> usize {
        lock(&self.ledger).by_session.len()
    }

    /// `Ok` when `client` may open one more session now (maybe by closing an idle one);
    /// otherwise why not and what to do.
    pub fn admit(&self, client: IpAddr) -> Result<(), String> {
        self.room(&lock(&self.ledger), client).map(|_| ())
    }

    /// What one more session of `client` takes, or why there is no room (see the module
    /// docs).
    fn room(&self, ledger: &Ledger, client: IpAddr) -> Result<Room, String> {
        let held = ledger.held(client);
        let client_full = held >= self.bounds.max_sessions_per_client;
        let all_full = ledger.by_session.len() >= self.bounds.max_sessions;
        if !client_full && !all_full {
            return Ok(Room::Free);
        }
        if client_full {
            return match ledger.oldest_idle(client) {
                Some(id) => Ok(Room::Evict(id.clone())),
                None => Err(format!(
                    "{client} has {held} MCP sessions open, the limit for one client address \
                     (http.max_sessions_per_client), and each has a request in flight, so none \
                     can be closed to make room: wait for a request to finish, close unused \
                     sessions or raise the limit"
                )),
            };
        }
        // Only the global bound: the client holding the most sessions, if more than this
        // one will, gives up its idle session unused the longest; else this client's own.
        let heaviest = ledger
            .idle
            .iter()
            .filter(|(other, _)| **other != client)
            .filter_map(|(other, idle)| {
                let count = ledger.held(*other);
                let (used, id) = idle.iter().next()?;
                (count > held + 1).then_some((count, std::cmp::Reverse(*used), id))
            })
            .max_by_key(|(count, used, _)| (*count, *used))
            .map(|(_, _, id)| id)
            .or_else(|| ledger.oldest_idle(client));
        match heaviest {
            Some(id) => Ok(Room::Evict(id.clone())),
            None => Err(format!(
                "mcpproxy has {} MCP sessions open, its limit (http.max_sessions), and none \
                 can be closed to make room (each is in use, or belongs to a client with no \
                 more sessions than {client}): wait for a request to finish, close unused \
                 sessions or raise the limit; idle sessions close after {} s",
                self.bounds.max_sessions,
                self.bounds.idle.as_secs()
            )),
        }
    }

    /// Closes an evicted session in rmcp: gone at once for its client's next request
    /// (`404`), its worker told to end in the background (a session whose client stopped
    /// reading may take its time).
    async fn close_evicted(&self, id: SessionId, client: IpAddr) {
        tracing::debug!(
            session = %id,
            %client,
            "closed an idle MCP session to make room for a new one (session bounds)"
        );
        let handle = self.inner.sessions.write().await.remove(&id);
        if let (Some(handle), Ok(runtime)) = (handle, tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                if let Err(e) = handle.close().await {
                    tracing::debug!(session = %id, "closing an evicted session: {e}");
                }
            });
        }
    }

    fn release(&self, id: &SessionId) {
        lock(&self.ledger).remove(id);
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let client = CLIENT.try_with(|c| *c).unwrap_or(UNKNOWN_CLIENT);
        self.room(&lock(&self.ledger), client)
            .map_err(SessionError::Full)?;
        let (id, transport) = self.inner.create_session().await?;
        let taken = {
            let mut ledger = lock(&self.ledger);
            self.room(&ledger, client).map(|room| {
                let evicted = match room {
                    Room::Free => None,
                    Room::Evict(victim) => {
                        let owner = ledger.by_session.get(&victim).map(|h| h.client);
                        ledger.remove(&victim);
                        Some((victim, owner.unwrap_or(client)))
                    }
                };
                ledger.insert(id.clone(), client);
                evicted
            })
        };
        match taken {
            Ok(evicted) => {
                if let Some((victim, owner)) = evicted {
                    self.close_evicted(victim, owner).await;
                }
                Ok((id, transport))
            }
            Err(full) => {
                // Another request took the last room while this one was being created.
                let _ = self.inner.close_session(&id).await;
                Err(SessionError::Full(full))
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let answer = self.inner.initialize_session(id, message).await;
        // Initialized (or not): idle from now until its next request.
        lock(&self.ledger).end(id);
        Ok(answer?)
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
        lock(&self.ledger).begin(id);
        let in_flight = InFlight {
            ledger: self.ledger.clone(),
            id: id.clone(),
        };
        // Busy while the request's stream is open: until its answer is sent (or the client
        // goes away).
        let stream = self.inner.create_stream(id, message).await?;
        Ok(stream.map(move |message| {
            let _busy = &in_flight;
            message
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        lock(&self.ledger).touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        lock(&self.ledger).touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        lock(&self.ledger).touch(id);
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

    /// A session of `client` created and answered (idle), as after `initialize`.
    async fn idle_session(sessions: &BoundedSessions, client: IpAddr) -> SessionId {
        let (id, transport) = with_client(client, sessions.create_session())
            .await
            .expect("room for it");
        drop(transport);
        lock(&sessions.ledger).end(&id);
        id
    }

    fn holds(sessions: &BoundedSessions, id: &SessionId) -> bool {
        lock(&sessions.ledger).by_session.contains_key(id)
    }

    #[tokio::test]
    async fn past_the_client_bound_its_idle_session_unused_longest_makes_room() {
        let sessions = BoundedSessions::new(bounds(100, 3));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = idle_session(&sessions, a).await;
        let second = idle_session(&sessions, a).await;
        let third = idle_session(&sessions, a).await;
        // The first is used again: the second is now unused the longest.
        {
            let mut ledger = lock(&sessions.ledger);
            ledger.begin(&first);
            ledger.end(&first);
        }
        assert!(sessions.admit(a).is_ok(), "room is made, not refused");
        let fourth = idle_session(&sessions, a).await;
        assert!(
            !holds(&sessions, &second),
            "the idle session unused longest went"
        );
        assert!(holds(&sessions, &first) && holds(&sessions, &third) && holds(&sessions, &fourth));
        assert_eq!(sessions.open(), 3);
        assert!(
            !sessions.has_session(&second).await.unwrap(),
            "closed in rmcp too: its client gets 404"
        );
    }

    #[tokio::test]
    async fn a_session_with_a_request_in_flight_is_never_closed_to_make_room() {
        let sessions = BoundedSessions::new(bounds(100, 2));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let busy = idle_session(&sessions, a).await;
        let idle = idle_session(&sessions, a).await;
        lock(&sessions.ledger).begin(&busy);
        let newest = idle_session(&sessions, a).await;
        assert!(holds(&sessions, &busy), "busy, though unused longest");
        assert!(!holds(&sessions, &idle));
        lock(&sessions.ledger).begin(&newest);
        // Both busy: refused, saying why.
        let err = sessions.admit(a).unwrap_err();
        assert!(err.contains("http.max_sessions_per_client"), "{err}");
        assert!(err.contains("request in flight"), "{err}");
        let err = with_client(a, sessions.create_session())
            .await
            .err()
            .unwrap();
        assert!(matches!(err, SessionError::Full(_)), "{err}");
        // A request that ends makes its session idle again.
        lock(&sessions.ledger).end(&busy);
        assert!(sessions.admit(a).is_ok());
        idle_session(&sessions, a).await;
        assert!(!holds(&sessions, &busy) && holds(&sessions, &newest));
    }

    #[tokio::test]
    async fn a_flood_from_one_client_never_locks_another_out() {
        let sessions = BoundedSessions::new(bounds(4, 4));
        let flood: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let mut flooded = Vec::new();
        for _ in 0..300 {
            flooded.push(idle_session(&sessions, flood).await);
        }
        assert_eq!(sessions.open(), 4);
        assert!(flooded[296..].iter().all(|id| holds(&sessions, id)));
        // Another client takes room from the one holding the most, down to a fair share.
        let mine = [
            idle_session(&sessions, other).await,
            idle_session(&sessions, other).await,
        ];
        assert!(!holds(&sessions, &flooded[296]) && !holds(&sessions, &flooded[297]));
        assert!(holds(&sessions, &flooded[298]) && holds(&sessions, &flooded[299]));
        // Now even (2 and 2): each new session replaces the newcomer's own oldest.
        let third = idle_session(&sessions, other).await;
        assert!(!holds(&sessions, &mine[0]) && holds(&sessions, &mine[1]));
        assert!(holds(&sessions, &third));
        // And the flood goes on without pushing the other client below its share.
        for _ in 0..50 {
            idle_session(&sessions, flood).await;
        }
        assert!(holds(&sessions, &mine[1]) && holds(&sessions, &third));
        assert_eq!(sessions.open(), 4);
    }
}

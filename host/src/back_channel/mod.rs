//! The back channel: the way from upstream sessions back to client sessions. One upstream
//! session serves every client, so what an upstream sends on its own (progress, log
//! messages, a question for the user, an updated resource) has to be routed to the client
//! it concerns:
//!
//! - **Calls in flight**: each proxied call registers the upstream request id and progress
//!   token it was sent with, next to the client request it came from ([`CallOrigin`]).
//!   Progress, elicitation and sampling requests of the upstream find their client by those.
//! - **Client sessions**: each MCP session of a client registers here while it is open, with
//!   the logging level it asked for and the resources it subscribed to, so that upstream
//!   log messages and `resources/updated` reach exactly the sessions that want them. A log
//!   message goes only to sessions that asked for its level (`logging/setLevel`, or a
//!   2026-07-28 request's own log level while it is in flight), never to one that set none.
//! - **Queues** (`outbox`): what is relayed to a session or a listen stream is queued for it,
//!   bounded and coalesced, and sent by a task of the queue's own, so an upstream never
//!   waits on a client and a client that does not read costs a bounded amount of memory.
//! - **Listen streams** (`listeners`): each client `subscriptions/listen` stream (protocol
//!   2026-07-28), with the streams opened upstream for it, so a change an upstream
//!   announces reaches the streams that asked.
//! - **Asking a client** ([`ask_client`]): a server-to-client request is sent on the stream
//!   of the client request that caused it, within a deadline, so an upstream never waits on
//!   a client forever.
//!
//! The module knows rmcp's peers and nothing of the proxy above it.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

mod listeners;
mod outbox;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientResult, GetExtensions, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ProgressToken, RequestId, RequestMetaObject, ServerNotification,
    ServerRequest,
};
use rmcp::service::{OriginatingRequestId, Peer, RoleServer};
use tokio_util::sync::CancellationToken;

pub(crate) use listeners::ListenerGuard;

use outbox::{Item, Outboxes, QueueKey, Target};

/// The most `_meta` bytes (as JSON) a client request may pass on to an upstream; a larger
/// `_meta` is not forwarded.
pub(crate) const MAX_FORWARDED_META_BYTES: usize = 16 << 10;

/// At most this many resource subscriptions per client session.
pub(crate) const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 1024;

/// One client session, for the life of its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SessionKey(u64);

impl SessionKey {
    /// A key no other session in this process has.
    pub(crate) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for SessionKey {
    fn default() -> Self {
        Self::new()
    }
}

/// The client request a proxied call came from.
#[derive(Debug, Clone)]
pub(crate) struct CallOrigin {
    pub session: SessionKey,
    pub peer: Peer<RoleServer>,
    /// The client's JSON-RPC request id.
    pub request_id: RequestId,
    /// The client's `progressToken`, when it asked for progress.
    pub progress_token: Option<ProgressToken>,
    /// What the client said it can do (elicitation, sampling).
    pub capabilities: Option<ClientCapabilities>,
    /// The request `_meta` to pass on to the upstream (see [`forwardable_meta`]).
    pub meta: Option<RequestMetaObject>,
    /// Cancelled when the client cancels its request (`notifications/cancelled`).
    pub cancelled: CancellationToken,
    /// The client's name and version, for records and messages.
    pub client: Option<mcpproxy_activity::ClientRecord>,
    /// The client's MCP session id (HTTP), for records.
    pub session_id: Option<String>,
    /// The answers a 2026-07-28 client sends with a repeated call after an
    /// `input_required` result, and the server's state to resume from: passed on as sent.
    pub input_responses: Option<rmcp::model::InputResponses>,
    pub request_state: Option<String>,
    /// For a client on protocol 2026-07-28 or later: its version, capabilities and client
    /// info as request `_meta`, so an upstream that speaks that version answers the request
    /// the way the client expects (`resultType`, `input_required`). Passed on only to
    /// stdio upstreams that listed the version in `server/discover`.
    pub protocol: Option<(rmcp::model::ProtocolVersion, RequestMetaObject)>,
    /// The request carries its own lifecycle (2026-07-28 without a session): nothing but
    /// the request itself says who sent it.
    pub stateless: bool,
}

impl CallOrigin {
    pub(crate) fn can_elicit(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(|c| c.elicitation.is_some())
    }

    /// Whether the client declared the tasks extension (for its session or in this
    /// request's `_meta`), so it can follow a task with `tasks/get`.
    pub(crate) fn can_follow_tasks(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(ClientCapabilities::supports_tasks)
    }

    pub(crate) fn can_sample(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(|c| c.sampling.is_some())
    }

    /// How the client is named in messages: `client 'NAME'` or `the client`.
    pub(crate) fn describe_client(&self) -> String {
        match &self.client {
            Some(client) => format!("client '{}'", crate::trust::quote(&client.name)),
            None => "the client".to_owned(),
        }
    }
}

/// What a server-to-client request was, for the audit trail.
#[derive(Debug, Clone)]
pub(crate) struct ForwardedRequest {
    pub server: String,
    /// `elicitation/create`, `sampling/createMessage`.
    pub method: &'static str,
    /// The request's parameters (capped and redacted by the observer).
    pub params: serde_json::Value,
    /// The call it belonged to, if one was found.
    pub origin: Option<CallOrigin>,
    /// Why it was not forwarded, or what went wrong; `None` when the client answered.
    pub error: Option<String>,
    /// The client's answer (`accept`, `decline`, `cancel` for an elicitation).
    pub outcome: Option<String>,
    pub duration: Duration,
}

/// Told about every server-to-client request the back channel handled (the proxy records them).
pub(crate) trait RequestObserver: Send + Sync {
    fn forwarded(&self, request: ForwardedRequest);
}

struct InFlight {
    server: String,
    upstream_request: RequestId,
    upstream_progress: ProgressToken,
    origin: CallOrigin,
    /// The log level the request itself set (protocol 2026-07-28 `_meta`), if any.
    log_level: Option<LoggingLevel>,
    relays: Arc<Relays>,
}

/// How many progress notifications of one call were relayed, and how many are being
/// relayed now: rmcp hands each notification to a task of its own, so the last one can
/// still be on its way when the call's response arrives.
#[derive(Default)]
pub(crate) struct Relays {
    started: std::sync::atomic::AtomicUsize,
    active: std::sync::atomic::AtomicUsize,
    /// Told when a relay ends.
    ended: tokio::sync::Notify,
}

/// Held while one progress notification is relayed.
pub(crate) struct RelayTicket(Arc<Relays>);

impl Drop for RelayTicket {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.ended.notify_waiters();
    }
}

#[derive(Default)]
struct Calls {
    next: u64,
    by_id: HashMap<u64, InFlight>,
}

struct ClientSession {
    peer: Peer<RoleServer>,
    /// The server the session sees (a direct endpoint); `None`: every server.
    server: Option<String>,
    log_level: Option<LoggingLevel>,
    /// `(server, uri)` pairs.
    subscriptions: BTreeSet<(String, String)>,
}

/// A client session something is relayed to.
#[derive(Clone)]
pub(crate) struct Recipient {
    key: SessionKey,
    peer: Peer<RoleServer>,
}

/// A client session a log message is relayed to, and the least severe level it takes.
#[derive(Clone)]
pub(crate) struct LogRecipient {
    recipient: Recipient,
    min_level: LoggingLevel,
}

/// Every route back from upstreams to clients.
#[derive(Default)]
pub(crate) struct BackChannel {
    calls: Mutex<Calls>,
    sessions: Mutex<HashMap<SessionKey, ClientSession>>,
    listeners: Mutex<listeners::Listeners>,
    outboxes: Arc<Outboxes>,
    observer: OnceLock<Arc<dyn RequestObserver>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Maps and sets only; a panic elsewhere cannot leave them half-written.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes a call's routes when the call ends, however it ends.
pub(crate) struct CallGuard {
    back_channel: Arc<BackChannel>,
    id: u64,
    relays: Arc<Relays>,
}

impl CallGuard {
    /// Before the call's answer goes back: lets progress notifications the upstream sent
    /// before its answer reach the client first. Free for a call that had no progress; for
    /// one that had, a few scheduler turns and at most [`SETTLE_LIMIT`].
    pub(crate) async fn settle(&self) {
        if self.relays.started.load(Ordering::Acquire) == 0 {
            return;
        }
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        self.wait_for_relays(|_started, active| active == 0).await;
    }

    /// [`CallGuard::settle`] for a call whose transport counted the progress notifications
    /// the server sent ahead of its answer (`sent_before`): waits until that many have been
    /// taken up and every relay has ended, at most [`SETTLE_LIMIT`]. Free when there were
    /// none.
    pub(crate) async fn settle_counted(&self, sent_before: usize) {
        if sent_before == 0 {
            return;
        }
        // A notification rmcp could not read is never relayed: the wait ends at the limit.
        self.wait_for_relays(|started, active| started >= sent_before && active == 0)
            .await;
    }

    /// Waits until `done(started, active)` holds for the call's relays, looking again each
    /// time a relay ends, at most [`SETTLE_LIMIT`].
    async fn wait_for_relays(&self, done: impl Fn(usize, usize) -> bool) {
        let relays = &self.relays;
        let settled = async {
            loop {
                let ended = relays.ended.notified();
                tokio::pin!(ended);
                // Told of every relay that ends from here on, before looking.
                ended.as_mut().enable();
                let started = relays.started.load(Ordering::Acquire);
                if done(started, relays.active.load(Ordering::Acquire)) {
                    return;
                }
                ended.await;
            }
        };
        let _ = tokio::time::timeout(SETTLE_LIMIT, settled).await;
    }
}

/// The longest a call's answer waits for its progress notifications to be relayed.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_millis(50);

impl Drop for CallGuard {
    fn drop(&mut self) {
        lock(&self.back_channel.calls).by_id.remove(&self.id);
    }
}

impl BackChannel {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Sets who is told about server-to-client requests; only the first call counts.
    pub(crate) fn set_observer(&self, observer: Arc<dyn RequestObserver>) {
        let _ = self.observer.set(observer);
    }

    pub(crate) fn observe(&self, request: ForwardedRequest) {
        if let Some(observer) = self.observer.get() {
            observer.forwarded(request);
        }
    }

    /// Routes what the upstream `server` sends about its request `upstream_request`
    /// (progress token `upstream_progress`) to `origin`, until the guard is dropped.
    pub(crate) fn register_call(
        self: &Arc<Self>,
        server: &str,
        upstream_request: RequestId,
        upstream_progress: ProgressToken,
        origin: CallOrigin,
    ) -> CallGuard {
        let relays = Arc::new(Relays::default());
        let log_level = origin
            .protocol
            .as_ref()
            .and_then(|(_, meta)| meta.log_level());
        let mut calls = lock(&self.calls);
        calls.next += 1;
        let id = calls.next;
        calls.by_id.insert(
            id,
            InFlight {
                server: server.to_owned(),
                upstream_request,
                upstream_progress,
                origin,
                log_level,
                relays: relays.clone(),
            },
        );
        CallGuard {
            back_channel: self.clone(),
            id,
            relays,
        }
    }

    /// The call of `server` that sent `token` upstream, and a ticket to hold while its
    /// progress is relayed (see [`CallGuard::settle`]).
    pub(crate) fn origin_by_progress(
        &self,
        server: &str,
        token: &ProgressToken,
    ) -> Option<(CallOrigin, RelayTicket)> {
        lock(&self.calls)
            .by_id
            .values()
            .find(|c| c.server == server && &c.upstream_progress == token)
            .map(|c| {
                c.relays.started.fetch_add(1, Ordering::AcqRel);
                c.relays.active.fetch_add(1, Ordering::AcqRel);
                (c.origin.clone(), RelayTicket(c.relays.clone()))
            })
    }

    /// The call a server-to-client request of `server` belongs to: the one with the
    /// upstream request id the transport associated it with, else (stdio carries no
    /// association) the newest call in flight to `server`.
    pub(crate) fn origin_for_request(
        &self,
        server: &str,
        upstream_request: Option<&RequestId>,
    ) -> Option<CallOrigin> {
        let calls = lock(&self.calls);
        if let Some(id) = upstream_request
            && let Some(call) = calls
                .by_id
                .values()
                .find(|c| c.server == server && &c.upstream_request == id)
        {
            return Some(call.origin.clone());
        }
        calls
            .by_id
            .iter()
            .filter(|(_, c)| c.server == server)
            .max_by_key(|(id, _)| **id)
            .map(|(_, c)| c.origin.clone())
    }

    /// Calls in flight, over all servers.
    #[cfg(test)]
    pub(crate) fn calls_in_flight(&self) -> usize {
        lock(&self.calls).by_id.len()
    }

    /// Registers (or refreshes) an open client session.
    pub(crate) fn open_session(
        &self,
        key: SessionKey,
        peer: &Peer<RoleServer>,
        server: Option<&str>,
    ) {
        lock(&self.sessions)
            .entry(key)
            .or_insert_with(|| ClientSession {
                peer: peer.clone(),
                server: server.map(str::to_owned),
                log_level: None,
                subscriptions: BTreeSet::new(),
            });
    }

    /// The open sessions of the direct endpoint of `server` (for
    /// `notifications/tools/list_changed`: only they see its tools).
    pub(crate) fn direct_sessions(&self, server: &str) -> Vec<Recipient> {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| !s.peer.is_transport_closed());
        sessions
            .iter()
            .filter(|(_, s)| s.server.as_deref() == Some(server))
            .map(|(key, s)| Recipient {
                key: *key,
                peer: s.peer.clone(),
            })
            .collect()
    }

    /// Forgets a session; returns the `(server, uri)` subscriptions no other session
    /// holds any more, which the caller unsubscribes upstream.
    pub(crate) fn close_session(&self, key: SessionKey) -> Vec<(String, String)> {
        self.outboxes.forget(QueueKey::Session(key));
        let mut sessions = lock(&self.sessions);
        let Some(closed) = sessions.remove(&key) else {
            return Vec::new();
        };
        closed
            .subscriptions
            .into_iter()
            .filter(|sub| !sessions.values().any(|s| s.subscriptions.contains(sub)))
            .collect()
    }

    /// The session wants log messages at `level` and above.
    pub(crate) fn set_log_level(
        &self,
        key: SessionKey,
        peer: &Peer<RoleServer>,
        level: LoggingLevel,
    ) {
        self.open_session(key, peer, None);
        if let Some(session) = lock(&self.sessions).get_mut(&key) {
            session.log_level = Some(level);
        }
    }

    /// The sessions a log message of `server` at `level` goes to: those that asked for
    /// messages at that level or a more verbose one with `logging/setLevel`, and those that
    /// set none that way but have a call in flight to `server` whose request set a log level
    /// of its own (protocol 2026-07-28) that takes it. A session that set no level gets no
    /// log message at all: upstream logs can be chatty, and nobody asked.
    pub(crate) fn log_receivers(&self, server: &str, level: LoggingLevel) -> Vec<LogRecipient> {
        let per_request: Vec<(SessionKey, Peer<RoleServer>, LoggingLevel)> = lock(&self.calls)
            .by_id
            .values()
            .filter(|c| c.server == server)
            .filter_map(|c| {
                let min = c.log_level?;
                Some((c.origin.session, c.origin.peer.clone(), min))
            })
            .collect();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| !s.peer.is_transport_closed());
        let mut receivers: Vec<LogRecipient> = sessions
            .iter()
            .filter_map(|(key, s)| {
                let min = s.log_level.filter(|min| rank(level) >= rank(*min))?;
                Some(LogRecipient {
                    recipient: Recipient {
                        key: *key,
                        peer: s.peer.clone(),
                    },
                    min_level: min,
                })
            })
            .collect();
        // The most verbose level of each session's requests in flight.
        let mut by_request: HashMap<SessionKey, (Peer<RoleServer>, LoggingLevel)> = HashMap::new();
        for (key, peer, min) in per_request {
            if sessions.get(&key).is_some_and(|s| s.log_level.is_some()) {
                continue;
            }
            let entry = by_request.entry(key).or_insert((peer, min));
            if rank(min) < rank(entry.1) {
                entry.1 = min;
            }
        }
        receivers.extend(
            by_request
                .into_iter()
                .filter(|(_, (_, min))| rank(level) >= rank(*min))
                .map(|(key, (peer, min))| LogRecipient {
                    recipient: Recipient { key, peer },
                    min_level: min,
                }),
        );
        receivers
    }

    /// The most verbose level any open session asked for: what upstreams are asked to
    /// send (each session still gets only its own level and above).
    pub(crate) fn most_verbose_level(&self) -> Option<LoggingLevel> {
        lock(&self.sessions)
            .values()
            .filter(|s| !s.peer.is_transport_closed())
            .filter_map(|s| s.log_level)
            .min_by_key(|level| rank(*level))
    }

    /// Every open session (for `list_changed` notifications).
    pub(crate) fn all_sessions(&self) -> Vec<Recipient> {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| !s.peer.is_transport_closed());
        sessions
            .iter()
            .map(|(key, s)| Recipient {
                key: *key,
                peer: s.peer.clone(),
            })
            .collect()
    }

    /// Queues progress of the call `origin` (already carrying the client's progress token)
    /// for its session: past [`MAX_WAITING_PROGRESS`] of its token waiting, it replaces the
    /// newest of them. `ticket` is let go once it is sent, replaced or dropped.
    pub(crate) fn relay_progress(
        &self,
        origin: &CallOrigin,
        progress: ProgressNotificationParam,
        ticket: RelayTicket,
    ) {
        self.outboxes.push(
            QueueKey::Session(origin.session),
            || Target::Session(origin.peer.clone()),
            Item::Progress(progress, ticket),
        );
    }

    /// Queues a log message of `server` for each of `receivers` (see
    /// [`BackChannel::log_receivers`]); past [`MAX_QUEUED_LOGS`] waiting for a session it is
    /// dropped, and counted in one note.
    pub(crate) fn relay_log(
        &self,
        server: &str,
        receivers: Vec<LogRecipient>,
        message: LoggingMessageNotificationParam,
    ) {
        for LogRecipient {
            recipient,
            min_level,
        } in receivers
        {
            self.outboxes.push(
                QueueKey::Session(recipient.key),
                || Target::Session(recipient.peer.clone()),
                Item::Log {
                    server: server.to_owned(),
                    message: message.clone(),
                    min_level,
                },
            );
        }
    }

    /// Queues a change notification (`list_changed`, `resources/updated`) for each of
    /// `recipients`; one of each kind waits per session.
    pub(crate) fn relay_change(
        &self,
        recipients: Vec<Recipient>,
        notification: &ServerNotification,
    ) {
        for recipient in recipients {
            self.outboxes.push(
                QueueKey::Session(recipient.key),
                || Target::Session(recipient.peer.clone()),
                Item::Change(notification.clone()),
            );
        }
    }

    /// Subscribes the session to `uri` of `server`. `Ok(true)` when no session held that
    /// subscription before (the caller subscribes upstream).
    pub(crate) fn subscribe(
        &self,
        key: SessionKey,
        peer: &Peer<RoleServer>,
        server: &str,
        uri: &str,
    ) -> Result<bool, String> {
        self.open_session(key, peer, None);
        let mut sessions = lock(&self.sessions);
        let entry = (server.to_owned(), uri.to_owned());
        let first = !sessions.values().any(|s| s.subscriptions.contains(&entry));
        let Some(session) = sessions.get_mut(&key) else {
            return Ok(first);
        };
        if !session.subscriptions.contains(&entry)
            && session.subscriptions.len() >= MAX_SUBSCRIPTIONS_PER_SESSION
        {
            return Err(format!(
                "this session already has {MAX_SUBSCRIPTIONS_PER_SESSION} resource subscriptions, \
                 the most mcpproxy keeps for one session; unsubscribe from some first"
            ));
        }
        session.subscriptions.insert(entry);
        Ok(first)
    }

    /// Drops the session's subscription; `true` when no session holds it any more.
    pub(crate) fn unsubscribe(&self, key: SessionKey, server: &str, uri: &str) -> bool {
        let mut sessions = lock(&self.sessions);
        let entry = (server.to_owned(), uri.to_owned());
        if let Some(session) = sessions.get_mut(&key) {
            session.subscriptions.remove(&entry);
        }
        !sessions.values().any(|s| s.subscriptions.contains(&entry))
    }

    /// The sessions subscribed to `uri` of `server`.
    pub(crate) fn subscribers(&self, server: &str, uri: &str) -> Vec<Recipient> {
        let entry = (server.to_owned(), uri.to_owned());
        lock(&self.sessions)
            .iter()
            .filter(|(_, s)| s.subscriptions.contains(&entry))
            .map(|(key, s)| Recipient {
                key: *key,
                peer: s.peer.clone(),
            })
            .collect()
    }
}

/// Severity order of MCP log levels (syslog's).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The part of a client request's `_meta` that is the client's to pass on: everything but
/// the progress token (the upstream gets one of the proxy's, mapped back by the back channel) and
/// the `io.modelcontextprotocol/` keys of the client's own session. `None` when nothing
/// is left, or when it is larger than [`MAX_FORWARDED_META_BYTES`].
pub(crate) fn forwardable_meta(meta: &RequestMetaObject) -> Option<RequestMetaObject> {
    let kept: serde_json::Map<String, serde_json::Value> = meta
        .0
        .iter()
        .filter(|(key, _)| {
            key.as_str() != "progressToken" && !key.starts_with("io.modelcontextprotocol/")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if kept.is_empty() {
        return None;
    }
    let size = serde_json::to_vec(&kept).map_or(usize::MAX, |b| b.len());
    if size > MAX_FORWARDED_META_BYTES {
        tracing::debug!(size, "a request _meta too large to forward was dropped");
        return None;
    }
    Some(RequestMetaObject(kept.into()))
}

/// The per-request lifecycle `_meta` of a client on protocol 2026-07-28 or later (version,
/// capabilities, client info, log level); `None` for a client of an earlier version.
pub(crate) fn protocol_meta(
    version: Option<rmcp::model::ProtocolVersion>,
    capabilities: Option<ClientCapabilities>,
    client: Option<rmcp::model::Implementation>,
    request: &RequestMetaObject,
) -> Option<(rmcp::model::ProtocolVersion, RequestMetaObject)> {
    let version = version?;
    if version.as_str() < rmcp::model::ProtocolVersion::V_2026_07_28.as_str() {
        return None;
    }
    let mut meta = RequestMetaObject::default();
    meta.set_protocol_version(version.clone());
    meta.set_client_capabilities(capabilities.unwrap_or_default());
    if let Some(client) = client {
        meta.set_client_info(client);
    }
    if let Some(level) = request.log_level() {
        meta.set_log_level(level);
    }
    Some((version, meta))
}

/// Why a server-to-client request got no answer from the client.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    #[error("{client} did not answer within {} s", timeout.as_secs())]
    Timeout { client: String, timeout: Duration },
    #[error("{client} could not be asked: {message}")]
    Failed { client: String, message: String },
}

/// Sends `request` to the client of `origin` on the stream of the request that caused
/// it, and waits at most `timeout` for the answer. Also ends when the client cancels the
/// call.
pub(crate) async fn ask_client(
    origin: &CallOrigin,
    mut request: ServerRequest,
    timeout: Duration,
) -> Result<ClientResult, AskError> {
    request
        .extensions_mut()
        .insert(OriginatingRequestId(origin.request_id.clone()));
    let peer = origin.peer.clone();
    let client = origin.describe_client();
    // A task of its own: rmcp marks a request sent from inside a request handler with that
    // handler's request id, which here would be the upstream's, not the client's.
    let sent = tokio::spawn(async move { peer.send_request(request).await });
    let abort = sent.abort_handle();
    let result = tokio::select! {
        joined = tokio::time::timeout(timeout, sent) => joined,
        () = origin.cancelled.cancelled() => {
            abort.abort();
            return Err(AskError::Failed {
                client,
                message: "the call was cancelled".into(),
            });
        }
    };
    match result {
        Err(_) => {
            abort.abort();
            Err(AskError::Timeout { client, timeout })
        }
        Ok(Err(join)) => Err(AskError::Failed {
            client,
            message: join.to_string(),
        }),
        Ok(Ok(Err(e))) => Err(AskError::Failed {
            client,
            message: e.to_string(),
        }),
        Ok(Ok(Ok(answer))) => Ok(answer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::back_channel::outbox::{DROPPED_NOTE_LOGGER, MAX_QUEUED_LOGS, MAX_WAITING_PROGRESS};

    #[test]
    fn forwardable_meta_drops_the_token_and_session_keys_and_caps_size() {
        let mut meta = RequestMetaObject::default();
        meta.0.insert("progressToken".into(), 7.into());
        meta.0.insert(
            "io.modelcontextprotocol/protocolVersion".into(),
            "2026-07-28".into(),
        );
        meta.0.insert("traceparent".into(), "00-abc".into());
        let kept = forwardable_meta(&meta).expect("traceparent stays");
        assert_eq!(kept.0.len(), 1);
        assert_eq!(kept.0["traceparent"], "00-abc");

        let mut only_token = RequestMetaObject::default();
        only_token.0.insert("progressToken".into(), 1.into());
        assert!(forwardable_meta(&only_token).is_none());

        let mut huge = RequestMetaObject::default();
        huge.0.insert(
            "blob".into(),
            "x".repeat(MAX_FORWARDED_META_BYTES + 1).into(),
        );
        assert!(forwardable_meta(&huge).is_none());
    }

    #[test]
    fn log_levels_are_ordered_by_severity() {
        assert!(rank(LoggingLevel::Error) > rank(LoggingLevel::Warning));
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
        assert_eq!(rank(LoggingLevel::Emergency), 7);
    }

    /// A real client session's server-side peer (an rmcp server and client over an
    /// in-memory pipe), to register in the back channel.
    struct Quiet;
    impl rmcp::ServerHandler for Quiet {}

    async fn session() -> (
        Peer<RoleServer>,
        rmcp::service::RunningService<RoleServer, Quiet>,
        rmcp::service::RunningService<rmcp::RoleClient, ()>,
    ) {
        use rmcp::ServiceExt;
        let (server_io, client_io) = tokio::io::duplex(64 << 10);
        let server = tokio::spawn(async move { Quiet.serve(server_io).await });
        let client = ().serve(client_io).await.expect("client session");
        let server = server.await.expect("join").expect("server session");
        (server.peer().clone(), server, client)
    }

    fn origin(session: SessionKey, peer: &Peer<RoleServer>, request: i64) -> CallOrigin {
        CallOrigin {
            session,
            peer: peer.clone(),
            request_id: RequestId::Number(request),
            progress_token: Some(ProgressToken(rmcp::model::NumberOrString::Number(request))),
            capabilities: None,
            meta: None,
            cancelled: CancellationToken::new(),
            client: None,
            session_id: None,
            input_responses: None,
            request_state: None,
            protocol: None,
            stateless: false,
        }
    }

    fn token(n: i64) -> ProgressToken {
        ProgressToken(rmcp::model::NumberOrString::Number(n))
    }

    #[tokio::test]
    async fn calls_are_found_by_progress_token_and_request_id_until_they_end() {
        let (peer, _server, _client) = session().await;
        let channel = BackChannel::new();
        let key = SessionKey::new();
        let first =
            channel.register_call("fs", RequestId::Number(7), token(70), origin(key, &peer, 1));
        let second =
            channel.register_call("fs", RequestId::Number(8), token(80), origin(key, &peer, 2));
        let other =
            channel.register_call("gh", RequestId::Number(7), token(70), origin(key, &peer, 3));

        let (found, ticket) = channel
            .origin_by_progress("fs", &token(80))
            .expect("by token");
        assert_eq!(found.request_id, RequestId::Number(2));
        drop(ticket);
        assert!(channel.origin_by_progress("fs", &token(99)).is_none());
        // The same token on another server is another call.
        let (found, _) = channel.origin_by_progress("gh", &token(70)).expect("gh");
        assert_eq!(found.request_id, RequestId::Number(3));

        // Associated by request id; without one, the newest call to that server.
        let by_id = channel
            .origin_for_request("fs", Some(&RequestId::Number(7)))
            .unwrap();
        assert_eq!(by_id.request_id, RequestId::Number(1));
        let newest = channel.origin_for_request("fs", None).unwrap();
        assert_eq!(newest.request_id, RequestId::Number(2));

        assert_eq!(channel.calls_in_flight(), 3);
        drop(second);
        assert_eq!(
            channel.origin_for_request("fs", None).unwrap().request_id,
            RequestId::Number(1)
        );
        drop((first, other));
        assert_eq!(channel.calls_in_flight(), 0);
        assert!(channel.origin_for_request("fs", None).is_none());
    }

    /// A back channel with one call of server `fs` in flight (progress token 1).
    fn one_call(peer: &Peer<RoleServer>) -> (Arc<BackChannel>, CallGuard) {
        let channel = BackChannel::new();
        let call = channel.register_call(
            "fs",
            RequestId::Number(1),
            token(1),
            origin(SessionKey::new(), peer, 1),
        );
        (channel, call)
    }

    #[tokio::test]
    async fn a_counted_settle_waits_for_that_many_relays_to_start_and_end() {
        let (peer, _server, _client) = session().await;
        let (channel, call) = one_call(&peer);
        call.settle_counted(0).await;
        let relaying = channel.clone();
        let relays = tokio::spawn(async move {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(2)).await;
                let (_, ticket) = relaying.origin_by_progress("fs", &token(1)).unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                drop(ticket);
            }
        });
        call.settle_counted(2).await;
        assert_eq!(call.relays.started.load(Ordering::Acquire), 2);
        assert_eq!(call.relays.active.load(Ordering::Acquire), 0);
        relays.await.unwrap();
    }

    #[tokio::test]
    async fn a_counted_settle_gives_up_on_a_notification_never_relayed() {
        let (peer, _server, _client) = session().await;
        let (_channel, call) = one_call(&peer);
        let started = tokio::time::Instant::now();
        call.settle_counted(1).await;
        // It returns (no relay ever starts), and not before the limit.
        assert!(started.elapsed() >= SETTLE_LIMIT);
    }

    #[tokio::test]
    async fn a_call_settles_at_once_without_progress_and_waits_for_relays_in_flight() {
        let (peer, _server, _client) = session().await;
        let (channel, call) = one_call(&peer);
        call.settle().await;
        let (_, ticket) = channel.origin_by_progress("fs", &token(1)).unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            drop(ticket);
        });
        call.settle().await;
        assert_eq!(
            call.relays.active.load(Ordering::Acquire),
            0,
            "settle waited for the relay"
        );
        release.await.unwrap();
    }

    #[tokio::test]
    async fn log_levels_pick_the_sessions_that_asked_and_none_that_did_not() {
        let (quiet_peer, _s1, _c1) = session().await;
        let (debug_peer, _s2, _c2) = session().await;
        let (error_peer, _s3, _c3) = session().await;
        let (modern_peer, _s4, _c4) = session().await;
        let channel = BackChannel::new();
        let (quiet, debug, error) = (SessionKey::new(), SessionKey::new(), SessionKey::new());
        channel.open_session(quiet, &quiet_peer, None);
        channel.set_log_level(debug, &debug_peer, LoggingLevel::Debug);
        channel.set_log_level(error, &error_peer, LoggingLevel::Error);
        assert_eq!(channel.most_verbose_level(), Some(LoggingLevel::Debug));
        assert_eq!(channel.log_receivers("fs", LoggingLevel::Info).len(), 1);
        assert_eq!(channel.log_receivers("fs", LoggingLevel::Critical).len(), 2);
        // A session that set no level hears nothing, even from a server it has a call in
        // flight to.
        let _call = channel.register_call(
            "fs",
            RequestId::Number(1),
            token(1),
            origin(quiet, &quiet_peer, 1),
        );
        assert_eq!(channel.log_receivers("fs", LoggingLevel::Info).len(), 1);
        assert_eq!(
            channel.log_receivers("fs", LoggingLevel::Emergency).len(),
            2
        );
        // A 2026-07-28 request that set its own level hears the server it calls, at that
        // level and above, while it is in flight.
        let modern = SessionKey::new();
        let mut request = origin(modern, &modern_peer, 2);
        let mut meta = RequestMetaObject::default();
        meta.set_log_level(LoggingLevel::Warning);
        request.protocol = Some((rmcp::model::ProtocolVersion::V_2026_07_28, meta));
        let call = channel.register_call("fs", RequestId::Number(2), token(2), request);
        assert_eq!(channel.log_receivers("fs", LoggingLevel::Info).len(), 1);
        assert_eq!(channel.log_receivers("fs", LoggingLevel::Warning).len(), 2);
        assert_eq!(channel.log_receivers("gh", LoggingLevel::Warning).len(), 1);
        drop(call);
        assert_eq!(channel.log_receivers("fs", LoggingLevel::Warning).len(), 1);
        assert_eq!(channel.all_sessions().len(), 3);
    }

    /// A server session whose client is the test itself, byte by byte, over a pipe of
    /// `pipe` bytes: nothing is read from it until the test reads its lines.
    async fn unread_session(
        pipe: usize,
    ) -> (
        Peer<RoleServer>,
        rmcp::service::RunningService<RoleServer, Quiet>,
        tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
        tokio::io::WriteHalf<tokio::io::DuplexStream>,
    ) {
        use rmcp::ServiceExt;
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let (server_io, client_io) = tokio::io::duplex(pipe);
        let (read, mut write) = tokio::io::split(client_io);
        let server = tokio::spawn(async move { Quiet.serve(server_io).await });
        let initialize = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "slow", "version": "1"}}
        });
        write
            .write_all(format!("{initialize}\n").as_bytes())
            .await
            .unwrap();
        let mut lines = tokio::io::BufReader::new(read).lines();
        let answer = lines.next_line().await.unwrap().unwrap();
        assert!(answer.contains("\"result\""), "{answer}");
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
        let server = server.await.expect("join").expect("server session");
        (server.peer().clone(), server, lines, write)
    }

    fn message(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    #[tokio::test]
    async fn logs_for_a_client_that_does_not_read_are_capped_and_the_drop_told_once() {
        let (peer, _server, mut lines, _write) = unread_session(4096).await;
        let channel = BackChannel::new();
        let key = SessionKey::new();
        channel.set_log_level(key, &peer, LoggingLevel::Info);
        // Queued while nothing runs (one thread, no await): the client reads none of them
        // meanwhile.
        let sent = 2000;
        for n in 0..sent {
            let receivers = channel.log_receivers("fs", LoggingLevel::Info);
            assert_eq!(receivers.len(), 1);
            let mut log = LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                format!("{n:05} {}", "x".repeat(1000)).into(),
            );
            log.logger = Some("fs".into());
            channel.relay_log("fs", receivers, log);
            // Below the client's level: not queued at all.
            assert!(channel.log_receivers("fs", LoggingLevel::Debug).is_empty());
        }
        assert_eq!(channel.outboxes.len(), 1);
        let mut received = Vec::new();
        let note = loop {
            let line = lines.next_line().await.unwrap().expect("a line");
            let message = message(&line);
            assert_eq!(message["method"], "notifications/message", "{message}");
            if message["params"]["logger"] == DROPPED_NOTE_LOGGER {
                break message;
            }
            received.push(message["params"]["data"].as_str().unwrap()[..5].to_owned());
        };
        assert_eq!(received.len(), MAX_QUEUED_LOGS, "the cap, no more");
        assert_eq!(received[0], "00000");
        assert_eq!(
            received[MAX_QUEUED_LOGS - 1],
            format!("{:05}", MAX_QUEUED_LOGS - 1)
        );
        assert_eq!(note["params"]["level"], "warning");
        let text = note["params"]["data"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("{} messages dropped", sent - MAX_QUEUED_LOGS)),
            "{text}"
        );
        // The queue is forgotten once drained.
        for _ in 0..100 {
            if channel.outboxes.len() == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(channel.outboxes.len(), 0);
    }

    #[tokio::test]
    async fn progress_waiting_for_a_slow_client_is_bounded_and_keeps_the_latest_of_each_token() {
        let (peer, _server, mut lines, _write) = unread_session(4096).await;
        let channel = BackChannel::new();
        let key = SessionKey::new();
        let first =
            channel.register_call("fs", RequestId::Number(7), token(70), origin(key, &peer, 1));
        let second =
            channel.register_call("fs", RequestId::Number(8), token(80), origin(key, &peer, 2));
        for step in 1..=500 {
            for upstream in [70, 80] {
                let (origin, ticket) = channel
                    .origin_by_progress("fs", &token(upstream))
                    .expect("in flight");
                let client_token = origin.progress_token.clone().expect("asked for progress");
                let progress =
                    ProgressNotificationParam::new(client_token, f64::from(step)).with_total(500.0);
                channel.relay_progress(&origin, progress, ticket);
            }
        }
        // One taken up late (below the newest waiting, which it would replace) is stale.
        let (origin, ticket) = channel.origin_by_progress("fs", &token(70)).unwrap();
        let client_token = origin.progress_token.clone().unwrap();
        channel.relay_progress(
            &origin,
            ProgressNotificationParam::new(client_token, 250.0),
            ticket,
        );
        // A change queued after them comes after them.
        channel.open_session(key, &peer, None);
        channel.relay_change(
            channel.all_sessions(),
            &ServerNotification::ToolListChangedNotification(Default::default()),
        );
        let mut seen = Vec::new();
        loop {
            let line = lines.next_line().await.unwrap().expect("a line");
            let message = message(&line);
            if message["method"] == "notifications/tools/list_changed" {
                break;
            }
            assert_eq!(message["method"], "notifications/progress", "{message}");
            seen.push((
                message["params"]["progressToken"].as_i64().unwrap(),
                message["params"]["progress"].as_f64().unwrap(),
            ));
        }
        // The first few of each token as they came, then the latest in place of the rest.
        let mut expected = Vec::new();
        for step in 1..MAX_WAITING_PROGRESS {
            expected.extend([(1, step as f64), (2, step as f64)]);
        }
        expected.extend([(1, 500.0), (2, 500.0)]);
        assert_eq!(seen, expected);
        // Every relay has ended (sent or replaced): the answers need not wait.
        first.settle().await;
        second.settle().await;
        assert_eq!(first.relays.started.load(Ordering::Acquire), 501);
        assert_eq!(first.relays.active.load(Ordering::Acquire), 0);
        assert_eq!(second.relays.active.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_closed_session_forgets_what_waits_for_it() {
        let (peer, _server, _lines, _write) = unread_session(1024).await;
        let channel = BackChannel::new();
        let key = SessionKey::new();
        channel.set_log_level(key, &peer, LoggingLevel::Debug);
        let call =
            channel.register_call("fs", RequestId::Number(1), token(1), origin(key, &peer, 1));
        let (origin, ticket) = channel.origin_by_progress("fs", &token(1)).unwrap();
        channel.relay_progress(
            &origin,
            ProgressNotificationParam::new(token(1), 1.0),
            ticket,
        );
        for n in 0..10 {
            channel.relay_log(
                "fs",
                channel.log_receivers("fs", LoggingLevel::Info),
                LoggingMessageNotificationParam::new(LoggingLevel::Info, n.into()),
            );
        }
        assert_eq!(channel.outboxes.len(), 1);
        channel.close_session(key);
        assert_eq!(channel.outboxes.len(), 0);
        assert_eq!(
            call.relays.active.load(Ordering::Acquire),
            0,
            "the waiting progress was let go"
        );
    }

    #[tokio::test]
    async fn subscriptions_are_shared_counted_bounded_and_released_on_close() {
        let (peer_a, _s1, _c1) = session().await;
        let (peer_b, _s2, _c2) = session().await;
        let channel = BackChannel::new();
        let (a, b) = (SessionKey::new(), SessionKey::new());
        assert_eq!(channel.subscribe(a, &peer_a, "fs", "file:///x"), Ok(true));
        assert_eq!(channel.subscribe(b, &peer_b, "fs", "file:///x"), Ok(false));
        assert_eq!(channel.subscribers("fs", "file:///x").len(), 2);
        assert!(
            !channel.unsubscribe(a, "fs", "file:///x"),
            "b still holds it"
        );
        assert_eq!(channel.subscribers("fs", "file:///x").len(), 1);
        assert_eq!(channel.subscribe(b, &peer_b, "fs", "file:///y"), Ok(true));
        let mut orphaned = channel.close_session(b);
        orphaned.sort();
        assert_eq!(
            orphaned,
            vec![
                ("fs".to_owned(), "file:///x".to_owned()),
                ("fs".to_owned(), "file:///y".to_owned())
            ]
        );
        for i in 0..MAX_SUBSCRIPTIONS_PER_SESSION {
            assert!(
                channel
                    .subscribe(a, &peer_a, "fs", &format!("u{i}"))
                    .is_ok()
            );
        }
        let refused = channel.subscribe(a, &peer_a, "fs", "one-more").unwrap_err();
        assert!(refused.contains("unsubscribe from some first"), "{refused}");
    }

    #[test]
    fn session_keys_are_unique() {
        let a = SessionKey::new();
        let b = SessionKey::new();
        assert_ne!(a, b);
    }
}

//! Client sessions: each MCP session of a client while it is open ([`SessionKey`]), with the
//! logging level it asked for and the resources it subscribed to, and which sessions a log
//! message, a change or a `resources/updated` goes to.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::LoggingLevel;
use rmcp::service::{Peer, RoleServer};

use super::channel::{BackChannel, lock};
use super::outbox::QueueKey;

/// At most this many resource subscriptions per client session.
pub(super) const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 1024;

/// One client session, for the life of its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey(u64);

impl SessionKey {
    /// A key no other session in this process has.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for SessionKey {
    fn default() -> Self {
        Self::new()
    }
}

pub(super) struct ClientSession {
    peer: Peer<RoleServer>,
    /// The server the session sees (a direct endpoint); `None`: every server.
    server: Option<String>,
    log_level: Option<LoggingLevel>,
    /// `(server, uri)` pairs.
    subscriptions: BTreeSet<(String, String)>,
}

/// A client session something is relayed to.
#[derive(Clone)]
pub struct Recipient {
    pub(super) key: SessionKey,
    pub(super) peer: Peer<RoleServer>,
}

/// A client session a log message is relayed to, and the least severe level it takes.
#[derive(Clone)]
pub struct LogRecipient {
    pub(super) recipient: Recipient,
    pub(super) min_level: LoggingLevel,
}

impl BackChannel {
    /// Registers (or refreshes) an open client session.
    pub fn open_session(&self, key: SessionKey, peer: &Peer<RoleServer>, server: Option<&str>) {
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
    pub fn direct_sessions(&self, server: &str) -> Vec<Recipient> {
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
    pub fn close_session(&self, key: SessionKey) -> Vec<(String, String)> {
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
    pub fn set_log_level(&self, key: SessionKey, peer: &Peer<RoleServer>, level: LoggingLevel) {
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
    pub fn log_receivers(&self, server: &str, level: LoggingLevel) -> Vec<LogRecipient> {
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
    pub fn most_verbose_level(&self) -> Option<LoggingLevel> {
        lock(&self.sessions)
            .values()
            .filter(|s| !s.peer.is_transport_closed())
            .filter_map(|s| s.log_level)
            .min_by_key(|level| rank(*level))
    }

    /// Every open session (for `list_changed` notifications).
    pub fn all_sessions(&self) -> Vec<Recipient> {
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

    /// Subscribes the session to `uri` of `server`. `Ok(true)` when no session held that
    /// subscription before (the caller subscribes upstream).
    pub fn subscribe(
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
    pub fn unsubscribe(&self, key: SessionKey, server: &str, uri: &str) -> bool {
        let mut sessions = lock(&self.sessions);
        let entry = (server.to_owned(), uri.to_owned());
        if let Some(session) = sessions.get_mut(&key) {
            session.subscriptions.remove(&entry);
        }
        !sessions.values().any(|s| s.subscriptions.contains(&entry))
    }

    /// The sessions subscribed to `uri` of `server`.
    pub fn subscribers(&self, server: &str, uri: &str) -> Vec<Recipient> {
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
pub(super) fn rank(level: LoggingLevel) -> u8 {
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

#[cfg(test)]
mod tests;

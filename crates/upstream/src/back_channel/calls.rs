//! The call registry: each proxied call in flight, with the upstream request id and progress
//! token it was sent with and the client request it came from ([`CallOrigin`]), so that
//! what an upstream sends about a call finds its client. A call's routes go when its
//! [`CallGuard`] is dropped.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{ClientCapabilities, LoggingLevel, ProgressToken, RequestId, RequestMetaObject};
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use super::channel::{BackChannel, lock};
use super::relay::{RelayTicket, Relays};
use super::sessions::SessionKey;

/// The client request a proxied call came from.
#[derive(Debug, Clone)]
pub struct CallOrigin {
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
    pub fn can_elicit(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(|c| c.elicitation.is_some())
    }

    /// Whether the client declared the tasks extension (for its session or in this
    /// request's `_meta`), so it can follow a task with `tasks/get`.
    pub fn can_follow_tasks(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(ClientCapabilities::supports_tasks)
    }

    pub fn can_sample(&self) -> bool {
        self.capabilities
            .as_ref()
            .is_some_and(|c| c.sampling.is_some())
    }

    /// How the client is named in messages: `client 'NAME'` or `the client`.
    pub fn describe_client(&self) -> String {
        match &self.client {
            Some(client) => format!("client '{}'", mcpproxy_support::quote(&client.name)),
            None => "the client".to_owned(),
        }
    }
}

pub(super) struct InFlight {
    pub(super) server: String,
    upstream_request: RequestId,
    upstream_progress: ProgressToken,
    pub(super) origin: CallOrigin,
    /// The log level the request itself set (protocol 2026-07-28 `_meta`), if any.
    pub(super) log_level: Option<LoggingLevel>,
    relays: Arc<Relays>,
}

#[derive(Default)]
pub(super) struct Calls {
    next: u64,
    pub(super) by_id: HashMap<u64, InFlight>,
}

/// Removes a call's routes when the call ends, however it ends.
pub struct CallGuard {
    back_channel: Arc<BackChannel>,
    id: u64,
    pub(super) relays: Arc<Relays>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        lock(&self.back_channel.calls).by_id.remove(&self.id);
    }
}

impl BackChannel {
    /// Routes what the upstream `server` sends about its request `upstream_request`
    /// (progress token `upstream_progress`) to `origin`, until the guard is dropped.
    pub fn register_call(
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
    pub fn origin_by_progress(
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
    pub fn origin_for_request(
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
    pub fn calls_in_flight(&self) -> usize {
        lock(&self.calls).by_id.len()
    }
}

#[cfg(test)]
mod tests;

//! The back channel itself ([`BackChannel`]): the tables every route is kept in (calls in
//! flight, client sessions, listen streams), the queues to clients, and who is told about
//! server-to-client requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::asking::RequestObserver;
use super::calls::Calls;
use super::listeners::Listeners;
use super::outbox::Outboxes;
use super::sessions::{ClientSession, SessionKey};

/// Every route back from upstreams to clients.
#[derive(Default)]
pub struct BackChannel {
    pub(super) calls: Mutex<Calls>,
    pub(super) sessions: Mutex<HashMap<SessionKey, ClientSession>>,
    pub(super) listeners: Mutex<Listeners>,
    pub(super) outboxes: Arc<Outboxes>,
    pub(super) observer: OnceLock<Arc<dyn RequestObserver>>,
}

pub(super) use mcpproxy_support::lock;

impl BackChannel {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
}

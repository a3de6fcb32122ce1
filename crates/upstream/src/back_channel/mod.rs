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

mod asking;
mod calls;
mod channel;
mod listeners;
mod outbox;
mod relay;
mod sessions;
#[cfg(test)]
mod test_support;

pub use asking::{AskError, ForwardedRequest, RelayGuard, RequestObserver, ask_client};
pub use calls::CallOrigin;
pub use channel::BackChannel;
pub use listeners::ListenerGuard;
pub use relay::{forwardable_meta, protocol_meta};
pub use sessions::{Recipient, SessionKey};

//! Upstream MCP servers: one long-lived rmcp client session per configured server (stdio
//! child process or streamable HTTP), shared by every proxied call.
//!
//! Each upstream has a supervisor task that connects, lists tools, keeps the registry and
//! the search index current (on `notifications/tools/list_changed` and on a periodic
//! sweep), notices when the session dies, and reconnects with capped exponential backoff.
//! Calls take the current session's peer, so many can be in flight at once.
//!
//! Every listing is vetted against the trust store (`vetting`): a quarantined server is
//! connected and listed but none of its tools is searchable or callable until a person
//! approves it; on other servers, tools that are new or changed since they were pinned are
//! held back, and each change is reported on the [`Upstreams::take_changes`] channel.
//!
//! Beside the sessions, what they need and nothing above them: `back_channel` (a server's
//! requests and notifications about a call, sent back to the client whose call caused
//! them), `index` (the BM25 search over every upstream tool), `oauth` (the OAuth 2.1 login
//! to a server that asks for one, built on rmcp's authorization manager) and `line_guard`
//! (newline-delimited JSON-RPC read from a pipe, with a line cap).

pub mod back_channel;
pub mod index;
pub mod line_guard;
pub mod oauth;

mod call_result;
mod child;
mod convert;
mod error;
mod explain;
mod handler;
mod lane;
mod lazy;
mod lifecycle;
mod listing;
pub mod log;
mod login;
mod reach;
mod references;
mod refusals;
mod requests;
mod sandbox;
mod server;
mod state;
mod supervisor;
mod upstreams;
mod vetting;
mod watch;

pub use convert::tool_from_mcp;
pub use error::Error;
pub use login::LoginError;
pub use requests::{CallAnswer, UpstreamStream};
pub use sandbox::SandboxStatus;
pub use server::{Upstream, WireTools};
pub use state::{ServerStatus, State, TransportKind};
pub use upstreams::{AppliedChanges, LaunchApprovalError, SandboxPaths, Upstreams};
pub use vetting::{Approval, ChangeKind, ToolChange};

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

mod call_result;
mod child;
mod convert;
mod error;
mod handler;
mod lane;
mod lifecycle;
mod listing;
pub(crate) mod log;
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

pub(crate) use convert::tool_from_mcp;
pub(crate) use error::Error;
pub(crate) use login::LoginError;
pub(crate) use requests::{CallAnswer, UpstreamStream};
pub(crate) use sandbox::SandboxStatus;
pub(crate) use server::{Upstream, WireTools};
pub(crate) use state::{ServerStatus, State, TransportKind};
pub(crate) use upstreams::{AppliedChanges, LaunchApprovalError, SandboxPaths, Upstreams};
pub(crate) use vetting::{Approval, ChangeKind, ToolChange};

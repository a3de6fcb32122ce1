//! The MCP server clients talk to, over streamable HTTP and stdio, in two views:
//!
//! - **Aggregate** (`/mcp`, `serve --stdio`): the built-in tools (`retrieve_tools`, the
//!   three call variants and, when offered, `upstream_servers`), and every upstream's
//!   prompts, resources and templates, named `server:name`.
//! - **Direct** (`/mcp/servers/NAME`, `serve --stdio --server NAME`): one upstream's
//!   trusted tools, prompts and resources under their own names; each tool call is judged
//!   as the variant its effective annotations call for.
//!
//! Both pass on what upstreams send about a client's request (progress, log messages,
//! elicitation and sampling requests, resource updates) through the [`mcpproxy_upstream::back_channel`].
//!
//! Tool-level failures (a policy rejection, an upstream error, bad arguments) come back as a
//! `CallToolResult` with `isError: true` and a message an agent can act on; the upstream's
//! own results pass through unchanged. Protocol misuse (an unknown tool) is a JSON-RPC error,
//! and so is a call refused by a rate limit (`rate_limited`: over HTTP with status 429).

mod builtin_calls;
mod client_login;
mod client_session;
mod code_tool;
mod direct;
pub mod http;
mod json_reply;
mod manage_tool;
mod rate_limited;
mod scoped;
mod server;
pub mod sessions;
pub mod sticky;
mod tools;

use builtin_calls::call_result;
use server::catalog_error;

pub use server::ProxyServer;
pub use tools::{LEGACY_CALL_TOOL_MESSAGE, builtin_tools_with};

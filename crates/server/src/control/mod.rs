//! One owner per data dir, many front-ends.
//!
//! The process that holds the activity journal (redb lets one process open it) is the
//! data dir's **owner**. It also listens on the control socket `<data_dir>/mcpproxy.sock`, a
//! Unix socket of mode 0600: the file's permissions are the authentication, so only the user
//! who owns the data dir can reach it. On that socket the owner answers
//!
//! - HTTP/1.1: the same routes as its TCP listener (`/mcp`, `/api/v1`, `/metrics`, `/`),
//!   which the CLI uses to list activity, call tools and manage upstreams; and
//! - newline-delimited JSON-RPC: an MCP session exactly as on stdio, which a front-end
//!   `serve --stdio` forwards its IDE's session to. The first byte tells them apart (`{`
//!   starts JSON-RPC; HTTP starts with a method name).
//!
//! Every other mcpproxy process on the data dir is a front-end: [`bridge`] carries an IDE's
//! stdio session to the owner (and back to a new owner after the owner restarts), [`relay`]
//! forwards TCP connections when the owner serves stdio only. [`owner`] binds and serves the
//! socket. [`attach`] is the first line a front-end may send (`@server NAME`, `@watch`).
//! [`holder`] names the process that holds a data dir, for the message of a second
//! would-be owner.
//!
//! When the owner stops or dies, its front-ends take over: each that notices (the bridge's
//! session ends, the relay's `@watch` connection ends) tells its process, which tries to
//! open the journal and become the owner. redb lets one process have it, so exactly one
//! wins; the others find the winner's socket and attach to it. The bridge and the relay
//! hold what arrives meanwhile for a few seconds instead of failing it.

pub mod attach;
pub mod bridge;
pub mod holder;
pub mod owner;
pub mod relay;
mod socket;

pub use socket::{Error, SOCKET_FILE, answers, check_length, connect, socket_path};

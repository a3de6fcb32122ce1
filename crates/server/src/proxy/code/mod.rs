//! The `code_execution` tool: a JavaScript script run in the sandboxed runtime of
//! `mcpproxy-plugin-host`, whose every `call_tool` is a real call through the proxy.
//! `request` checks the arguments, `run` runs a script and records it, `inner` makes the
//! script's calls.

mod inner;
mod request;
mod run;

pub use request::parse_code_request;
pub use run::{CodeExecutor, CodeReport};

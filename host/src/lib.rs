//! mcpproxy: an MCP proxy whose security policy runs as sandboxed WebAssembly components.
//!
//! - [`plugin`] loads and runs the policy plugins (the `wit/` contract);
//! - [`policy`] is the call pipeline built on them: annotate, validate, combine;
//! - [`cli`] is the `mcpproxy` command line.

pub mod cli;
pub mod plugin;
pub mod policy;

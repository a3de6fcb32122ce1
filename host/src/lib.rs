//! mcpproxy: an MCP proxy whose security policy runs as sandboxed WebAssembly components.
//!
//! This crate is the top of the workspace: the `mcpproxy` command line ([`run`]), which
//! parses its arguments, calls the running proxy (`mcpproxy-server`) or the lower crates,
//! and prints. Everything else lives below it, in crates that cannot name it: the running
//! proxy and its front ends (`mcpproxy-server`), the upstream sessions (`mcpproxy-upstream`),
//! the cluster (`mcpproxy-cluster`), the plugin host and the author's kit, the journal
//! (`mcpproxy-activity`), trust, auth, rate limits, the config, the vocabulary, the sandbox,
//! the egress proxy and the helpers (docs/architecture.md draws the graph).
//!
//! The public surface is what the binary needs.

mod cli;

pub use cli::run;

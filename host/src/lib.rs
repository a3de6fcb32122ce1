//! mcpproxy: an MCP proxy whose security policy runs as sandboxed WebAssembly components.
//!
//! - [`plugin`] loads and runs the policy plugins (the `wit/` contract);
//! - [`policy`] is the call pipeline built on them: annotate, validate, combine;
//! - [`config`] reads and validates `mcp_config.json`;
//! - [`upstream`] keeps one MCP client session per upstream server;
//! - [`index`] is the BM25 search over every upstream tool;
//! - [`proxy`] is the shared core: resolve, judge, call; search;
//! - [`mcp`] is the MCP server clients talk to (HTTP and stdio);
//! - [`activity`] is the audit trail: records, the redb journal, queries, retention;
//! - [`delivery`] feeds the audit trail to sink plugins in the background;
//! - [`api`] is the REST API under `/api/v1`;
//! - [`cli`] is the `mcpproxy` command line.

pub mod activity;
pub mod api;
pub mod cli;
pub mod config;
pub mod delivery;
pub mod index;
pub mod mcp;
pub mod plugin;
pub mod policy;
pub mod proxy;
pub mod upstream;

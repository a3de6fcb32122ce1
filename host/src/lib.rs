//! mcpproxy: an MCP proxy whose security policy runs as sandboxed WebAssembly components.
//!
//! This crate is the top of the workspace: the MCP server, the running proxy, the REST
//! API, the page and the command line. Below it, and unable to name it: `mcpproxy-plugin-host`
//! (wasmtime, the WIT worlds, the embedded plugins), `mcpproxy-activity` (the journal),
//! `mcpproxy-upstream` (the client sessions to upstream servers, the back channel, the tool
//! index, OAuth logins), `mcpproxy-cluster` (the state replicas share, the cluster's
//! journal), `mcpproxy-trust` (approvals, pins, holds), `mcpproxy-rate-limit` (token
//! buckets), `mcpproxy-auth`
//! (credentials, client tokens, the loopback rule, masking),
//! `mcpproxy-config` (`mcp_config.json` read and validated), `mcpproxy-policy` (the
//! vocabulary and the pipeline), and the sandbox, the egress proxy and the helpers.
//!
//! Its modules in layers, bottom up; a module uses only modules of lower layers (the
//! architecture test in `tests/architecture.rs` checks it, `docs/architecture.md` draws it):
//!
//! 0. `listener` (the TCP listener: connection cap, header timeout, shutdown), `metrics`
//!    (Prometheus);
//! 1. `telemetry` (OTLP export of the call spans), `scoping` (what a logged-in caller sees);
//! 2. `control` (one owner per data dir: its socket; the bridge and relay of every other
//!    process);
//! 3. `proxy`: the shared core: resolve, judge, call, record; search;
//! 4. `runtime` (the running proxy built from a `Config`), `manage` (changes to the
//!    upstream servers while running, validated, written back, applied);
//! 5. `mcp`, `api`, `web`: the MCP server (HTTP and stdio), the REST API under `/api/v1`,
//!    the page at `/`;
//! 6. `cli`: the `mcpproxy` command line ([`run`]).
//!
//! The public surface is what the binary, the benches and the black-box tests need.

mod api;
mod cli;
mod control;
mod listener;
mod manage;
mod mcp;
mod metrics;
mod proxy;
mod runtime;
mod scoping;
mod telemetry;
mod web;

pub use cli::run;
pub use proxy::{parse_call, split_name};

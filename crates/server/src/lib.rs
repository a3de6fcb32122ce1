//! The running proxy: the shared core every call passes (resolve, judge, call, record), the
//! proxy built from a config and changed while it runs, the MCP endpoint (HTTP and stdio),
//! the REST API, the page, the metrics, the trace export and the owner of a data dir.
//!
//! Its modules in layers, bottom up; a module uses only modules of lower layers (the
//! architecture test in `tests/architecture.rs` checks it, `docs/architecture.md` draws it):
//!
//! 0. `listener` (the TCP listener: connection cap, header timeout, shutdown), `metrics`
//!    (Prometheus), `watch` (a directory's changes, settled);
//! 1. `telemetry` (OTLP export of the call spans), `scoping` (what a logged-in caller sees);
//! 2. `control` (one owner per data dir: its socket; the bridge and relay of every other
//!    process);
//! 3. `proxy`: the shared core: resolve, judge, call, record; search;
//! 4. `runtime` (the running proxy built from a `Config`), `manage` (changes to the
//!    upstream servers while running, validated, written back, applied);
//! 5. `mcp`, `api`, `web`: the MCP server (HTTP and stdio), the REST API under `/api/v1`,
//!    the page at `/`;
//! 6. `serve`: the one entry point, [`Server::builder`]: owns the data dir (or fronts its
//!    owner), puts the parts together and serves them over HTTP or stdio.
//!
//! Below it, and unable to name it: the upstream sessions (`mcpproxy-upstream`), the
//! cluster's shared state, the plugin host, the journal, trust, auth, the config and the
//! vocabulary. Above it only the command line (`mcpproxy`), which parses, calls this crate
//! and prints.

pub mod api;
pub mod control;
mod idle;
pub mod listener;
pub mod manage;
pub mod mcp;
pub mod metrics;
pub mod proxy;
pub mod runtime;
pub mod scoping;
pub mod serve;
pub mod telemetry;
mod watch;
pub mod web;

pub use serve::Server;

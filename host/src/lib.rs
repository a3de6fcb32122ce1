//! mcpproxy: an MCP proxy whose security policy runs as sandboxed WebAssembly components.
//!
//! Modules, from the bottom of the graph up (each imports only modules listed before it;
//! `docs/architecture.md` draws the graph):
//!
//! - [`spans`]: the tracing target of the spans exported as traces;
//! - [`secrets`], [`private_fs`]: secrets kept out of what is shown (URLs, arguments, free
//!   text masked) and out of other users' reach (data-dir files 0600, directories 0700);
//! - [`policy`]: the vocabulary of a call and the pipeline: annotator and validator stages,
//!   verdicts, the combined evaluation;
//! - [`grant`], [`limits`], [`access`]: small rules shared by several modules (the hosts a
//!   sink may reach, plugin resource limits, the loopback Host/Origin check and the bearer
//!   token);
//! - [`listener`]: the TCP listener under `/mcp` and `/api/v1` (connection cap, header-read
//!   timeout, graceful shutdown);
//! - [`activity`]: the audit trail: records, the redb journal, queries, retention, and the
//!   delivery of records to sinks;
//! - [`config`]: reads and validates `mcp_config.json`;
//! - [`telemetry`]: exports the [`spans`] to an OpenTelemetry collector (OTLP), if configured;
//! - [`plugin`]: loads and runs WebAssembly components (the `wit/` contract) as policy
//!   stages and sinks;
//! - [`trust`]: approved servers and pinned tools (quarantine, rug-pull protection), and
//!   the security analysis a reviewer reads;
//! - [`index`]: the BM25 search over every upstream tool;
//! - [`upstream`]: one MCP client session per upstream server;
//! - [`proxy`]: the shared core: resolve, judge, call, record; search;
//! - [`runtime`]: builds the running proxy from a [`config::Config`];
//! - [`manage`]: changes to the upstream servers while running (tool, CLI, REST, hand
//!   edits of the file): validated, written back, applied;
//! - [`mcp`], [`api`], [`web`]: the MCP server (HTTP and stdio), the REST API under
//!   `/api/v1` and the page at `/`;
//! - [`control`]: one owner per data dir: the owner's control socket, and the front-ends
//!   (a stdio bridge, a TCP relay) of every other process on the data dir;
//! - [`memory`]: the heap under glibc: malloc arenas capped at one per four cores, freed pages
//!   given back;
//! - [`cli`]: the `mcpproxy` command line.

mod access;
mod api;
mod back_channel;
mod cli;
mod config;
mod control;
mod index;
mod line_guard;
mod listener;
mod manage;
mod mcp;
mod metrics;
mod proxy;
mod runtime;
mod secrets;
mod telemetry;
mod trust;
mod upstream;
mod web;

pub use cli::run;
pub use config::Config;
pub use proxy::{parse_call, split_name};

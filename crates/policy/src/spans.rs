//! The spans mcpproxy opens around a call, named once. They all use the tracing target
//! [`TARGET`], which the log never prints: they exist to be exported as traces when
//! `telemetry.otlp_endpoint` is set ([`crate::telemetry`]); otherwise no subscriber wants
//! them and each costs one cached branch.
//!
//! One call is one trace: `call` (the MCP request as mcpproxy serves it) with children
//! `policy` (annotate and validate; a child `plugin` span per annotator and validator
//! run), `journal` (the record made durable) and `upstream` (the upstream `tools/call`).
//! Attributes name servers, tools, plugins and outcomes; never arguments, results or
//! messages from callers, upstreams or plugins (those may carry secrets).

/// The tracing target of every span exported as a trace.
pub const TARGET: &str = "mcpproxy::span";

//! mcpproxy's black-box and library-level integration tests: one test binary, one module per
//! area. Plugins under test are the real components built from `plugins/` by
//! crates/plugin-host/build.rs.
//!
//! A module's name starts with its area: `cli_` (commands run as a user would), `cluster_`
//! (replicas sharing one state), `journal_` (the audit trail), `mcp_` (the proxy through
//! MCP), `plugin_` (the plugin host and the plugins), `serve_` (`mcpproxy serve`, its
//! listener and what it exposes), `sink_`,
//! `trust_`, `upstream_`, `web_`. Helpers they share are in `support`.

#![allow(
    unsafe_code,
    reason = "the tests signal, limit and probe the processes they start through libc \
              (kill, setrlimit, getuid), which has no safe wrappers"
)]

mod support;

/// ring as the process's crypto provider (TLS, JWTs) before any test runs, as the binary's
/// `main` does: the tests build reqwest clients, MCP HTTP transports and tokens of their own,
/// and reqwest has no provider of its own in this workspace. A constructor (`.init_array`)
/// because nextest runs each test in a process of its own, with no common setup.
#[used]
#[cfg_attr(target_os = "linux", unsafe(link_section = ".init_array"))]
#[cfg_attr(target_os = "macos", unsafe(link_section = "__DATA,__mod_init_func"))]
static INSTALL_CRYPTO_PROVIDERS: extern "C" fn() = {
    extern "C" fn install() {
        mcpproxy_auth::install_crypto_providers();
    }
    install
};

/// The workspace's layers: which crate may depend on which, and which module of the proxy
/// may use which.
mod architecture;

/// The team gateway: three replicas behind HAProxy on PostgreSQL and ClickHouse, with
/// logins by a real authorization server (docs/deploy-team.md).
mod deploy_team;
/// docs/cli.md's command table checked against the binary's `--help`.
mod docs_cli;
/// The README's 5-minute tour run as written, its outputs checked.
mod docs_readme_tour;

/// `mcpproxy call` and `mcpproxy tools`, with and without a running server.
mod cli_call;
/// `mcpproxy client add | remove | list`: mcpproxy written into an IDE's MCP config.
mod cli_client;
/// `mcpproxy doctor`, and the read-only commands beside a running owner when the file has a typo.
mod cli_doctor;
/// `mcpproxy upstream import`: what it leaves out (mcpproxy itself, duplicates) and why.
mod cli_import;
/// What the CLI prints for people: line breaks, widths, what waits for approval.
mod cli_output;
/// `mcpproxy plugins list` and `mcpproxy plugins check`, run as a user would.
mod cli_plugins;
/// Replicas sharing one state in PostgreSQL: approvals, held tools, upstream servers.
mod cluster_approvals;
mod cluster_state;

mod journal_chain;
/// The cluster's journal read back from a real ClickHouse: two replicas, one trail, each
/// record once, through a replica killed and a batch delivered twice.
mod journal_cluster;
/// `activity verify --cluster` over a real ClickHouse table: every replica's chain, each
/// tampering named.
mod journal_cluster_verify;
/// The audit trail: REST API, `mcpproxy activity`, crash safety.
mod journal_e2e;
/// The audit trail fails closed: calls refused while the journal cannot write (injected
/// write errors, a real full tmpfs), and its recovery without a restart.
mod journal_failclosed;
/// The audit trail under flood (minimum age, pressure mode, alert) and damage (repair).
mod journal_hardening;
/// Everything that runs server code on the record: prompts, completions, subscriptions,
/// through the API, the CLI and a sink.
mod journal_records;

/// A person approves the exact call: elicitation, `mcpproxy approvals`, REST, timeouts.
mod mcp_approvals;
mod mcp_approvals_input_required;
/// Server-to-client requests (sampling, elicitation) reach only the client whose call asked.
mod mcp_back_channel;
/// `code_execution`: scripts in the WebAssembly runtime calling real servers through the
/// policy, their limits and their records.
mod mcp_code;
/// The MCP conformance suite against the conformance fixture, directly and through the
/// direct endpoint `/mcp/servers/NAME`.
mod mcp_conformance;
/// The MCP conformance suite's client scenarios with mcpproxy as the client of each
/// scenario's server (`tests/conformance/client.sh`).
mod mcp_conformance_client;
/// Everything MCP carries (progress, elicitation, prompts, resources) through the proxy,
/// against the official server-everything and the official Python SDK.
mod mcp_everything;
/// What the proxy passes on about a call: the request `_meta` and the client's cancellation.
mod mcp_forwarding;
/// The proxy in front of the official npm MCP servers.
mod mcp_npm;
/// The proxy end to end: the binary, the fixture upstream, an MCP client.
mod mcp_proxy;
/// Bounded relays: log and progress floods at clients that do not read, and session floods
/// from one client address.
mod mcp_relay_bounds;
/// Tasks (the tasks extension) on the aggregate endpoint, as a 2026-07-28 client sends them.
mod mcp_tasks;

/// Validators in other languages (JavaScript, Python and C examples built from source), the
/// contract's versioning rule, and instance reuse.
mod plugin_languages;
/// Plugins live: `plugins reload` and the watch on --plugins DIR swap the policy plugins whole.
mod plugin_reload;
/// Result guards: secrets redacted from what upstreams return, custom guards, faults.
mod plugin_result_guards;
/// The opt-in safety-routing validator: every class x variant, and through real MCP.
mod plugin_safety_routing;

/// Who is asking: the caller in the plugins' call context (`host.caller`) beside a plugin
/// built against the contract before it, and the group-gate validator deciding by group,
/// with identities from a real authorization server.
mod identity_group_gate;
/// `management` grants: which logged-in callers get the `upstream_servers` tool; refusals
/// on the record.
mod identity_management;
/// `rate_limits`: per caller, per tool and per upstream; 429 with Retry-After over HTTP, the
/// JSON-RPC error over stdio.
mod identity_rate_limits;
/// `scopes`: servers and tools hidden from logged-in callers in every list, every direct
/// endpoint and every call.
mod identity_scopes;

/// `mcpproxy serve` itself: defaults, config errors, stdio mode, shutdown.
mod serve_cli;
/// Clients that log in: `/mcp` as an OAuth protected resource of a real authorization
/// server (oidc-provider), tokens checked, identities recorded.
mod serve_client_auth;
/// The metrics a dashboard reads move with real calls.
mod serve_dashboard_metrics;
/// The owner hand-off: front-ends take the data dir over when its owner dies.
mod serve_handoff;
/// `/mcp` and the listener under attack: the bearer token, session and connection bounds,
/// malformed requests.
mod serve_listener;
/// `/healthz`, `/readyz` and `/metrics` (read by the reference OpenMetrics parser).
mod serve_observability;
/// One owner per data dir: stdio front-ends, the CLI and an HTTP relay beside it.
mod serve_owner;
/// Trace export over OTLP/HTTP.
mod serve_telemetry;

/// Sinks: the audit trail into an HTTP receiver and a real ClickHouse, through outages,
/// restarts, an ungranted host, and sinks that trap or hang.
mod sink_e2e;

/// Quarantine and tool pinning: review, rug pulls, approval, across restarts.
mod trust_e2e;
/// Approval bound to what runs: launch specs changed by an agent, a hand edit or between
/// runs wait for a person; every change to the servers is recorded.
mod trust_launch;
/// Pins on everything the policy reads (`_meta`, output schema, annotations' title), the
/// spec's defaults for an annotations object without hints, listings that survive a
/// malformed tool, and the pins of the previous version.
mod trust_pins;

/// The sandbox of stdio servers, against a hostile server.
mod upstream_egress;
/// An HTTP upstream of 2026-07-28 (a session begun with `server/discover`): tool changes
/// still reach clients at once.
mod upstream_http_lifecycle;
/// Servers started by package launchers (`npx -y`, `uvx`) from registries on loopback.
mod upstream_launchers;
/// Lazy servers: started by their first call, stopped when idle, their tools known meanwhile.
mod upstream_lazy;
/// An upstream's life with the proxy: waited for while it connects, killed with the proxy.
mod upstream_lifecycle;
/// An upstream's tool list kept between calls: 500 calls to three replicas of a Python SDK
/// server behind HAProxy cost at most 1% more requests than the calls.
mod upstream_list_cache;
/// Changing upstream servers while running: the upstream_servers tool, the CLI, hand edits.
mod upstream_manage;
/// Remote servers behind a real OAuth authorization server: login, refresh, revocation.
mod upstream_oauth;
/// A call the sandbox refused says what it refused, in the agent's and the CLI's error.
mod upstream_refusal_errors;
mod upstream_sandbox;
/// `${secret:NAME}` and `${env:NAME}` in a server's config: resolved at start, never shown;
/// a missing one an error naming the fix.
mod upstream_secret_refs;
/// Secrets in upstream URLs and arguments hidden in the CLI, REST, MCP and the log; data-dir
/// files private whatever the umask.
mod upstream_secrets;

/// The page as a control room: approval after the analysis, the chart, the decisions.
mod web_control_room;
/// The page at `/` in a real headless browser (chromium through chromedriver).
mod web_e2e;

//! The proxy's Prometheus metrics: counters and histograms updated as calls happen, gauges
//! set from the proxy's state just before each scrape, and their exposition in the
//! OpenMetrics text format that `GET /metrics` serves.
//!
//! Labels are plain strings the callers hand in (server, variant, status, decision, plugin,
//! fault kind); nothing here knows the rest of the crate. Server and plugin names come from
//! the config and the loaded plugins, so label sets stay few; tool names come from
//! upstreams, so at most [`MAX_TOOL_LABEL_SETS`] (server, tool) pairs are counted by name
//! and the rest as tool `other`. [`stages`] times each policy plugin and counts its
//! decisions.
//!
//! Each area registers its own families and updates them ([`calls`], [`plugins`],
//! [`upstreams`], [`journal`], [`sessions`], [`approvals`]); [`Metrics`] holds one of each and the registry.

mod approvals;
mod calls;
mod journal;
mod plugins;
mod sessions;
mod stages;
mod upstreams;

pub use calls::MAX_TOOL_LABEL_SETS;
pub use journal::SinkGauge;
pub use sessions::{Open, OpenGuard, Probe};
pub use stages::{timed_annotators, timed_validators};
pub use upstreams::UpstreamGauge;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use approvals::ApprovalMetrics;
use calls::CallMetrics;
use journal::JournalMetrics;
use plugins::PluginMetrics;
use sessions::SessionMetrics;
use upstreams::UpstreamMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

/// Every metric the proxy exposes, by area.
pub struct Metrics {
    registry: Registry,
    calls: CallMetrics,
    plugins: PluginMetrics,
    upstreams: UpstreamMetrics,
    journal: JournalMetrics,
    sessions: SessionMetrics,
    approvals: ApprovalMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("mcpproxy");
        let calls = CallMetrics::register(&mut registry);
        let plugins = PluginMetrics::register(&mut registry);
        let upstreams = UpstreamMetrics::register(&mut registry);
        let journal = JournalMetrics::register(&mut registry);
        let sessions = SessionMetrics::register(&mut registry);
        let approvals = ApprovalMetrics::register(&mut registry);
        register_build(&mut registry);
        Self {
            registry,
            calls,
            plugins,
            upstreams,
            journal,
            sessions,
            approvals,
        }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        self.sessions.read_probes();
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// `mcpproxy_build`: the running version (and git commit, when the build knew it).
fn register_build(registry: &mut Registry) {
    let mut build = vec![("version".to_owned(), env!("CARGO_PKG_VERSION").to_owned())];
    if let Some(sha) = option_env!("MCPPROXY_GIT_SHA") {
        build.push(("git_sha".to_owned(), sha.to_owned()));
    }
    let info = prometheus_client::metrics::info::Info::new(build);
    registry.register(
        "build",
        "The running mcpproxy's version (and git commit, when the build knew it)",
        info,
    );
}

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests;

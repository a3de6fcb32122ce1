//! The calls' metrics: calls through the call variants by server, variant, status and
//! decision; their time end to end, at the upstream and in the policy; and calls by tool
//! (the first [`MAX_TOOL_LABEL_SETS`] pairs by name).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::{Metrics, ServerLabels};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    variant: String,
    status: String,
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VariantLabels {
    variant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    server: String,
    tool: String,
}

/// The most distinct (server, tool) label sets `mcpproxy_tool_calls_total` counts by name;
/// later tools count as tool `other` of their server.
pub const MAX_TOOL_LABEL_SETS: usize = 200;

/// Latency buckets from 50 µs to about 1.6 s (a call) or 3.3 ms (the policy).
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// The families of this area, registered by [`CallMetrics::register`].
pub(super) struct CallMetrics {
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<VariantLabels, Histogram>,
    upstream_call_seconds: Family<ServerLabels, Histogram>,
    policy_seconds: Histogram,
    tool_calls: Family<ToolLabels, Counter>,
    tool_label_sets: std::sync::Mutex<std::collections::HashSet<ToolLabels>>,
}

impl CallMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls through the call variants, by upstream server, variant, status and policy decision",
            calls.clone(),
        );
        let call_seconds =
            Family::<VariantLabels, Histogram>::new_with_constructor(call_buckets as fn() -> _);
        registry.register_with_unit(
            "call_duration",
            "Time from a call's arrival to its answer, upstream included",
            Unit::Seconds,
            call_seconds.clone(),
        );
        let upstream_call_seconds =
            Family::<ServerLabels, Histogram>::new_with_constructor(call_buckets as fn() -> _);
        registry.register_with_unit(
            "upstream_call_duration",
            "Time an upstream server took to answer one tools/call, by server; the call's \
             duration less this is the proxy's own share",
            Unit::Seconds,
            upstream_call_seconds.clone(),
        );
        let policy_seconds = Histogram::new(exponential_buckets(0.000_005, 2.0, 14));
        registry.register_with_unit(
            "policy_duration",
            "Time the policy pipeline (annotators and validators) took for one call",
            Unit::Seconds,
            policy_seconds.clone(),
        );
        let tool_calls: Family<ToolLabels, Counter> = Family::default();
        registry.register(
            "tool_calls",
            "Tool calls that reached an upstream tool, by server and tool (the first 200 pairs by name, later ones as tool \"other\")",
            tool_calls.clone(),
        );
        Self {
            calls,
            call_seconds,
            upstream_call_seconds,
            policy_seconds,
            tool_calls,
            tool_label_sets: std::sync::Mutex::default(),
        }
    }
}

impl Metrics {
    /// One call answered: `status` is how it ended (`success`, `error`, `blocked`,
    /// `refused`, `held`, `dry_run`), `decision` the policy's (`allow`, `warn`, `reject`,
    /// or `none` when the policy did not run).
    pub fn call(&self, server: &str, variant: &str, status: &str, decision: &str, took: Duration) {
        self.calls
            .calls
            .get_or_create(&CallLabels {
                server: server.to_owned(),
                variant: variant.to_owned(),
                status: status.to_owned(),
                decision: decision.to_owned(),
            })
            .inc();
        self.calls
            .call_seconds
            .get_or_create(&VariantLabels {
                variant: variant.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// An upstream server answered one `tools/call` (or failed to) after `took`. `server`
    /// must be a configured server's name, never one a caller chose.
    pub fn upstream_call(&self, server: &str, took: Duration) {
        self.calls
            .upstream_call_seconds
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// The policy pipeline ran for one call.
    pub fn policy(&self, took: Duration) {
        self.calls.policy_seconds.observe(took.as_secs_f64());
    }

    /// One tool call reached `server`'s `tool` (counted by name for the first
    /// [`MAX_TOOL_LABEL_SETS`] pairs, then as `other`).
    pub fn tool_call(&self, server: &str, tool: &str) {
        let mut labels = ToolLabels {
            server: server.to_owned(),
            tool: tool.to_owned(),
        };
        {
            let mut seen = mcpproxy_support::lock(&self.calls.tool_label_sets);
            if !seen.contains(&labels) {
                if seen.len() < MAX_TOOL_LABEL_SETS {
                    seen.insert(labels.clone());
                } else {
                    labels.tool = "other".to_owned();
                }
            }
        }
        self.calls.tool_calls.get_or_create(&labels).inc();
    }
}

//! The plugins' metrics: what each policy plugin answered, how long it took, its deadlines
//! and faults; and what the result guards did (the first 256 label sets by kind) and how long
//! they took.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    plugin: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    plugin: String,
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuardLabels {
    guard: String,
    action: String,
    kind: String,
}

/// The most distinct (guard, action, kind) label sets counted; kinds past it count as
/// `other`, so a guard that invents kinds cannot grow the exposition without bound.
const MAX_GUARD_LABEL_SETS: usize = 256;

/// Latency buckets of one plugin run: 5 µs to about 80 ms.
fn plugin_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_005, 2.0, 15))
}

/// The families of this area, registered by [`PluginMetrics::register`].
pub(super) struct PluginMetrics {
    plugin_faults: Family<FaultLabels, Counter>,
    plugin_decisions: Family<DecisionLabels, Counter>,
    plugin_seconds: Family<PluginLabels, Histogram>,
    plugin_timeouts: Family<PluginLabels, Counter>,
    guard_actions: Family<GuardLabels, Counter>,
    guard_label_sets: std::sync::Mutex<std::collections::HashSet<GuardLabels>>,
    guard_seconds: Histogram,
}

impl PluginMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let plugin_faults = Family::<FaultLabels, Counter>::default();
        registry.register(
            "plugin_faults",
            "Plugin faults that rejected a call (fail closed), by plugin and kind",
            plugin_faults.clone(),
        );
        let plugin_decisions: Family<DecisionLabels, Counter> = Family::default();
        registry.register(
            "plugin_decisions",
            "What each policy plugin answered, by plugin and decision (allow, warn, reject, fault; annotators: annotated, abstained)",
            plugin_decisions.clone(),
        );
        let plugin_seconds: Family<PluginLabels, Histogram> =
            Family::new_with_constructor(plugin_buckets as fn() -> _);
        registry.register_with_unit(
            "plugin_duration",
            "Time one policy plugin took for one call",
            Unit::Seconds,
            plugin_seconds.clone(),
        );
        let plugin_timeouts: Family<PluginLabels, Counter> = Family::default();
        registry.register(
            "plugin_timeouts",
            "Policy plugin runs stopped at their deadline (the call was rejected), by plugin",
            plugin_timeouts.clone(),
        );
        let guard_actions = Family::<GuardLabels, Counter>::default();
        registry.register(
            "result_guard_actions",
            "What result guards did to upstream answers, by guard, action (redact: spans \
             redacted; mark: items marked; block: results withheld; fault: results withheld \
             because the guard faulted) and kind",
            guard_actions.clone(),
        );
        let guard_seconds = Histogram::new(exponential_buckets(0.000_005, 2.0, 16));
        registry.register_with_unit(
            "result_guard_duration",
            "Time the result guards took for one upstream answer",
            Unit::Seconds,
            guard_seconds.clone(),
        );
        Self {
            plugin_faults,
            plugin_decisions,
            plugin_seconds,
            plugin_timeouts,
            guard_actions,
            guard_label_sets: std::sync::Mutex::default(),
            guard_seconds,
        }
    }
}

impl Metrics {
    /// A plugin faulted and the call it judged was rejected.
    pub fn plugin_fault(&self, plugin: &str, kind: &str) {
        self.plugins
            .plugin_faults
            .get_or_create(&FaultLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// A policy plugin answered (`decision`: `allow`, `warn`, `reject`, an annotator's
    /// `annotated` or `abstained`, or `fault`) after `took`; `timed_out` when its fault was
    /// its deadline.
    pub fn plugin_ran(&self, plugin: &str, decision: &str, took: Duration, timed_out: bool) {
        let plugin = plugin.to_owned();
        self.plugins
            .plugin_decisions
            .get_or_create(&DecisionLabels {
                plugin: plugin.clone(),
                decision: decision.to_owned(),
            })
            .inc();
        let labels = PluginLabels { plugin };
        self.plugins
            .plugin_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if timed_out {
            self.plugins.plugin_timeouts.get_or_create(&labels).inc();
        }
    }

    /// A result guard acted `count` times on things of `kind`.
    pub fn guard_action(&self, guard: &str, action: &str, kind: &str, count: u32) {
        let mut labels = GuardLabels {
            guard: guard.to_owned(),
            action: action.to_owned(),
            kind: kind.to_owned(),
        };
        {
            let mut seen = mcpproxy_support::lock(&self.plugins.guard_label_sets);
            if !seen.contains(&labels) {
                if seen.len() < MAX_GUARD_LABEL_SETS {
                    seen.insert(labels.clone());
                } else {
                    labels.kind = "other".to_owned();
                }
            }
        }
        self.plugins
            .guard_actions
            .get_or_create(&labels)
            .inc_by(u64::from(count));
    }

    /// The result guards ran over one answer.
    pub fn guards_ran(&self, took: Duration) {
        self.plugins.guard_seconds.observe(took.as_secs_f64());
    }
}

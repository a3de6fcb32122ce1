//! The proxy's Prometheus metrics: counters and histograms updated as calls happen, gauges
//! set from the proxy's state just before each scrape, and their exposition in the
//! OpenMetrics text format that `GET /metrics` serves.
//!
//! Labels are plain strings the callers hand in (server, variant, status, decision, plugin,
//! fault kind); nothing here knows the rest of the crate. Server and plugin names come from
//! the config and the loaded plugins, so label sets stay few.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

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
struct FaultLabels {
    plugin: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    server: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabels {
    sink: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
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

type Seconds = Gauge<f64, AtomicU64>;

/// Latency buckets from 50 µs to about 1.6 s (a call) or 3.3 ms (the policy).
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// One upstream as the gauges show it.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamGauge {
    pub server: String,
    pub state: String,
    pub tools: u64,
}

/// One sink as the gauges show it.
#[derive(Debug, Clone)]
pub(crate) struct SinkGauge {
    pub sink: String,
    /// Records not yet delivered.
    pub backlog: u64,
    /// Age of the oldest undelivered record.
    pub lag: Duration,
}

/// Every metric the proxy exposes.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<VariantLabels, Histogram>,
    upstream_call_seconds: Family<ServerLabels, Histogram>,
    policy_seconds: Histogram,
    plugin_faults: Family<FaultLabels, Counter>,
    journal_commit_seconds: Histogram,
    journal_fsyncs: Counter,
    upstream_state: Family<UpstreamLabels, Gauge>,
    upstream_tools: Family<ServerLabels, Gauge>,
    journal_bytes: Gauge,
    journal_records: Gauge,
    journal_failing: Gauge,
    journal_failure: Family<ReasonLabels, Gauge>,
    sink_backlog: Family<SinkLabels, Gauge>,
    sink_lag_seconds: Family<SinkLabels, Seconds>,
    guard_actions: Family<GuardLabels, Counter>,
    guard_label_sets: std::sync::Mutex<std::collections::HashSet<GuardLabels>>,
    guard_seconds: Histogram,
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
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("mcpproxy");
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
        let plugin_faults = Family::<FaultLabels, Counter>::default();
        registry.register(
            "plugin_faults",
            "Plugin faults that rejected a call (fail closed), by plugin and kind",
            plugin_faults.clone(),
        );
        let journal_commit_seconds = Histogram::new(exponential_buckets(0.000_05, 2.0, 14));
        registry.register_with_unit(
            "journal_commit_duration",
            "Time from the start of one group commit of the activity journal until its records were durable (fsync included)",
            Unit::Seconds,
            journal_commit_seconds.clone(),
        );
        let journal_fsyncs = Counter::default();
        registry.register(
            "journal_fsyncs",
            "Fsyncs the activity journal's writer made (write-ahead log fsyncs and full commits)",
            journal_fsyncs.clone(),
        );
        let upstream_state = Family::<UpstreamLabels, Gauge>::default();
        registry.register(
            "upstream_state",
            "1 for each upstream server's current state (ready, connecting, error, disabled, quarantined)",
            upstream_state.clone(),
        );
        let upstream_tools = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "upstream_tools",
            "Tools each upstream server lists",
            upstream_tools.clone(),
        );
        let journal_bytes = Gauge::default();
        registry.register_with_unit(
            "journal_file",
            "Size of the activity journal file",
            Unit::Bytes,
            journal_bytes.clone(),
        );
        let journal_records = Gauge::default();
        registry.register(
            "journal_records",
            "Records in the activity journal",
            journal_records.clone(),
        );
        let journal_failing = Gauge::default();
        registry.register(
            "journal_failing",
            "1 while the activity journal cannot write (calls are refused), else 0",
            journal_failing.clone(),
        );
        let journal_failure = Family::<ReasonLabels, Gauge>::default();
        registry.register(
            "journal_failure",
            "1, labelled with the reason, while the activity journal cannot write",
            journal_failure.clone(),
        );
        let sink_backlog = Family::<SinkLabels, Gauge>::default();
        registry.register(
            "sink_backlog",
            "Records a sink has not delivered yet",
            sink_backlog.clone(),
        );
        let sink_lag_seconds = Family::<SinkLabels, Seconds>::default();
        registry.register_with_unit(
            "sink_lag",
            "Age of the oldest record a sink has not delivered yet",
            Unit::Seconds,
            sink_lag_seconds.clone(),
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
            guard_actions,
            guard_label_sets: std::sync::Mutex::default(),
            guard_seconds,
            registry,
            calls,
            call_seconds,
            upstream_call_seconds,
            policy_seconds,
            plugin_faults,
            journal_commit_seconds,
            journal_fsyncs,
            upstream_state,
            upstream_tools,
            journal_bytes,
            journal_records,
            journal_failing,
            journal_failure,
            sink_backlog,
            sink_lag_seconds,
        }
    }

    /// One call answered: `status` is how it ended (`success`, `error`, `blocked`,
    /// `refused`, `held`, `dry_run`), `decision` the policy's (`allow`, `warn`, `reject`,
    /// or `none` when the policy did not run).
    pub(crate) fn call(
        &self,
        server: &str,
        variant: &str,
        status: &str,
        decision: &str,
        took: Duration,
    ) {
        self.calls
            .get_or_create(&CallLabels {
                server: server.to_owned(),
                variant: variant.to_owned(),
                status: status.to_owned(),
                decision: decision.to_owned(),
            })
            .inc();
        self.call_seconds
            .get_or_create(&VariantLabels {
                variant: variant.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// An upstream server answered one `tools/call` (or failed to) after `took`. `server`
    /// must be a configured server's name, never one a caller chose.
    pub(crate) fn upstream_call(&self, server: &str, took: Duration) {
        self.upstream_call_seconds
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// The policy pipeline ran for one call.
    pub(crate) fn policy(&self, took: Duration) {
        self.policy_seconds.observe(took.as_secs_f64());
    }

    /// A plugin faulted and the call it judged was rejected.
    pub(crate) fn plugin_fault(&self, plugin: &str, kind: &str) {
        self.plugin_faults
            .get_or_create(&FaultLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// A result guard acted `count` times on things of `kind`.
    pub(crate) fn guard_action(&self, guard: &str, action: &str, kind: &str, count: u32) {
        let mut labels = GuardLabels {
            guard: guard.to_owned(),
            action: action.to_owned(),
            kind: kind.to_owned(),
        };
        {
            let mut seen = mcpproxy_policy::lock(&self.guard_label_sets);
            if !seen.contains(&labels) {
                if seen.len() < MAX_GUARD_LABEL_SETS {
                    seen.insert(labels.clone());
                } else {
                    labels.kind = "other".to_owned();
                }
            }
        }
        self.guard_actions
            .get_or_create(&labels)
            .inc_by(u64::from(count));
    }

    /// The result guards ran over one answer.
    pub(crate) fn guards_ran(&self, took: Duration) {
        self.guard_seconds.observe(took.as_secs_f64());
    }

    /// One group commit of the journal.
    pub(crate) fn journal_commit(&self, took: Duration) {
        self.journal_commit_seconds.observe(took.as_secs_f64());
    }

    /// One fsync by the journal's writer.
    pub(crate) fn journal_fsync(&self) {
        self.journal_fsyncs.inc();
    }

    /// The upstreams as they are now (servers no longer listed disappear).
    pub(crate) fn set_upstreams(&self, upstreams: impl IntoIterator<Item = UpstreamGauge>) {
        self.upstream_state.clear();
        self.upstream_tools.clear();
        for upstream in upstreams {
            self.upstream_state
                .get_or_create(&UpstreamLabels {
                    server: upstream.server.clone(),
                    state: upstream.state,
                })
                .set(1);
            self.upstream_tools
                .get_or_create(&ServerLabels {
                    server: upstream.server,
                })
                .set(i64::try_from(upstream.tools).unwrap_or(i64::MAX));
        }
    }

    /// The journal as it is now.
    pub(crate) fn set_journal(&self, file_bytes: u64, records: u64) {
        self.journal_bytes
            .set(i64::try_from(file_bytes).unwrap_or(i64::MAX));
        self.journal_records
            .set(i64::try_from(records).unwrap_or(i64::MAX));
    }

    /// Whether the journal writes: `None`, or why not.
    pub(crate) fn set_journal_health(&self, failing: Option<&str>) {
        self.journal_failure.clear();
        self.journal_failing.set(i64::from(failing.is_some()));
        if let Some(reason) = failing {
            self.journal_failure
                .get_or_create(&ReasonLabels {
                    reason: reason.to_owned(),
                })
                .set(1);
        }
    }

    /// The sinks as they are now.
    pub(crate) fn set_sinks(&self, sinks: impl IntoIterator<Item = SinkGauge>) {
        self.sink_backlog.clear();
        self.sink_lag_seconds.clear();
        for sink in sinks {
            let labels = SinkLabels { sink: sink.sink };
            self.sink_backlog
                .get_or_create(&labels)
                .set(i64::try_from(sink.backlog).unwrap_or(i64::MAX));
            self.sink_lag_seconds
                .get_or_create(&labels)
                .set(sink.lag.as_secs_f64());
        }
    }

    /// The OpenMetrics text exposition of every metric.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// The content type of [`Metrics::encode`]'s text.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_show_in_the_exposition() {
        let metrics = Metrics::new();
        metrics.call(
            "fs",
            "call_tool_read",
            "success",
            "allow",
            Duration::from_millis(2),
        );
        metrics.call(
            "fs",
            "call_tool_read",
            "success",
            "allow",
            Duration::from_millis(3),
        );
        metrics.upstream_call("fs", Duration::from_micros(400));
        metrics.plugin_fault("intent-matrix", "deadline");
        metrics.journal_fsync();
        metrics.set_upstreams([UpstreamGauge {
            server: "fs".into(),
            state: "ready".into(),
            tools: 14,
        }]);
        metrics.set_sinks([SinkGauge {
            sink: "clickhouse-sink".into(),
            backlog: 7,
            lag: Duration::from_millis(1500),
        }]);
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"mcpproxy_calls_total{server="fs",variant="call_tool_read",status="success",decision="allow"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"mcpproxy_call_duration_seconds_count{variant="call_tool_read"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcpproxy_upstream_call_duration_seconds_count{server="fs"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"mcpproxy_plugin_faults_total{plugin="intent-matrix",kind="deadline"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains("mcpproxy_journal_fsyncs_total 1\n"), "{text}");
        assert!(
            text.contains(r#"mcpproxy_upstream_state{server="fs",state="ready"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcpproxy_sink_lag_seconds{sink="clickhouse-sink"} 1.5"#),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");

        // A server that went away disappears from the gauges.
        metrics.set_upstreams([]);
        assert!(!metrics.encode().contains("upstream_state{"));
    }

    #[test]
    fn the_journal_failing_shows_with_its_reason_and_goes_when_it_recovers() {
        let metrics = Metrics::new();
        metrics.set_journal_health(None);
        let text = metrics.encode();
        assert!(text.contains("mcpproxy_journal_failing 0\n"), "{text}");
        assert!(!text.contains("mcpproxy_journal_failure{"), "{text}");

        metrics.set_journal_health(Some("No space left on device"));
        let text = metrics.encode();
        assert!(text.contains("mcpproxy_journal_failing 1\n"), "{text}");
        assert!(
            text.contains(r#"mcpproxy_journal_failure{reason="No space left on device"} 1"#),
            "{text}"
        );

        metrics.set_journal_health(None);
        let text = metrics.encode();
        assert!(text.contains("mcpproxy_journal_failing 0\n"), "{text}");
        assert!(!text.contains("mcpproxy_journal_failure{"), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new();
        metrics.plugin_fault("a\"b\nc", "trap");
        let text = metrics.encode();
        assert!(text.contains(r#"plugin="a\"b\nc""#), "{text}");
    }
}

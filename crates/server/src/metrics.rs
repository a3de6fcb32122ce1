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

mod stages;

pub use stages::{timed_annotators, timed_validators};

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
struct EgressLabels {
    server: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EgressBytesLabels {
    server: String,
    direction: String,
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    server: String,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    plugin: String,
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// The most distinct (server, tool) label sets `mcpproxy_tool_calls_total` counts by name;
/// later tools count as tool `other` of their server.
pub const MAX_TOOL_LABEL_SETS: usize = 200;

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
pub struct UpstreamGauge {
    pub server: String,
    pub state: String,
    pub tools: u64,
}

/// One sink as the gauges show it.
#[derive(Debug, Clone)]
pub struct SinkGauge {
    pub sink: String,
    /// Records not yet delivered.
    pub backlog: u64,
    /// Age of the oldest undelivered record.
    pub lag: Duration,
    /// Failed delivery attempts since the last delivery.
    pub failures: u64,
    /// Records delivered, all time.
    pub delivered: u64,
    /// Undelivered records dropped because the journal outgrew its cap.
    pub dropped: u64,
}

/// Counts how many of something are open, by kind; the count goes down when the guard
/// [`Metrics::opened`] returns is dropped.
pub struct OpenGuard {
    gauge: Gauge,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Reads a count at scrape time (the HTTP sessions of an endpoint).
pub type Probe = Box<dyn Fn() -> usize + Send + Sync>;

/// Every metric the proxy exposes.
pub struct Metrics {
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
    tool_calls: Family<ToolLabels, Counter>,
    tool_label_sets: std::sync::Mutex<std::collections::HashSet<ToolLabels>>,
    plugin_decisions: Family<DecisionLabels, Counter>,
    plugin_seconds: Family<PluginLabels, Histogram>,
    plugin_timeouts: Family<PluginLabels, Counter>,
    sink_failures: Family<SinkLabels, Gauge>,
    sink_delivered: Family<SinkLabels, Gauge>,
    sink_dropped: Family<SinkLabels, Gauge>,
    upstream_connects: Family<ServerLabels, Counter>,
    upstream_reconnects: Family<ServerLabels, Counter>,
    upstream_restarts: Family<ServerLabels, Counter>,
    egress_connections: Family<EgressLabels, Counter>,
    egress_bytes: Family<EgressBytesLabels, Counter>,
    egress_unrecorded: Family<ServerLabels, Counter>,
    sessions: Family<KindLabels, Gauge>,
    session_probes: std::sync::Mutex<Vec<(String, Probe)>>,
    streams: Family<KindLabels, Gauge>,
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
            "1 for each upstream server's current state (ready, connecting, error, disabled, quarantined, unapproved, login_required, authenticating)",
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
        let extra = Extra::register(&mut registry);
        Self {
            tool_calls: extra.tool_calls,
            tool_label_sets: std::sync::Mutex::default(),
            plugin_decisions: extra.plugin_decisions,
            plugin_seconds: extra.plugin_seconds,
            plugin_timeouts: extra.plugin_timeouts,
            sink_failures: extra.sink_failures,
            sink_delivered: extra.sink_delivered,
            sink_dropped: extra.sink_dropped,
            upstream_connects: extra.upstream_connects,
            upstream_reconnects: extra.upstream_reconnects,
            upstream_restarts: extra.upstream_restarts,
            egress_connections: extra.egress_connections,
            egress_bytes: extra.egress_bytes,
            egress_unrecorded: extra.egress_unrecorded,
            sessions: extra.sessions,
            session_probes: std::sync::Mutex::default(),
            streams: extra.streams,
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
    pub fn call(&self, server: &str, variant: &str, status: &str, decision: &str, took: Duration) {
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
    pub fn upstream_call(&self, server: &str, took: Duration) {
        self.upstream_call_seconds
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// The policy pipeline ran for one call.
    pub fn policy(&self, took: Duration) {
        self.policy_seconds.observe(took.as_secs_f64());
    }

    /// A plugin faulted and the call it judged was rejected.
    pub fn plugin_fault(&self, plugin: &str, kind: &str) {
        self.plugin_faults
            .get_or_create(&FaultLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// A result guard acted `count` times on things of `kind`.
    pub fn guard_action(&self, guard: &str, action: &str, kind: &str, count: u32) {
        let mut labels = GuardLabels {
            guard: guard.to_owned(),
            action: action.to_owned(),
            kind: kind.to_owned(),
        };
        {
            let mut seen = mcpproxy_support::lock(&self.guard_label_sets);
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
    pub fn guards_ran(&self, took: Duration) {
        self.guard_seconds.observe(took.as_secs_f64());
    }

    /// One group commit of the journal.
    pub fn journal_commit(&self, took: Duration) {
        self.journal_commit_seconds.observe(took.as_secs_f64());
    }

    /// One fsync by the journal's writer.
    pub fn journal_fsync(&self) {
        self.journal_fsyncs.inc();
    }

    /// The upstreams as they are now (servers no longer listed disappear).
    pub fn set_upstreams(&self, upstreams: impl IntoIterator<Item = UpstreamGauge>) {
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
    pub fn set_journal(&self, file_bytes: u64, records: u64) {
        self.journal_bytes
            .set(i64::try_from(file_bytes).unwrap_or(i64::MAX));
        self.journal_records
            .set(i64::try_from(records).unwrap_or(i64::MAX));
    }

    /// Whether the journal writes: `None`, or why not.
    pub fn set_journal_health(&self, failing: Option<&str>) {
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
    pub fn set_sinks(&self, sinks: impl IntoIterator<Item = SinkGauge>) {
        self.sink_backlog.clear();
        self.sink_lag_seconds.clear();
        self.sink_failures.clear();
        self.sink_delivered.clear();
        self.sink_dropped.clear();
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for sink in sinks {
            let labels = SinkLabels { sink: sink.sink };
            self.sink_failures
                .get_or_create(&labels)
                .set(count(sink.failures));
            self.sink_delivered
                .get_or_create(&labels)
                .set(count(sink.delivered));
            self.sink_dropped
                .get_or_create(&labels)
                .set(count(sink.dropped));
            self.sink_backlog
                .get_or_create(&labels)
                .set(i64::try_from(sink.backlog).unwrap_or(i64::MAX));
            self.sink_lag_seconds
                .get_or_create(&labels)
                .set(sink.lag.as_secs_f64());
        }
    }

    /// One tool call reached `server`'s `tool` (counted by name for the first
    /// [`MAX_TOOL_LABEL_SETS`] pairs, then as `other`).
    pub fn tool_call(&self, server: &str, tool: &str) {
        let mut labels = ToolLabels {
            server: server.to_owned(),
            tool: tool.to_owned(),
        };
        {
            let mut seen = mcpproxy_support::lock(&self.tool_label_sets);
            if !seen.contains(&labels) {
                if seen.len() < MAX_TOOL_LABEL_SETS {
                    seen.insert(labels.clone());
                } else {
                    labels.tool = "other".to_owned();
                }
            }
        }
        self.tool_calls.get_or_create(&labels).inc();
    }

    /// A policy plugin answered (`decision`: `allow`, `warn`, `reject`, an annotator's
    /// `annotated` or `abstained`, or `fault`) after `took`; `timed_out` when its fault was
    /// its deadline.
    pub fn plugin_ran(&self, plugin: &str, decision: &str, took: Duration, timed_out: bool) {
        let plugin = plugin.to_owned();
        self.plugin_decisions
            .get_or_create(&DecisionLabels {
                plugin: plugin.clone(),
                decision: decision.to_owned(),
            })
            .inc();
        let labels = PluginLabels { plugin };
        self.plugin_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if timed_out {
            self.plugin_timeouts.get_or_create(&labels).inc();
        }
    }

    /// An upstream started a connection attempt; `again` when it had been connected before
    /// (its session ended, or it was restarted).
    pub fn upstream_connecting(&self, server: &str, again: bool) {
        let labels = ServerLabels {
            server: server.to_owned(),
        };
        self.upstream_connects.get_or_create(&labels).inc();
        if again {
            self.upstream_reconnects.get_or_create(&labels).inc();
        }
    }

    /// One connection through a server's egress proxy, and the bytes it carried.
    pub fn egress(&self, server: &str, outcome: &str, sent: u64, received: u64) {
        self.egress_connections
            .get_or_create(&EgressLabels {
                server: server.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        for (direction, bytes) in [("sent", sent), ("received", received)] {
            self.egress_bytes
                .get_or_create(&EgressBytesLabels {
                    server: server.to_owned(),
                    direction: direction.to_owned(),
                })
                .inc_by(bytes);
        }
    }

    /// An egress connection left out of the journal (the server's record rate was spent).
    pub fn egress_unrecorded(&self, server: &str) {
        self.egress_unrecorded
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// A person restarted an upstream (REST, CLI, the page).
    pub fn upstream_restarted(&self, server: &str) {
        self.upstream_restarts
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// One more open session (`kind`: `stdio`, `socket`) or stream (`activity`) until the
    /// guard is dropped.
    pub fn opened(&self, what: Open, kind: &str) -> OpenGuard {
        let family = match what {
            Open::Session => &self.sessions,
            Open::Stream => &self.streams,
        };
        let gauge = family
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .clone();
        gauge.inc();
        OpenGuard { gauge }
    }

    /// Sessions of `kind` counted by `probe` at each scrape (an HTTP endpoint's sessions).
    pub fn probe_sessions(&self, kind: &str, probe: Probe) {
        mcpproxy_support::lock(&self.session_probes).push((kind.to_owned(), probe));
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        for (kind, probe) in mcpproxy_support::lock(&self.session_probes).iter() {
            let open = i64::try_from(probe()).unwrap_or(i64::MAX);
            self.sessions
                .get_or_create(&KindLabels { kind: kind.clone() })
                .set(open);
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What [`Metrics::opened`] counts.
#[derive(Debug, Clone, Copy)]
pub enum Open {
    /// An MCP session (`mcpproxy_sessions`).
    Session,
    /// A long-lived stream (`mcpproxy_open_streams`).
    Stream,
}

/// The families added for dashboards, registered in one place.
struct Extra {
    tool_calls: Family<ToolLabels, Counter>,
    plugin_decisions: Family<DecisionLabels, Counter>,
    plugin_seconds: Family<PluginLabels, Histogram>,
    plugin_timeouts: Family<PluginLabels, Counter>,
    sink_failures: Family<SinkLabels, Gauge>,
    sink_delivered: Family<SinkLabels, Gauge>,
    sink_dropped: Family<SinkLabels, Gauge>,
    upstream_connects: Family<ServerLabels, Counter>,
    upstream_reconnects: Family<ServerLabels, Counter>,
    upstream_restarts: Family<ServerLabels, Counter>,
    sessions: Family<KindLabels, Gauge>,
    streams: Family<KindLabels, Gauge>,
    egress_connections: Family<EgressLabels, Counter>,
    egress_bytes: Family<EgressBytesLabels, Counter>,
    egress_unrecorded: Family<ServerLabels, Counter>,
}

impl Extra {
    fn register(registry: &mut Registry) -> Self {
        let extra = Self {
            tool_calls: Family::default(),
            plugin_decisions: Family::default(),
            plugin_seconds: Family::new_with_constructor(plugin_buckets as fn() -> _),
            plugin_timeouts: Family::default(),
            sink_failures: Family::default(),
            sink_delivered: Family::default(),
            sink_dropped: Family::default(),
            upstream_connects: Family::default(),
            upstream_reconnects: Family::default(),
            upstream_restarts: Family::default(),
            sessions: Family::default(),
            streams: Family::default(),
            egress_connections: Family::default(),
            egress_bytes: Family::default(),
            egress_unrecorded: Family::default(),
        };
        registry.register(
            "tool_calls",
            "Tool calls that reached an upstream tool, by server and tool (the first 200 pairs by name, later ones as tool \"other\")",
            extra.tool_calls.clone(),
        );
        registry.register(
            "plugin_decisions",
            "What each policy plugin answered, by plugin and decision (allow, warn, reject, fault; annotators: annotated, abstained)",
            extra.plugin_decisions.clone(),
        );
        registry.register_with_unit(
            "plugin_duration",
            "Time one policy plugin took for one call",
            Unit::Seconds,
            extra.plugin_seconds.clone(),
        );
        registry.register(
            "plugin_timeouts",
            "Policy plugin runs stopped at their deadline (the call was rejected), by plugin",
            extra.plugin_timeouts.clone(),
        );
        registry.register(
            "sink_failures",
            "Failed delivery attempts of a sink since its last delivery",
            extra.sink_failures.clone(),
        );
        registry.register(
            "sink_delivered_records",
            "Records a sink delivered, all time",
            extra.sink_delivered.clone(),
        );
        registry.register(
            "sink_dropped_records",
            "Undelivered records dropped because the journal outgrew max_undelivered_bytes",
            extra.sink_dropped.clone(),
        );
        registry.register(
            "upstream_connects",
            "Connection attempts to each upstream server (the first included)",
            extra.upstream_connects.clone(),
        );
        registry.register(
            "upstream_reconnects",
            "Connection attempts to an upstream server that had been connected (its session ended, or it was restarted)",
            extra.upstream_reconnects.clone(),
        );
        registry.register(
            "upstream_restarts",
            "Restarts of an upstream server a person asked for",
            extra.upstream_restarts.clone(),
        );
        registry.register(
            "sessions",
            "Open MCP sessions, by kind (http, stdio, socket: IDEs forwarded by another mcpproxy)",
            extra.sessions.clone(),
        );
        registry.register(
            "open_streams",
            "Open long-lived streams, by kind (activity: the live feed of /api/v1/activity/stream)",
            extra.streams.clone(),
        );
        registry.register(
            "egress_connections",
            "Connections sandboxed servers asked their egress proxy for, by server and outcome (connected, refused: not in the allow-list, failed: allowed but unreachable)",
            extra.egress_connections.clone(),
        );
        registry.register_with_unit(
            "egress",
            "Bytes carried by the egress proxy, by server and direction (sent: from the server out, received: back to it)",
            Unit::Bytes,
            extra.egress_bytes.clone(),
        );
        registry.register(
            "egress_unrecorded_connections",
            "Egress connections counted but not written one by one to the journal because the server opened them faster than the record rate",
            extra.egress_unrecorded.clone(),
        );
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
        extra
    }
}

/// Latency buckets of one plugin run: 5 µs to about 80 ms.
fn plugin_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_005, 2.0, 15))
}

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests;

//! The upstreams' metrics: each server's state and tools (set before each scrape), its
//! connection attempts and the restarts people asked for, and what its egress proxy carried.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::{Metrics, ServerLabels};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    server: String,
    state: String,
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

/// One upstream as the gauges show it.
#[derive(Debug, Clone)]
pub struct UpstreamGauge {
    pub server: String,
    pub state: String,
    pub tools: u64,
}

/// The families of this area, registered by [`UpstreamMetrics::register`].
pub(super) struct UpstreamMetrics {
    upstream_state: Family<UpstreamLabels, Gauge>,
    upstream_tools: Family<ServerLabels, Gauge>,
    upstream_connects: Family<ServerLabels, Counter>,
    upstream_reconnects: Family<ServerLabels, Counter>,
    upstream_restarts: Family<ServerLabels, Counter>,
    egress_connections: Family<EgressLabels, Counter>,
    egress_bytes: Family<EgressBytesLabels, Counter>,
    egress_unrecorded: Family<ServerLabels, Counter>,
}

impl UpstreamMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let upstream_state = Family::<UpstreamLabels, Gauge>::default();
        registry.register(
            "upstream_state",
            "1 for each upstream server's current state (ready, connecting, error, disabled, quarantined, unapproved, login_required, authenticating, idle)",
            upstream_state.clone(),
        );
        let upstream_tools = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "upstream_tools",
            "Tools each upstream server lists",
            upstream_tools.clone(),
        );
        let upstream_connects: Family<ServerLabels, Counter> = Family::default();
        registry.register(
            "upstream_connects",
            "Connection attempts to each upstream server (the first included)",
            upstream_connects.clone(),
        );
        let upstream_reconnects: Family<ServerLabels, Counter> = Family::default();
        registry.register(
            "upstream_reconnects",
            "Connection attempts to an upstream server that had been connected (its session ended, or it was restarted)",
            upstream_reconnects.clone(),
        );
        let upstream_restarts: Family<ServerLabels, Counter> = Family::default();
        registry.register(
            "upstream_restarts",
            "Restarts of an upstream server a person asked for",
            upstream_restarts.clone(),
        );
        let egress_connections: Family<EgressLabels, Counter> = Family::default();
        registry.register(
            "egress_connections",
            "Connections sandboxed servers asked their egress proxy for, by server and outcome (connected, refused: not in the allow-list, failed: allowed but unreachable)",
            egress_connections.clone(),
        );
        let egress_bytes: Family<EgressBytesLabels, Counter> = Family::default();
        registry.register_with_unit(
            "egress",
            "Bytes carried by the egress proxy, by server and direction (sent: from the server out, received: back to it)",
            Unit::Bytes,
            egress_bytes.clone(),
        );
        let egress_unrecorded: Family<ServerLabels, Counter> = Family::default();
        registry.register(
            "egress_unrecorded_connections",
            "Egress connections counted but not written one by one to the journal because the server opened them faster than the record rate",
            egress_unrecorded.clone(),
        );
        Self {
            upstream_state,
            upstream_tools,
            upstream_connects,
            upstream_reconnects,
            upstream_restarts,
            egress_connections,
            egress_bytes,
            egress_unrecorded,
        }
    }
}

impl Metrics {
    /// The upstreams as they are now (servers no longer listed disappear).
    pub fn set_upstreams(&self, upstreams: impl IntoIterator<Item = UpstreamGauge>) {
        self.upstreams.upstream_state.clear();
        self.upstreams.upstream_tools.clear();
        for upstream in upstreams {
            self.upstreams
                .upstream_state
                .get_or_create(&UpstreamLabels {
                    server: upstream.server.clone(),
                    state: upstream.state,
                })
                .set(1);
            self.upstreams
                .upstream_tools
                .get_or_create(&ServerLabels {
                    server: upstream.server,
                })
                .set(i64::try_from(upstream.tools).unwrap_or(i64::MAX));
        }
    }

    /// An upstream started a connection attempt; `again` when it had been connected before
    /// (its session ended, or it was restarted).
    pub fn upstream_connecting(&self, server: &str, again: bool) {
        let labels = ServerLabels {
            server: server.to_owned(),
        };
        self.upstreams
            .upstream_connects
            .get_or_create(&labels)
            .inc();
        if again {
            self.upstreams
                .upstream_reconnects
                .get_or_create(&labels)
                .inc();
        }
    }

    /// A person restarted an upstream (REST, CLI, the page).
    pub fn upstream_restarted(&self, server: &str) {
        self.upstreams
            .upstream_restarts
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// One connection through a server's egress proxy, and the bytes it carried.
    pub fn egress(&self, server: &str, outcome: &str, sent: u64, received: u64) {
        self.upstreams
            .egress_connections
            .get_or_create(&EgressLabels {
                server: server.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        for (direction, bytes) in [("sent", sent), ("received", received)] {
            self.upstreams
                .egress_bytes
                .get_or_create(&EgressBytesLabels {
                    server: server.to_owned(),
                    direction: direction.to_owned(),
                })
                .inc_by(bytes);
        }
    }

    /// An egress connection left out of the journal (the server's record rate was spent).
    pub fn egress_unrecorded(&self, server: &str) {
        self.upstreams
            .egress_unrecorded
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .inc();
    }
}

//! The approvals' metrics: the calls waiting for a person now (set at each scrape) and the
//! answers given, by decision.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: String,
    asked_via: String,
}

/// The families of this area, registered by [`ApprovalMetrics::register`].
pub(super) struct ApprovalMetrics {
    pending: Gauge,
    decided: Family<DecisionLabels, Counter>,
}

impl ApprovalMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let pending = Gauge::default();
        registry.register(
            "approvals_pending",
            "Calls waiting for a person's approval now (`mcpproxy approvals list`)",
            pending.clone(),
        );
        let decided: Family<DecisionLabels, Counter> = Family::default();
        registry.register(
            "approvals",
            "Calls a rule of `approvals` made wait, by how they ended (approved, denied, \
             cancelled, timed_out, refused) and who was asked (client, page)",
            decided.clone(),
        );
        Self { pending, decided }
    }
}

impl Metrics {
    /// Sets how many calls wait for a person (at scrape time).
    pub fn set_approvals_pending(&self, waiting: usize) {
        self.approvals
            .pending
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }

    /// Counts one call that waited for a person, by how it ended.
    pub fn approval_decided(&self, decision: &str, asked_via: &str) {
        self.approvals
            .decided
            .get_or_create(&DecisionLabels {
                decision: decision.to_owned(),
                asked_via: asked_via.to_owned(),
            })
            .inc();
    }
}

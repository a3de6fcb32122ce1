//! The activity trail's metrics: the journal's group commits, fsyncs, size and health, and
//! each sink's backlog, lag, failures and deliveries (set before each scrape).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabels {
    sink: String,
}

type Seconds = Gauge<f64, AtomicU64>;

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

/// The families of this area, registered by [`JournalMetrics::register`].
pub(super) struct JournalMetrics {
    journal_commit_seconds: Histogram,
    journal_fsyncs: Counter,
    journal_bytes: Gauge,
    journal_records: Gauge,
    journal_failing: Gauge,
    journal_failure: Family<ReasonLabels, Gauge>,
    sink_backlog: Family<SinkLabels, Gauge>,
    sink_lag_seconds: Family<SinkLabels, Seconds>,
    sink_failures: Family<SinkLabels, Gauge>,
    sink_delivered: Family<SinkLabels, Gauge>,
    sink_dropped: Family<SinkLabels, Gauge>,
}

impl JournalMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
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
        let sink_failures: Family<SinkLabels, Gauge> = Family::default();
        registry.register(
            "sink_failures",
            "Failed delivery attempts of a sink since its last delivery",
            sink_failures.clone(),
        );
        let sink_delivered: Family<SinkLabels, Gauge> = Family::default();
        registry.register(
            "sink_delivered_records",
            "Records a sink delivered, all time",
            sink_delivered.clone(),
        );
        let sink_dropped: Family<SinkLabels, Gauge> = Family::default();
        registry.register(
            "sink_dropped_records",
            "Undelivered records dropped because the journal outgrew max_undelivered_bytes",
            sink_dropped.clone(),
        );
        Self {
            journal_commit_seconds,
            journal_fsyncs,
            journal_bytes,
            journal_records,
            journal_failing,
            journal_failure,
            sink_backlog,
            sink_lag_seconds,
            sink_failures,
            sink_delivered,
            sink_dropped,
        }
    }
}

impl Metrics {
    /// One group commit of the journal.
    pub fn journal_commit(&self, took: Duration) {
        self.journal
            .journal_commit_seconds
            .observe(took.as_secs_f64());
    }

    /// One fsync by the journal's writer.
    pub fn journal_fsync(&self) {
        self.journal.journal_fsyncs.inc();
    }

    /// The journal as it is now.
    pub fn set_journal(&self, file_bytes: u64, records: u64) {
        self.journal
            .journal_bytes
            .set(i64::try_from(file_bytes).unwrap_or(i64::MAX));
        self.journal
            .journal_records
            .set(i64::try_from(records).unwrap_or(i64::MAX));
    }

    /// Whether the journal writes: `None`, or why not.
    pub fn set_journal_health(&self, failing: Option<&str>) {
        self.journal.journal_failure.clear();
        self.journal
            .journal_failing
            .set(i64::from(failing.is_some()));
        if let Some(reason) = failing {
            self.journal
                .journal_failure
                .get_or_create(&ReasonLabels {
                    reason: reason.to_owned(),
                })
                .set(1);
        }
    }

    /// The sinks as they are now.
    pub fn set_sinks(&self, sinks: impl IntoIterator<Item = SinkGauge>) {
        self.journal.sink_backlog.clear();
        self.journal.sink_lag_seconds.clear();
        self.journal.sink_failures.clear();
        self.journal.sink_delivered.clear();
        self.journal.sink_dropped.clear();
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for sink in sinks {
            let labels = SinkLabels { sink: sink.sink };
            self.journal
                .sink_failures
                .get_or_create(&labels)
                .set(count(sink.failures));
            self.journal
                .sink_delivered
                .get_or_create(&labels)
                .set(count(sink.delivered));
            self.journal
                .sink_dropped
                .get_or_create(&labels)
                .set(count(sink.dropped));
            self.journal
                .sink_backlog
                .get_or_create(&labels)
                .set(i64::try_from(sink.backlog).unwrap_or(i64::MAX));
            self.journal
                .sink_lag_seconds
                .get_or_create(&labels)
                .set(sink.lag.as_secs_f64());
        }
    }
}

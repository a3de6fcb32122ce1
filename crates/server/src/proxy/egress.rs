//! The sandboxed servers' egress connections, recorded: each one (carried, refused or
//! failed) counted in the metrics and written as an `egress` activity record. A server that
//! opens connections faster than [`RECORDS_PER_SECOND`] (after a burst of [`BURST`]) has the
//! excess counted, not recorded one by one: the next record it gets says how many were left
//! out, so a hostile server cannot flood the journal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use mcpproxy_activity::{ActivityRecord, RecordType, Source, Status};
use serde_json::json;
use tokio::sync::mpsc;

use super::Proxy;
use mcpproxy_egress::{EgressEvent, Outcome};

/// Records a server may get per second, on average.
const RECORDS_PER_SECOND: f64 = 20.0;
/// Records a server may get at once.
const BURST: f64 = 200.0;
/// Servers whose buckets are remembered (their names come from the config, so this only
/// bounds memory against a config with very many servers).
const MAX_BUCKETS: usize = 4096;

/// One server's allowance of records.
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Connections left out since its last record.
    left_out: u64,
}

impl Proxy {
    /// Records the egress events until the senders are gone.
    pub fn record_egress(
        self: &Arc<Self>,
        mut events: mpsc::Receiver<EgressEvent>,
    ) -> tokio::task::JoinHandle<()> {
        let proxy = self.clone();
        tokio::spawn(async move {
            let mut buckets: HashMap<Arc<str>, Bucket> = HashMap::new();
            while let Some(event) = events.recv().await {
                proxy.metrics().egress(
                    &event.server,
                    event.outcome.as_str(),
                    event.sent,
                    event.received,
                );
                if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&event.server) {
                    buckets.clear();
                }
                let now = Instant::now();
                let bucket = buckets.entry(event.server.clone()).or_insert(Bucket {
                    tokens: BURST,
                    at: now,
                    left_out: 0,
                });
                bucket.tokens = (bucket.tokens
                    + now.duration_since(bucket.at).as_secs_f64() * RECORDS_PER_SECOND)
                    .min(BURST);
                bucket.at = now;
                if bucket.tokens < 1.0 {
                    bucket.left_out += 1;
                    proxy.metrics().egress_unrecorded(&event.server);
                    continue;
                }
                bucket.tokens -= 1.0;
                let left_out = std::mem::take(&mut bucket.left_out);
                proxy.append(record(&event, left_out)).await;
            }
        })
    }
}

/// The `egress` record of one connection.
pub(super) fn record(event: &EgressEvent, left_out: u64) -> ActivityRecord {
    let mut record = ActivityRecord::new(
        RecordType::Egress,
        Source::Upstream,
        &*event.server,
        event.destination(),
    );
    let why = match &event.outcome {
        Outcome::Connected => {
            record.status = Status::Success;
            None
        }
        Outcome::Refused(why) => {
            record.status = Status::Blocked;
            Some(why)
        }
        Outcome::Failed(why) => {
            record.status = Status::Error;
            Some(why)
        }
    };
    record.error_message = why.cloned();
    record.response_bytes = event.received;
    record.duration_ms = u64::try_from(event.duration.as_millis()).unwrap_or(u64::MAX);
    let mut details = json!({
        "host": event.host,
        "port": event.port,
        "protocol": event.protocol,
        "outcome": event.outcome.as_str(),
        "bytes_sent": event.sent,
        "bytes_received": event.received,
    });
    if let Some(address) = event.address {
        details["address"] = json!(address.to_string());
    }
    if left_out > 0 {
        details["left_out_before"] = json!(left_out);
    }
    record.details = Some(details);
    record
}

//! Retention: deleting the oldest records until the age, count and size limits hold, and
//! what happens when they cannot (pressure mode).
//!
//! Deletion runs oldest first in transactions of `retention_batch` records, removing each
//! record's index entries with it. A record some sink has not delivered yet (it still has an
//! outbox entry, see `outbox`) is kept past the limits: retention stops at it and warns how
//! much it kept. That has a bound, `max_undelivered_bytes`: once the journal's data outgrows
//! it, the oldest records go even if undelivered, each counted as dropped for the sinks that
//! had not delivered it, with an error in the log.
//!
//! **Minimum age.** The size and count limits (`max_bytes`, `max_records`, and the
//! `max_undelivered_bytes` overflow, which is a size limit too) never delete a record younger
//! than `min_age`: whoever can call the proxy could otherwise flood the journal with large
//! records and push the genuine record of an earlier call out. Only `max_age` deletes by age
//! (and `min_age` ≤ `max_age`, so it never reaches a record `min_age` protects).
//!
//! **Pressure.** When retention stops because the journal is still over `max_bytes` or
//! `max_records` and its oldest record is younger than `min_age`, the journal is *under
//! pressure*: until a retention run finds it back under its limits, new records are stored
//! summarised ([`ActivityRecord::summarised`], under 2 KiB each) rather than refused (a
//! refused record would fail the call). The data on disk may therefore exceed `max_bytes` by
//! those summaries until the young records age past `min_age`. Entering pressure logs one
//! error and writes one [`RecordType::Alert`] record naming the busiest sessions and clients
//! of the last [`ALERT_WINDOW`] records; leaving it logs an info line, and entering it again
//! later writes another alert.
//!
//! **The hash chain.** Retention deletes a chained record only if a checkpoint covers it
//! (it signs the head first), and records the first checkpoint at or after the last
//! record it deleted as the chain's *anchor* (`pruned_to`), keeping that checkpoint and
//! dropping older ones; `verify` then reports the records before the anchor as pruned and
//! checks the rest from the anchor's signed hash on.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde_json::json;

use super::Result;
use super::chain::ChainLink;
use super::chain::link::{CHAIN, pruned, read_head};
use super::journal::{
    DATA_BYTES, Journal, META, RECORDS, index_keys, key_id, key_ms, open_indexes, row_cost,
};
use super::outbox::{OUTBOX_KEYS, drop_undelivered};
use super::record::{ActivityRecord, RecordType, Source, Status, now_ms};

/// How many of the newest records the pressure alert looks at for its busiest sessions and
/// clients.
pub(crate) const ALERT_WINDOW: usize = 1000;

/// Where one retention pass left the journal.
struct Pass {
    deleted: usize,
    /// Over a size or count limit with only records younger than `min_age` left.
    pressure: bool,
    bytes: u64,
    records: u64,
}

/// Milliseconds of `d`, saturating.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Journal {
    /// Deletes the oldest records until the age, count and size limits hold, stopping at the
    /// oldest undelivered record unless the data is over `max_undelivered_bytes`, and (for
    /// size and count) at the first record younger than `min_age`; returns how many were
    /// deleted. Updates the pressure state (see the module docs), writing an `alert` record
    /// when pressure begins. Blocking: from async code use `spawn_blocking` (as
    /// [`spawn_retention`](Self::spawn_retention) does).
    pub fn run_retention(&self) -> Result<usize> {
        // Fold the write-ahead log into the file first: a record it deletes must not be in
        // the log, or a crash would bring it back.
        self.checkpoint()?;
        // Sign the chain's head, so that every chained record is covered by a checkpoint
        // retention may anchor to (it deletes none a checkpoint does not cover).
        self.sign_head()?;
        let pass = self.guard(|| self.delete_oldest())?;
        let was = self.pressure.swap(pass.pressure, Ordering::Relaxed);
        if pass.pressure && !was {
            self.alert(&pass)?;
        } else if was && !pass.pressure {
            tracing::info!(
                "the activity journal is back under its retention limits; new records are \
                 stored in full again"
            );
        }
        Ok(pass.deleted)
    }

    fn delete_oldest(&self) -> Result<Pass> {
        let limits = &self.options.retention;
        let batch = self.options.retention_batch.max(1);
        let now = now_ms();
        let cutoff_ms = (!limits.max_age.is_zero()).then(|| now.saturating_sub(ms(limits.max_age)));
        let young_ms = (!limits.min_age.is_zero()).then(|| now.saturating_sub(ms(limits.min_age)));
        let mut pass = Pass {
            deleted: 0,
            pressure: false,
            bytes: 0,
            records: 0,
        };
        let mut kept: Option<[u8; 16]> = None;
        let mut dropped = 0u64;
        let mut dropped_for = BTreeSet::new();
        loop {
            let txn = self.db()?.begin_write()?;
            let mut n = 0;
            let mut done = false;
            let signed = read_head(&txn.open_table(CHAIN)?)?.signed_seq;
            let mut max_deleted = 0;
            {
                let mut records = txn.open_table(RECORDS)?;
                let mut indexes = open_indexes(&txn)?;
                let mut meta = txn.open_table(META)?;
                let mut bytes = meta.get(DATA_BYTES)?.map_or(0, |g| g.value());
                let mut len = records.len()?;
                while n < batch {
                    let oldest = records
                        .first()?
                        .map(|(k, v)| (k.value(), v.value().to_vec()));
                    let Some((key, json)) = oldest else {
                        done = true;
                        break;
                    };
                    let too_old = cutoff_ms.is_some_and(|c| key_ms(&key) < c);
                    let too_much = (limits.max_records > 0 && len > limits.max_records)
                        || (limits.max_bytes > 0 && bytes > limits.max_bytes);
                    if !too_old && !too_much {
                        done = true;
                        break;
                    }
                    if !too_old && young_ms.is_some_and(|y| key_ms(&key) >= y) {
                        // Over a size or count limit, but this (the oldest) record is younger
                        // than min_age, and so is every record after it.
                        pass.pressure = true;
                        done = true;
                        break;
                    }
                    let seq = ChainLink::of_row(&json).and_then(|link| link.seq);
                    if seq.is_some_and(|seq| seq > signed) {
                        // No checkpoint covers it yet: the chain's anchor must be one.
                        done = true;
                        break;
                    }
                    max_deleted = max_deleted.max(seq.unwrap_or(0));
                    let undelivered = txn.open_table(OUTBOX_KEYS)?.get(key)?.is_some();
                    if undelivered {
                        let over_bound = limits.max_undelivered_bytes > 0
                            && bytes > limits.max_undelivered_bytes;
                        if !over_bound {
                            kept = Some(key);
                            done = true;
                            break;
                        }
                        dropped += 1;
                        dropped_for.extend(drop_undelivered(&txn, &key)?);
                    }
                    records.remove(key)?;
                    match serde_json::from_slice::<ActivityRecord>(&json) {
                        Ok(rec) => {
                            let keys = index_keys(&rec);
                            for (index, k) in indexes.iter_mut().zip(&keys) {
                                if let Some(k) = k {
                                    index.remove((k.as_str(), key))?;
                                }
                            }
                            bytes = bytes.saturating_sub(row_cost(json.len(), &keys));
                        }
                        Err(e) => {
                            tracing::warn!(
                                id = %key_id(&key),
                                "deleting a corrupt activity record; its index entries stay behind: {e}"
                            );
                            bytes = bytes.saturating_sub(16 + json.len() as u64);
                        }
                    }
                    len -= 1;
                    n += 1;
                }
                meta.insert(DATA_BYTES, bytes)?;
                pass.bytes = bytes;
                pass.records = len;
            }
            if max_deleted > 0 {
                pruned(&txn, max_deleted)?;
            }
            txn.commit()?;
            pass.deleted += n;
            if done || n == 0 {
                break;
            }
        }
        if dropped > 0 {
            tracing::error!(
                dropped,
                sinks = %dropped_for.iter().cloned().collect::<Vec<_>>().join(", "),
                "the activity journal outgrew activity.retention.max_undelivered_bytes ({} bytes) \
                 while sinks were behind: deleted {dropped} records they had not delivered; \
                 they will never reach those sinks (see `mcpproxy activity sinks`)",
                limits.max_undelivered_bytes
            );
        }
        if let Some(key) = kept {
            self.warn_kept(&key)?;
        }
        Ok(pass)
    }

    /// Logs the start of a pressure episode and writes its `alert` record.
    fn alert(&self, pass: &Pass) -> Result<()> {
        let limits = &self.options.retention;
        let hours = limits.min_age.as_secs() / 3600;
        let (sessions, clients) = self.guard(|| self.busiest(ALERT_WINDOW))?;
        let top = |list: &[(String, u64)], what: &str| match list.first() {
            Some((name, n)) => format!(
                "the busiest {what} of the last {ALERT_WINDOW} records is {name} ({n} records)"
            ),
            None => format!("no {what} is named in the last {ALERT_WINDOW} records"),
        };
        let session_hint = sessions.first().map_or_else(
            || "mcpproxy activity list".to_owned(),
            |(s, _)| format!("mcpproxy activity list --session {s}"),
        );
        let message = format!(
            "The activity journal is over its limit ({} bytes of data for activity.retention.max_bytes {}, \
             {} records for max_records {}) and every record in it is younger than \
             activity.retention.min_age_hours ({hours} h), so retention may not delete any. \
             New records are stored summarised (arguments and long text cut) until older records \
             can go. Something may be flooding the proxy: {}; {}. Look at its calls with \
             `{session_hint}` (or GET /api/v1/activity?session=...). To keep full records, raise \
             activity.retention.max_bytes or max_records, or lower min_age_hours.",
            pass.bytes,
            limits.max_bytes,
            pass.records,
            limits.max_records,
            top(&sessions, "session"),
            top(&clients, "client"),
        );
        tracing::error!("{message}");
        let count = |list: Vec<(String, u64)>, key: &str| -> Vec<serde_json::Value> {
            list.into_iter()
                .map(|(name, n)| json!({ key: name, "records": n }))
                .collect()
        };
        let mut alert = ActivityRecord::new(
            RecordType::Alert,
            Source::Proxy,
            "mcpproxy",
            "activity_journal",
        );
        alert.status = Status::Error;
        alert.error_message = Some(message);
        alert.details = Some(json!({
            "alert": "journal_under_pressure",
            "data_bytes": pass.bytes,
            "records": pass.records,
            "max_bytes": limits.max_bytes,
            "max_records": limits.max_records,
            "min_age_hours": hours,
            "window": ALERT_WINDOW,
            "top_sessions": count(sessions, "session_id"),
            "top_clients": count(clients, "client"),
        }));
        self.bulk_load(&[alert])
    }

    /// The five sessions and clients with the most records among the newest `window`.
    #[allow(
        clippy::type_complexity,
        reason = "two ranked lists of (name, count); a named type would be used once"
    )]
    fn busiest(&self, window: usize) -> Result<(Vec<(String, u64)>, Vec<(String, u64)>)> {
        let txn = self.db()?.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let mut sessions: HashMap<String, u64> = HashMap::new();
        let mut clients: HashMap<String, u64> = HashMap::new();
        for row in table.iter()?.rev().take(window) {
            let (_, json) = row?;
            let Ok(rec) = serde_json::from_slice::<ActivityRecord>(json.value()) else {
                continue;
            };
            if let Some(s) = rec.session_id {
                *sessions.entry(s).or_default() += 1;
            }
            if let Some(c) = rec.client {
                *clients
                    .entry(format!("{} {}", c.name, c.version).trim().to_owned())
                    .or_default() += 1;
            }
        }
        let top = |map: HashMap<String, u64>| {
            let mut list: Vec<_> = map.into_iter().collect();
            list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            list.truncate(5);
            list
        };
        Ok((top(sessions), top(clients)))
    }

    /// Logs that retention kept records past its limits for sinks that are behind.
    fn warn_kept(&self, oldest: &[u8; 16]) -> Result<()> {
        let behind: Vec<String> = self
            .sink_status()?
            .into_iter()
            .filter(|s| s.backlog > 0)
            .map(|s| {
                format!(
                    "{} ({} undelivered{})",
                    s.name,
                    s.backlog,
                    s.state
                        .last_error
                        .as_ref()
                        .map(|e| format!(", last error: {e}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        let (len, data_bytes) = self.guard(|| {
            let txn = self.db()?.begin_read()?;
            let len = txn.open_table(RECORDS)?.len()?;
            let data_bytes = txn
                .open_table(META)?
                .get(DATA_BYTES)?
                .map_or(0, |g| g.value());
            Ok((len, data_bytes))
        })?;
        tracing::warn!(
            records = len,
            data_bytes,
            oldest_kept = %key_id(oldest),
            "activity retention is keeping records past its limits because sinks have not \
             delivered them: {}; they are deleted anyway once the data exceeds {} bytes \
             (activity.retention.max_undelivered_bytes)",
            behind.join("; "),
            self.options.retention.max_undelivered_bytes
        );
        Ok(())
    }

    /// Runs [`run_retention`](Self::run_retention) now and then every `retention.interval` on
    /// the blocking pool. Holds only a weak reference: the task ends once the journal is
    /// dropped. Must be called inside a tokio runtime (like `tokio::spawn`).
    pub fn spawn_retention(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let journal = Arc::downgrade(self);
        let period = self
            .options
            .retention
            .interval
            .max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(journal) = journal.upgrade() else {
                    return;
                };
                match tokio::task::spawn_blocking(move || journal.run_retention()).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!("activity retention deleted {n} records"),
                    Ok(Err(e)) => tracing::warn!("activity retention failed: {e}"),
                    Err(e) => tracing::error!("activity retention task failed: {e}"),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;

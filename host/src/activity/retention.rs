//! Retention: deleting the oldest records until the age, count and size limits hold.
//!
//! Deletion runs oldest first in transactions of `retention_batch` records, removing each
//! record's index entries with it. A record some sink has not delivered yet (it still has an
//! outbox entry, see `outbox`) is kept past the limits: retention stops at it and warns how
//! much it kept. That has a bound, `max_undelivered_bytes`: once the journal's data outgrows
//! it, the oldest records go even if undelivered, each counted as dropped for the sinks that
//! had not delivered it, with an error in the log.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::Result;
use super::journal::{
    DATA_BYTES, INDEXES, Journal, META, RECORDS, index_keys, key_id, key_ms, row_cost,
};
use super::outbox::{OUTBOX_KEYS, drop_undelivered};
use super::record::{ActivityRecord, now_ms};

/// Retention limits; a zero value disables that limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Delete records older than this; default 90 days.
    pub max_age: Duration,
    /// Keep at most this many records; default 1 000 000.
    pub max_records: u64,
    /// Keep the logical data size (record JSON + keys + index entries) under this; default
    /// 1 GiB. The file itself is larger (B-tree pages) and never shrinks, but stops growing.
    pub max_bytes: u64,
    /// How large the logical data may grow while it holds records a sink has not delivered;
    /// past it, undelivered records are deleted too (and counted as dropped). Default 4 GiB.
    pub max_undelivered_bytes: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(90 * 24 * 3600),
            max_records: 1_000_000,
            max_bytes: 1 << 30,
            max_undelivered_bytes: 4 << 30,
        }
    }
}

impl Journal {
    /// Deletes the oldest records until the age, count and size limits hold, stopping at the
    /// oldest undelivered record unless the data is over `max_undelivered_bytes`; returns how
    /// many were deleted. Blocking: from async code use `spawn_blocking` (as
    /// [`spawn_retention`](Self::spawn_retention) does).
    pub fn run_retention(&self) -> Result<usize> {
        let limits = &self.options.retention;
        let batch = self.options.retention_batch.max(1);
        let cutoff_ms = (!limits.max_age.is_zero()).then(|| {
            let age = u64::try_from(limits.max_age.as_millis()).unwrap_or(u64::MAX);
            now_ms().saturating_sub(age)
        });
        let mut deleted = 0;
        let mut kept: Option<[u8; 16]> = None;
        let mut dropped = 0u64;
        let mut dropped_for = BTreeSet::new();
        loop {
            let txn = self.db.begin_write()?;
            let mut n = 0;
            let mut done = false;
            {
                let mut records = txn.open_table(RECORDS)?;
                let mut indexes = Vec::with_capacity(INDEXES.len());
                for def in INDEXES {
                    indexes.push(txn.open_table(def)?);
                }
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
                    let over = (limits.max_records > 0 && len > limits.max_records)
                        || cutoff_ms.is_some_and(|c| key_ms(&key) < c)
                        || (limits.max_bytes > 0 && bytes > limits.max_bytes);
                    if !over {
                        done = true;
                        break;
                    }
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
            }
            txn.commit()?;
            deleted += n;
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
        Ok(deleted)
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
        let txn = self.db.begin_read()?;
        let len = txn.open_table(RECORDS)?.len()?;
        let data_bytes = txn
            .open_table(META)?
            .get(DATA_BYTES)?
            .map_or(0, |g| g.value());
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

    /// Runs [`run_retention`](Self::run_retention) now and then every `retention_interval` on
    /// the blocking pool. Holds only a weak reference: the task ends once the journal is
    /// dropped. Must be called inside a tokio runtime (like `tokio::spawn`).
    pub fn spawn_retention(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let journal = Arc::downgrade(self);
        let period = self
            .options
            .retention_interval
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
mod tests {
    use super::*;
    use crate::activity::record::Status;
    use crate::activity::test_util::{check_indexes, open_temp, rec_at};
    use crate::activity::{Filter, JournalOptions};

    const DAY: u64 = 24 * 3600 * 1000;

    fn options(retention: Retention, batch: usize) -> JournalOptions {
        JournalOptions {
            retention,
            retention_batch: batch,
            ..JournalOptions::default()
        }
    }

    fn none() -> Retention {
        Retention {
            max_age: Duration::ZERO,
            max_records: 0,
            max_bytes: 0,
            max_undelivered_bytes: 0,
        }
    }

    /// 100 records, one a minute, ending now.
    fn fill(j: &Journal) -> Vec<ActivityRecord> {
        let now = now_ms();
        let recs: Vec<_> = (0..100u64)
            .map(|i| {
                let server = if i % 2 == 0 { "even" } else { "odd" };
                rec_at(
                    now - (99 - i) * 60_000,
                    server,
                    "t",
                    "write",
                    Status::Success,
                )
            })
            .collect();
        j.bulk_load(&recs).unwrap();
        recs
    }

    fn ids(j: &Journal) -> Vec<String> {
        let mut ids: Vec<_> = j
            .query(&Filter::default(), 1000, 0)
            .unwrap()
            .records
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.reverse();
        ids
    }

    #[test]
    fn by_count_oldest_first_in_batches() {
        let (_dir, j) = open_temp(options(
            Retention {
                max_records: 30,
                ..none()
            },
            7,
        ));
        let recs = fill(&j);
        assert_eq!(j.run_retention().unwrap(), 70);
        let want: Vec<_> = recs[70..].iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids(&j), want);
        assert_eq!(j.run_retention().unwrap(), 0);
        let even = Filter {
            server: Some("even".into()),
            ..Filter::default()
        };
        assert_eq!(j.query(&even, 1000, 0).unwrap().records.len(), 15);
        check_indexes(&j);
    }

    #[test]
    fn by_age() {
        let (_dir, j) = open_temp(options(
            Retention {
                max_age: Duration::from_secs(3600),
                ..none()
            },
            10_000,
        ));
        let now = now_ms();
        let old: Vec<_> = (0..50)
            .map(|i| rec_at(now - 10 * DAY + i, "s", "t", "read", Status::Success))
            .collect();
        let new: Vec<_> = (0..20)
            .map(|i| rec_at(now - 1000 + i, "s", "t", "read", Status::Success))
            .collect();
        j.bulk_load(&old).unwrap();
        j.bulk_load(&new).unwrap();
        assert_eq!(j.run_retention().unwrap(), 50);
        assert_eq!(
            ids(&j),
            new.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
        );
        check_indexes(&j);
    }

    #[test]
    fn by_size() {
        let (_dir, j) = open_temp(options(none(), 10_000));
        fill(&j);
        let full = j.stats().unwrap().data_bytes;
        let per_record = full / 100;
        drop(j);
        let limit = full / 4;
        let (_dir, j) = open_temp(options(
            Retention {
                max_bytes: limit,
                ..none()
            },
            10_000,
        ));
        let recs = fill(&j);
        let deleted = j.run_retention().unwrap();
        let left = j.stats().unwrap().data_bytes;
        assert!(
            left <= limit && left + per_record * 2 > limit,
            "{left} vs {limit}"
        );
        assert_eq!(
            ids(&j),
            recs[deleted..]
                .iter()
                .map(|r| r.id.clone())
                .collect::<Vec<_>>()
        );
        check_indexes(&j);
        // The size counter follows upserts and deletions down to zero.
        let (_dir2, j2) = open_temp(options(
            Retention {
                max_records: 1,
                ..none()
            },
            3,
        ));
        fill(&j2);
        j2.run_retention().unwrap();
        assert_eq!(j2.len().unwrap(), 1);
        let last = ids(&j2).pop().unwrap();
        let rec = j2.get(&last).unwrap().unwrap();
        let cost = j2.stats().unwrap().data_bytes;
        assert_eq!(
            cost,
            row_cost(serde_json::to_vec(&rec).unwrap().len(), &index_keys(&rec))
        );
    }

    #[tokio::test]
    async fn undelivered_records_are_kept_until_the_bound() {
        let (_dir, j) = open_temp(options(
            Retention {
                max_records: 10,
                ..none()
            },
            7,
        ));
        let old = fill(&j); // before any sink: never queued
        j.register_sinks(&["ch".to_string()]).unwrap();
        let mut recs = Vec::new();
        for i in 0..30 {
            let rec = rec_at(now_ms() + i, "s", "t", "read", Status::Success);
            j.append(rec.clone()).await.unwrap();
            recs.push(rec);
        }
        assert_eq!(
            j.run_retention().unwrap(),
            100,
            "stops at the oldest undelivered"
        );
        assert_eq!(ids(&j).first(), Some(&recs[0].id));
        assert!(j.get(&old[99].id).unwrap().is_none());

        // Deliver 25: retention may now delete those, down to the limit of 10.
        let batch = j.sink_batch("ch", 25, usize::MAX).unwrap().unwrap();
        j.sink_delivered("ch", batch.last_seq, 25).unwrap();
        assert_eq!(j.run_retention().unwrap(), 20);
        assert_eq!(j.len().unwrap(), 10);
        check_indexes(&j);

        // Past max_undelivered_bytes, undelivered records go too, counted as dropped.
        drop(j);
        let (_dir, j) = open_temp(options(
            Retention {
                max_records: 2,
                max_undelivered_bytes: 1,
                ..none()
            },
            7,
        ));
        j.register_sinks(&["ch".to_string()]).unwrap();
        for i in 0..5 {
            j.append(rec_at(now_ms() + i, "s", "t", "read", Status::Success))
                .await
                .unwrap();
        }
        assert_eq!(j.run_retention().unwrap(), 3);
        let status = &j.sink_status().unwrap()[0];
        assert_eq!(status.state.dropped, 3);
        assert_eq!(status.backlog, 5, "the cursor did not move");
        assert_eq!(
            j.sink_batch("ch", 100, usize::MAX)
                .unwrap()
                .unwrap()
                .records
                .len(),
            2
        );
        check_indexes(&j);
    }

    #[tokio::test]
    async fn spawned_task_runs_and_stops_with_the_journal() {
        let mut opts = options(
            Retention {
                max_records: 5,
                ..none()
            },
            10_000,
        );
        opts.retention_interval = Duration::from_millis(20);
        let (_dir, j) = open_temp(opts);
        fill(&j);
        let task = j.spawn_retention();
        for _ in 0..200 {
            if j.len().unwrap() == 5 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(j.len().unwrap(), 5);
        drop(j);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
}

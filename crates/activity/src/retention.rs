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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde_json::json;

use super::Result;
use super::journal::{
    DATA_BYTES, Journal, META, RECORDS, index_keys, key_id, key_ms, open_indexes, row_cost,
};
use super::outbox::{OUTBOX_KEYS, drop_undelivered};
use super::record::{ActivityRecord, RecordType, Source, Status, now_ms};

/// Retention limits; a zero value disables that limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Delete records older than this; default 90 days.
    pub max_age: Duration,
    /// Never delete a record younger than this because of `max_records`, `max_bytes` or
    /// `max_undelivered_bytes`; default 7 days.
    pub min_age: Duration,
    /// Keep at most this many records; default 1 000 000.
    pub max_records: u64,
    /// Keep the logical data size (record JSON + keys + index entries) under this; default
    /// 1 GiB. The file itself is larger (B-tree pages); it stops growing, and shrinks when
    /// the journal is next opened if retention freed much of it.
    pub max_bytes: u64,
    /// How large the logical data may grow while it holds records a sink has not delivered;
    /// past it, undelivered records are deleted too (and counted as dropped). Default 4 GiB.
    pub max_undelivered_bytes: u64,
    /// Period of [`Journal::spawn_retention`]; default 60 s.
    pub interval: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(90 * 24 * 3600),
            min_age: Duration::from_secs(7 * 24 * 3600),
            max_records: 1_000_000,
            max_bytes: 1 << 30,
            max_undelivered_bytes: 4 << 30,
            interval: Duration::from_secs(60),
        }
    }
}

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
mod tests {
    use super::*;
    use crate::record::{RecordType, Status};
    use crate::test_util::{check_indexes, open_temp, rec_at};
    use crate::{Filter, JournalOptions};

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
            min_age: Duration::ZERO,
            max_records: 0,
            max_bytes: 0,
            max_undelivered_bytes: 0,
            interval: Duration::from_secs(60),
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
                .rows
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
        opts.retention.interval = Duration::from_millis(20);
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

    /// `n` records of about `size` bytes of arguments, `age_ms` old (spaced 1 ms apart).
    fn big(n: u64, size: usize, age_ms: u64, session: &str) -> Vec<ActivityRecord> {
        let now = now_ms();
        (0..n)
            .map(|i| {
                let mut rec = rec_at(now - age_ms + i, "s", "t", "write", Status::Success);
                rec.arguments = Some(serde_json::json!({"blob": "x".repeat(size)}));
                rec.session_id = Some(session.to_owned());
                rec
            })
            .collect()
    }

    fn with_min_age(max_bytes: u64) -> JournalOptions {
        options(
            Retention {
                max_bytes,
                min_age: Duration::from_secs(3600),
                max_age: Duration::from_secs(30 * 24 * 3600),
                ..none()
            },
            10_000,
        )
    }

    #[test]
    fn min_age_keeps_young_records_over_max_bytes_and_old_ones_still_go() {
        let (_dir, j) = open_temp(with_min_age(100_000));
        let old = big(50, 2000, 2 * DAY, "old");
        let young = big(200, 2000, 60_000, "flood");
        j.bulk_load(&old).unwrap();
        j.bulk_load(&young).unwrap();
        assert!(j.stats().unwrap().data_bytes > 400_000);
        // Every old record goes (over max_bytes and older than min_age); no young one does.
        assert_eq!(j.run_retention().unwrap(), 50);
        assert_eq!(j.len().unwrap(), 200 + 1, "the young records and the alert");
        assert!(j.get(&young[0].id).unwrap().is_some());
        assert!(j.get(&old[49].id).unwrap().is_none());
        assert!(j.under_pressure());
        check_indexes(&j);
        // Without min_age the same flood pushes everything else out.
        let (_dir, j) = open_temp(options(
            Retention {
                max_bytes: 100_000,
                ..none()
            },
            10_000,
        ));
        j.bulk_load(&young).unwrap();
        assert!(j.run_retention().unwrap() > 100);
        assert!(j.get(&young[0].id).unwrap().is_none());
        assert!(!j.under_pressure());
    }

    #[tokio::test]
    async fn under_pressure_records_are_summarised_and_one_alert_is_written_per_episode() {
        let (_dir, j) = open_temp(with_min_age(100_000));
        let alerts = |j: &Journal| {
            j.query(
                &Filter {
                    record_type: Some(RecordType::Alert),
                    ..Filter::default()
                },
                100,
                0,
            )
            .unwrap()
            .records
        };
        // Not under pressure: stored in full.
        let full = big(1, 8000, 0, "s0").remove(0);
        j.append(full.clone()).await.unwrap();
        assert!(!j.get(&full.id).unwrap().unwrap().summarised);

        j.bulk_load(&big(100, 2000, 60_000, "flood")).unwrap();
        j.run_retention().unwrap();
        assert!(j.under_pressure());
        let first = alerts(&j);
        assert_eq!(first.len(), 1);
        let alert = &first[0];
        assert_eq!(alert.record_type, RecordType::Alert);
        assert_eq!(alert.status, Status::Error);
        let text = alert.error_message.as_deref().unwrap();
        assert!(text.contains("min_age_hours"), "{text}");
        assert!(text.contains("--session flood"), "{text}");
        assert_eq!(
            alert.details.as_ref().unwrap()["top_sessions"][0]["session_id"],
            "flood"
        );
        assert!(!alert.summarised);

        // Under pressure: new records are summarised, small, and keep their identity.
        let flood = big(1, 8000, 0, "flood").remove(0);
        j.append(flood.clone()).await.unwrap();
        let stored = j.get(&flood.id).unwrap().unwrap();
        assert!(stored.summarised);
        assert!(stored.arguments_truncated);
        assert!(serde_json::to_vec(&stored).unwrap().len() <= 2048);
        assert_eq!(stored.session_id, flood.session_id);
        assert_eq!(stored.status, flood.status);

        // Still under pressure: no second alert.
        j.run_retention().unwrap();
        assert_eq!(alerts(&j).len(), 1);
        drop(j);

        // A new episode after leaving pressure writes another alert.
        let (_dir, j) = open_temp(with_min_age(100_000));
        let flood = big(100, 2000, 60_000, "a");
        j.bulk_load(&flood).unwrap();
        j.run_retention().unwrap();
        assert!(j.under_pressure());
        assert_eq!(alerts(&j).len(), 1);
        // Leave: the flood's records are written again (their calls' outcomes), summarised
        // under pressure, which brings the journal back under max_bytes; the next pass finds
        // it within its limits, with nothing to delete.
        for rec in flood {
            j.upsert(rec).await.unwrap();
        }
        assert!(j.stats().unwrap().data_bytes < 100_000);
        assert_eq!(j.run_retention().unwrap(), 0);
        assert!(!j.under_pressure(), "back under its limits: pressure ends");
        assert_eq!(alerts(&j).len(), 1);
        // A new flood starts a new episode, with its own alert.
        j.bulk_load(&big(100, 2000, 30_000, "b")).unwrap();
        j.run_retention().unwrap();
        assert!(j.under_pressure());
        assert_eq!(alerts(&j).len(), 2);
    }

    #[test]
    fn reopening_compacts_a_file_retention_emptied() {
        let (dir, j) = open_temp(options(none(), 10_000));
        let path = j.path().to_path_buf();
        j.bulk_load(&big(4000, 2000, 60_000, "s")).unwrap();
        drop(j);
        let full = std::fs::metadata(&path).unwrap().len();
        let j = Journal::open(
            &path,
            options(
                Retention {
                    max_records: 100,
                    ..none()
                },
                10_000,
            ),
        )
        .unwrap();
        assert_eq!(j.run_retention().unwrap(), 3900);
        drop(j);
        let before = std::fs::metadata(&path).unwrap().len();
        assert!(before >= full / 2, "redb does not shrink on its own");
        let j = Journal::open(&path, options(none(), 10_000)).unwrap();
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(after * 4 < before, "compacted: {before} -> {after} bytes");
        assert_eq!(j.len().unwrap(), 100);
        check_indexes(&j);
        drop((j, dir));
    }
}

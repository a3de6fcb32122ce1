//! Retention: deleting the oldest records until the age, count and size limits hold.
//!
//! Deletion runs oldest first in transactions of `retention_batch` records, removing each
//! record's index entries with it. Sinks pin what they have not delivered yet with a named
//! floor ([`Journal::set_retention_floor`], stored in the `activity_floors` table so it
//! survives restarts): a record whose id is at or after the lowest floor is never deleted,
//! even past the limits, and a warning says how many were kept and for which floor.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::Result;
use super::journal::{
    DATA_BYTES, INDEXES, Journal, META, RECORDS, index_keys, key_id, key_ms, parse_key, row_cost,
};
use super::record::{ActivityRecord, format_timestamp, now_ms};

/// Retention floors: name → ULID bytes of the oldest record that must be kept.
pub(super) const FLOORS: TableDefinition<&str, [u8; 16]> = TableDefinition::new("activity_floors");

/// Retention limits; a zero value disables that limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Delete records older than this; default 30 days.
    pub max_age: Duration,
    /// Keep at most this many records; default 1 000 000.
    pub max_records: u64,
    /// Keep the logical data size (record JSON + keys + index entries) under this; default
    /// 1 GiB. The file itself is larger (B-tree pages) and never shrinks, but stops growing.
    pub max_bytes: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(30 * 24 * 3600),
            max_records: 1_000_000,
            max_bytes: 1 << 30,
        }
    }
}

/// Most records counted for the "kept past retention" warning.
const KEPT_COUNT_CAP: u64 = 1_000_000;

impl Journal {
    /// Pins records at or after `id` against retention under `name` (one floor per sink);
    /// `None` removes the floor. Durable when it returns.
    pub fn set_retention_floor(&self, name: &str, id: Option<&str>) -> Result<()> {
        let key = id.map(parse_key).transpose()?;
        let txn = self.db.begin_write()?;
        {
            let mut floors = txn.open_table(FLOORS)?;
            match key {
                Some(key) => floors.insert(name, key)?,
                None => floors.remove(name)?,
            };
        }
        txn.commit()?;
        Ok(())
    }

    /// The retention floors as `(name, id)`, by name.
    pub fn retention_floors(&self) -> Result<Vec<(String, String)>> {
        let txn = self.db.begin_read()?;
        let floors = txn.open_table(FLOORS)?;
        let mut out = Vec::new();
        for row in floors.iter()? {
            let (name, key) = row?;
            out.push((name.value().to_string(), key_id(&key.value())));
        }
        Ok(out)
    }

    /// The lowest floor as `(key, name)`.
    fn lowest_floor(&self) -> Result<Option<([u8; 16], String)>> {
        let txn = self.db.begin_read()?;
        let floors = txn.open_table(FLOORS)?;
        let mut lowest: Option<([u8; 16], String)> = None;
        for row in floors.iter()? {
            let (name, key) = row?;
            let key = key.value();
            if lowest.as_ref().is_none_or(|(k, _)| key < *k) {
                lowest = Some((key, name.value().to_string()));
            }
        }
        Ok(lowest)
    }

    /// Deletes the oldest records until the age, count and size limits hold or the lowest
    /// floor is reached; returns how many were deleted. Blocking: from async code use
    /// `spawn_blocking` (as [`spawn_retention`](Self::spawn_retention) does).
    pub fn run_retention(&self) -> Result<usize> {
        let limits = &self.options.retention;
        let batch = self.options.retention_batch.max(1);
        let floor = self.lowest_floor()?;
        let cutoff_ms = (!limits.max_age.is_zero()).then(|| {
            let age = u64::try_from(limits.max_age.as_millis()).unwrap_or(u64::MAX);
            now_ms().saturating_sub(age)
        });
        let mut deleted = 0;
        let mut pinned = false;
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
                    if floor.as_ref().is_some_and(|(f, _)| key >= *f) {
                        pinned = true;
                        done = true;
                        break;
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
        if pinned && let Some((floor_key, name)) = floor {
            self.warn_pinned(&floor_key, &name, cutoff_ms)?;
        }
        Ok(deleted)
    }

    /// Logs how many records the floor keeps past the limits.
    fn warn_pinned(&self, floor: &[u8; 16], name: &str, cutoff_ms: Option<u64>) -> Result<()> {
        let limits = &self.options.retention;
        let txn = self.db.begin_read()?;
        let records = txn.open_table(RECORDS)?;
        let len = records.len()?;
        let data_bytes = txn
            .open_table(META)?
            .get(DATA_BYTES)?
            .map_or(0, |g| g.value());
        let over_count = if limits.max_records > 0 {
            len.saturating_sub(limits.max_records)
        } else {
            0
        };
        let mut over_age = 0;
        if let Some(cutoff) = cutoff_ms {
            let upper = ulid::Ulid::from_parts(cutoff, 0).to_bytes();
            let range =
                records.range::<[u8; 16]>((Bound::Included(*floor), Bound::Excluded(upper)))?;
            for row in range {
                row?;
                over_age += 1;
                if over_age >= KEPT_COUNT_CAP {
                    break;
                }
            }
        }
        let over_bytes = if limits.max_bytes > 0 {
            data_bytes.saturating_sub(limits.max_bytes)
        } else {
            0
        };
        let kept = over_count.max(over_age);
        tracing::warn!(
            floor = name,
            floor_id = %key_id(floor),
            over_count,
            over_age,
            over_bytes,
            "activity retention kept {kept} records past retention: sink {name:?} has not yet \
             delivered the records from {} on",
            format_timestamp(key_ms(floor)),
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

    #[test]
    fn floor_pins_records_and_persists() {
        let (_dir, j) = open_temp(options(
            Retention {
                max_records: 10,
                ..none()
            },
            7,
        ));
        let path = j.path().to_path_buf();
        let recs = fill(&j);
        j.set_retention_floor("clickhouse", Some(&recs[20].id))
            .unwrap();
        j.set_retention_floor("later", Some(&recs[60].id)).unwrap();
        assert!(j.set_retention_floor("bad", Some("not-an-id")).is_err());
        assert_eq!(j.run_retention().unwrap(), 20, "stops at the lowest floor");
        assert_eq!(ids(&j).first(), Some(&recs[20].id));
        drop(j);
        let j = Journal::open(
            &path,
            options(
                Retention {
                    max_records: 10,
                    ..none()
                },
                7,
            ),
        )
        .unwrap();
        assert_eq!(
            j.retention_floors().unwrap(),
            vec![
                ("clickhouse".to_string(), recs[20].id.clone()),
                ("later".into(), recs[60].id.clone())
            ]
        );
        j.set_retention_floor("clickhouse", None).unwrap();
        assert_eq!(j.run_retention().unwrap(), 40);
        j.set_retention_floor("later", None).unwrap();
        assert_eq!(j.run_retention().unwrap(), 30);
        assert_eq!(
            ids(&j),
            recs[90..].iter().map(|r| r.id.clone()).collect::<Vec<_>>()
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

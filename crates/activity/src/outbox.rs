//! The outbox: what each activity sink has yet to deliver, in commit order.
//!
//! While any sink is registered, the writer gives every *finished* record (not `pending`) a
//! sequence number as it commits it, in the same transaction: `activity_outbox` maps the
//! number to the record's key and `activity_outbox_keys` the key back to its number. One
//! writer thread commits, so numbers grow in commit order and a reader never sees a gap
//! that fills later — unlike ids, which are taken when a call starts. A record finished
//! twice (an upsert after delivery) gets a new number and is delivered again, by id.
//!
//! Each sink has a row in `activity_sinks` (JSON [`SinkState`]): its cursor (the last
//! number delivered) and its delivery history. A sink reads a batch after its cursor
//! ([`Journal::sink_batch`]), delivers it, and only then moves the cursor
//! ([`Journal::sink_delivered`], an fsync'd commit). Entries every sink has passed are
//! trimmed in that commit. Retention does not delete a record that still has an entry,
//! unless the journal outgrows `max_undelivered_bytes` (see `retention`).

use std::ops::Bound;

use redb::{
    ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use super::batch::{SinkBatch, StoredRecord};
use super::journal::{Journal, META, RECORDS, key_id, key_ms};
use super::record::{format_timestamp, now_ms};
use super::{Error, Result};

/// Sequence number → record key, for every finished record some sink has yet to deliver.
pub(super) const OUTBOX: TableDefinition<u64, [u8; 16]> = TableDefinition::new("activity_outbox");
/// Record key → its sequence number (what pins a record against retention).
pub(super) const OUTBOX_KEYS: TableDefinition<[u8; 16], u64> =
    TableDefinition::new("activity_outbox_keys");
/// Sink name → its [`SinkState`] as JSON.
pub(super) const SINKS: TableDefinition<&str, &[u8]> = TableDefinition::new("activity_sinks");
/// Key in [`META`]: the last sequence number handed out.
pub(super) const LAST_SEQ: &str = "outbox_last_seq";

/// What the journal remembers about one sink.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkState {
    /// The last sequence number delivered.
    pub cursor: u64,
    /// When the sink was first registered (unix ms); it delivers what finished from then on.
    pub registered_ms: u64,
    /// Records delivered, all time.
    pub delivered: u64,
    /// When the last batch was delivered (unix ms).
    pub last_delivery_ms: Option<u64>,
    /// The last failure, cleared by the next delivery.
    pub last_error: Option<String>,
    pub last_error_ms: Option<u64>,
    /// Failed attempts since the last delivery.
    pub failures: u64,
    /// Undelivered records deleted because the journal outgrew `max_undelivered_bytes`.
    pub dropped: u64,
}

/// A sink's state with its backlog, as `mcpproxy activity sinks` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkStatus {
    pub name: String,
    /// Finished records not yet delivered.
    pub backlog: u64,
    /// Timestamp of the oldest undelivered record.
    pub oldest_undelivered: Option<String>,
    /// How far behind the sink is: now minus the oldest undelivered record's time, in ms.
    pub lag_ms: Option<u64>,
    #[serde(flatten)]
    pub state: SinkState,
}

impl Journal {
    /// Makes `names` the registered sinks: a new one starts at the current end of the outbox
    /// (it delivers records finished from now on); a sink no longer named is unregistered and
    /// its cursor dropped. Returns the unregistered sinks with their undelivered counts, for
    /// the caller to warn about. With no sink left, the outbox is emptied and no longer kept.
    pub fn register_sinks(&self, names: &[String]) -> Result<Vec<(String, u64)>> {
        self.guard(|| {
            // Turn the outbox on first: a commit racing this registration then gets a number,
            // at worst one at or below the new cursor, which is fine (the sink starts after it).
            if !names.is_empty() {
                self.outbox_on
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let mut txn = self.db()?.begin_write()?;
            txn.set_durability(redb::Durability::Immediate)?;
            let mut removed = Vec::new();
            {
                let last = txn
                    .open_table(META)?
                    .get(LAST_SEQ)?
                    .map_or(0, |g| g.value());
                let mut sinks = txn.open_table(SINKS)?;
                let existing = read_states(&sinks)?;
                for (name, state) in &existing {
                    if !names.contains(name) {
                        sinks.remove(name.as_str())?;
                        removed.push((name.clone(), last.saturating_sub(state.cursor)));
                    }
                }
                for name in names {
                    if !existing.iter().any(|(n, _)| n == name) {
                        let state = SinkState {
                            cursor: last,
                            registered_ms: now_ms(),
                            ..SinkState::default()
                        };
                        sinks.insert(name.as_str(), encode(&state)?.as_slice())?;
                    }
                }
            }
            trim(&txn)?;
            txn.commit()?;
            if names.is_empty() {
                self.outbox_on
                    .store(false, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(removed)
        })
    }

    /// Up to `max_records` records (and about `max_bytes` of JSON, at least one record) after
    /// `sink`'s cursor, in commit order; `None` when it is caught up. Entries whose record is
    /// gone (deleted by the size bound, or corrupt) are skipped and counted in the cursor.
    pub fn sink_batch(
        &self,
        sink: &str,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Option<SinkBatch>> {
        self.guard(|| {
            let txn = self.db()?.begin_read()?;
            let sinks = txn.open_table(SINKS)?;
            let Some(state) = sinks.get(sink)?.map(|g| decode(g.value())).transpose()? else {
                return Err(Error::UnknownSink(sink.to_owned()));
            };
            let outbox = txn.open_table(OUTBOX)?;
            let records = txn.open_table(RECORDS)?;
            let mut batch = SinkBatch {
                rows: Vec::new(),
                last_seq: state.cursor,
                more: false,
            };
            let mut bytes = 0;
            for row in outbox.range((Bound::Excluded(state.cursor), Bound::Unbounded))? {
                if batch.rows.len() >= max_records.max(1) || (bytes >= max_bytes && bytes > 0) {
                    batch.more = true;
                    break;
                }
                let (seq, key) = row?;
                let key = key.value();
                batch.last_seq = seq.value();
                if let Some(json) = records.get(key)?
                    && let Some(row) = StoredRecord::framed(&key, json.value())
                {
                    bytes += row.json.len();
                    batch.rows.push(row);
                }
            }
            Ok((batch.last_seq > state.cursor).then_some(batch))
        })
    }

    /// Records that `sink` delivered everything up to `last_seq` (`count` records): moves its
    /// cursor, clears its error, and trims what every sink has passed. Durable on return.
    pub fn sink_delivered(&self, sink: &str, last_seq: u64, count: u64) -> Result<()> {
        self.update_sink(sink, |state| {
            state.cursor = state.cursor.max(last_seq);
            state.delivered += count;
            state.last_delivery_ms = Some(now_ms());
            state.last_error = None;
            state.failures = 0;
        })
    }

    /// Records a failed delivery attempt of `sink`; its cursor stays.
    pub fn sink_failed(&self, sink: &str, error: &str) -> Result<()> {
        self.update_sink(sink, |state| {
            state.last_error = Some(error.to_owned());
            state.last_error_ms = Some(now_ms());
            state.failures += 1;
        })
    }

    fn update_sink(&self, sink: &str, change: impl FnOnce(&mut SinkState)) -> Result<()> {
        self.guard(|| {
            let mut txn = self.db()?.begin_write()?;
            txn.set_durability(redb::Durability::Immediate)?;
            {
                let mut sinks = txn.open_table(SINKS)?;
                let Some(mut state) = sinks.get(sink)?.map(|g| decode(g.value())).transpose()?
                else {
                    return Err(Error::UnknownSink(sink.to_owned()));
                };
                change(&mut state);
                sinks.insert(sink, encode(&state)?.as_slice())?;
            }
            trim(&txn)?;
            txn.commit()?;
            Ok(())
        })
    }

    /// Every registered sink with its backlog and lag, by name.
    pub fn sink_status(&self) -> Result<Vec<SinkStatus>> {
        self.guard(|| {
            let txn = self.db()?.begin_read()?;
            let sinks = txn.open_table(SINKS)?;
            let outbox = txn.open_table(OUTBOX)?;
            let last = txn
                .open_table(META)?
                .get(LAST_SEQ)?
                .map_or(0, |g| g.value());
            let now = now_ms();
            let mut out = Vec::new();
            for (name, state) in read_states(&sinks)? {
                let first = outbox
                    .range((Bound::Excluded(state.cursor), Bound::Unbounded))?
                    .next()
                    .transpose()?
                    .map(|(_, key)| key.value());
                let oldest_ms = first.map(|key| key_ms(&key));
                out.push(SinkStatus {
                    name,
                    backlog: last.saturating_sub(state.cursor),
                    oldest_undelivered: oldest_ms.map(format_timestamp),
                    lag_ms: oldest_ms.map(|ms| now.saturating_sub(ms)),
                    state,
                });
            }
            Ok(out)
        })
    }

    /// Whether any sink is registered (the writer keeps the outbox only then).
    pub fn has_sinks(&self) -> bool {
        self.outbox_on.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Whether any sink is registered in the file (read at open).
pub(super) fn any_sink(db: &redb::Database) -> Result<bool> {
    let txn = db.begin_read()?;
    Ok(!txn.open_table(SINKS)?.is_empty()?)
}

/// Gives each finished record of a batch its sequence number (writer thread, inside the
/// batch's transaction). A record that already had one (finished again) is renumbered.
pub(super) fn enqueue(txn: &WriteTransaction, keys: &[[u8; 16]]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut meta = txn.open_table(META)?;
    let mut outbox = txn.open_table(OUTBOX)?;
    let mut by_key = txn.open_table(OUTBOX_KEYS)?;
    let mut seq = meta.get(LAST_SEQ)?.map_or(0, |g| g.value());
    for key in keys {
        seq += 1;
        if let Some(old) = by_key.insert(*key, seq)?.map(|g| g.value()) {
            outbox.remove(old)?;
        }
        outbox.insert(seq, *key)?;
    }
    meta.insert(LAST_SEQ, seq)?;
    Ok(())
}

/// Removes the outbox entries every registered sink has delivered (all of them when no
/// sink is registered).
fn trim(txn: &WriteTransaction) -> Result<()> {
    let states = read_states(&txn.open_table(SINKS)?)?;
    let upto = states
        .iter()
        .map(|(_, s)| s.cursor)
        .min()
        .unwrap_or(u64::MAX);
    let mut outbox = txn.open_table(OUTBOX)?;
    let mut by_key = txn.open_table(OUTBOX_KEYS)?;
    let done: Vec<(u64, [u8; 16])> = outbox
        .range(..=upto)?
        .map(|row| row.map(|(seq, key)| (seq.value(), key.value())))
        .collect::<std::result::Result<_, _>>()?;
    for (seq, key) in done {
        outbox.remove(seq)?;
        if by_key.get(key)?.is_some_and(|g| g.value() == seq) {
            by_key.remove(key)?;
        }
    }
    Ok(())
}

/// Called by retention when it deletes a record that still has an outbox entry: removes
/// the entry and counts the record as dropped for every sink that had not delivered it.
pub(super) fn drop_undelivered(txn: &WriteTransaction, key: &[u8; 16]) -> Result<Vec<String>> {
    let mut by_key = txn.open_table(OUTBOX_KEYS)?;
    let Some(seq) = by_key.remove(*key)?.map(|g| g.value()) else {
        return Ok(Vec::new());
    };
    txn.open_table(OUTBOX)?.remove(seq)?;
    let mut sinks = txn.open_table(SINKS)?;
    let mut hit = Vec::new();
    for (name, mut state) in read_states(&sinks)? {
        if state.cursor < seq {
            state.dropped += 1;
            sinks.insert(name.as_str(), encode(&state)?.as_slice())?;
            hit.push(name);
        }
    }
    tracing::debug!(id = %key_id(key), "deleted an undelivered record");
    Ok(hit)
}

/// The registered sinks of a journal being repaired.
pub(super) fn read_sinks(db: &redb::Database) -> Result<Vec<(String, SinkState)>> {
    let txn = db.begin_read()?;
    read_states(&txn.open_table(SINKS)?)
}

/// The keys of the records some sink of a journal being repaired had not delivered, in
/// delivery order.
pub(super) fn read_undelivered(db: &redb::Database) -> Result<Vec<[u8; 16]>> {
    let txn = db.begin_read()?;
    let outbox = txn.open_table(OUTBOX)?;
    let mut keys = Vec::new();
    for row in outbox.iter()? {
        keys.push(row?.1.value());
    }
    Ok(keys)
}

/// Registers `sinks` in a repaired journal with their history but a cursor of 0, and queues
/// `keys` (those of its records that are in the journal) for all of them: a sink delivers
/// again whatever some sink had not delivered (ids let the remote drop repeats). Returns how
/// many were queued.
pub(super) fn restore(
    db: &redb::Database,
    sinks: &[(String, SinkState)],
    keys: &[[u8; 16]],
) -> Result<usize> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    {
        let mut table = txn.open_table(SINKS)?;
        for (name, state) in sinks {
            let state = SinkState {
                cursor: 0,
                ..state.clone()
            };
            table.insert(name.as_str(), encode(&state)?.as_slice())?;
        }
    }
    let present: Vec<[u8; 16]> = {
        let records = txn.open_table(RECORDS)?;
        let mut present = Vec::with_capacity(keys.len());
        for key in keys {
            if records.get(*key)?.is_some() {
                present.push(*key);
            }
        }
        present
    };
    enqueue(&txn, &present)?;
    txn.commit()?;
    Ok(present.len())
}

fn read_states<T: ReadableTable<&'static str, &'static [u8]>>(
    sinks: &T,
) -> Result<Vec<(String, SinkState)>> {
    let mut out = Vec::new();
    for row in sinks.iter()? {
        let (name, value) = row?;
        out.push((name.value().to_owned(), decode(value.value())?));
    }
    Ok(out)
}

fn encode(state: &SinkState) -> Result<Vec<u8>> {
    serde_json::to_vec(state).map_err(|source| Error::Encode {
        id: "sink state".into(),
        source,
    })
}

fn decode(bytes: &[u8]) -> Result<SinkState> {
    serde_json::from_slice(bytes).map_err(|source| Error::Corrupt {
        id: "sink state".into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JournalOptions;
    use crate::record::Status;
    use crate::test_util::{open_temp, rec_at};

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn only_finished_records_after_registration_are_queued_in_commit_order() {
        let (_dir, j) = open_temp(JournalOptions::default());
        let before = rec_at(now_ms(), "s", "before", "read", Status::Success);
        j.append(before).await.unwrap();
        assert!(!j.has_sinks());
        assert!(j.register_sinks(&names(&["ch"])).unwrap().is_empty());
        assert!(j.has_sinks());
        assert!(
            j.sink_batch("ch", 10, 1 << 20).unwrap().is_none(),
            "starts at the end"
        );

        // Started first, finished last: delivered after the one that finished first.
        let mut slow = rec_at(now_ms(), "s", "slow", "read", Status::Pending);
        j.append(slow.clone()).await.unwrap();
        let fast = rec_at(now_ms() + 1, "s", "fast", "read", Status::Success);
        j.append(fast.clone()).await.unwrap();
        assert_eq!(
            j.sink_status().unwrap()[0].backlog,
            1,
            "pending is not queued"
        );
        slow.status = Status::Success;
        j.upsert(slow.clone()).await.unwrap();

        let batch = j.sink_batch("ch", 10, 1 << 20).unwrap().unwrap();
        let ids: Vec<_> = batch.rows.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids, vec![fast.id.clone(), slow.id.clone()]);
        let status = &j.sink_status().unwrap()[0];
        assert_eq!(status.backlog, 2);
        assert_eq!(
            status.oldest_undelivered.as_deref(),
            Some(fast.timestamp.as_str())
        );

        // Partial delivery, then the rest.
        let one = j.sink_batch("ch", 1, 1 << 20).unwrap().unwrap();
        assert_eq!(one.rows.len(), 1);
        assert!(one.more, "stopped at the batch size with records behind it");
        j.sink_delivered("ch", one.last_seq, 1).unwrap();
        let rest = j.sink_batch("ch", 10, 1 << 20).unwrap().unwrap();
        assert_eq!(rest.rows[0].id, slow.id);
        assert!(!rest.more, "reached the end of the outbox");
        j.sink_failed("ch", "remote down").unwrap();
        let status = &j.sink_status().unwrap()[0];
        assert_eq!(status.state.failures, 1);
        assert_eq!(status.state.last_error.as_deref(), Some("remote down"));
        j.sink_delivered("ch", rest.last_seq, 1).unwrap();
        assert!(j.sink_batch("ch", 10, 1 << 20).unwrap().is_none());
        let status = &j.sink_status().unwrap()[0];
        assert_eq!(
            (
                status.backlog,
                status.state.delivered,
                status.state.failures
            ),
            (0, 2, 0)
        );
        assert_eq!(status.state.last_error, None);
        assert_eq!(status.lag_ms, None);

        // Everything delivered was trimmed.
        let txn = j.db().unwrap().begin_read().unwrap();
        assert!(txn.open_table(OUTBOX).unwrap().is_empty().unwrap());
        assert!(txn.open_table(OUTBOX_KEYS).unwrap().is_empty().unwrap());
    }

    #[tokio::test]
    async fn two_sinks_keep_their_own_cursors_and_the_state_survives_reopen() {
        let (_dir, j) = open_temp(JournalOptions::default());
        let path = j.path().to_path_buf();
        j.register_sinks(&names(&["a", "b"])).unwrap();
        for i in 0..5 {
            j.append(rec_at(now_ms() + i, "s", "t", "read", Status::Success))
                .await
                .unwrap();
        }
        let a = j.sink_batch("a", 100, 1 << 20).unwrap().unwrap();
        j.sink_delivered("a", a.last_seq, 5).unwrap();
        assert!(j.sink_batch("a", 100, 1 << 20).unwrap().is_none());
        assert_eq!(
            j.sink_batch("b", 100, 1 << 20).unwrap().unwrap().rows.len(),
            5
        );
        assert!(matches!(
            j.sink_batch("zzz", 1, 1),
            Err(Error::UnknownSink(_))
        ));
        drop(j);

        let j = Journal::open(&path, JournalOptions::default()).unwrap();
        assert!(j.has_sinks(), "the outbox stays on across a restart");
        assert_eq!(
            j.sink_batch("b", 100, 1 << 20).unwrap().unwrap().rows.len(),
            5
        );
        // Dropping b from the config: its backlog is reported and trimmed.
        let removed = j.register_sinks(&names(&["a"])).unwrap();
        assert_eq!(removed, vec![("b".to_string(), 5)]);
        let txn = j.db().unwrap().begin_read().unwrap();
        assert!(txn.open_table(OUTBOX).unwrap().is_empty().unwrap());
        drop(txn);
        j.register_sinks(&[]).unwrap();
        assert!(!j.has_sinks());
        j.append(rec_at(now_ms(), "s", "t", "read", Status::Success))
            .await
            .unwrap();
        let txn = j.db().unwrap().begin_read().unwrap();
        assert!(
            txn.open_table(OUTBOX).unwrap().is_empty().unwrap(),
            "no sink, no outbox"
        );
    }

    #[tokio::test]
    async fn batches_are_bounded_by_bytes_but_never_empty() {
        let (_dir, j) = open_temp(JournalOptions::default());
        j.register_sinks(&names(&["a"])).unwrap();
        for i in 0..10 {
            j.append(rec_at(now_ms() + i, "s", "t", "read", Status::Success))
                .await
                .unwrap();
        }
        assert_eq!(j.sink_batch("a", 100, 1).unwrap().unwrap().rows.len(), 1);
        let some = j.sink_batch("a", 100, 1000).unwrap().unwrap().rows.len();
        assert!((2..10).contains(&some), "{some}");
    }
}

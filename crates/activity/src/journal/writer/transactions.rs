//! The write transactions' helpers: applying puts to the records, indexes, size counter,
//! hash chain (a final record is linked as it is written, see `chain::link`) and outbox;
//! committing them; the empty `Immediate` commit that persists earlier ones; and
//! keeping only the latest put of each record in a batch.

use std::borrow::Cow;
use std::collections::HashSet;

use redb::{Database, ReadableTable, WriteTransaction};

use super::messages::Put;
use crate::Result;
use crate::chain::link::{Chainer, Linked, Linker};
use crate::journal::schema::{
    DATA_BYTES, IDX_STATUS, META, N_INDEXES, RECORDS, index_keys, key_id, open_indexes, row_cost,
};
use crate::outbox;
use crate::record::{ActivityRecord, Status};

/// Writes `puts` into `txn`: replaces rows, moves index entries, keeps the size counter,
/// and (with `outbox`) queues each finished record for the sinks.
pub(super) fn apply_puts(
    txn: &WriteTransaction,
    puts: &[&Put],
    outbox: bool,
    chainer: &Chainer,
) -> Result<()> {
    let mut records = txn.open_table(RECORDS)?;
    let mut indexes = open_indexes(txn)?;
    let mut meta = txn.open_table(META)?;
    let mut bytes = meta.get(DATA_BYTES)?.map_or(0, |g| g.value());
    let mut linker = Linker::open(txn)?;
    let mut finished = Vec::new();
    for put in puts {
        let pending = put.keys[IDX_STATUS].as_deref() == Some(Status::Pending.as_str());
        let old = records.get(put.key)?.map(|g| g.value().to_vec());
        let row = if pending || put.carried {
            Cow::Borrowed(put.json.as_slice())
        } else {
            match linker.link(&key_id(&put.key), &put.json, old.as_deref())? {
                Linked::Unchanged => continue,
                Linked::Store(row) => Cow::Owned(row),
            }
        };
        if !pending {
            finished.push(put.key);
        }
        records.insert(put.key, row.as_ref())?;
        // Index entries the old row already has, and the new one keeps: a final record
        // after its `pending` one changes its status only, and re-inserting the other four
        // entries rewrote their B-tree pages for nothing.
        let mut kept = [false; N_INDEXES];
        if let Some(old) = old {
            match serde_json::from_slice::<ActivityRecord>(&old) {
                Ok(old_rec) => {
                    let old_keys = index_keys(&old_rec);
                    bytes = bytes.saturating_sub(row_cost(old.len(), &old_keys));
                    for (i, (old_key, new_key)) in old_keys.iter().zip(&put.keys).enumerate() {
                        if let Some(k) = old_key {
                            if old_key == new_key {
                                kept[i] = true;
                            } else {
                                indexes[i].remove((k.as_str(), put.key))?;
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        id = %key_id(&put.key),
                        "replacing a corrupt activity row; its old index entries stay behind: {e}"
                    );
                    bytes = bytes.saturating_sub(16 + old.len() as u64);
                }
            }
        }
        for ((index, key), kept) in indexes.iter_mut().zip(&put.keys).zip(kept) {
            if let Some(k) = key
                && !kept
            {
                index.insert((k.as_str(), put.key), ())?;
            }
        }
        bytes = bytes.saturating_add(row_cost(row.len(), &put.keys));
    }
    meta.insert(DATA_BYTES, bytes)?;
    drop((records, indexes, meta));
    linker.finish(txn, chainer)?;
    if outbox {
        outbox::enqueue(txn, &finished)?;
    }
    Ok(())
}

/// One write transaction with `puts`, committed with `durability`.
pub(in crate::journal) fn commit_puts(
    db: &Database,
    puts: &[&Put],
    durability: redb::Durability,
    outbox: bool,
    chainer: &Chainer,
) -> Result<()> {
    let mut txn = db.begin_write()?;
    txn.set_durability(durability)?;
    apply_puts(&txn, puts, outbox, chainer)?;
    txn.commit()?;
    Ok(())
}

/// An empty `Immediate` commit: persists every earlier `None` commit.
pub(super) fn sync(db: &Database) -> Result<()> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    txn.commit()?;
    Ok(())
}

/// The puts to write, in queue order: where a batch holds several puts of one record (a
/// call's `pending` record and its outcome), only the last, which replaces the others.
pub(in crate::journal) fn latest_per_key(puts: &[Put]) -> Vec<&Put> {
    latest(puts.iter())
}

/// [`latest_per_key`] of puts in queue order, wherever they are.
pub(super) fn latest<'a, I>(puts: I) -> Vec<&'a Put>
where
    I: DoubleEndedIterator<Item = &'a Put>,
{
    let mut seen = HashSet::new();
    let mut latest: Vec<&Put> = puts.rev().filter(|p| seen.insert(p.key)).collect();
    latest.reverse();
    latest
}

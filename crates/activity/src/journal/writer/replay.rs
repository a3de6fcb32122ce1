//! Writing back records a write-ahead log holds: the replay at open, and the
//! write-missing transaction the recovery also uses (only rows the file lacks, so the sinks
//! get nothing twice; refused records removed).

use redb::{Database, ReadableTable, WriteTransaction};

use super::messages::Put;
use super::transactions::{apply_puts, latest_per_key};
use crate::Result;
use crate::chain::link::Chainer;
use crate::chain::same_content;
use crate::journal::schema::{DATA_BYTES, META, RECORDS, open_indexes, row_cost};

/// Replays the payloads of a write-ahead log into `db` (one `Immediate` commit): for each
/// record its last payload, written only where the stored row differs, so a record the file
/// already holds is neither rewritten nor queued for the sinks again. A payload that is not
/// a record is skipped with a warning. Returns how many records it wrote.
pub(in crate::journal) fn replay(
    db: &Database,
    payloads: Vec<Vec<u8>>,
    outbox: bool,
    chainer: &Chainer,
) -> Result<usize> {
    let puts = stored_puts(payloads);
    if puts.is_empty() {
        return Ok(0);
    }
    write_missing(db, &latest_per_key(&puts), &[], outbox, chainer)
}

/// The puts of a write-ahead log's payloads; one that is not a record is skipped with a
/// warning.
pub(super) fn stored_puts(payloads: Vec<Vec<u8>>) -> Vec<Put> {
    payloads
        .into_iter()
        .filter_map(|json| {
            Put::from_stored(json)
                .inspect_err(|e| {
                    tracing::warn!("skipping an unreadable write-ahead log entry: {e}")
                })
                .ok()
        })
        .collect()
}

/// In one `Immediate` transaction: writes each of `puts` (latest per key) whose row differs
/// from the stored one (so nothing the file holds is queued for the sinks twice), and
/// removes the rows of `refused` (records somebody waited for that were refused) where the
/// file holds exactly them. Returns how many records it wrote.
pub(in crate::journal) fn write_missing(
    db: &Database,
    puts: &[&Put],
    refused: &[&Put],
    outbox: bool,
    chainer: &Chainer,
) -> Result<usize> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    let changed: Vec<&Put> = {
        let records = txn.open_table(RECORDS)?;
        let mut changed = Vec::new();
        for put in puts {
            if records
                .get(put.key)?
                .is_none_or(|row| !same_content(row.value(), &put.json))
            {
                changed.push(*put);
            }
        }
        changed
    };
    apply_puts(&txn, &changed, outbox, chainer)?;
    remove_refused(&txn, refused)?;
    txn.commit()?;
    Ok(changed.len())
}

/// Removes the rows that are exactly one of `refused`, with their index entries.
fn remove_refused(txn: &WriteTransaction, refused: &[&Put]) -> Result<()> {
    if refused.is_empty() {
        return Ok(());
    }
    let mut records = txn.open_table(RECORDS)?;
    let mut indexes = open_indexes(txn)?;
    let mut meta = txn.open_table(META)?;
    let mut bytes = meta.get(DATA_BYTES)?.map_or(0, |g| g.value());
    for put in refused {
        let stored = records
            .get(put.key)?
            .is_some_and(|row| row.value() == put.json.as_slice());
        if !stored {
            continue;
        }
        records.remove(put.key)?;
        for (index, key) in indexes.iter_mut().zip(&put.keys) {
            if let Some(k) = key {
                index.remove((k.as_str(), put.key))?;
            }
        }
        bytes = bytes.saturating_sub(row_cost(put.json.len(), &put.keys));
    }
    meta.insert(DATA_BYTES, bytes)?;
    Ok(())
}

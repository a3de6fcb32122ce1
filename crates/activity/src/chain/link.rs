//! The writer's side of the chain: the chain tables, linking a record as it is written
//! final ([`Linker`]), and signing the head ([`Chainer`], checkpoints).
//!
//! Everything here runs inside the write transaction that stores the records (on the
//! journal's writer thread, the open's replay, or retention's own transaction), so the
//! chain's head and the rows it covers are committed together: a crash rolls both back.
//!
//! Tables: `activity_chain` maps `head` to the last `seq` (8 bytes, big-endian) and its hash
//! (32 bytes), `signed` to the last checkpoint's `seq` and time (unix ms), `started` to the
//! time `seq` 1 was written, and `pruned_to` to the checkpoint retention cut at (its anchor);
//! `activity_checkpoints` maps a checkpoint's `seq` to its JSON.

use std::sync::Arc;

use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde_json::Value;

use super::borrowed::{self, chain_members};
use super::key::{Checkpoint, SigningKey};
use super::{ChainLink, Digest32, GENESIS, Replaced, hex, record_hash, same_content, splice};
use crate::{Error, Result};

/// The chain's state (see the module docs).
pub(crate) const CHAIN: TableDefinition<&str, &[u8]> = TableDefinition::new("activity_chain");
/// The checkpoints: `seq` → [`Checkpoint`] JSON.
pub(crate) const CHECKPOINTS: TableDefinition<u64, &[u8]> =
    TableDefinition::new("activity_checkpoints");

const HEAD: &str = "head";
const SIGNED: &str = "signed";
const STARTED: &str = "started";
const PRUNED_TO: &str = "pruned_to";

/// What the writer signs with, and how often.
#[derive(Debug)]
pub(crate) struct Chainer {
    pub(crate) key: SigningKey,
    pub(crate) every: u64,
    pub(crate) interval_ms: u64,
}

/// The chain's state as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChainHead {
    /// The last `seq` written (0: none yet).
    pub seq: u64,
    /// Its hash.
    pub hash: Digest32,
    /// The last checkpoint's `seq` (0: none yet).
    pub signed_seq: u64,
    /// The last checkpoint's time, unix ms.
    pub signed_ms: u64,
    /// When `seq` 1 was written, unix ms (0: not yet).
    pub started_ms: u64,
    /// Retention's anchor: the checkpoint at or after every record it deleted (0: none).
    pub pruned_to: u64,
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Reads the chain's state from any readable chain table.
pub(crate) fn read_head(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<ChainHead> {
    let get = |key: &str| -> Result<Vec<u8>> {
        Ok(table
            .get(key)?
            .map(|g| g.value().to_vec())
            .unwrap_or_default())
    };
    let head = get(HEAD)?;
    let signed = get(SIGNED)?;
    let mut hash = GENESIS;
    if let Some(bytes) = head.get(8..40) {
        hash.copy_from_slice(bytes);
    }
    Ok(ChainHead {
        seq: u64_at(&head, 0),
        hash,
        signed_seq: u64_at(&signed, 0),
        signed_ms: u64_at(&signed, 8),
        started_ms: u64_at(&get(STARTED)?, 0),
        pruned_to: u64_at(&get(PRUNED_TO)?, 0),
    })
}

/// Links the final records of one write transaction.
pub(crate) struct Linker {
    head: ChainHead,
    start: ChainHead,
    /// The canonical bytes of the record being hashed, kept between records.
    scratch: Vec<u8>,
}

/// What to store for a record.
pub(crate) enum Linked {
    /// The row already holds this record, chained: leave it.
    Unchanged,
    /// Store these bytes.
    Store(Vec<u8>),
}

impl Linker {
    /// The chain as `txn` sees it.
    pub(crate) fn open(txn: &WriteTransaction) -> Result<Self> {
        let head = read_head(&txn.open_table(CHAIN)?)?;
        Ok(Self {
            head,
            start: head,
            scratch: Vec::new(),
        })
    }

    /// The row to store for `json`, a final record's JSON as the writer encodes it (without
    /// chain fields), replacing `old` (the stored row, if any): `json` with the next `seq`,
    /// its `prev` and `hash`.
    pub(crate) fn link(&mut self, id: &str, json: &[u8], old: Option<&[u8]>) -> Result<Linked> {
        let old_link = old
            .and_then(ChainLink::of_row)
            .filter(ChainLink::is_chained);
        let mut replaces = Vec::new();
        if let (Some(old), Some(old_link)) = (old, old_link) {
            if same_content(old, json) {
                return Ok(Linked::Unchanged);
            }
            replaces = old_link.replaces;
            if let (Some(seq), Some(hash)) = (old_link.seq, old_link.hash) {
                replaces.push(Replaced { seq, hash });
            }
        }
        let seq = self.head.seq + 1;
        let hash = match borrowed::record_hash(
            &self.head.hash,
            json,
            chain_members(seq, &replaces),
            &mut self.scratch,
        ) {
            Some(hash) => hash,
            // Not a JSON object: the definition's way, which names what is wrong.
            None => hash_by_value(&self.head.hash, json, seq, &replaces).map_err(|source| {
                Error::Corrupt {
                    id: id.to_owned(),
                    source,
                }
            })?,
        };
        let link = ChainLink {
            seq: Some(seq),
            replaces,
            prev: Some(hex(&self.head.hash)),
            hash: Some(hex(&hash)),
        };
        self.head.seq = seq;
        self.head.hash = hash;
        Ok(Linked::Store(splice(json, &link)))
    }

    /// Stores the new head in `txn`, and signs it when a checkpoint is due.
    pub(crate) fn finish(self, txn: &WriteTransaction, chainer: &Chainer) -> Result<()> {
        if self.head == self.start {
            return Ok(());
        }
        let now = crate::now_ms();
        let mut table = txn.open_table(CHAIN)?;
        let mut head = [0u8; 40];
        head[..8].copy_from_slice(&self.head.seq.to_be_bytes());
        head[8..].copy_from_slice(&self.head.hash);
        table.insert(HEAD, head.as_slice())?;
        if self.start.seq == 0 {
            table.insert(STARTED, now.to_be_bytes().as_slice())?;
        }
        drop(table);
        let behind = self.head.seq - self.head.signed_seq;
        let due = (chainer.every > 0 && behind >= chainer.every)
            || now.saturating_sub(self.head.signed_ms) >= chainer.interval_ms;
        if due {
            sign(txn, chainer, &self.head, now)?;
        }
        Ok(())
    }
}

/// [`Linker::link`]'s hash by way of a `serde_json::Value`: `json` with `seq` (and
/// `replaces`, when there are any) set, hashed by [`record_hash`], the definition that
/// [`borrowed`] matches for every JSON object.
pub(super) fn hash_by_value(
    prev: &Digest32,
    json: &[u8],
    seq: u64,
    replaces: &[Replaced],
) -> serde_json::Result<Digest32> {
    let mut value: Value = serde_json::from_slice(json)?;
    if let Value::Object(map) = &mut value {
        map.insert("seq".into(), seq.into());
        if !replaces.is_empty() {
            map.insert(
                "replaces".into(),
                serde_json::to_value(replaces).unwrap_or(Value::Null),
            );
        }
    }
    Ok(record_hash(prev, &value))
}

/// Writes a checkpoint of `head` in `txn`.
fn sign(txn: &WriteTransaction, chainer: &Chainer, head: &ChainHead, now: u64) -> Result<()> {
    let checkpoint = chainer.key.checkpoint(head.seq, &head.hash, now);
    let json = serde_json::to_vec(&checkpoint).map_err(|source| Error::Encode {
        id: format!("checkpoint {}", head.seq),
        source,
    })?;
    txn.open_table(CHECKPOINTS)?
        .insert(head.seq, json.as_slice())?;
    let mut signed = [0u8; 16];
    signed[..8].copy_from_slice(&head.seq.to_be_bytes());
    signed[8..].copy_from_slice(&now.to_be_bytes());
    txn.open_table(CHAIN)?.insert(SIGNED, signed.as_slice())?;
    Ok(())
}

/// In `txn`: signs the head if records were chained since the last checkpoint; the chain's
/// state after, and whether it signed.
pub(crate) fn checkpoint_now(
    txn: &WriteTransaction,
    chainer: &Chainer,
) -> Result<(ChainHead, bool)> {
    let mut head = read_head(&txn.open_table(CHAIN)?)?;
    if head.seq <= head.signed_seq {
        return Ok((head, false));
    }
    let now = crate::now_ms();
    sign(txn, chainer, &head, now)?;
    head.signed_seq = head.seq;
    head.signed_ms = now;
    Ok((head, true))
}

/// In `txn`, after retention deleted chained records up to `seq` `max_deleted`: moves the
/// anchor to the first checkpoint at or after it and drops the checkpoints before the
/// anchor.
pub(crate) fn pruned(txn: &WriteTransaction, max_deleted: u64) -> Result<()> {
    let mut checkpoints = txn.open_table(CHECKPOINTS)?;
    let anchor = checkpoints
        .range(max_deleted..)?
        .next()
        .transpose()?
        .map(|(seq, _)| seq.value());
    let Some(anchor) = anchor else {
        // Retention deletes only records a checkpoint covers; nothing to anchor otherwise.
        return Ok(());
    };
    let mut chain = txn.open_table(CHAIN)?;
    let current = read_head(&chain)?.pruned_to;
    if anchor <= current {
        return Ok(());
    }
    chain.insert(PRUNED_TO, anchor.to_be_bytes().as_slice())?;
    checkpoints.retain(|seq, _| seq >= anchor)?;
    Ok(())
}

/// Opens the chain tables (at the journal's open).
pub(crate) fn create_tables(txn: &WriteTransaction) -> Result<()> {
    txn.open_table(CHAIN)?;
    txn.open_table(CHECKPOINTS)?;
    Ok(())
}

/// The checkpoints stored, oldest first (one that does not decode is skipped, and so
/// reported by `verify` as missing if it was needed).
pub(crate) fn read_checkpoints(
    table: &impl ReadableTable<u64, &'static [u8]>,
) -> Result<Vec<Checkpoint>> {
    let mut out = Vec::new();
    for row in table.iter()? {
        let (_, json) = row?;
        if let Ok(checkpoint) = serde_json::from_slice(json.value()) {
            out.push(checkpoint);
        }
    }
    Ok(out)
}

/// Builds the writer's [`Chainer`] for the journal at `journal` with `options`.
pub(crate) fn chainer(
    journal: &std::path::Path,
    options: &super::ChainOptions,
    replica: Option<&str>,
) -> Result<Arc<Chainer>> {
    let key = match &options.key_seed {
        Some(seed) => SigningKey::from_hex_seed(&seed.hex, &seed.source)?,
        None => {
            let path = options.key_file.clone().unwrap_or_else(|| {
                journal
                    .parent()
                    .unwrap_or_else(|| std::path::Path::new("."))
                    .join(super::KEY_FILE)
            });
            SigningKey::load_or_create(&path)?
        }
    };
    Ok(Arc::new(Chainer {
        key: key.for_replica(replica.map(str::to_owned)),
        every: options.checkpoint_every,
        interval_ms: u64::try_from(options.checkpoint_interval.as_millis()).unwrap_or(u64::MAX),
    }))
}

/// A journal's chain tables as stored, for a repair to carry over.
#[derive(Debug, Default)]
pub(crate) struct ChainTables {
    chain: Vec<(String, Vec<u8>)>,
    checkpoints: Vec<(u64, Vec<u8>)>,
}

/// Reads the chain tables of `db` (empty when the journal has none).
pub(crate) fn read_tables(db: &redb::Database) -> Result<ChainTables> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let mut tables = ChainTables::default();
    let chain = match txn.open_table(CHAIN) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(tables),
        Err(e) => return Err(e.into()),
    };
    for row in chain.iter()? {
        let (key, value) = row?;
        tables
            .chain
            .push((key.value().to_owned(), value.value().to_vec()));
    }
    if let Ok(checkpoints) = txn.open_table(CHECKPOINTS) {
        for row in checkpoints.iter()? {
            let (seq, json) = row?;
            tables
                .checkpoints
                .push((seq.value(), json.value().to_vec()));
        }
    }
    Ok(tables)
}

/// Writes `tables` into `txn` (a repaired journal's, after its rows were carried over);
/// without a stored head, the head is the carried row with the highest `seq` (`head`).
pub(crate) fn write_tables(
    txn: &WriteTransaction,
    tables: &ChainTables,
    head: Option<(u64, Digest32)>,
) -> Result<()> {
    let mut chain = txn.open_table(CHAIN)?;
    for (key, value) in &tables.chain {
        chain.insert(key.as_str(), value.as_slice())?;
    }
    if chain.get(HEAD)?.is_none()
        && let Some((seq, hash)) = head
    {
        let mut bytes = [0u8; 40];
        bytes[..8].copy_from_slice(&seq.to_be_bytes());
        bytes[8..].copy_from_slice(&hash);
        chain.insert(HEAD, bytes.as_slice())?;
    }
    let mut checkpoints = txn.open_table(CHECKPOINTS)?;
    for (seq, json) in &tables.checkpoints {
        checkpoints.insert(*seq, json.as_slice())?;
    }
    Ok(())
}

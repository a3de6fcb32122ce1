//! The journal's chain from the outside: [`Journal::verify_chain`] walks the stored rows,
//! [`Journal::sign_head`] makes a checkpoint now, [`Journal::chain_trailer`] is what an
//! export appends so it verifies offline, and [`verify_export`] checks such an export.
//!
//! An export is JSON Lines: the records (each with its chain fields), then one line per
//! checkpoint, `{"checkpoint": {...}}`, and one line with the chain's state,
//! `{"chain": {"head_seq": …, "pruned_to": …, "started_ms": …}}`.
//!
//! A witness keeps checkpoints elsewhere ([`Journal::latest_checkpoint`], [`read_witness`]);
//! `verify_chain_with` and `verify_export_with` check the chain against them too.

use std::io::BufRead;

use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::key::Checkpoint;
use super::link::{CHAIN, CHECKPOINTS, ChainHead, checkpoint_now, read_checkpoints, read_head};
use super::verify::{ChainReport, Verifier};
use crate::Result;
use crate::journal::{Journal, RECORDS, key_id};

/// The chain's state as an export carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ChainState {
    /// The last `seq` written.
    pub head_seq: u64,
    /// Retention's anchor checkpoint (0: nothing pruned).
    pub pruned_to: u64,
    /// When `seq` 1 was written, unix ms.
    pub started_ms: u64,
}

impl From<ChainHead> for ChainState {
    fn from(head: ChainHead) -> Self {
        Self {
            head_seq: head.seq,
            pruned_to: head.pruned_to,
            started_ms: head.started_ms,
        }
    }
}

/// A trailer line of an export.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Trailer {
    Checkpoint(Checkpoint),
    Chain(ChainState),
}

impl Journal {
    /// The public key (hex) this journal signs its checkpoints with.
    pub fn public_key(&self) -> String {
        self.chain.key.public_hex()
    }

    /// Signs the chain's head now if records were chained since the last checkpoint.
    /// Blocking.
    pub fn sign_head(&self) -> Result<()> {
        self.guard(|| {
            let mut txn = self.db()?.begin_write()?;
            txn.set_durability(redb::Durability::Immediate)?;
            if checkpoint_now(&txn, &self.chain)?.1 {
                txn.commit()?;
            } else {
                txn.abort()?;
            }
            Ok(())
        })
    }

    /// Signs the head if records were chained since the last checkpoint, and returns the
    /// last checkpoint (`None` while the chain is empty): what a witness keeps.
    pub fn latest_checkpoint(&self) -> Result<Option<Checkpoint>> {
        self.sign_head()?;
        Ok(self.chain_state()?.1.pop())
    }

    /// The chain's stored state and its checkpoints, oldest first.
    pub fn chain_state(&self) -> Result<(ChainState, Vec<Checkpoint>)> {
        self.guard(|| {
            let txn = self.db()?.begin_read()?;
            let head = read_head(&txn.open_table(CHAIN)?)?;
            let checkpoints = read_checkpoints(&txn.open_table(CHECKPOINTS)?)?;
            Ok((head.into(), checkpoints))
        })
    }

    /// What an export appends after its records (see the module docs).
    pub fn chain_trailer(&self) -> Result<Vec<u8>> {
        let (state, checkpoints) = self.chain_state()?;
        let mut out = Vec::new();
        for checkpoint in checkpoints {
            line(&Trailer::Checkpoint(checkpoint), &mut out);
        }
        line(&Trailer::Chain(state), &mut out);
        Ok(out)
    }

    /// Walks the chain of every stored row (see `verify`): signatures are checked against
    /// `key` (hex) if given, else this journal's own key; with `since_ms`, only the chain
    /// from the first record at or after it on. Blocking: ~1 s per 100,000 records.
    pub fn verify_chain(&self, key: Option<&str>, since_ms: Option<u64>) -> Result<ChainReport> {
        self.verify_chain_with(key, since_ms, Vec::new())
    }

    /// [`verify_chain`](Self::verify_chain), also against `witness`: checkpoints kept
    /// elsewhere (see [`read_witness`]). A chain rewritten and signed again with the journal's
    /// key no longer matches them.
    pub fn verify_chain_with(
        &self,
        key: Option<&str>,
        since_ms: Option<u64>,
        witness: Vec<Checkpoint>,
    ) -> Result<ChainReport> {
        let key = match key {
            Some(key) => (key.to_owned(), "given"),
            None => (self.public_key(), "journal"),
        };
        let mut verifier = Verifier::new(Some(key));
        if let Some(since) = since_ms {
            verifier.since(since);
        }
        for checkpoint in witness {
            verifier.checkpoint(checkpoint);
        }
        self.guard(|| {
            let txn = self.db()?.begin_read()?;
            let head = read_head(&txn.open_table(CHAIN)?)?;
            verifier.chain_state(head.seq, head.pruned_to, head.started_ms);
            for checkpoint in read_checkpoints(&txn.open_table(CHECKPOINTS)?)? {
                verifier.checkpoint(checkpoint);
            }
            for row in txn.open_table(RECORDS)?.iter()? {
                let (key, json) = row?;
                match serde_json::from_slice::<Value>(json.value()) {
                    Ok(value) => verifier.record(&value),
                    Err(e) => verifier.unreadable(&key_id(&key.value()), &e.to_string()),
                }
            }
            Ok(())
        })?;
        Ok(verifier.finish())
    }
}

fn line<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    if serde_json::to_writer(&mut *out, value).is_ok() {
        out.push(b'\n');
    }
}

/// Verifies an export (JSON Lines, see the module docs) read from `input`; signatures are
/// checked against `key` (hex) if given, else against the key the checkpoints name, which
/// proves only that the export is consistent with itself. An error names the line that
/// cannot be read.
pub fn verify_export(
    input: impl BufRead,
    key: Option<&str>,
    since_ms: Option<u64>,
) -> std::result::Result<ChainReport, String> {
    verify_export_with(input, key, since_ms, Vec::new())
}

/// [`verify_export`], also against `witness` (see [`Journal::verify_chain_with`]).
pub fn verify_export_with(
    input: impl BufRead,
    key: Option<&str>,
    since_ms: Option<u64>,
    witness: Vec<Checkpoint>,
) -> std::result::Result<ChainReport, String> {
    let mut verifier = Verifier::new(key.map(|k| (k.to_owned(), "given")));
    if let Some(since) = since_ms {
        verifier.since(since);
    }
    for checkpoint in witness {
        verifier.checkpoint(checkpoint);
    }
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read line {} of the export: {e}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(e) => {
                verifier.unreadable(&format!("on line {}", n + 1), &e.to_string());
                continue;
            }
        };
        if value.get("checkpoint").is_some() || value.get("chain").is_some() {
            match serde_json::from_value::<Trailer>(value) {
                Ok(Trailer::Checkpoint(checkpoint)) => verifier.checkpoint(checkpoint),
                Ok(Trailer::Chain(state)) => {
                    verifier.chain_state(state.head_seq, state.pruned_to, state.started_ms)
                }
                Err(e) => {
                    return Err(format!(
                        "line {} of the export is neither a record nor a checkpoint ({e}); is \
                         it a JSON Lines export of `mcpproxy activity export`?",
                        n + 1
                    ));
                }
            }
            continue;
        }
        verifier.record(&value);
    }
    Ok(verifier.finish())
}

/// The checkpoints a witness kept: JSON Lines, each line an object with a `checkpoint`
/// member (the `data` of `GET /api/v1/activity/checkpoint`, or a checkpoint line of an
/// export). An error names the line that is not one.
pub fn read_witness(input: impl BufRead) -> std::result::Result<Vec<Checkpoint>, String> {
    #[derive(Deserialize)]
    struct Line {
        checkpoint: Checkpoint,
    }
    let mut out = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read line {}: {e}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line).map_err(|e| {
            format!(
                "line {} is not a checkpoint ({e}): each line must be an object with a \
                 \"checkpoint\" member, as GET /api/v1/activity/checkpoint answers in its data",
                n + 1
            )
        })?;
        out.push(parsed.checkpoint);
    }
    Ok(out)
}

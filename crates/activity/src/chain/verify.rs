//! Walking a chain: [`Verifier`] takes a journal's rows (or an export's lines) and its
//! checkpoints, and its [`ChainReport`] names every break with the records and times
//! around it.
//!
//! What is checked: each chained record's `hash` against its content and `prev`; that
//! `seq` runs without a gap (a missing one was deleted, unless a later version of its
//! record `replaces` it, or retention pruned it before its anchor); that each `prev` is the
//! hash of the record before (a record inserted, reordered or altered breaks the link);
//! each checkpoint's signature, and that the record it signed still has the signed hash;
//! that no record is missing after the last one up to the last checkpoint or the stored
//! head (a truncated tail); and that no final record without chain fields was written after
//! the chain started (records from before it are reported as unchained, not as a break).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::key::Checkpoint;
use super::{Digest32, GENESIS, Replaced, record_hash, unhex32};
use crate::format_timestamp;

/// What kind of break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// `seq` numbers are missing: records were deleted.
    Deleted,
    /// A record's content does not match its hash: it was altered.
    Altered,
    /// A record's `prev` is not the hash of the record before it: something was inserted,
    /// reordered or rewritten there.
    BrokenLink,
    /// A record that does not belong in the chain: two records claim one `seq`, or a record
    /// without chain fields was written after the chain started.
    Inserted,
    /// A checkpoint's signature is not the key's.
    BadSignature,
    /// A validly signed checkpoint names a hash the chain no longer has: it was rewritten.
    CheckpointMismatch,
    /// Records after the last one present were signed (or counted in the head): the tail was
    /// cut.
    Truncated,
    /// A row that is not a record (not JSON), or chain fields that do not parse.
    Unreadable,
}

/// One break.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// What kind.
    pub kind: ProblemKind,
    /// The `seq` where it is (the first of a range).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The record it is about, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What is wrong, with the records and times around it.
    pub message: String,
}

/// What `verify` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChainReport {
    /// Everything holds.
    pub ok: bool,
    /// Rows read.
    pub records: u64,
    /// Records in the chain.
    pub chained: u64,
    /// Final records from before the chain started (not covered, not a break).
    pub unchained: u64,
    /// Records not final yet (the chain covers a record once it is final).
    pub pending: u64,
    /// Versions of records replaced by a later version (their `seq` is explained).
    pub replaced: u64,
    /// `seq` numbers retention pruned (at or before its anchor checkpoint).
    pub pruned: u64,
    /// The first and last `seq` checked.
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// Checkpoints read, and the last one that is validly signed.
    pub checkpoints: u64,
    pub last_checkpoint: Option<CheckpointSummary>,
    /// Records after the last valid checkpoint: they link, but no signature covers them yet.
    pub unsigned_tail: u64,
    /// The public key the signatures were checked against, and where it came from
    /// (`given`, `journal`: the journal's own key file, `export`: the export's checkpoints
    /// themselves, which proves only that the export is consistent).
    pub key: Option<String>,
    pub key_source: Option<String>,
    /// Every break found, in `seq` order.
    pub problems: Vec<Problem>,
}

/// A checkpoint, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    pub seq: u64,
    pub time: String,
}

#[derive(Debug)]
struct Entry {
    id: String,
    time: String,
    prev: Digest32,
    hash: Digest32,
    intact: bool,
}

/// Collects rows and checkpoints, then [`finish`](Verifier::finish)es into a report.
#[derive(Debug, Default)]
pub struct Verifier {
    key: Option<(String, String)>,
    since_ms: Option<u64>,
    entries: BTreeMap<u64, Entry>,
    replaced: HashMap<u64, Digest32>,
    unchained: Vec<(String, u64)>,
    checkpoints: Vec<Checkpoint>,
    head_seq: u64,
    pruned_to: u64,
    started_ms: u64,
    report: ChainReport,
}

impl Verifier {
    /// A verifier checking signatures against `key` (hex) from `source` (`given`,
    /// `journal`); without one, against the key the checkpoints name (`export`).
    pub fn new(key: Option<(String, &str)>) -> Self {
        Self {
            key: key.map(|(k, s)| (k.trim().to_ascii_lowercase(), s.to_owned())),
            ..Self::default()
        }
    }

    /// Checks only the chain from the first record at or after `ms` on.
    pub fn since(&mut self, ms: u64) {
        self.since_ms = Some(ms);
    }

    /// What the journal stored about its chain: the head's `seq`, retention's anchor, when
    /// the chain started.
    pub fn chain_state(&mut self, head_seq: u64, pruned_to: u64, started_ms: u64) {
        self.head_seq = head_seq;
        self.pruned_to = pruned_to;
        self.started_ms = started_ms;
    }

    /// A checkpoint.
    pub fn checkpoint(&mut self, checkpoint: Checkpoint) {
        self.checkpoints.push(checkpoint);
    }

    /// A row that is not JSON (its id from the storage key, when known).
    pub fn unreadable(&mut self, id: &str, detail: &str) {
        self.report.records += 1;
        self.problem(
            ProblemKind::Unreadable,
            None,
            Some(id),
            format!("record {id} is not readable JSON ({detail}): it was damaged or altered"),
        );
    }

    /// One record, as stored or exported.
    pub fn record(&mut self, value: &Value) {
        self.report.records += 1;
        let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
        let id = text("id").to_owned();
        let time = text("timestamp").to_owned();
        let ms = crate::parse_record_id(&id).unwrap_or(0);
        let Some(seq) = value.get("seq") else {
            if text("status") == "pending" {
                self.report.pending += 1;
            } else {
                self.unchained.push((id, ms));
            }
            return;
        };
        let parsed = (
            seq.as_u64(),
            unhex32(text("prev")),
            unhex32(text("hash")),
            value.get("replaces").map_or(Some(Vec::new()), |r| {
                serde_json::from_value::<Vec<Replaced>>(r.clone()).ok()
            }),
        );
        let (Some(seq), Some(prev), Some(hash), Some(replaces)) = parsed else {
            let message = format!(
                "record {id} ({time}) has chain fields that do not parse (seq, prev, hash, \
                 replaces): they were altered"
            );
            self.problem(ProblemKind::Unreadable, None, Some(&id), message);
            return;
        };
        for replaced in replaces {
            if let Some(hash) = unhex32(&replaced.hash) {
                self.replaced.insert(replaced.seq, hash);
            }
        }
        let intact = record_hash(&prev, value) == hash;
        let entry = Entry {
            id,
            time,
            prev,
            hash,
            intact,
        };
        if let Some(other) = self.entries.get(&seq) {
            let message = format!(
                "records {} ({}) and {} ({}) both claim seq {seq}: one was inserted",
                other.id, other.time, entry.id, entry.time
            );
            let id = entry.id.clone();
            self.problem(ProblemKind::Inserted, Some(seq), Some(&id), message);
            return;
        }
        self.entries.insert(seq, entry);
    }

    fn problem(&mut self, kind: ProblemKind, seq: Option<u64>, id: Option<&str>, message: String) {
        self.report.problems.push(Problem {
            kind,
            seq,
            id: id.map(str::to_owned),
            message,
        });
    }

    /// `seq` as a report names it: the record's id and time, when present.
    fn name(&self, seq: u64) -> String {
        match self.entries.get(&seq) {
            Some(e) => format!("record {} (seq {seq}, {})", e.id, e.time),
            None => format!("seq {seq}"),
        }
    }

    /// The report.
    pub fn finish(mut self) -> ChainReport {
        self.report.chained = self.entries.len() as u64;
        let signed = self.check_checkpoints();
        let first = self.first_seq(&signed);
        if let Some((first, prev)) = first {
            self.walk(first, prev);
        }
        self.check_tail(&signed);
        self.check_unchained();
        self.report
            .problems
            .sort_by_key(|p| p.seq.unwrap_or(u64::MAX));
        self.report.ok = self.report.problems.is_empty();
        self.report
    }

    /// Checks every checkpoint's signature; the validly signed ones by `seq`.
    fn check_checkpoints(&mut self) -> BTreeMap<u64, Checkpoint> {
        self.report.checkpoints = self.checkpoints.len() as u64;
        let mut signed = BTreeMap::new();
        for checkpoint in std::mem::take(&mut self.checkpoints) {
            let key = match &self.key {
                Some((key, _)) => key.clone(),
                None => checkpoint.key.clone(),
            };
            if self.report.key.is_none() {
                self.report.key = Some(key.clone());
                self.report.key_source = Some(
                    self.key
                        .as_ref()
                        .map_or_else(|| "export".to_owned(), |(_, s)| s.clone()),
                );
            }
            if !checkpoint.signed_by(&key) {
                let message = format!(
                    "the checkpoint of seq {} signed at {} does not carry a valid signature of \
                     key {key}: it was forged or altered (or signed by another key: pass the \
                     right one with --key)",
                    checkpoint.seq, checkpoint.time
                );
                self.problem(
                    ProblemKind::BadSignature,
                    Some(checkpoint.seq),
                    None,
                    message,
                );
                continue;
            }
            match (self.entries.get(&checkpoint.seq), unhex32(&checkpoint.head)) {
                (Some(entry), Some(head)) if entry.hash != head => {
                    let message = format!(
                        "the checkpoint signed at {} says seq {} has hash {}, but {} has \
                         another: the chain was rewritten up to there",
                        checkpoint.time,
                        checkpoint.seq,
                        checkpoint.head,
                        self.name(checkpoint.seq)
                    );
                    let id = entry.id.clone();
                    self.problem(
                        ProblemKind::CheckpointMismatch,
                        Some(checkpoint.seq),
                        Some(&id),
                        message,
                    );
                }
                _ => {}
            }
            signed.insert(checkpoint.seq, checkpoint);
        }
        if let Some(last) = signed.values().next_back() {
            self.report.last_checkpoint = Some(CheckpointSummary {
                seq: last.seq,
                time: last.time.clone(),
            });
        }
        signed
    }

    /// Where the walk starts and the `prev` expected there.
    fn first_seq(&mut self, signed: &BTreeMap<u64, Checkpoint>) -> Option<(u64, Option<Digest32>)> {
        if let Some(since) = self.since_ms {
            let first = self
                .entries
                .iter()
                .filter(|(_, e)| crate::parse_record_id(&e.id).is_some_and(|ms| ms >= since))
                .map(|(seq, _)| *seq)
                .min()?;
            return Some((first, None));
        }
        if self.pruned_to == 0 {
            return Some((1, Some(GENESIS)));
        }
        let anchor = signed.get(&self.pruned_to).and_then(|c| unhex32(&c.head));
        if anchor.is_none() {
            let message = format!(
                "retention's anchor, the checkpoint of seq {}, is missing or not validly \
                 signed: the records before it cannot be told pruned from deleted",
                self.pruned_to
            );
            self.problem(ProblemKind::Deleted, Some(self.pruned_to), None, message);
        }
        let pruned = (1..=self.pruned_to)
            .filter(|s| !self.entries.contains_key(s))
            .count();
        self.report.pruned = pruned as u64;
        for (seq, entry) in self.entries.range(..=self.pruned_to) {
            if !entry.intact {
                let message = altered(entry, *seq);
                let id = entry.id.clone();
                self.report.problems.push(Problem {
                    kind: ProblemKind::Altered,
                    seq: Some(*seq),
                    id: Some(id),
                    message,
                });
            }
        }
        Some((self.pruned_to + 1, anchor))
    }

    /// Walks `seq` from `first` to the last present one.
    fn walk(&mut self, first: u64, mut known: Option<Digest32>) {
        let Some(last) = self.entries.keys().next_back().copied() else {
            return;
        };
        if last < first {
            return;
        }
        self.report.first_seq = Some(first);
        self.report.last_seq = Some(last);
        let mut seq = first;
        while seq <= last {
            if let Some(hash) = self
                .replaced
                .get(&seq)
                .filter(|_| !self.entries.contains_key(&seq))
            {
                self.report.replaced += 1;
                known = Some(*hash);
                seq += 1;
                continue;
            }
            let Some(entry) = self.entries.get(&seq) else {
                let mut end = seq;
                while !self.entries.contains_key(&(end + 1))
                    && !self.replaced.contains_key(&(end + 1))
                {
                    end += 1;
                }
                let range = if end == seq {
                    format!("seq {seq} is missing")
                } else {
                    format!("seq {seq} to {end} ({} records) are missing", end - seq + 1)
                };
                let before = if seq > 1 {
                    self.name(seq - 1)
                } else {
                    "the chain's start".into()
                };
                let message = format!(
                    "{range} between {before} and {}: deleted",
                    self.name(end + 1)
                );
                self.problem(ProblemKind::Deleted, Some(seq), None, message);
                known = None;
                seq = end + 1;
                continue;
            };
            let (id, hash, prev, intact) = (entry.id.clone(), entry.hash, entry.prev, entry.intact);
            if !intact {
                let message = altered(entry, seq);
                self.problem(ProblemKind::Altered, Some(seq), Some(&id), message);
            }
            if known.is_some_and(|k| k != prev) {
                let before = if seq > 1 {
                    self.name(seq - 1)
                } else {
                    "the chain's start".into()
                };
                let message = format!(
                    "{} does not follow {before}: its prev is not that record's hash (a \
                     record was inserted, reordered or rewritten there)",
                    self.name(seq)
                );
                self.problem(ProblemKind::BrokenLink, Some(seq), Some(&id), message);
            }
            known = Some(hash);
            seq += 1;
        }
    }

    /// Records cut from the end: a checkpoint or the stored head past the last record.
    fn check_tail(&mut self, signed: &BTreeMap<u64, Checkpoint>) {
        let last = self.entries.keys().next_back().copied().unwrap_or(0);
        let last_signed = signed.keys().next_back().copied().unwrap_or(0);
        self.report.unsigned_tail = last.saturating_sub(last_signed.max(self.pruned_to));
        let expected = last_signed.max(self.head_seq);
        if expected > last && self.since_ms.is_none_or(|_| last > 0) {
            let why = if last_signed > last {
                let time = signed.get(&last_signed).map_or("", |c| c.time.as_str());
                format!("the checkpoint signed at {time} covers seq {last_signed}")
            } else {
                format!("the journal's head is seq {}", self.head_seq)
            };
            let after = if last > 0 {
                self.name(last)
            } else {
                "the chain's start".into()
            };
            let message = format!(
                "the records after {after} are missing, up to seq {expected} ({why}): the tail \
                 was truncated"
            );
            self.problem(ProblemKind::Truncated, Some(last + 1), None, message);
        }
    }

    /// Final records without chain fields: from before the chain (fine) or after (inserted).
    fn check_unchained(&mut self) {
        let started = if self.started_ms > 0 {
            Some(self.started_ms)
        } else {
            None
        };
        for (id, ms) in std::mem::take(&mut self.unchained) {
            if self.since_ms.is_some_and(|since| ms < since) {
                continue;
            }
            match started {
                Some(started) if ms > started => {
                    let message = format!(
                        "record {id} ({}) has no chain fields but is newer than the chain's \
                         start ({}): it was inserted",
                        format_timestamp(ms),
                        format_timestamp(started)
                    );
                    self.problem(ProblemKind::Inserted, None, Some(&id), message);
                }
                _ => self.report.unchained += 1,
            }
        }
    }
}

fn altered(entry: &Entry, seq: u64) -> String {
    format!(
        "record {} (seq {seq}, {}) does not match its hash: its content was altered after it \
         was written",
        entry.id, entry.time
    )
}

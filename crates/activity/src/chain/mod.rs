//! The journal's hash chain: what makes the audit trail tamper-evident.
//!
//! Every record gets three chain fields when it becomes *final* (its status is no longer
//! `pending`): `seq` (1, 2, 3, … with no gap, per journal), `prev` (the `hash` of record
//! `seq - 1`, or 64 zeros for `seq` 1) and `hash`:
//!
//! ```text
//! hash = SHA-256( prev as 32 raw bytes || canonical(record without "prev" and "hash") )
//! ```
//!
//! [`canonical`] is the record's JSON with the members of every object sorted by key (byte
//! order of their UTF-8), no whitespace, strings escaped as JSON requires and no more
//! (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx`; all
//! else literal UTF-8), integers in decimal and other numbers in their shortest round-trip
//! form. For records whose numbers are integers this is Python's
//! `json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
//!
//! A record that is rewritten after it became final (a task's outcome completing a record
//! already closed) gets a new `seq`, and its row lists the versions it replaces in
//! `replaces` (`[{"seq": …, "hash": …}]`, covered by its hash), so the chain still links
//! over the old `seq` and `verify` reports it as replaced, not deleted.
//!
//! Every [`ChainOptions::checkpoint_every`] records or [`ChainOptions::checkpoint_interval`]
//! (whichever comes first, checked as records are written, and on close) the writer signs
//! the chain's head with the journal's Ed25519 key (see [`key`]): a [`Checkpoint`].
//!
//! The parts: [`key`] (the signing key and the checkpoint's signature), [`link`] (the
//! writer's side: the chain tables, linking a record, writing checkpoints), `borrowed`
//! (the writer's way to a record's canonical bytes, without a `Value`), [`verify`]
//! (walking a chain and naming what is wrong), `journal` (verifying a journal or an export,
//! the export's trailer), `tests`.

mod borrowed;
mod journal;
pub(crate) mod key;
pub(crate) mod link;
pub(crate) mod verify;

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use journal::{ChainState, read_witness, verify_export, verify_export_with};
pub use key::{Checkpoint, SigningKey, public_key_of};
pub use verify::{ChainReport, Problem, ProblemKind, Verifier};

/// A SHA-256 digest.
pub(crate) type Digest32 = [u8; 32];

/// The `prev` of the first record of a chain.
pub(crate) const GENESIS: Digest32 = [0; 32];

/// The file next to the journal that holds its signing key, unless
/// [`ChainOptions::key_file`] names another.
pub const KEY_FILE: &str = "activity-signing.key";

/// How the journal signs its chain.
#[derive(Debug, Clone)]
pub struct ChainOptions {
    /// Sign the head after this many records (0: never by count); default 1000.
    pub checkpoint_every: u64,
    /// Sign the head when it is this old and unsigned (checked as records are written and
    /// on close); default 60 s.
    pub checkpoint_interval: Duration,
    /// The signing key's file; default [`KEY_FILE`] beside the journal, made at first open
    /// (mode 0600).
    pub key_file: Option<std::path::PathBuf>,
    /// The signing key itself, as 64 hex digits (`activity.signing_key`, a `${secret:NAME}`
    /// resolved at start), and where it came from; replaces the key file when given.
    pub key_seed: Option<KeySeed>,
}

/// A signing key's seed given by the config rather than kept in a file.
#[derive(Clone)]
pub struct KeySeed {
    /// 64 hex digits.
    pub hex: String,
    /// Where it came from, for messages (e.g. `${secret:AUDIT_KEY}`); never the key.
    pub source: String,
}

impl std::fmt::Debug for KeySeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySeed")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Default for ChainOptions {
    fn default() -> Self {
        Self {
            checkpoint_every: 1000,
            checkpoint_interval: Duration::from_secs(60),
            key_file: None,
            key_seed: None,
        }
    }
}

/// An earlier version of a record, replaced after it was final.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    /// Its `seq`.
    pub seq: u64,
    /// Its `hash` (hex).
    pub hash: String,
}

/// A record's chain fields, as stored at the end of its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ChainLink {
    /// Position in the chain, from 1.
    #[serde(default)]
    pub seq: Option<u64>,
    /// Versions this record replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<Replaced>,
    /// The previous record's hash (hex).
    #[serde(default)]
    pub prev: Option<String>,
    /// This record's hash (hex).
    #[serde(default)]
    pub hash: Option<String>,
}

impl ChainLink {
    /// The chain fields of a stored row (all `None` for a row outside the chain).
    pub fn of_row(json: &[u8]) -> Option<Self> {
        serde_json::from_slice(json).ok()
    }

    /// Whether the row is in the chain.
    pub fn is_chained(&self) -> bool {
        self.seq.is_some() && self.hash.is_some()
    }
}

/// The canonical bytes of `value` (see the module docs).
pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    write_canonical(value, &mut out);
    out
}

/// SHA-256 (hex) of `value`'s canonical bytes: what a record's `approval.arguments_hash`
/// holds for the call's arguments, so that an outside tool recomputes it the same way.
pub fn canonical_sha256(value: &Value) -> String {
    hex(&Sha256::digest(canonical(value)))
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(b':');
                write_canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // Writing a string, number, boolean or null into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// The hash of a record whose JSON object (chain fields `seq` and `replaces` included,
/// `prev` and `hash` left out or removed here) is `record`, linked to `prev`.
pub fn record_hash(prev: &Digest32, record: &Value) -> Digest32 {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    match record {
        Value::Object(map) if map.contains_key("prev") || map.contains_key("hash") => {
            let mut map = map.clone();
            map.remove("prev");
            map.remove("hash");
            hasher.update(canonical(&Value::Object(map)));
        }
        _ => hasher.update(canonical(record)),
    }
    hasher.finalize().into()
}

/// The hash of a final record linked at `seq` after `prev`, from its JSON object as the
/// journal encodes it (without chain fields; `replaces` none): [`record_hash`] of that
/// object with `seq` set, computed as the journal's writer does, from the text (see
/// `borrowed`). `None` when `json` is not a JSON object.
pub fn linked_record_hash(prev: &Digest32, json: &[u8], seq: u64) -> Option<Digest32> {
    borrowed::record_hash(
        prev,
        json,
        borrowed::chain_members(seq, &[]),
        &mut Vec::new(),
    )
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The 32 bytes of a 64-digit hex string; `None` when it is not one.
pub(crate) fn unhex32(text: &str) -> Option<Digest32> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let hi = digit(pair[0])?;
        let lo = digit(pair[1])?;
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

/// `json` (a record's JSON object as the writer encodes it, without chain fields) with the
/// chain fields appended before its closing brace.
pub(crate) fn splice(json: &[u8], link: &ChainLink) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 200);
    out.extend_from_slice(json.strip_suffix(b"}").unwrap_or(json));
    let fields = serde_json::to_vec(link).unwrap_or_default();
    if let Some(inner) = fields.strip_prefix(b"{").and_then(|f| f.strip_suffix(b"}")) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(inner);
    }
    out.push(b'}');
    out
}

/// Whether `stored` is `json` itself or `json` with chain fields spliced in (see
/// [`splice`]): the same record, as far as its content goes.
pub(crate) fn same_content(stored: &[u8], json: &[u8]) -> bool {
    if stored == json {
        return true;
    }
    let Some(body) = json.strip_suffix(b"}") else {
        return false;
    };
    stored.starts_with(body) && stored[body.len()..].starts_with(b",\"seq\":")
}

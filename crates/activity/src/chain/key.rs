//! The journal's Ed25519 signing key and its checkpoints.
//!
//! The key is a 32-byte seed kept as 64 hex digits in a file of its own (mode 0600), made
//! at the journal's first open. A [`Checkpoint`] signs the chain's head; the signed message
//! is the ASCII text
//!
//! ```text
//! mcpproxy-activity-checkpoint:v1:<seq>:<head hash, 64 hex digits>:<time, unix ms>
//! ```
//!
//! so an outside tool can check it with any Ed25519 library and the public key that
//! `mcpproxy activity key` prints (64 hex digits).

use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

use super::{Digest32, hex, unhex32};
use crate::{Error, Result};

/// A journal's signing key.
pub struct SigningKey {
    pair: Ed25519KeyPair,
    /// The file it is kept in, or where it came from (`${secret:NAME}`), for messages.
    path: PathBuf,
    /// The replica the journal belongs to, labelled on each checkpoint (not signed).
    replica: Option<String>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("path", &self.path)
            .field("public", &self.public_hex())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// The key in `path`, made (mode 0600) when the file does not exist.
    pub fn load_or_create(path: &Path) -> Result<Self> {
        let bad = |detail: String| Error::SigningKey {
            path: path.to_path_buf(),
            detail,
        };
        let seed = match std::fs::read_to_string(path) {
            Ok(text) => unhex32(text.trim()).ok_or_else(|| {
                bad("it does not hold 64 hex digits (an Ed25519 seed)".to_owned())
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut seed = [0u8; 32];
                SystemRandom::new()
                    .fill(&mut seed)
                    .map_err(|_| bad("the system gave no random bytes for a new key".into()))?;
                let mut text = hex(&seed);
                text.push('\n');
                mcpproxy_support::write_private_atomically(path, text.as_bytes())
                    .map_err(|e| bad(format!("cannot write a new key: {e}")))?;
                seed
            }
            Err(e) => return Err(bad(format!("cannot read it: {e}"))),
        };
        Self::from_seed(&seed, path)
    }

    /// The key of a 32-byte `seed` given as 64 hex digits (a `${secret:NAME}` in the config,
    /// so that replicas can share one key); `source` names where it came from in messages.
    pub fn from_hex_seed(text: &str, source: &str) -> Result<Self> {
        let bad = |detail: &str| Error::SigningKeySeed {
            source_name: source.to_owned(),
            detail: detail.to_owned(),
        };
        let seed = unhex32(text.trim())
            .ok_or_else(|| bad("it does not hold 64 hex digits (an Ed25519 seed)"))?;
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|_| bad("the seed is not a valid Ed25519 key"))?;
        Ok(Self {
            pair,
            path: PathBuf::from(source),
            replica: None,
        })
    }

    fn from_seed(seed: &[u8; 32], path: &Path) -> Result<Self> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).map_err(|_| Error::SigningKey {
            path: path.to_path_buf(),
            detail: "the seed is not a valid Ed25519 key".into(),
        })?;
        Ok(Self {
            pair,
            path: path.to_path_buf(),
            replica: None,
        })
    }

    /// Labels the checkpoints this key signs with `replica` (a cluster's replica name).
    pub fn for_replica(mut self, replica: Option<String>) -> Self {
        self.replica = replica;
        self
    }

    /// The public key, 64 hex digits.
    pub fn public_hex(&self) -> String {
        hex(self.pair.public_key().as_ref())
    }

    /// The file the key is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A checkpoint of the head `(seq, head)` at `time_ms`.
    pub fn checkpoint(&self, seq: u64, head: &Digest32, time_ms: u64) -> Checkpoint {
        let message = signed_message(seq, &hex(head), time_ms);
        Checkpoint {
            seq,
            head: hex(head),
            time_ms,
            time: crate::format_timestamp(time_ms),
            key: self.public_hex(),
            signature: hex(self.pair.sign(message.as_bytes()).as_ref()),
            replica: self.replica.clone(),
        }
    }
}

/// A signed statement that the chain's record `seq` has the hash `head`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The last record signed.
    pub seq: u64,
    /// Its hash (hex).
    pub head: String,
    /// When it was signed, unix milliseconds.
    pub time_ms: u64,
    /// The same, RFC 3339 (for people; not signed).
    #[serde(default)]
    pub time: String,
    /// The signer's public key (hex). Verify against a key you trust, not this one.
    pub key: String,
    /// The Ed25519 signature (hex) of the message in the module docs.
    pub signature: String,
    /// The replica of a cluster whose journal signed it (`cluster.replica`), so that a
    /// witness of several replicas, or `activity verify --cluster`, knows which chain it
    /// belongs to. A label, not signed: a wrong one makes the checkpoint fail to match the
    /// chain it is put against, it cannot make a rewritten chain pass. Absent outside a
    /// cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

impl Checkpoint {
    /// Whether the signature is `public`'s (hex) over this checkpoint.
    pub fn signed_by(&self, public: &str) -> bool {
        let Some(public) = unhex32(public) else {
            return false;
        };
        let Some(signature) = unhex64(&self.signature) else {
            return false;
        };
        let message = signed_message(self.seq, &self.head, self.time_ms);
        UnparsedPublicKey::new(&ED25519, public)
            .verify(message.as_bytes(), &signature)
            .is_ok()
    }
}

/// The text a checkpoint signs.
fn signed_message(seq: u64, head_hex: &str, time_ms: u64) -> String {
    format!("mcpproxy-activity-checkpoint:v1:{seq}:{head_hex}:{time_ms}")
}

fn unhex64(text: &str) -> Option<[u8; 64]> {
    if text.len() != 128 || !text.is_ascii() {
        return None;
    }
    let lo = unhex32(&text[..64])?;
    let hi = unhex32(&text[64..])?;
    let mut out = [0u8; 64];
    out[..32].copy_from_slice(&lo);
    out[32..].copy_from_slice(&hi);
    Some(out)
}

/// The public key (hex) of the key in `path`, without making one.
pub fn public_key_of(path: &Path) -> Result<String> {
    if !path.exists() {
        return Err(Error::NoSigningKey {
            path: path.to_path_buf(),
        });
    }
    Ok(SigningKey::load_or_create(path)?.public_hex())
}

//! Sealed `requestState` for InputRequiredResult rounds (SEP-2322): the state is
//! JSON, hex-encoded and followed by an HMAC-SHA256 tag under a key drawn at start,
//! so a client can echo it back but not forge or alter it. The fixture keeps nothing
//! per request on its side.

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BLOCK: usize = 64;

/// The key states are sealed with (deliberately not `Debug`: the key stays out of logs).
pub struct Sealer {
    key: [u8; 32],
}

impl Sealer {
    /// A sealer with a fresh random key.
    pub fn new() -> anyhow::Result<Self> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|error| anyhow::anyhow!("no randomness: {error}"))?;
        Ok(Self { key })
    }

    fn tag(&self, message: &[u8]) -> [u8; 32] {
        let mut padded = [0u8; BLOCK];
        padded[..self.key.len()].copy_from_slice(&self.key);
        let inner_key: Vec<u8> = padded.iter().map(|b| b ^ 0x36).collect();
        let outer_key: Vec<u8> = padded.iter().map(|b| b ^ 0x5c).collect();
        let inner = Sha256::new()
            .chain_update(&inner_key)
            .chain_update(message)
            .finalize();
        Sha256::new()
            .chain_update(&outer_key)
            .chain_update(inner)
            .finalize()
            .into()
    }

    /// `state` sealed as `HEX(json).HEX(tag)`.
    pub fn seal(&self, state: &Value) -> String {
        let payload = state.to_string();
        format!(
            "{}.{}",
            hex(payload.as_bytes()),
            hex(&self.tag(payload.as_bytes()))
        )
    }

    /// The state inside `sealed`, or invalid params when it was altered or is not one.
    pub fn open(&self, sealed: &str) -> Result<Value, McpError> {
        let invalid = || {
            McpError::invalid_params(
                "requestState failed its integrity check",
                Some(json!({ "requestState": sealed })),
            )
        };
        let (payload, tag) = sealed.split_once('.').ok_or_else(invalid)?;
        let payload = unhex(payload).ok_or_else(invalid)?;
        let tag = unhex(tag).ok_or_else(invalid)?;
        let expected = self.tag(&payload);
        // Compare without an early exit.
        let same = tag.len() == expected.len()
            && tag
                .iter()
                .zip(expected)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if !same {
            return Err(invalid());
        }
        serde_json::from_slice(&payload).map_err(|_| invalid())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_state_opens_and_an_altered_one_does_not() {
        let sealer = Sealer::new().expect("randomness");
        let sealed = sealer.seal(&json!({ "round": 2, "name": "Alice" }));
        assert_eq!(
            sealer.open(&sealed).expect("opens"),
            json!({ "round": 2, "name": "Alice" })
        );
        assert!(sealer.open(&format!("{sealed}-TAMPERED")).is_err());
        let (payload, tag) = sealed.split_once('.').expect("two parts");
        let forged = sealer.seal(&json!({ "round": 3 }));
        let (forged_payload, _) = forged.split_once('.').expect("two parts");
        assert!(sealer.open(&format!("{forged_payload}.{tag}")).is_err());
        assert!(sealer.open(payload).is_err());
        assert!(Sealer::new().expect("randomness").open(&sealed).is_err());
    }

    #[test]
    fn the_tag_is_hmac_sha256() {
        // HMAC-SHA256 of "Hi There" under the key 0x0b * 32, as Python's hmac module
        // computes it.
        let sealer = Sealer { key: [0x0b; 32] };
        assert_eq!(
            hex(&sealer.tag(b"Hi There")),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }
}

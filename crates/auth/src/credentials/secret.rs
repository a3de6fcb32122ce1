//! A stored value: shown only through [`Secret::expose`], redacted in `Debug`, wiped from
//! memory when dropped.

use zeroize::Zeroize;

/// A credential's value. Its `Debug` never shows it; its memory is zeroed on drop.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The value itself, for the one place that sends it (a header, an env var, a token
    /// request).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

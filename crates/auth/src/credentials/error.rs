//! What can go wrong with the credential store. No variant carries a stored value.

use std::path::PathBuf;

/// A failure of the credential store; its text names the file or key and the fix, never a
/// value.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("credential store {}: {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        source: std::io::Error,
    },
    #[error(
        "{} is not a valid credentials file ({detail}); fix it by hand or move it aside \
         (the secrets it held must then be set again with `mcpproxy secret set NAME`)",
        path.display()
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "MCPPROXY_CREDENTIALS={value} is not a credential backend; set it to `file` or \
         `keyring`, or unset it to use the keyring when one answers and the file otherwise"
    )]
    BadChoice { value: String },
    #[error(
        "MCPPROXY_CREDENTIALS=keyring, but no OS keyring answers ({reason}); start a Secret \
         Service (gnome-keyring, KeePassXC) in a D-Bus session, or set \
         MCPPROXY_CREDENTIALS=file (or unset it) to use the 0600 file in the data dir"
    )]
    KeyringUnavailable { reason: String },
    #[error("the OS keyring failed on credential {key}: {reason}")]
    Keyring { key: String, reason: String },
    #[error("credential key {key} is invalid: {reason}")]
    BadKey { key: String, reason: &'static str },
    #[error("the value for credential {key} is {len} bytes, over the limit of {max}")]
    TooLarge { key: String, len: usize, max: usize },
}

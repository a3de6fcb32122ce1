//! What reading the config can fail with: every message starts with the file it came from
//! and names the key that is wrong.

use std::io;
use std::path::PathBuf;

/// A configuration problem. The message always starts with the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file named on the command line does not exist.
    #[error(
        "{}: no such config file: create it (`{{}}` is a valid config that keeps every default) or point --config at an existing file",
        path.display()
    )]
    NotFound { path: PathBuf },
    /// The file exists but could not be read.
    #[error("{}: cannot read the config file: {io}", path.display())]
    Read { path: PathBuf, io: io::Error },
    /// The file is not valid JSON.
    #[error("{origin}: line {line}, column {column}: invalid JSON: {message}")]
    Syntax {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// The JSON is well formed but a key is unknown, has the wrong type or a bad value.
    /// `key` is the key path (`mcpServers[2].url`), empty for the whole document.
    #[error("{origin}: {}{message}", key_prefix(key))]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

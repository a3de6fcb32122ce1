//! The REST API key: configured (`api_key` in mcp_config.json), or generated on first start
//! and kept in `<data-dir>/api_key` (mode 0600). Keys are compared in constant time.

use std::path::{Path, PathBuf};

/// The file the generated key lives in.
pub fn key_path(data_dir: &Path) -> PathBuf {
    data_dir.join("api_key")
}

/// Why the key could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the API key from {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot store the API key in {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is empty; delete it and mcpproxy makes a new key")]
    Empty { path: PathBuf },
    #[error("no randomness for a new API key: {0}")]
    Random(String),
}

/// The configured key, else the stored one, else a new one (stored).
pub fn load_or_create(data_dir: &Path, configured: Option<&str>) -> Result<String, Error> {
    if let Some(key) = configured {
        return Ok(key.to_owned());
    }
    let path = key_path(data_dir);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let key = text.trim();
            if key.is_empty() {
                return Err(Error::Empty { path });
            }
            // A key file left readable by others (an older release, a copy) is narrowed to
            // 0600; best effort: the key still works if that fails.
            if let Ok(file) = std::fs::File::open(&path) {
                let _ = mcpproxy_support::restrict(&file);
            }
            Ok(key.to_owned())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = generate()?;
            write_private(&path, &key).map_err(|source| Error::Write { path, source })?;
            Ok(key)
        }
        Err(source) => Err(Error::Read { path, source }),
    }
}

/// The stored key, if any, without creating one.
pub fn load_existing(data_dir: &Path, configured: Option<&str>) -> Option<String> {
    configured.map(str::to_owned).or_else(|| {
        std::fs::read_to_string(key_path(data_dir))
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    })
}

/// Constant-time equality of two keys.
pub fn matches(expected: &str, given: &str) -> bool {
    mcpproxy_auth::access::secret_matches(expected, given)
}

fn generate() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Random(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_private(path: &Path, key: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        mcpproxy_support::create_private_dir(dir)?;
    }
    use std::io::Write;
    let mut file = mcpproxy_support::open_private(
        std::fs::OpenOptions::new().write(true).create_new(true),
        path,
    )?;
    file.write_all(key.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path(), None).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(load_or_create(dir.path(), None).unwrap(), first);
        assert_eq!(load_existing(dir.path(), None), Some(first.clone()));
        assert_eq!(load_or_create(dir.path(), Some("mine")).unwrap(), "mine");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_path(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn keys_compare_exactly() {
        assert!(matches("abc", "abc"));
        assert!(!matches("abc", "abd"));
        assert!(!matches("abc", "ab"));
        assert!(!matches("abc", ""));
    }
}

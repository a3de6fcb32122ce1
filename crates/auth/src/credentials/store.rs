//! [`CredentialStore`]: picks the backend once (`MCPPROXY_CREDENTIALS`, else the keyring
//! when it answers, else the file), checks keys and value sizes, and serves `get`, `set`,
//! `delete` and `keys` to any number of tasks and processes.

use std::path::Path;
use std::sync::Arc;

use mcpproxy_support::quote;

use super::file::DocumentFile;
use super::{CredentialError, Secret};

/// The file of the file backend, in the data dir.
pub(super) const FILE_NAME: &str = "credentials.json";
/// The keyring backend's index of key names (never values), in the data dir.
const INDEX_FILE_NAME: &str = "credentials-index.json";
/// The environment variable that forces a backend: `file` or `keyring`.
pub(super) const BACKEND_VAR: &str = "MCPPROXY_CREDENTIALS";
/// The longest key, in bytes.
const MAX_KEY_BYTES: usize = 512;
/// The largest value, in bytes (an OAuth token response with an ID token is a few KiB).
const MAX_VALUE_BYTES: usize = 256 * 1024;

/// The credential store of one data dir. Cheap to clone (an `Arc`), safe to share.
#[derive(Clone)]
pub struct CredentialStore {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    /// The file: the values (file backend), or values stored before a keyring answered
    /// (keyring backend: read and deleted, never written).
    file: DocumentFile,
    /// `file: <path>` / `keyring: ...`, for `secret list` and the log.
    label: &'static str,
}

enum Backend {
    File,
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    Keyring {
        keyring: super::keyring::Keyring,
        index: DocumentFile,
    },
}

/// Which backend `MCPPROXY_CREDENTIALS` asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Choice {
    Auto,
    File,
    Keyring,
}

impl CredentialStore {
    /// The store of `data_dir`: the backend `MCPPROXY_CREDENTIALS` names, else the OS
    /// keyring when it answers (probed once), else `credentials.json` in the data dir.
    pub fn open(data_dir: &Path) -> Result<CredentialStore, CredentialError> {
        let choice = match std::env::var(BACKEND_VAR) {
            Err(_) => Choice::Auto,
            Ok(value) => match value.trim() {
                "" => Choice::Auto,
                "file" => Choice::File,
                "keyring" => Choice::Keyring,
                _ => {
                    return Err(CredentialError::BadChoice {
                        value: quote(&value),
                    });
                }
            },
        };
        if choice != Choice::File {
            match Self::probe_keyring(data_dir) {
                Ok(store) => return Ok(store),
                Err(reason) if choice == Choice::Keyring => {
                    return Err(CredentialError::KeyringUnavailable { reason });
                }
                Err(reason) => tracing::debug!(%reason, "no OS keyring answers"),
            }
        }
        let store = Self::open_file(data_dir);
        tracing::info!(
            file = %store.inner.file.path().display(),
            "credentials are kept in a 0600 file (no OS keyring in use)"
        );
        Ok(store)
    }

    /// The file backend of `data_dir`, with no keyring probe.
    pub fn open_file(data_dir: &Path) -> CredentialStore {
        let file = DocumentFile::new(data_dir, FILE_NAME);
        let label = leak_label(format!("file: {}", file.path().display()));
        CredentialStore {
            inner: Arc::new(Inner {
                backend: Backend::File,
                file,
                label,
            }),
        }
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    fn probe_keyring(data_dir: &Path) -> Result<CredentialStore, String> {
        let keyring = super::keyring::Keyring::probe(data_dir)?;
        let label = if cfg!(target_os = "macos") {
            "keyring: Keychain"
        } else {
            "keyring: Secret Service"
        };
        Ok(CredentialStore {
            inner: Arc::new(Inner {
                backend: Backend::Keyring {
                    keyring,
                    index: DocumentFile::new(data_dir, INDEX_FILE_NAME),
                },
                file: DocumentFile::new(data_dir, FILE_NAME),
                label,
            }),
        })
    }

    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    fn probe_keyring(_data_dir: &Path) -> Result<CredentialStore, String> {
        let _ = INDEX_FILE_NAME;
        Err("this build has no OS keyring support on this platform".to_owned())
    }

    /// Where the values are: `keyring: Secret Service`, `keyring: Keychain` or
    /// `file: <path>`.
    pub fn backend(&self) -> &'static str {
        self.inner.label
    }

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<Secret>, CredentialError> {
        check_key(key)?;
        match &self.inner.backend {
            Backend::File => {}
            #[cfg(any(target_os = "linux", target_os = "macos"))]
            Backend::Keyring { keyring, .. } => {
                match keyring
                    .get(key)
                    .map_err(|reason| keyring_error(key, reason))?
                {
                    super::keyring::Lookup::Found(value) => return Ok(Some(Secret::new(value))),
                    super::keyring::Lookup::Missing => {}
                }
            }
        }
        Ok(self.inner.file.read()?.secrets.remove(key))
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn set(&self, key: &str, value: &str) -> Result<(), CredentialError> {
        check_key(key)?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(CredentialError::TooLarge {
                key: quote(key),
                len: value.len(),
                max: MAX_VALUE_BYTES,
            });
        }
        match &self.inner.backend {
            Backend::File => self.inner.file.update(|document| {
                document
                    .secrets
                    .insert(key.to_owned(), Secret::new(value.to_owned()));
                ((), true)
            }),
            #[cfg(any(target_os = "linux", target_os = "macos"))]
            Backend::Keyring { keyring, index } => {
                keyring
                    .set(key, value)
                    .map_err(|reason| keyring_error(key, reason))?;
                index.update(|document| ((), document.keys.insert(key.to_owned())))?;
                // An older value in the file would only confuse a later reader.
                self.inner
                    .file
                    .update(|document| ((), document.secrets.remove(key).is_some()))
            }
        }
    }

    /// Forgets `key`; whether anything was stored under it.
    pub fn delete(&self, key: &str) -> Result<bool, CredentialError> {
        check_key(key)?;
        let mut deleted = false;
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if let Backend::Keyring { keyring, index } = &self.inner.backend {
            deleted |= keyring
                .delete(key)
                .map_err(|reason| keyring_error(key, reason))?;
            index.update(|document| ((), document.keys.remove(key)))?;
        }
        if self.inner.file.path().exists() {
            deleted |= self.inner.file.update(|document| {
                let removed = document.secrets.remove(key).is_some();
                (removed, removed)
            })?;
        }
        Ok(deleted)
    }

    /// The stored keys that start with `prefix`, sorted. Names only.
    pub fn keys(&self, prefix: &str) -> Result<Vec<String>, CredentialError> {
        let mut keys: std::collections::BTreeSet<String> = self
            .inner
            .file
            .read()?
            .secrets
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        if let Backend::Keyring { index, .. } = &self.inner.backend {
            keys.extend(
                index
                    .read()?
                    .keys
                    .into_iter()
                    .filter(|k| k.starts_with(prefix)),
            );
        }
        Ok(keys.into_iter().collect())
    }
}

impl std::fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialStore")
            .field("backend", &self.inner.label)
            .finish_non_exhaustive()
    }
}

/// A key is 1 to 512 bytes with no control characters and no surrounding whitespace.
fn check_key(key: &str) -> Result<(), CredentialError> {
    let bad = |reason| {
        Err(CredentialError::BadKey {
            key: quote(key),
            reason,
        })
    };
    if key.is_empty() {
        return bad("it is empty");
    }
    if key.len() > MAX_KEY_BYTES {
        return bad("it is longer than 512 bytes");
    }
    if key.chars().any(char::is_control) {
        return bad("it has a control character");
    }
    if key.trim() != key {
        return bad("it starts or ends with whitespace");
    }
    Ok(())
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn keyring_error(key: &str, reason: String) -> CredentialError {
    CredentialError::Keyring {
        key: quote(key),
        reason,
    }
}

/// The file backend's label, kept for the life of the process: one per distinct data dir a
/// process opens (one, in practice), each leaked once.
fn leak_label(label: String) -> &'static str {
    static LABELS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut labels = mcpproxy_support::lock(&LABELS);
    if let Some(known) = labels.iter().find(|known| **known == label) {
        return known;
    }
    let leaked: &'static str = Box::leak(label.into_boxed_str());
    labels.push(leaked);
    leaked
}

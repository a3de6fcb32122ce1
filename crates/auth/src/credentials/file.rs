//! The file backend: a JSON document in the data dir, 0600 in a 0700 dir, replaced
//! atomically (temporary file, sync, rename) under an exclusive `flock` of a lock file beside
//! it, and read again before every change, so two processes (or two stores of one process)
//! never lose each other's writes. The keyring backend keeps its index of key names (names
//! only) in a document of the same shape.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use zeroize::Zeroizing;

use super::{CredentialError, Secret};

/// The file's size limit: far above any real use, so a runaway file is refused, not read.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Temporary file names unique within the process (two stores may write at once).
static TEMPORARY_SEQ: AtomicU64 = AtomicU64::new(0);

/// The document on disk. `secrets` holds values (the file backend), `keys` only names (the
/// keyring backend's index).
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Document {
    version: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) secrets: BTreeMap<String, Secret>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(super) keys: BTreeSet<String>,
}

/// One JSON document file and its lock file.
pub(super) struct DocumentFile {
    path: PathBuf,
    lock_path: PathBuf,
}

impl DocumentFile {
    pub(super) fn new(dir: &Path, file_name: &str) -> Self {
        Self {
            path: dir.join(file_name),
            lock_path: dir.join(format!(".{file_name}.lock")),
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The document as it is now (empty when there is no file), read under a shared lock.
    pub(super) fn read(&self) -> Result<Document, CredentialError> {
        if !self.path.exists() {
            return Ok(Document::default());
        }
        let lock = self.lock(false)?;
        let document = self.load();
        drop(lock);
        document
    }

    /// Reads the document under an exclusive lock, lets `change` edit it, and writes it back
    /// when `change` says it changed something.
    pub(super) fn update<R>(
        &self,
        change: impl FnOnce(&mut Document) -> (R, bool),
    ) -> Result<R, CredentialError> {
        let lock = self.lock(true)?;
        let mut document = self.load()?;
        let (result, changed) = change(&mut document);
        if changed {
            document.version = 1;
            self.store(&document)?;
        }
        drop(lock);
        Ok(result)
    }

    fn io_error(
        &self,
        path: &Path,
        action: &'static str,
    ) -> impl FnOnce(std::io::Error) -> CredentialError {
        let path = path.to_path_buf();
        move |source| CredentialError::Io {
            path,
            action,
            source,
        }
    }

    /// Opens the lock file (0600, the dir 0700 when made here) and takes its `flock`.
    fn lock(&self, exclusive: bool) -> Result<File, CredentialError> {
        if let Some(dir) = self.path.parent() {
            mcpproxy_support::create_private_dir(dir)
                .map_err(self.io_error(dir, "creating the data dir"))?;
        }
        let file = mcpproxy_support::open_private(
            OpenOptions::new().read(true).write(true).create(true),
            &self.lock_path,
        )
        .map_err(self.io_error(&self.lock_path, "opening the lock file"))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(self.io_error(&self.lock_path, "locking"))?;
        Ok(file)
    }

    fn load(&self) -> Result<Document, CredentialError> {
        let mut file =
            match mcpproxy_support::open_private(OpenOptions::new().read(true), &self.path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Document::default());
                }
                Err(e) => return Err(self.io_error(&self.path, "opening")(e)),
            };
        let corrupt = |detail: String| CredentialError::Corrupt {
            path: self.path.clone(),
            detail,
        };
        let mut text = Zeroizing::new(Vec::new());
        let read = (&mut file)
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(self.io_error(&self.path, "reading"))?;
        if read as u64 > MAX_FILE_BYTES {
            return Err(corrupt(format!("larger than {MAX_FILE_BYTES} bytes")));
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(Document::default());
        }
        // serde_json's messages may quote the text they stumbled on (a value): only the
        // position and the kind of error are reported.
        let document: Document = serde_json::from_slice(&text).map_err(|e| {
            let kind = match e.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    "not JSON"
                }
                _ => "not the expected {\"version\":1,\"secrets\":{NAME:VALUE}} shape",
            };
            corrupt(format!("{kind} at line {} column {}", e.line(), e.column()))
        })?;
        if document.version != 1 {
            return Err(corrupt(format!(
                "version {} is not 1: written by another mcpproxy version",
                document.version
            )));
        }
        Ok(document)
    }

    /// Replaces the file: a 0600 temporary file beside it, synced, renamed over it, the dir
    /// synced.
    fn store(&self, document: &Document) -> Result<(), CredentialError> {
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let text = Zeroizing::new(serde_json::to_vec_pretty(document).map_err(|_| {
            CredentialError::Corrupt {
                path: self.path.clone(),
                detail: "cannot be encoded".to_owned(),
            }
        })?);
        let file_name = self
            .path
            .file_name()
            .map_or_else(|| "credentials".into(), |n| n.to_string_lossy());
        let temporary = dir.join(format!(
            ".{file_name}.{}.{}.tmp",
            std::process::id(),
            TEMPORARY_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let mut file = mcpproxy_support::open_private(
                OpenOptions::new().write(true).create_new(true),
                &temporary,
            )?;
            file.write_all(&text)?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)?;
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        result.map_err(self.io_error(&self.path, "writing"))
    }
}

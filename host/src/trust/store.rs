//! The trust decisions on disk: `<data dir>/trust.json`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::policy::{Annotations, Tool};

use super::{Error, Result, fingerprint};

/// The file's name in the data dir.
pub const FILE_NAME: &str = "trust.json";
/// The largest trust file read: far more than thousands of pinned tools need.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// A tool as it was approved: everything the policy reads about it (see [`super::pin`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PinnedTool {
    /// The pin's format ([`super::pin::PIN_VERSION`] now). Absent in the files of earlier
    /// versions (1): those pins cover the name, description, input schema and hints only.
    #[serde(default = "super::pin::v1")]
    pub version: u32,
    pub sha256: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: serde_json::Value,
    #[serde(
        default,
        rename = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<serde_json::Value>,
    pub annotations: Option<Annotations>,
    /// `annotations.title`.
    #[serde(
        default,
        rename = "annotationsTitle",
        skip_serializing_if = "Option::is_none"
    )]
    pub annotations_title: Option<String>,
    /// The pinned part of `_meta` ([`super::pin::pinned_meta`]).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// When it was pinned (RFC 3339).
    pub pinned_at: String,
}

impl PinnedTool {
    pub fn of(tool: &Tool, at: &str) -> Self {
        Self {
            version: super::pin::PIN_VERSION,
            sha256: fingerprint(tool),
            description: tool.description.clone(),
            input_schema: tool.input_schema.clone(),
            output_schema: tool.output_schema.clone(),
            annotations: tool.annotations,
            annotations_title: tool.annotations_title.clone(),
            meta: super::pin::pinned_meta(tool.meta.as_ref()),
            pinned_at: at.to_owned(),
        }
    }
}

/// What was decided about one server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTrust {
    /// When a person approved the server (clearing its quarantine), and who.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Its tools as approved (or as first seen, for a server never quarantined).
    #[serde(default)]
    pub tools: BTreeMap<String, PinnedTool>,
}

impl ServerTrust {
    pub fn pin(&mut self, tool: &Tool, at: &str) {
        self.tools
            .insert(tool.name.clone(), PinnedTool::of(tool, at));
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default)]
    servers: BTreeMap<String, ServerTrust>,
}

/// The trust decisions of one data dir, loaded once and saved on every change.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    file: Mutex<TrustFile>,
}

impl TrustStore {
    /// Opens `<data_dir>/trust.json` (an absent file is an empty store).
    pub fn open(data_dir: &Path) -> Result<Self> {
        let path = data_dir.join(FILE_NAME);
        let file = match std::fs::File::open(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TrustFile::default(),
            Err(source) => return Err(Error::Read { path, source }),
            Ok(file) => {
                let mut text = String::new();
                std::io::Read::read_to_string(
                    &mut std::io::Read::take(file, MAX_FILE_BYTES),
                    &mut text,
                )
                .map_err(|source| Error::Read {
                    path: path.clone(),
                    source,
                })?;
                serde_json::from_str(&text).map_err(|source| Error::Corrupt {
                    path: path.clone(),
                    source,
                })?
            }
        };
        Ok(Self {
            path,
            file: Mutex::new(file),
        })
    }

    /// A store that is never saved (tests, and commands that only read).
    pub fn in_memory() -> Self {
        Self {
            path: PathBuf::new(),
            file: Mutex::new(TrustFile::default()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrustFile> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What was decided about `server`, if anything.
    pub fn server(&self, server: &str) -> Option<ServerTrust> {
        self.lock().servers.get(server).cloned()
    }

    /// Changes what is stored about `server` and saves the file. The change is kept in
    /// memory even if the save fails (the error says so).
    pub fn update<R>(&self, server: &str, change: impl FnOnce(&mut ServerTrust) -> R) -> Result<R> {
        let mut file = self.lock();
        let result = change(file.servers.entry(server.to_owned()).or_default());
        self.save(&file)?;
        Ok(result)
    }

    fn save(&self, file: &TrustFile) -> Result<()> {
        if self.path.as_os_str().is_empty() {
            return Ok(());
        }
        let write_err = |source| Error::Write {
            path: self.path.clone(),
            source,
        };
        let json =
            serde_json::to_vec_pretty(file).map_err(|e| write_err(std::io::Error::other(e)))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(write_err)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let mut out = std::fs::File::create(&tmp).map_err(write_err)?;
        out.write_all(&json).map_err(write_err)?;
        out.sync_all().map_err(write_err)?;
        drop(out);
        std::fs::rename(&tmp, &self.path).map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_survive_a_reopen_and_a_corrupt_file_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::open(dir.path()).unwrap();
        assert_eq!(store.server("fx"), None);
        let tool = Tool {
            name: "echo".into(),
            description: "Echo".into(),
            ..Default::default()
        };
        store
            .update("fx", |s| {
                s.approved_at = Some("2026-11-23T00:00:00Z".into());
                s.pin(&tool, "2026-11-23T00:00:00Z");
            })
            .unwrap();
        let again = TrustStore::open(dir.path()).unwrap();
        let fx = again.server("fx").unwrap();
        assert_eq!(fx.tools["echo"].sha256, fingerprint(&tool));
        assert!(fx.approved_at.is_some());

        std::fs::write(dir.path().join(FILE_NAME), "{not json").unwrap();
        let err = TrustStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is not a valid trust file"), "{err}");
        assert!(err.contains("move it away"), "{err}");
    }
}

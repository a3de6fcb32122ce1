//! The OS keyring backend, through the `keyring` crate: Secret Service (pure Rust, over
//! D-Bus) on Linux, the Keychain on macOS. Each entry is service `mcpproxy:<data dir>`,
//! user `<key>`, so two data dirs never share a credential. The keyring cannot list, so the
//! key names (never values) are kept in an index file in the data dir.
//!
//! The crate's Secret Service calls block on a runtime of their own, which panics inside a
//! tokio runtime: every call runs on a short-lived thread of its own.

use std::path::Path;
use std::time::Duration;

/// How long the probe at open waits for the keyring to answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The service name of this data dir's entries.
pub(super) struct Keyring {
    service: String,
}

/// What the keyring answered.
pub(super) enum Lookup {
    Found(String),
    Missing,
}

impl Keyring {
    /// The keyring of this machine, if one answers: a lookup of a probe entry must come back
    /// found or missing, not failed.
    ///
    /// A session bus without a Secret Service may take D-Bus's activation timeout (25 s) to
    /// say so: the probe waits [`PROBE_TIMEOUT`] and counts silence as no keyring (its thread
    /// finishes on its own).
    pub(super) fn probe(data_dir: &Path) -> Result<Self, String> {
        let service = format!("mcpproxy:{}", data_dir.display());
        let (answer, answered) = std::sync::mpsc::channel();
        let probe = Self {
            service: service.clone(),
        };
        std::thread::Builder::new()
            .name("keyring-probe".to_owned())
            .spawn(move || {
                let _ = answer.send(probe.get("mcpproxy/probe").map(drop));
            })
            .map_err(|e| format!("cannot start the keyring probe: {e}"))?;
        match answered.recv_timeout(PROBE_TIMEOUT) {
            Ok(Ok(())) => Ok(Self { service }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
        }
    }

    pub(super) fn get(&self, key: &str) -> Result<Lookup, String> {
        self.run(key, |entry| match entry.get_password() {
            Ok(value) => Ok(Lookup::Found(value)),
            Err(keyring::Error::NoEntry) => Ok(Lookup::Missing),
            Err(e) => Err(describe(&e)),
        })
    }

    pub(super) fn set(&self, key: &str, value: &str) -> Result<(), String> {
        self.run(key, |entry| {
            entry.set_password(value).map_err(|e| describe(&e))
        })
    }

    /// Whether there was an entry to delete.
    pub(super) fn delete(&self, key: &str) -> Result<bool, String> {
        self.run(key, |entry| match entry.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(describe(&e)),
        })
    }

    /// Runs `op` on the entry for `key` on a thread of its own (see the module's note).
    fn run<R: Send>(
        &self,
        key: &str,
        op: impl FnOnce(&keyring::Entry) -> Result<R, String> + Send,
    ) -> Result<R, String> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let entry =
                        keyring::Entry::new(&self.service, key).map_err(|e| describe(&e))?;
                    op(&entry)
                })
                .join()
                .unwrap_or_else(|_| Err("the keyring library panicked".to_owned()))
        })
    }
}

/// The keyring's error without anything it may have read (a value that is not UTF-8 is
/// described, not shown).
fn describe(error: &keyring::Error) -> String {
    match error {
        keyring::Error::BadEncoding(_) => "the stored value is not UTF-8".to_owned(),
        keyring::Error::Ambiguous(items) => {
            format!("{} entries match the key", items.len())
        }
        other => other.to_string(),
    }
}

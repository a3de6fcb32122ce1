//! The trust decisions on disk: `<data dir>/trust.json`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc, watch};

use mcpproxy_config::ServerConfig;
use mcpproxy_policy::{Annotations, CompactJson, Tool};

use super::launch::{LaunchSpec, LaunchView};
use super::{Error, Result, ToolDiff, fingerprint};

/// The file's name in the data dir.
pub(super) const FILE_NAME: &str = "trust.json";
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
    pub input_schema: CompactJson,
    #[serde(
        default,
        rename = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<CompactJson>,
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
    /// The launch spec a person approved (how the server starts, where it connects): the
    /// server runs only while its configuration still has this fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<ApprovedLaunch>,
    /// Its tools as approved (or as first seen, for a server never quarantined).
    #[serde(default)]
    pub tools: BTreeMap<String, PinnedTool>,
    /// Tools a replica of the cluster saw change since they were pinned (shared state
    /// only): held on every replica, whatever its own session lists, until a person
    /// approves the tool (pinning it again clears it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held: BTreeMap<String, HeldTool>,
}

/// A tool held because a replica saw it change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldTool {
    /// [`fingerprint`] of the changed form the replica saw.
    pub sha256: String,
    /// What changed, as the replica that saw it listed it.
    pub diff: ToolDiff,
    /// When it was seen (RFC 3339).
    pub seen_at: String,
}

/// An approved launch spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovedLaunch {
    /// [`LaunchSpec::sha256`] of what was approved.
    pub sha256: String,
    /// What was approved, secrets masked (for the diff when it changes).
    pub spec: LaunchView,
    pub approved_at: String,
    pub approved_by: String,
}

/// Where a configured server stands against the approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Its launch spec is approved and so are its calls.
    Approved,
    /// Its launch spec is approved (it may start and list its tools) but its calls are not:
    /// quarantined, under review.
    Quarantined,
    /// Its launch spec was never approved, or changed since: it is not started.
    LaunchNotApproved {
        /// The spec approved before, if any, and what changed since.
        approved: Option<Box<LaunchView>>,
        changes: Vec<String>,
    },
}

impl Standing {
    /// Whether calls are refused.
    pub fn is_quarantined(&self) -> bool {
        *self != Standing::Approved
    }

    /// Whether the server may be started (its process run, its URL connected).
    pub fn may_start(&self) -> bool {
        !matches!(self, Standing::LaunchNotApproved { .. })
    }
}

impl ServerTrust {
    /// Pins `tool` as it is now: approved in this form, no longer held.
    pub fn pin(&mut self, tool: &Tool, at: &str) {
        self.held.remove(&tool.name);
        self.tools
            .insert(tool.name.clone(), PinnedTool::of(tool, at));
    }
}

/// Every trust decision: the trust file's content, or the shared state as loaded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrustState {
    /// Approvals are bound to launch specs: set once the servers of the config at the data
    /// dir's first start were approved as written ([`TrustStore::bind_launches`]).
    #[serde(default)]
    pub launch_binding: bool,
    #[serde(default)]
    pub servers: BTreeMap<String, ServerTrust>,
}

/// One change for the shared store to write, in the order made.
#[derive(Debug, Clone, PartialEq)]
pub enum TrustWrite {
    /// What is stored about `name` went from `before` to `after` (`None`: nothing).
    Server {
        name: String,
        before: Option<Box<ServerTrust>>,
        after: Option<Box<ServerTrust>>,
    },
    /// Approvals are bound to launch specs from now on ([`TrustStore::bind_launches`]).
    Binding,
}

/// The link of a store whose state is shared (`cluster.postgres`): its changes go to a
/// writer task, the state others wrote comes back through [`TrustStore::replace`].
#[derive(Debug)]
struct Shared {
    writes: mpsc::UnboundedSender<TrustWrite>,
    /// Changes sent to the writer and not yet written (or failed).
    pending: AtomicU64,
    /// Changes ever sent to the writer: a state read from the shared store before a change
    /// was sent may lack it even once it is written ([`TrustStore::replace_since`]).
    sent: AtomicU64,
    /// Woken when the last pending change is written.
    settled: Notify,
    /// Bumped each time the state others wrote replaced this one.
    changed: watch::Sender<u64>,
}

/// Who approved the servers found in the config at the data dir's first start.
pub(crate) const FIRST_START: &str = "mcp_config.json at the data dir's first start";

/// The trust decisions of one data dir, loaded once and saved on every change.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    file: Mutex<TrustState>,
    shared: Option<Shared>,
}

impl TrustStore {
    /// Opens `<data_dir>/trust.json` (an absent file is an empty store).
    pub fn open(data_dir: &Path) -> Result<Self> {
        let path = data_dir.join(FILE_NAME);
        let file = match std::fs::File::open(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => TrustState::default(),
            Err(source) => return Err(Error::Read { path, source }),
            Ok(file) => {
                // A file an older release left readable by others is narrowed now, not at the
                // next save (best effort: a file we may not chmod is still read).
                if let Err(e) = mcpproxy_support::restrict(&file) {
                    tracing::warn!("cannot make {} private (mode 0600): {e}", path.display());
                }
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
            shared: None,
        })
    }

    /// A store whose state is shared with other replicas, starting from `state`: every
    /// change is kept in memory at once (the API stays synchronous) and sent, in order, to
    /// the receiver returned, whose owner writes it to the shared store and calls
    /// [`TrustStore::written`] after each.
    pub fn shared(state: TrustState) -> (Self, mpsc::UnboundedReceiver<TrustWrite>) {
        #[allow(
            clippy::disallowed_methods,
            reason = "the store's API is synchronous and no write may be dropped; each write is \
                      one trust decision (an approval, a pin, a hold), and `pending` counts \
                      what the writer has yet to store"
        )]
        let (writes, receiver) = mpsc::unbounded_channel();
        let store = Self {
            path: PathBuf::new(),
            file: Mutex::new(state),
            shared: Some(Shared {
                writes,
                pending: AtomicU64::new(0),
                sent: AtomicU64::new(0),
                settled: Notify::new(),
                changed: watch::Sender::new(0),
            }),
        };
        (store, receiver)
    }

    /// Whether the state is shared with other replicas.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Replaces the state with what the shared store holds now, unless changes made here
    /// are still on their way to it (`false`: call again once [`TrustStore::settled`]
    /// returns). Subscribers hear of it when anything changed.
    #[cfg(test)]
    pub fn replace(&self, state: TrustState) -> bool {
        self.replace_since(state, self.read_mark())
    }

    /// Taken before reading the shared state, for [`TrustStore::replace_since`]: how many
    /// changes this store has sent so far, or `None` while some are still on their way (a
    /// read begun now may lack them even once they are written; read once
    /// [`TrustStore::settled`] returns).
    pub fn read_mark(&self) -> Option<u64> {
        let shared = self.shared.as_ref()?;
        // `sent` before `pending`: a change is counted pending before it is counted sent, so
        // a change this load of `sent` counts is either still pending below or written
        // already (and then in what a read begun after this sees).
        let sent = shared.sent.load(Ordering::Acquire);
        (shared.pending.load(Ordering::Acquire) == 0).then_some(sent)
    }

    /// [`TrustStore::replace`] with a state read after [`TrustStore::read_mark`] returned
    /// `mark`: refused (`false`: read again) when changes were on their way as the read
    /// began (`None`) or one was sent since, because the state read may lack them even when
    /// they are written by now; replacing with it would undo the change here (a server this
    /// replica just approved would read as unapproved).
    pub fn replace_since(&self, state: TrustState, mark: Option<u64>) -> bool {
        let (Some(shared), Some(mark)) = (&self.shared, mark) else {
            return false;
        };
        let mut file = self.lock();
        if shared.pending.load(Ordering::Acquire) > 0 || shared.sent.load(Ordering::Acquire) != mark
        {
            return false;
        }
        if *file != state {
            *file = state;
            drop(file);
            shared.changed.send_modify(|generation| *generation += 1);
        }
        true
    }

    /// One change sent to the writer was written (or given up on).
    pub fn written(&self) {
        if let Some(shared) = &self.shared
            && shared.pending.fetch_sub(1, Ordering::AcqRel) == 1
        {
            shared.settled.notify_one();
        }
    }

    /// Waits until no change made here is on its way to the shared store.
    pub async fn settled(&self) {
        if let Some(shared) = &self.shared {
            while shared.pending.load(Ordering::Acquire) > 0 {
                shared.settled.notified().await;
            }
        }
    }

    /// Hears of each replacement by the shared state ([`TrustStore::replace`]); `None` for
    /// a store that is not shared.
    pub fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        self.shared.as_ref().map(|s| s.changed.subscribe())
    }

    /// Records that `tool` of `server` was seen changed (`diff` from its pin, `sha256` of
    /// the form seen), so every replica holds it until a person approves it. Only for a
    /// shared store: alone, a replica's own review of each listing holds it already.
    pub fn hold(
        &self,
        server: &str,
        tool: &str,
        sha256: &str,
        diff: &ToolDiff,
        at: &str,
    ) -> Result<()> {
        let (already_held, is_the_pinned_form) = {
            let state = self.lock();
            let trust = state.servers.get(server);
            (
                trust
                    .and_then(|s| s.held.get(tool))
                    .is_some_and(|held| held.sha256 == sha256),
                trust
                    .and_then(|s| s.tools.get(tool))
                    .is_some_and(|pinned| pinned.sha256 == sha256),
            )
        };
        // Holding the approved form would release the hold on every replica (a held entry
        // equal to the pin reads as trusted): a replica whose server lists the approved form
        // again (after a restart) keeps the hold another replica made, it does not replace it.
        if self.shared.is_none() || already_held || is_the_pinned_form {
            return Ok(());
        }
        self.update(server, |s| {
            s.held.insert(
                tool.to_owned(),
                HeldTool {
                    sha256: sha256.to_owned(),
                    diff: diff.clone(),
                    seen_at: at.to_owned(),
                },
            );
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrustState> {
        mcpproxy_support::lock(&self.file)
    }

    /// What was decided about `server`, if anything.
    pub fn server(&self, server: &str) -> Option<ServerTrust> {
        self.lock().servers.get(server).cloned()
    }

    /// Where `server` stands: whether its launch spec and its calls are approved.
    pub fn standing(&self, server: &ServerConfig) -> Standing {
        let file = self.lock();
        let trust = file.servers.get(&server.name);
        let spec = LaunchSpec::of(server);
        match trust.and_then(|t| t.launch.as_ref()) {
            Some(launch) if launch.sha256 == spec.sha256 => {
                if trust.is_some_and(|t| t.approved_at.is_some()) {
                    Standing::Approved
                } else {
                    Standing::Quarantined
                }
            }
            Some(launch) => Standing::LaunchNotApproved {
                approved: Some(Box::new(launch.spec.clone())),
                changes: launch.spec.diff(&spec),
            },
            None => Standing::LaunchNotApproved {
                approved: None,
                changes: Vec::new(),
            },
        }
    }

    /// Approves how `server` starts as configured now and, with `calls`, its calls (clearing
    /// its quarantine); without `calls` it starts quarantined, for review. Saved at once.
    pub fn approve_launch(
        &self,
        server: &ServerConfig,
        calls: bool,
        by: &str,
        at: &str,
    ) -> Result<()> {
        let spec = LaunchSpec::of(server);
        self.update(&server.name, |s| {
            s.launch = Some(ApprovedLaunch {
                sha256: spec.sha256,
                spec: spec.view,
                approved_at: at.to_owned(),
                approved_by: by.to_owned(),
            });
            if calls {
                s.approved_at = Some(at.to_owned());
                s.approved_by = Some(by.to_owned());
            } else {
                s.approved_at = None;
                s.approved_by = None;
            }
        })
    }

    /// Forgets everything decided about `server` (its approvals and its pins): a server
    /// removed and added again is new.
    pub fn forget(&self, server: &str) -> Result<()> {
        let mut file = self.lock();
        if let Some(before) = file.servers.remove(server) {
            self.persist(
                &file,
                vec![TrustWrite::Server {
                    name: server.to_owned(),
                    before: Some(Box::new(before)),
                    after: None,
                }],
            )?;
        }
        Ok(())
    }

    /// Binds approvals to launch specs, once per data dir: at the first start (or the first
    /// start of a version that binds them), every server of the config is approved as
    /// written — the person wrote that file — its calls too unless it is marked
    /// `quarantined` (and a person did not approve it before). Every server added later
    /// arrives with no approval. Returns the servers approved now.
    pub fn bind_launches(&self, servers: &[ServerConfig], at: &str) -> Result<Vec<String>> {
        let mut file = self.lock();
        if file.launch_binding {
            return Ok(Vec::new());
        }
        let mut approved = Vec::new();
        let mut writes = Vec::new();
        for server in servers {
            let spec = LaunchSpec::of(server);
            let before = file.servers.get(&server.name).cloned().map(Box::new);
            let trust = file.servers.entry(server.name.clone()).or_default();
            trust.launch = Some(ApprovedLaunch {
                sha256: spec.sha256,
                spec: spec.view,
                approved_at: at.to_owned(),
                approved_by: FIRST_START.to_owned(),
            });
            if !server.quarantined && trust.approved_at.is_none() {
                trust.approved_at = Some(at.to_owned());
                trust.approved_by = Some(FIRST_START.to_owned());
            }
            writes.push(TrustWrite::Server {
                name: server.name.clone(),
                before,
                after: Some(Box::new(trust.clone())),
            });
            approved.push(server.name.clone());
        }
        file.launch_binding = true;
        writes.push(TrustWrite::Binding);
        self.persist(&file, writes)?;
        Ok(approved)
    }

    /// Changes what is stored about `server` and saves the file. The change is kept in
    /// memory even if the save fails (the error says so).
    pub fn update<R>(&self, server: &str, change: impl FnOnce(&mut ServerTrust) -> R) -> Result<R> {
        let mut file = self.lock();
        let before = file.servers.get(server).cloned().map(Box::new);
        let trust = file.servers.entry(server.to_owned()).or_default();
        let result = change(trust);
        let after = Some(Box::new(trust.clone()));
        self.persist(
            &file,
            vec![TrustWrite::Server {
                name: server.to_owned(),
                before,
                after,
            }],
        )?;
        Ok(result)
    }

    /// Makes the changes durable: the file saved, or (shared) each change that changes
    /// something sent to the writer. Called with the state locked, so a
    /// [`TrustStore::replace`] never overtakes a change on its way.
    fn persist(&self, file: &TrustState, writes: Vec<TrustWrite>) -> Result<()> {
        let Some(shared) = &self.shared else {
            return self.save(file);
        };
        for write in writes {
            if let TrustWrite::Server { before, after, .. } = &write
                && before == after
            {
                continue;
            }
            shared.pending.fetch_add(1, Ordering::AcqRel);
            shared.sent.fetch_add(1, Ordering::AcqRel);
            if shared.writes.send(write).is_err() {
                self.written();
                return Err(Error::Unshared);
            }
        }
        Ok(())
    }

    fn save(&self, file: &TrustState) -> Result<()> {
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
            mcpproxy_support::create_private_dir(dir).map_err(write_err)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        // 0600: who is trusted, and how each server starts, is the user's business.
        let mut out = mcpproxy_support::create_private_file(&tmp).map_err(write_err)?;
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

    #[tokio::test]
    async fn a_shared_store_sends_each_change_and_takes_others_only_when_its_own_are_written() {
        let (store, mut writes) = TrustStore::shared(TrustState::default());
        let mut changed = store.subscribe().expect("a shared store is subscribed to");
        let tool = |description: &str| Tool {
            name: "echo".into(),
            description: description.into(),
            ..Default::default()
        };
        store.update("fx", |s| s.pin(&tool("Echo"), "t0")).unwrap();
        let Some(TrustWrite::Server {
            name,
            before,
            after,
        }) = writes.recv().await
        else {
            panic!("the change is sent to the writer");
        };
        assert_eq!((name.as_str(), before), ("fx", None));
        assert!(after.is_some_and(|a| a.tools.contains_key("echo")));
        // A change that changes nothing is not sent.
        store.update("fx", |_| {}).unwrap();
        assert!(writes.try_recv().is_err());

        // Another replica's state does not overwrite a change still on its way.
        let mut theirs = TrustState::default();
        theirs.servers.entry("gh".into()).or_default();
        assert!(!store.replace(theirs.clone()));
        assert!(store.server("gh").is_none());
        store.written();
        store.settled().await;
        // A state read before a change was sent lacks it, even once it is written.
        let mark = store.read_mark();
        assert!(mark.is_some());
        store.update("fx", |s| s.pin(&tool("Echo2"), "t0")).unwrap();
        assert!(writes.try_recv().is_ok());
        store.written();
        assert!(!store.replace_since(theirs.clone(), mark));
        assert!(store.server("fx").is_some());
        // So does a state read while a change was on its way (the read's snapshot may be
        // older than the write), even when nothing was sent during the read and the change
        // is written by the time the read ends.
        store.update("fx", |s| s.pin(&tool("Echo3"), "t0")).unwrap();
        assert!(writes.try_recv().is_ok());
        let mark = store.read_mark();
        assert_eq!(mark, None);
        store.written();
        assert!(!store.replace_since(theirs.clone(), mark));
        assert!(store.server("fx").is_some());
        assert!(store.replace(theirs));
        assert!(store.server("gh").is_some() && store.server("fx").is_none());
        assert!(changed.has_changed().unwrap());
        changed.borrow_and_update();

        // A held tool is held in the review, however the replica's own listing looks,
        // until it is pinned again.
        let listed: BTreeMap<String, Tool> = [("echo".to_owned(), tool("Echo"))].into();
        store.update("fx", |s| s.pin(&tool("Echo"), "t1")).unwrap();
        let diff = ToolDiff::between(&PinnedTool::of(&tool("Echo"), "t1"), &tool("Evil"));
        store
            .hold("fx", "echo", &fingerprint(&tool("Evil")), &diff, "t2")
            .unwrap();
        let review = super::super::Review::of(&listed, store.server("fx").as_ref());
        assert!(!review.is_trusted("echo"), "{review:?}");
        // A replica whose server lists the approved form again (restarted) does not release
        // the hold by holding that form.
        store
            .hold("fx", "echo", &fingerprint(&tool("Echo")), &diff, "t2")
            .unwrap();
        let review = super::super::Review::of(&listed, store.server("fx").as_ref());
        assert!(!review.is_trusted("echo"), "{review:?}");
        store.update("fx", |s| s.pin(&tool("Echo"), "t3")).unwrap();
        let review = super::super::Review::of(&listed, store.server("fx").as_ref());
        assert!(review.is_trusted("echo"));
    }

    #[test]
    fn a_store_of_one_data_dir_holds_nothing_for_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::open(dir.path()).unwrap();
        assert!(store.subscribe().is_none());
        store
            .hold("fx", "echo", "abc", &ToolDiff::default(), "t")
            .unwrap();
        assert_eq!(store.server("fx"), None);
    }
}

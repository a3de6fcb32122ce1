//! Every configured upstream ([`Upstreams`]): starting a supervisor for each, applying a
//! new configuration while the proxy runs, restarting, approving a launch, shutting down.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::back_channel::BackChannel;
use crate::index::ToolIndex;
use mcpproxy_config::{ServerConfig, UpstreamConfig};
use mcpproxy_trust::{LaunchSpec, Review, TrustStore};

use super::{ServerStatus, State, ToolChange, Upstream, log, supervisor};
use mcpproxy_support::{lock, read_lock as read, write_lock as write};

/// Why a launch was not approved ([`Upstreams::approve_launch`]).
#[derive(Debug, thiserror::Error)]
pub enum LaunchApprovalError {
    #[error("unknown server '{0}'")]
    UnknownServer(String),
    /// The launch is not the one the fingerprint names (it changed since it was reviewed).
    #[error(
        "the launch changed since it was reviewed: it is {} now",
        now.fingerprint()
    )]
    Changed { now: Box<LaunchSpec> },
    /// No fingerprint was given, and the launch as configured now was never approved.
    #[error(
        "the launch (fingerprint {}) is not approved, and the approval does not name it by its fingerprint",
        now.fingerprint()
    )]
    Unreviewed { now: Box<LaunchSpec> },
    #[error("cannot save the approval: {0}")]
    Save(#[from] mcpproxy_trust::Error),
}

/// How many egress events may wait to be recorded before the newest are dropped (their
/// metrics are still counted).
const EGRESS_QUEUE: usize = 4096;

/// Every configured upstream, with their supervisors. Servers can be added, removed and
/// restarted while the proxy runs ([`Upstreams::apply`], [`Upstreams::restart`]).
pub struct Upstreams {
    servers: RwLock<BTreeMap<String, Running>>,
    settings: UpstreamConfig,
    default_timeout: Duration,
    index: Arc<ToolIndex>,
    trust: Arc<TrustStore>,
    shutdown: CancellationToken,
    changes_tx: mpsc::UnboundedSender<ToolChange>,
    changes: std::sync::Mutex<Option<mpsc::UnboundedReceiver<ToolChange>>>,
    egress_tx: mpsc::Sender<mcpproxy_egress::EgressEvent>,
    egress: std::sync::Mutex<Option<mpsc::Receiver<mcpproxy_egress::EgressEvent>>>,
    back_channel: Arc<BackChannel>,
    /// Paths no sandbox grant may reach (the data dir, the config file).
    forbidden_paths: Arc<[mcpproxy_sandbox::ForbiddenPath]>,
    /// Where package launchers' caches go, a directory per server (`DATA_DIR/launchers`).
    launcher_caches: std::path::PathBuf,
    /// Where upstream servers' OAuth tokens are kept.
    pub(super) credentials: mcpproxy_auth::credentials::CredentialStore,
    /// Logins in progress (`upstream login`, the page's "Log in").
    pub(super) logins: crate::oauth::Logins,
}

/// One upstream and its supervisor.
struct Running {
    upstream: Arc<Upstream>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// What [`Upstreams::apply`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AppliedChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Servers whose configuration changed, restarted with the new one.
    pub restarted: Vec<String>,
}

impl AppliedChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty()
    }
}

impl Upstreams {
    /// Starts a supervisor per enabled server (quarantined ones included: they are listed,
    /// never called). Must run inside a tokio runtime.
    pub fn start(
        servers: &[ServerConfig],
        settings: &UpstreamConfig,
        default_timeout: Duration,
        index: Arc<ToolIndex>,
        trust: Arc<TrustStore>,
        sandbox_paths: SandboxPaths,
        credentials: mcpproxy_auth::credentials::CredentialStore,
    ) -> Arc<Self> {
        #[allow(
            clippy::disallowed_methods,
            reason = "vetting is synchronous and must not drop a change; one per tool a listing finds new, changed or removed"
        )]
        let (changes_tx, receiver) = mpsc::unbounded_channel();
        let (egress_tx, egress) = mpsc::channel(EGRESS_QUEUE);
        let upstreams = Self {
            servers: RwLock::new(BTreeMap::new()),
            settings: *settings,
            default_timeout,
            index,
            trust,
            shutdown: CancellationToken::new(),
            changes_tx,
            changes: std::sync::Mutex::new(Some(receiver)),
            egress_tx,
            egress: std::sync::Mutex::new(Some(egress)),
            back_channel: BackChannel::new(),
            forbidden_paths: sandbox_paths.forbidden.into(),
            launcher_caches: sandbox_paths.launcher_caches,
            credentials,
            logins: crate::oauth::Logins::default(),
        };
        {
            // The lazy servers' known tools go into the index in one commit, before any
            // supervisor runs.
            let prepared: Vec<Arc<Upstream>> =
                servers.iter().map(|c| upstreams.prepare(c)).collect();
            super::lazy::publish_pinned(&prepared, &upstreams.index);
            let mut map = write(&upstreams.servers);
            for upstream in prepared {
                map.insert(upstream.name().to_owned(), upstreams.spawn(upstream));
            }
        }
        Arc::new(upstreams)
    }

    /// A new upstream for `config`, its supervisor started unless it is disabled or its
    /// launch spec is not approved.
    fn launch(&self, config: &ServerConfig) -> Running {
        let upstream = self.prepare(config);
        super::lazy::publish_pinned(std::slice::from_ref(&upstream), &self.index);
        self.spawn(upstream)
    }

    /// A new upstream for `config`, not started yet: `disabled`, `unapproved`, or
    /// `disconnected` until [`spawn`](Self::spawn) starts its supervisor.
    fn prepare(&self, config: &ServerConfig) -> Arc<Upstream> {
        let standing = self.trust.standing(config);
        let initial = if !config.enabled {
            State::Disabled
        } else if !standing.may_start() {
            State::Unapproved
        } else {
            State::Disconnected
        };
        Arc::new(Upstream {
            config: config.clone(),
            settings: self.settings,
            default_timeout: self.default_timeout,
            state: watch::Sender::new(initial),
            session: RwLock::default(),
            tools: RwLock::new(Arc::new(BTreeMap::new())),
            wire_tools: RwLock::new(Arc::default()),
            refresh: Notify::new(),
            quarantined: AtomicBool::new(standing.is_quarantined()),
            standing,
            review: RwLock::new(Arc::new(Review::default())),
            trust: self.trust.clone(),
            index: self.index.clone(),
            changes: self.changes_tx.clone(),
            reported: std::sync::Mutex::new(BTreeMap::new()),
            inferred_reads: std::sync::Mutex::new(Vec::new()),
            egress: std::sync::Mutex::default(),
            egress_events: self.egress_tx.clone(),
            log: std::sync::Mutex::new(log::Ring::default()),
            back_channel: self.back_channel.clone(),
            forbidden_paths: self.forbidden_paths.clone(),
            launcher_cache: self.launcher_caches.join(launcher_dir_name(&config.name)),
            credentials: self.credentials.clone(),
            challenge: Arc::default(),
            login_done: Notify::new(),
            usage: Default::default(),
        })
    }

    /// Starts the supervisor of a prepared upstream that may run (`disconnected`, or a lazy
    /// server `idle` with its tools published).
    fn spawn(&self, upstream: Arc<Upstream>) -> Running {
        let stop = self.shutdown.child_token();
        let may_run = matches!(upstream.state(), State::Disconnected | State::Idle);
        let task = may_run.then(|| {
            tokio::spawn(supervisor::run(
                upstream.clone(),
                self.index.clone(),
                stop.clone(),
            ))
        });
        Running {
            upstream,
            stop,
            task,
        }
    }

    /// Makes the running servers match `servers`: new ones start, removed ones stop (their
    /// sessions closed, their processes ended, their tools out of the index), changed ones
    /// restart with their new configuration; the others are not touched.
    pub async fn apply(&self, servers: &[ServerConfig]) -> AppliedChanges {
        let mut applied = AppliedChanges::default();
        let mut stopping = Vec::new();
        {
            let mut map = write(&self.servers);
            let wanted: BTreeMap<&str, &ServerConfig> =
                servers.iter().map(|s| (s.name.as_str(), s)).collect();
            let gone: Vec<String> = map
                .keys()
                .filter(|name| !wanted.contains_key(name.as_str()))
                .cloned()
                .collect();
            for name in gone {
                if let Some(running) = map.remove(&name) {
                    stopping.push(running);
                    // A server removed and added again is new: nothing of it is trusted.
                    if let Err(e) = self.trust.forget(&name) {
                        tracing::error!(
                            "cannot forget the approvals of removed server '{name}': {e}"
                        );
                    }
                    applied.removed.push(name);
                }
            }
            for (name, config) in wanted {
                match map.get(name) {
                    Some(running) if running.upstream.config == *config => {}
                    Some(running) => {
                        if config.quarantined
                            && !running.upstream.config.quarantined
                            && let Err(e) = self.revoke_approval(name)
                        {
                            tracing::error!("cannot quarantine '{name}' again: {e}");
                        }
                        if let Some(old) = map.insert(name.to_owned(), self.launch(config)) {
                            stopping.push(old);
                        }
                        applied.restarted.push(name.to_owned());
                    }
                    None => {
                        map.insert(name.to_owned(), self.launch(config));
                        applied.added.push(name.to_owned());
                    }
                }
            }
        }
        for running in stopping {
            stop(running).await;
        }
        applied
    }

    /// Forgets that a person approved `name`'s calls (its approved launch spec and its pinned
    /// tools stay): it is quarantined again when it restarts.
    pub fn revoke_approval(&self, name: &str) -> Result<(), mcpproxy_trust::Error> {
        if self
            .trust
            .server(name)
            .is_some_and(|s| s.approved_at.is_some())
        {
            self.trust.update(name, |server| {
                server.approved_at = None;
                server.approved_by = None;
            })?;
        }
        Ok(())
    }

    /// Approves how `name` starts as configured now and, with `calls`, its calls; restarts it
    /// so the approval takes effect (a server whose launch was not approved starts now).
    ///
    /// `fingerprint` ([`mcpproxy_trust::parse_fingerprint`]) is the launch the person reviewed:
    /// the launch is approved only if it is that one, checked on the very configuration
    /// whose fingerprint is stored, so a change made in between is never approved unseen.
    /// Without one, only a launch already approved is (approved again). Returns the launch
    /// approved.
    pub async fn approve_launch(
        &self,
        name: &str,
        calls: bool,
        by: &str,
        at: &str,
        fingerprint: Option<&str>,
    ) -> Result<LaunchSpec, LaunchApprovalError> {
        let config = self
            .get(name)
            .map(|u| u.config.clone())
            .ok_or_else(|| LaunchApprovalError::UnknownServer(name.to_owned()))?;
        let spec = LaunchSpec::of(&config);
        match fingerprint {
            Some(given) if !spec.has_fingerprint(given) => {
                return Err(LaunchApprovalError::Changed {
                    now: Box::new(spec),
                });
            }
            Some(_) => {}
            None if !self.trust.standing(&config).may_start() => {
                return Err(LaunchApprovalError::Unreviewed {
                    now: Box::new(spec),
                });
            }
            None => {}
        }
        self.trust.approve_launch(&config, calls, by, at)?;
        self.restart(name).await;
        Ok(spec)
    }

    /// Applies trust decisions another replica made (shared state) to every server: a
    /// quarantine lifted or set, tools held or released at once; a server whose launch was
    /// approved (or is no longer) restarts. Returns the servers restarted.
    pub async fn retrust(&self) -> Vec<String> {
        let restart: Vec<String> = self
            .all()
            .iter()
            .filter(|u| u.config.enabled && !u.retrust())
            .map(|u| u.name().to_owned())
            .collect();
        for name in &restart {
            self.restart(name).await;
        }
        restart
    }

    /// The trust decisions the upstreams are held against.
    /// The paths no server's sandbox may reach (the data dir, the config file).
    pub fn forbidden_paths(&self) -> &[mcpproxy_sandbox::ForbiddenPath] {
        &self.forbidden_paths
    }

    pub fn trust(&self) -> &Arc<TrustStore> {
        &self.trust
    }

    /// Stops `name`'s session and starts a new one with the same configuration (a new
    /// process for a stdio server). `false` if there is no such server.
    pub async fn restart(&self, name: &str) -> bool {
        let old = {
            let mut map = write(&self.servers);
            let Some(config) = map.get(name).map(|r| r.upstream.config.clone()) else {
                return false;
            };
            map.insert(name.to_owned(), self.launch(&config))
        };
        if let Some(old) = old {
            stop(old).await;
        }
        true
    }

    /// The connections the sandboxed servers' egress proxies carried or refused, for the
    /// journal and the metrics (once: the first caller gets them).
    pub fn take_egress(&self) -> Option<mpsc::Receiver<mcpproxy_egress::EgressEvent>> {
        lock(&self.egress).take()
    }

    /// The tool changes the supervisors notice (new, changed, removed tools), for the
    /// activity journal. `None` after the first call: there is one consumer.
    pub fn take_changes(&self) -> Option<mpsc::UnboundedReceiver<ToolChange>> {
        lock(&self.changes).take()
    }

    /// The routes from upstreams back to clients (progress, logs, questions for the user).
    pub fn back_channel(&self) -> &Arc<BackChannel> {
        &self.back_channel
    }

    pub fn get(&self, name: &str) -> Option<Arc<Upstream>> {
        read(&self.servers).get(name).map(|r| r.upstream.clone())
    }

    pub fn names(&self) -> Vec<String> {
        read(&self.servers).keys().cloned().collect()
    }

    /// Every upstream, by name.
    pub fn all(&self) -> Vec<Arc<Upstream>> {
        read(&self.servers)
            .values()
            .map(|r| r.upstream.clone())
            .collect()
    }

    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.all().iter().map(|u| u.status()).collect()
    }

    /// Waits until no upstream is still on its first connection attempt, or the timeout.
    pub async fn settle(&self, timeout: Duration) {
        let upstreams = self.all();
        let wait_all = async {
            for upstream in &upstreams {
                let mut rx = upstream.subscribe();
                let _ = rx
                    .wait_for(|s| !matches!(s, State::Disconnected | State::Connecting))
                    .await;
            }
        };
        let _ = tokio::time::timeout(timeout, wait_all).await;
    }

    /// Stops every supervisor, closes every session and ends child processes.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let running: Vec<Running> = std::mem::take(&mut *write(&self.servers))
            .into_values()
            .collect();
        for running in running {
            stop(running).await;
        }
    }
}

/// Stops one supervisor and waits for it (its session closed, its tools out of the index).
async fn stop(mut running: Running) {
    running.stop.cancel();
    if let Some(task) = running.task.take() {
        let _ = task.await;
    }
    running.upstream.state.send_replace(State::Disconnected);
}

/// A server's directory under `launchers/`: its name made safe for a file name, with a
/// digest of the whole name so two names never share one.
fn launcher_dir_name(server: &str) -> String {
    use sha2::Digest;
    let safe: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let digest = sha2::Sha256::digest(server.as_bytes());
    format!(
        "{safe}-{:02x}{:02x}{:02x}{:02x}",
        digest[0], digest[1], digest[2], digest[3]
    )
}

/// What every stdio server's sandbox is built around.
pub struct SandboxPaths {
    /// Paths no grant may reach (the data dir, the config file).
    pub forbidden: Vec<mcpproxy_sandbox::ForbiddenPath>,
    /// Where package launchers' caches go, a directory per server (`DATA_DIR/launchers`).
    pub launcher_caches: std::path::PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applied_is_empty_only_when_nothing_changed() {
        assert!(AppliedChanges::default().is_empty());
        for applied in [
            AppliedChanges {
                added: vec!["fs".into()],
                ..AppliedChanges::default()
            },
            AppliedChanges {
                removed: vec!["fs".into()],
                ..AppliedChanges::default()
            },
            AppliedChanges {
                restarted: vec!["fs".into()],
                ..AppliedChanges::default()
            },
        ] {
            assert!(!applied.is_empty(), "{applied:?}");
        }
    }
}

//! Changing the upstream servers while mcpproxy runs: from the `upstream_servers` tool, the
//! CLI and the REST API, and from hand edits of the config file.
//!
//! Every change goes through the file: it is read, edited in place
//! ([`mcpproxy_config::document`]), validated as a whole exactly as at startup, written back
//! atomically, and only then applied to the running upstreams ([`Upstreams::apply`]): new
//! servers start, removed ones stop, changed ones restart, the others are not touched. An
//! edit that would make the file invalid is refused with the validation error and nothing
//! changes. [`watch`] applies hand edits the same way; an invalid one is logged and the
//! running servers stay as they are.
//!
//! What an MCP client may do is narrower than what a person may: a server it adds is always
//! quarantined, and it can neither lift a quarantine nor turn on
//! `auto_approve_tool_changes` (a person approves, with `mcpproxy upstream approve`).

mod grant;
mod shared;

pub use grant::check as check_grant;
pub use shared::{cluster_servers, follow_cluster};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use crate::proxy::Proxy;
use mcpproxy_activity::{ActivityRecord, RecordType, Source, Status, format_timestamp, now_ms};
use mcpproxy_config::document::{Document, EditError, LAUNCH_KEYS, write_atomically};
use mcpproxy_config::{self as config, Config, ManagementConfig, ServerConfig, Transport};
use mcpproxy_trust::{LaunchSpec, Standing, TrustStore};
use mcpproxy_upstream::log::LogLine;
use mcpproxy_upstream::{AppliedChanges, State, TransportKind, Upstreams};

/// Who asks for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// An MCP client, through the `upstream_servers` tool.
    Agent,
    /// A person, through the CLI or the REST API.
    Person,
}

impl Actor {
    fn as_str(self) -> &'static str {
        match self {
            Actor::Agent => "agent",
            Actor::Person => "person",
        }
    }
}

/// What a person's change approves besides being made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approve {
    /// The launch spec the person wrote may run, quarantined (its calls wait for
    /// `mcpproxy upstream approve`).
    #[default]
    Launch,
    /// The launch spec and the server's calls (`--approve`).
    Server,
}

/// A change to the servers.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new server; `entry` is its `mcpServers` entry (without `name`).
    Add {
        name: String,
        entry: Value,
    },
    Remove {
        name: String,
    },
    /// A deep-merge patch of the server's entry.
    Patch {
        name: String,
        patch: Value,
    },
}

impl Change {
    /// The server the change is about.
    pub fn name(&self) -> &str {
        match self {
            Change::Add { name, .. } | Change::Remove { name } | Change::Patch { name, .. } => name,
        }
    }

    /// `add`, `remove` or `update`: the record's `tool_name`.
    fn operation(&self) -> &'static str {
        match self {
            Change::Add { .. } => "add",
            Change::Remove { .. } => "remove",
            Change::Patch { .. } => "update",
        }
    }

    /// The entry keys the change sets (never their values: they may hold secrets).
    fn fields(&self) -> Vec<String> {
        match self {
            Change::Add { entry: v, .. } | Change::Patch { patch: v, .. } => v
                .as_object()
                .map(|o| {
                    o.keys()
                        .map(|k| mcpproxy_support::quote(k))
                        .take(32)
                        .collect()
                })
                .unwrap_or_default(),
            Change::Remove { .. } => Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "server management is read-only (management.read_only in the config): list and tail_log work; change servers by editing {}",
        path.as_deref().map_or_else(|| "the config file".to_owned(), |p| p.display().to_string())
    )]
    ReadOnly { path: Option<PathBuf> },
    #[error(
        "there is no config file to change (no --config and no home directory): start mcpproxy with --config FILE"
    )]
    NoConfigFile,
    #[error("{0}")]
    Edit(#[from] EditError),
    #[error("the change was not made: it would make the config invalid: {0}")]
    Invalid(config::Error),
    /// A sandbox grant reaches what no server may (the data dir, the config file): the
    /// server could never start.
    #[error("the change was not made: server '{server}' could never start: {source}")]
    Unreachable {
        server: String,
        source: mcpproxy_sandbox::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file as it is now is not a valid config (the message names the file).
    #[error("{source}")]
    Read {
        path: PathBuf,
        source: config::Error,
    },
    #[error("no upstream server named '{0}'; `list` shows the servers")]
    UnknownServer(String),
    #[error("{0}")]
    NotForAgents(String),
    #[error("the change was made, but its approval could not be saved: {0}")]
    Trust(String),
    #[error(
        "cannot record the change: the activity journal cannot write ({0}); nothing was changed"
    )]
    Unrecorded(String),
    /// The cluster's servers (`cluster.postgres`) could not be read or written.
    #[error("{0}; nothing was changed")]
    Shared(String),
}

/// One server as `list` shows it: its state and its configuration, with the values of
/// `env` and `headers` and any URL password hidden.
#[derive(Debug, Clone, Serialize)]
pub struct ServerView {
    pub name: String,
    pub transport: TransportKind,
    #[serde(flatten)]
    pub state: State,
    pub enabled: bool,
    pub quarantined: bool,
    pub tools: usize,
    /// Tools held back since they changed.
    pub pending: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// The names of its environment variables (values hidden).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The names of its headers (values hidden).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// The sandbox of a stdio server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<mcpproxy_upstream::SandboxStatus>,
}

/// Changes the servers of one running proxy.
pub struct Manager {
    /// Where changes are written: the config file the proxy was started with, else the
    /// default `~/.mcpproxy/mcp_config.json` (made on the first change).
    path: Option<PathBuf>,
    home: Option<PathBuf>,
    proxy: Arc<Proxy>,
    upstreams: Arc<Upstreams>,
    settings: ManagementConfig,
    /// The configuration last applied: the file as loaded or as last written.
    running: tokio::sync::Mutex<Config>,
    /// The cluster whose servers these are (`cluster.postgres`): changes go to its table,
    /// not to the file.
    cluster: Option<Arc<mcpproxy_cluster::Cluster>>,
}

impl Manager {
    pub fn new(
        path: Option<PathBuf>,
        home: Option<PathBuf>,
        proxy: Arc<Proxy>,
        running: Config,
    ) -> Self {
        Self {
            path,
            home,
            upstreams: proxy.upstreams().clone(),
            proxy,
            settings: running.management.clone(),
            running: tokio::sync::Mutex::new(running),
            cluster: None,
        }
    }

    /// Changes go to the servers `cluster` shares, and its changes apply here.
    pub fn with_cluster(mut self, cluster: Option<Arc<mcpproxy_cluster::Cluster>>) -> Self {
        self.cluster = cluster;
        self
    }

    pub fn settings(&self) -> &ManagementConfig {
        &self.settings
    }

    /// The config file changes go to.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Every server, by name.
    pub fn list(&self) -> Vec<ServerView> {
        self.upstreams
            .all()
            .iter()
            .map(|upstream| view(upstream.config(), upstream.status()))
            .collect()
    }

    /// The server's last `lines` stderr lines (stdio servers), oldest first.
    pub fn logs(&self, name: &str, lines: usize) -> Result<(Vec<LogLine>, u64), Error> {
        let upstream = self
            .upstreams
            .get(name)
            .ok_or_else(|| Error::UnknownServer(name.to_owned()))?;
        Ok(upstream.recent_log(lines))
    }

    /// Ends the server's session and starts a new one (a new process for a stdio server).
    pub async fn restart(&self, name: &str) -> Result<(), Error> {
        if self.upstreams.restart(name).await {
            Ok(())
        } else {
            Err(Error::UnknownServer(name.to_owned()))
        }
    }

    /// Makes `change` in the config file and applies it. A person's change approves the
    /// launch spec it writes (the server starts, quarantined unless `approve` is
    /// [`Approve::Server`]); an agent's approves nothing: a server it adds, or whose launch
    /// it changes, is not started until a person approves it. Recorded either way.
    pub async fn change(
        &self,
        change: Change,
        actor: Actor,
        approve: Approve,
    ) -> Result<AppliedChanges, Error> {
        self.change_by(change, actor, approve, None).await
    }

    /// [`Manager::change`] asked for by the logged-in caller `identity` (on its record).
    pub async fn change_by(
        &self,
        change: Change,
        actor: Actor,
        approve: Approve,
        identity: Option<mcpproxy_activity::IdentityRecord>,
    ) -> Result<AppliedChanges, Error> {
        let source = match actor {
            Actor::Agent => Source::Mcp,
            Actor::Person => Source::Api,
        };
        let operation = change.operation();
        let name = change.name().to_owned();
        let fields = change.fields();
        // An agent's change starts server code or changes what runs: like a call, it is not
        // made while it cannot be recorded.
        if actor == Actor::Agent && self.proxy.journal().is_failing() {
            let reason = self
                .proxy
                .journal()
                .health()
                .reason
                .unwrap_or_else(|| "unknown".to_owned());
            return Err(Error::Unrecorded(reason));
        }
        let outcome = self.make_change(change, actor, approve).await;
        let mut record = ActivityRecord::new(RecordType::ServerChange, source, &name, operation);
        record.identity = identity;
        let mut details = json!({"actor": actor.as_str(), "fields": fields});
        match &outcome {
            Ok((applied, launch_changes)) => {
                record.status = Status::Success;
                details["summary"] = json!(describe(applied));
                details["launch_changes"] = json!(launch_changes);
                self.describe_server(&name, &mut details);
            }
            Err(e) => {
                record.status = match e {
                    Error::NotForAgents(_) | Error::ReadOnly { .. } => Status::Blocked,
                    _ => Status::Error,
                };
                record.error_message = Some(e.to_string());
            }
        }
        record.details = Some(details);
        self.proxy.append(record).await;
        outcome.map(|(applied, _)| applied)
    }

    async fn make_change(
        &self,
        change: Change,
        actor: Actor,
        approve: Approve,
    ) -> Result<(AppliedChanges, Vec<String>), Error> {
        if self.settings.read_only {
            return Err(Error::ReadOnly {
                path: self.path.clone(),
            });
        }
        let mut running = self.running.lock().await;
        let name = change.name().to_owned();
        let before = running.server(&name).cloned();
        let (config, place) = match &self.cluster {
            Some(cluster) => (
                self.change_shared(cluster, change, actor).await?,
                "the cluster's servers".to_owned(),
            ),
            None => {
                let path = self.path.clone().ok_or(Error::NoConfigFile)?;
                let config = change_file(
                    &path,
                    self.home.as_deref(),
                    change,
                    actor,
                    self.upstreams.forbidden_paths(),
                )?;
                (config, path.display().to_string())
            }
        };
        let after = config.server(&name);
        if actor == Actor::Person
            && let Some(server) = after
        {
            approve_written(self.upstreams.trust(), before.as_ref(), server, approve)?;
        }
        let launch_changes = launch_diff(before.as_ref(), after);
        let applied = self.upstreams.apply(&config.servers).await;
        tracing::info!(
            server = %name,
            by = ?actor,
            "upstream servers changed in {place}: {}",
            describe(&applied)
        );
        *running = config;
        Ok((applied, launch_changes))
    }

    /// Reads the config file again (after a hand edit) and applies its servers. An invalid
    /// file changes nothing. A server the edit adds, or whose launch spec it changes, is not
    /// started until a person approves it; each change is recorded. In a cluster the
    /// servers are the cluster's, whatever the file says (see [`Manager::reload_shared`]).
    pub async fn reload(&self) -> Result<AppliedChanges, Error> {
        self.reload_as("hand edit").await
    }

    /// Applies the servers of the cluster as they are now (another replica changed them),
    /// as a hand edit of the file is applied.
    pub async fn reload_shared(&self) -> Result<AppliedChanges, Error> {
        self.reload_as("another replica of the cluster").await
    }

    async fn reload_as(&self, actor: &'static str) -> Result<AppliedChanges, Error> {
        let mut running = self.running.lock().await;
        let config = match &self.cluster {
            Some(cluster) => self.shared_config(cluster, actor == "hand edit").await?,
            None => {
                let path = self.path.clone().ok_or(Error::NoConfigFile)?;
                config::load(Some(&path), self.home.as_deref())
                    .map_err(|source| Error::Read {
                        path: path.clone(),
                        source,
                    })?
                    .config
            }
        };
        let path = self.path.clone().unwrap_or_default();
        let before: Vec<ServerConfig> = running.servers.clone();
        let applied = self.upstreams.apply(&config.servers).await;
        self.record_hand_edit(&before, &config.servers, &applied, actor)
            .await;
        let mut others = config.clone();
        others.servers = running.servers.clone();
        if others != *running {
            tracing::warn!(
                "{} changed more than mcpServers: the other changes take effect when mcpproxy restarts",
                path.display()
            );
        }
        *running = config;
        Ok(applied)
    }
}

impl Manager {
    /// One `server_change` record per server a hand edit added, removed or changed.
    async fn record_hand_edit(
        &self,
        before: &[ServerConfig],
        after: &[ServerConfig],
        applied: &AppliedChanges,
        actor: &'static str,
    ) {
        let old = |name: &str| before.iter().find(|s| s.name == name);
        let new = |name: &str| after.iter().find(|s| s.name == name);
        let changed = applied
            .added
            .iter()
            .map(|n| ("add", n))
            .chain(applied.removed.iter().map(|n| ("remove", n)))
            .chain(applied.restarted.iter().map(|n| ("update", n)));
        for (operation, name) in changed {
            let mut record = ActivityRecord::new(
                RecordType::ServerChange,
                Source::ConfigFile,
                name,
                operation,
            );
            record.status = Status::Success;
            let mut details = json!({"actor": actor});
            if let (Some(was), Some(now)) = (old(name), new(name)) {
                details["launch_changes"] = json!(launch_diff(Some(was), Some(now)));
            }
            self.describe_server(name, &mut details);
            if let Some(upstream) = self.upstreams.get(name)
                && !upstream.standing().may_start()
            {
                tracing::warn!(
                    "server '{name}' was {} by a hand edit of the config: it is not started until a person approves how it starts (`mcpproxy upstream inspect {name}`, then `mcpproxy upstream approve {name}`)",
                    if operation == "add" {
                        "added"
                    } else {
                        "changed"
                    }
                );
            }
            record.details = Some(details);
            self.proxy.append(record).await;
        }
    }
}

impl Manager {
    /// Adds the server's launch (secrets masked) and where it stands now to a record's
    /// `details`.
    fn describe_server(&self, name: &str, details: &mut Value) {
        if let Some(upstream) = self.upstreams.get(name) {
            details["launch"] = json!(LaunchSpec::of(upstream.config()).view.summary());
            details["standing"] = json!(standing_word(
                upstream.standing(),
                upstream.is_quarantined()
            ));
        }
    }
}

/// What changed in a server's launch spec from `before` to `after`, one line per
/// difference (none when either is missing).
fn launch_diff(before: Option<&ServerConfig>, after: Option<&ServerConfig>) -> Vec<String> {
    match (before, after) {
        (Some(was), Some(now)) => LaunchSpec::of(was).view.diff(&LaunchSpec::of(now)),
        _ => Vec::new(),
    }
}

/// Where a server stands, in a word for records and lists.
pub fn standing_word(standing: &Standing, quarantined: bool) -> &'static str {
    match standing {
        Standing::LaunchNotApproved { .. } => "launch not approved: not started",
        _ if quarantined => "quarantined",
        _ => "approved",
    }
}

/// Approves what a person wrote for `server` (`before`: the server as it was, if it
/// existed): its launch spec when it is new or changed, and its calls with
/// [`Approve::Server`]. Nothing else is approved.
pub fn approve_written(
    trust: &TrustStore,
    before: Option<&ServerConfig>,
    server: &ServerConfig,
    approve: Approve,
) -> Result<(), Error> {
    let launch_changed =
        before.is_none_or(|was| LaunchSpec::of(was).sha256 != LaunchSpec::of(server).sha256);
    if !launch_changed && approve != Approve::Server {
        return Ok(());
    }
    let now = format_timestamp(now_ms());
    trust
        .approve_launch(
            server,
            approve == Approve::Server,
            "a person (the change that wrote it)",
            &now,
        )
        .map_err(|e| Error::Trust(e.to_string()))
}

/// Makes `change` in the config file at `path` (made if missing): read, edited in place,
/// validated as a whole, written back atomically. Returns the new configuration. Used by
/// a running proxy ([`Manager::change`]) and by the CLI when none runs.
///
/// `forbidden` are the paths no server's sandbox may reach (the data dir, the config file):
/// a change granting one is refused before anything is written, with the reason, since the
/// server could never start (granting the home directory grants the data dir in it).
pub fn change_file(
    path: &Path,
    home: Option<&Path>,
    change: Change,
    actor: Actor,
    forbidden: &[mcpproxy_sandbox::ForbiddenPath],
) -> Result<Config, Error> {
    let change = match actor {
        Actor::Agent => for_an_agent(change)?,
        Actor::Person => change,
    };
    let text = if path.exists() {
        config::read_bounded(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?
    } else {
        String::new()
    };
    if !text.trim().is_empty() {
        // The file as it is must be valid: never build on a broken file.
        validate(path, home, &text).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
    }
    let mut document = Document::parse(&text)?;
    let name = change.name().to_owned();
    match change {
        Change::Add { name, entry } => document.add_server(&name, &entry)?,
        Change::Remove { name } => document.remove_server(&name)?,
        Change::Patch { name, patch } => document.patch_server(&name, &patch)?,
    }
    let text = document.to_text();
    let config = validate(path, home, &text).map_err(Error::Invalid)?;
    if let Some(server) = config.server(&name) {
        check_grants(server, forbidden)?;
    }
    if config.management.read_only {
        return Err(Error::ReadOnly {
            path: Some(path.to_owned()),
        });
    }
    write_atomically(path, &text).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })?;
    Ok(config)
}

/// Refuses a stdio server whose sandbox grants reach one of `forbidden`
/// ([`Error::Unreachable`]); `mcpproxy doctor` asks the same of a config as it is.
pub fn check_grants(
    server: &ServerConfig,
    forbidden: &[mcpproxy_sandbox::ForbiddenPath],
) -> Result<(), Error> {
    let isolation = &server.isolation;
    if !isolation.enabled || !matches!(server.transport, Transport::Stdio { .. }) {
        return Ok(());
    }
    mcpproxy_sandbox::check_grants_against(isolation.read.iter().chain(&isolation.write), forbidden)
        .map_err(|source| Error::Unreachable {
            server: mcpproxy_support::quote(&server.name),
            source,
        })
}

fn validate(path: &Path, home: Option<&Path>, text: &str) -> Result<Config, config::Error> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    Config::from_json_in(text, &path.display().to_string(), &dir, home)
}

/// What an agent may change: a server it adds is quarantined; it may not lift a
/// quarantine or accept tool changes unseen.
fn for_an_agent(change: Change) -> Result<Change, Error> {
    let refuse = |key: &str| {
        Error::NotForAgents(format!(
            "an MCP client may not set '{key}': a person approves servers and tool changes, with `mcpproxy upstream approve NAME` or on the page"
        ))
    };
    match change {
        Change::Add { name, mut entry } => {
            if entry.get("quarantined") == Some(&Value::Bool(false)) {
                return Err(refuse("quarantined: false"));
            }
            if entry.get("auto_approve_tool_changes") == Some(&Value::Bool(true)) {
                return Err(refuse("auto_approve_tool_changes: true"));
            }
            if let Some(fields) = entry.as_object_mut() {
                fields.insert("quarantined".into(), Value::Bool(true));
            }
            Ok(Change::Add { name, entry })
        }
        Change::Patch { name, patch } => {
            if patch
                .get("quarantined")
                .is_some_and(|q| q != &Value::Bool(true))
            {
                return Err(refuse("quarantined"));
            }
            if patch
                .get("auto_approve_tool_changes")
                .is_some_and(|a| a != &Value::Bool(false))
            {
                return Err(refuse("auto_approve_tool_changes"));
            }
            let mut patch = patch;
            if changes_launch(&patch)
                && let Some(fields) = patch.as_object_mut()
            {
                fields.insert("quarantined".into(), Value::Bool(true));
            }
            Ok(Change::Patch { name, patch })
        }
        remove @ Change::Remove { .. } => Ok(remove),
    }
}

/// Whether a patch changes how the server is started or reached.
fn changes_launch(patch: &Value) -> bool {
    patch
        .as_object()
        .is_some_and(|fields| fields.keys().any(|k| LAUNCH_KEYS.contains(&k.as_str())))
}

fn view(config: &ServerConfig, status: mcpproxy_upstream::ServerStatus) -> ServerView {
    let (command, args, env, url, headers) = match &config.transport {
        Transport::Stdio {
            command, args, env, ..
        } => (
            Some(command.clone()),
            Some(mcpproxy_auth::masking::mask_args(args)),
            env.keys().cloned().collect(),
            None,
            Vec::new(),
        ),
        Transport::Http { url, headers } => (
            None,
            None,
            Vec::new(),
            Some(mcpproxy_auth::masking::mask_url(url)),
            headers.keys().cloned().collect(),
        ),
    };
    ServerView {
        name: status.name,
        transport: status.transport,
        state: status.state,
        enabled: config.enabled,
        quarantined: status.quarantined,
        tools: status.tools,
        pending: status.pending,
        sandbox: status.sandbox,
        command,
        args,
        env,
        url,
        headers,
    }
}

/// Watches the config file and applies hand edits ([`Manager::reload`]); an edit mcpproxy
/// made itself finds nothing to change. No config file's directory: nothing to watch.
pub fn watch(
    manager: Arc<Manager>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), notify::Error> {
    let Some(path) = manager.path().map(Path::to_owned) else {
        return Ok(());
    };
    let Some(dir) = path.parent().map(Path::to_owned) else {
        return Ok(());
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    if !dir.exists() {
        return Ok(());
    }
    let file_name = path.file_name().map(|n| n.to_owned());
    let wanted = move |p: &Path| p.file_name() == file_name.as_deref();
    crate::watch::watch_dir(&dir, wanted, SETTLE, shutdown, move || {
        let manager = manager.clone();
        let path = path.clone();
        async move {
            match manager.reload().await {
                Ok(applied) if applied.is_empty() => {}
                Ok(applied) => tracing::info!(
                    "applied the edit of {}: {}",
                    path.display(),
                    describe(&applied)
                ),
                Err(e) => tracing::error!(
                    "ignored the edit of {}: {e}; the servers keep running as they were",
                    path.display()
                ),
            }
        }
    })
}

/// How long the config file's directory must be quiet before an edit is read (an editor's
/// save is several events).
const SETTLE: Duration = Duration::from_millis(200);

/// `added fs; removed gh; restarted db`.
pub fn describe(applied: &AppliedChanges) -> String {
    let mut parts = Vec::new();
    for (verb, names) in [
        ("added", &applied.added),
        ("removed", &applied.removed),
        ("restarted", &applied.restarted),
    ] {
        if !names.is_empty() {
            parts.push(format!("{verb} {}", names.join(", ")));
        }
    }
    if parts.is_empty() {
        "no server changed".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The JSON a change answers with.
pub fn applied_json(applied: &AppliedChanges) -> Value {
    json!({
        "added": applied.added,
        "removed": applied.removed,
        "restarted": applied.restarted,
        "summary": describe(applied),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_cannot_lift_quarantine_or_accept_changes_unseen() {
        let add = |entry: Value| Change::Add {
            name: "x".into(),
            entry,
        };
        assert_eq!(
            for_an_agent(add(json!({"command": "c"}))).unwrap(),
            add(json!({"command": "c", "quarantined": true}))
        );
        assert!(for_an_agent(add(json!({"command": "c", "quarantined": false}))).is_err());
        assert!(
            for_an_agent(add(
                json!({"command": "c", "auto_approve_tool_changes": true})
            ))
            .is_err()
        );
        let patch = |patch: Value| Change::Patch {
            name: "x".into(),
            patch,
        };
        assert!(for_an_agent(patch(json!({"quarantined": false}))).is_err());
        assert!(for_an_agent(patch(json!({"quarantined": null}))).is_err());
        assert_eq!(
            for_an_agent(patch(json!({"enabled": false}))).unwrap(),
            patch(json!({"enabled": false}))
        );
        // Changing how a server starts puts it back in quarantine.
        assert_eq!(
            for_an_agent(patch(json!({"args": ["x"]}))).unwrap(),
            patch(json!({"args": ["x"], "quarantined": true}))
        );
    }
}

//! Building the running proxy from a [`Config`]: the plugin engine and the loaded plugins,
//! the policy pipeline, the activity journal, the tool index, the upstream sessions and the
//! sink delivery, the trust store. `serve`, the one-shot CLI commands, benches and tests all build a proxy
//! here; the CLI only parses arguments, calls this and prints.

mod reload;

pub use reload::{ReloadError, Reloaded, Reloader, watch as watch_plugins};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::proxy::{ActivitySettings, Proxy};
use mcpproxy_activity::{self as activity, Journal, JournalOptions};
use mcpproxy_activity::{Delivery, Sink};
use mcpproxy_config::Config;
use mcpproxy_plugin_host::{
    self as plugin, EngineOptions, Plugin, PluginEngine, PluginKind, PluginSet,
};
use mcpproxy_policy::Limits;
use mcpproxy_policy::Pipeline;
use mcpproxy_policy::ToolScanner;
use mcpproxy_trust::{self as trust, TrustStore};
use mcpproxy_upstream::Upstreams;
use mcpproxy_upstream::index::{self, ToolIndex};

/// How long a one-shot command waits for its upstream to connect (or fail once).
const ONE_SHOT_SETTLE: Duration = Duration::from_secs(30);

/// Why the proxy could not be built. Each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plugin(#[from] plugin::Error),
    #[error("{key} names '{name}', which is {actual} plugin, not {wanted}")]
    WrongKind {
        key: &'static str,
        name: String,
        actual: &'static str,
        wanted: &'static str,
    },
    #[error(
        "{key} names '{name}', but no {kind} plugin of that name is loaded (loaded: {loaded}); add it with --plugins DIR"
    )]
    NotLoaded {
        key: &'static str,
        name: String,
        kind: PluginKind,
        loaded: String,
    },
    /// The journal's error is in the message, not the error's source: a chain printed
    /// with `{:#}` would say it twice.
    #[error("cannot open the activity journal {}: {error}", path.display())]
    Journal {
        path: PathBuf,
        error: activity::Error,
    },
    /// Another process holds the journal: the data dir has an owner (or a one-shot command
    /// such as `mcpproxy call` is using it).
    #[error(
        "the data dir {} is in use by {}, and only one mcpproxy process may own a data dir. \
         It does not answer on its control socket {} (a one-shot command such as `mcpproxy call`, \
         or a server still starting or stopping): wait for it to finish, or stop it, and try again; \
         or use another --data-dir",
        data_dir.display(),
        holder.as_ref().map_or_else(|| "another process".to_owned(), |h| h.to_string()),
        crate::control::socket_path(data_dir).display()
    )]
    Held {
        data_dir: PathBuf,
        holder: Option<crate::control::holder::Holder>,
    },
    #[error("cannot create the tool index: {0}")]
    Index(#[from] index::Error),
    #[error("cannot start delivering activity to the sinks: {0}")]
    Delivery(activity::Error),
    #[error(transparent)]
    Trust(#[from] trust::Error),
    #[error(transparent)]
    Credentials(#[from] mcpproxy_auth::credentials::CredentialError),
    /// `activity.checkpoints.signing_key` names a value that is not there.
    #[error(
        "activity.checkpoints.signing_key: {0} (the key the activity journal signs its \
         checkpoints with)"
    )]
    SigningKey(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a running proxy is made of.
pub struct Runtime {
    pub config: Config,
    pub proxy: Arc<Proxy>,
    /// The annotators and validators the pipeline runs, in order (for the startup summary).
    pub annotators: Vec<Arc<Plugin>>,
    pub validators: Vec<Arc<Plugin>>,
    /// The sink plugins named by `plugins.sinks`, in order.
    pub sinks: Vec<Arc<Plugin>>,
    /// The scanner behind the security analysis (the first loaded scanner plugin).
    pub scanner: Option<Arc<Plugin>>,
    /// The result guards every upstream answer goes through, in order.
    pub guards: Vec<Arc<Plugin>>,
}

/// Opens the data dir's trust store; at the data dir's first start, approves the servers of
/// the config as written ([`TrustStore::bind_launches`]).
pub fn open_trust(
    data_dir: &Path,
    servers: &[mcpproxy_config::ServerConfig],
) -> Result<TrustStore> {
    let trust = TrustStore::open(data_dir)?;
    bind_launches(&trust, servers)?;
    Ok(trust)
}

/// At the first start (of the data dir, or of the cluster for a shared store), approves the
/// servers of the config as written ([`TrustStore::bind_launches`]).
fn bind_launches(trust: &TrustStore, servers: &[mcpproxy_config::ServerConfig]) -> Result<()> {
    let now = activity::format_timestamp(activity::now_ms());
    let approved = trust.bind_launches(servers, &now)?;
    if !approved.is_empty() {
        tracing::info!(
            "first start on this {}: the servers in the config are approved as written ({}); servers added later wait for a person's approval",
            if trust.is_shared() {
                "cluster"
            } else {
                "data dir"
            },
            approved.join(", ")
        );
    }
    Ok(())
}

/// Applies the trust decisions other replicas make (a shared store) to the upstreams, as
/// long as they run.
fn follow_shared_trust(trust: &TrustStore, upstreams: &Arc<Upstreams>) {
    let Some(mut changed) = trust.subscribe() else {
        return;
    };
    let upstreams = Arc::downgrade(upstreams);
    tokio::spawn(async move {
        while changed.changed().await.is_ok() {
            let Some(upstreams) = upstreams.upgrade() else {
                return;
            };
            let restarted = upstreams.retrust().await;
            if !restarted.is_empty() {
                tracing::info!(
                    "restarted after another replica's approval: {}",
                    restarted.join(", ")
                );
            }
        }
    });
}

/// Records each server that is not started because its launch spec is not approved: added
/// to the config, or changed, since a person approved it (noticed at start).
fn record_unapproved_launches(proxy: &Arc<Proxy>) {
    use mcpproxy_activity::{ActivityRecord, RecordType, Source, Status};
    let mut records = Vec::new();
    for upstream in proxy.upstreams().all() {
        let trust::Standing::LaunchNotApproved { approved, changes } = upstream.standing() else {
            continue;
        };
        let name = upstream.name();
        tracing::warn!(
            "server '{name}' is not started: {}; review it with `mcpproxy upstream inspect {name}` and approve it with `mcpproxy upstream approve {name}`",
            if approved.is_some() {
                "how it starts changed since it was approved"
            } else {
                "how it starts was never approved (it was added to the config after the first start, not by a person through the CLI)"
            }
        );
        let mut record = ActivityRecord::new(
            RecordType::ServerChange,
            Source::ConfigFile,
            name,
            "unapproved",
        );
        record.status = Status::Blocked;
        record.details = Some(serde_json::json!({
            "actor": "config file (noticed at start)",
            "launch": trust::LaunchSpec::of(upstream.config()).view.summary(),
            "launch_changes": changes,
            "standing": "launch not approved: not started",
        }));
        records.push(record);
    }
    if records.is_empty() {
        return;
    }
    let proxy = proxy.clone();
    tokio::spawn(async move {
        for record in records {
            proxy.append(record).await;
        }
    });
}

/// The activity journal's file in the data dir.
/// What no server's sandbox may grant: the data dir (approvals, pins, the journal, the
/// control socket) and the config file (every server's secrets; an agent's way to widen a
/// sandbox).
pub fn forbidden_paths(
    data_dir: &Path,
    config_file: Option<&Path>,
) -> Vec<mcpproxy_sandbox::ForbiddenPath> {
    let mut paths = vec![mcpproxy_sandbox::ForbiddenPath {
        what: "mcpproxy's data dir",
        path: data_dir.to_path_buf(),
    }];
    if let Some(file) = config_file {
        paths.push(mcpproxy_sandbox::ForbiddenPath {
            what: "mcpproxy's config file",
            path: file.to_path_buf(),
        });
    }
    paths
}

pub fn journal_path(data_dir: &Path) -> PathBuf {
    data_dir.join("activity.redb")
}

impl Runtime {
    /// Loads plugins, opens the journal, starts the upstreams and builds the proxy.
    /// `plugins_dir` overrides the config's `plugins.dir`. Must run inside a tokio runtime.
    pub fn build(
        config: Config,
        data_dir: &Path,
        config_file: Option<&Path>,
        plugins_dir: Option<PathBuf>,
    ) -> Result<Self> {
        Self::build_with(config, data_dir, config_file, plugins_dir, None, None)
    }

    /// [`Runtime::build`] with the trust decisions the replicas of a cluster share
    /// (`shared`), instead of the data dir's `trust.json`, and the rate limits' buckets they
    /// share (`buckets`), instead of buckets in this process's memory.
    pub fn build_with(
        config: Config,
        data_dir: &Path,
        config_file: Option<&Path>,
        plugins_dir: Option<PathBuf>,
        shared: Option<Arc<TrustStore>>,
        buckets: Option<Arc<dyn mcpproxy_rate_limit::BucketStore>>,
    ) -> Result<Self> {
        let plugins_dir = plugins_dir.or_else(|| config.plugins.dir.clone());
        let plugins = load_plugins(&config, data_dir, plugins_dir.as_deref())?;
        let annotators = select(
            &plugins,
            PluginKind::Annotator,
            config.plugins.annotators.as_deref(),
            "plugins.annotators",
        )?;
        let validators = select(
            &plugins,
            PluginKind::Validator,
            config.plugins.validators.as_deref(),
            "plugins.validators",
        )?;
        let sinks = if config.plugins.sinks.is_empty() {
            Vec::new()
        } else {
            select(
                &plugins,
                PluginKind::Sink,
                Some(&config.plugins.sinks),
                "plugins.sinks",
            )?
        };
        if validators.is_empty() {
            tracing::warn!("no validator is active: every call is allowed");
        }
        let guards = select(
            &plugins,
            PluginKind::ResultGuard,
            config.plugins.guards.as_deref(),
            "plugins.guards",
        )?;
        let metrics = Arc::new(Metrics::new());
        let pipeline = Pipeline::new(
            crate::metrics::timed_annotators(plugin::annotators(&annotators), &metrics),
            crate::metrics::timed_validators(plugin::validators(&validators), &metrics),
        );
        let scanner = plugins.of_kind(PluginKind::Scanner).next().cloned();
        let journal = open_journal(&config, data_dir, Some(&metrics))?;
        journal.spawn_retention();
        let trust = match shared {
            Some(trust) => {
                bind_launches(&trust, &config.servers)?;
                trust
            }
            None => Arc::new(open_trust(data_dir, &config.servers)?),
        };
        let index = Arc::new(ToolIndex::new()?);
        let upstreams = Upstreams::start(
            &config.servers,
            &config.upstream,
            config.tool_call_timeout,
            index.clone(),
            trust.clone(),
            mcpproxy_upstream::SandboxPaths {
                forbidden: forbidden_paths(data_dir, config_file),
                launcher_caches: data_dir.join("launchers"),
            },
            mcpproxy_auth::credentials::CredentialStore::open(data_dir)?,
        );
        follow_shared_trust(&trust, &upstreams);
        let changes = upstreams.take_changes();
        let egress = upstreams.take_egress();
        let activity = ActivitySettings {
            max_argument_bytes: config.activity.max_argument_bytes,
            redact_keys: config.activity.redact_keys.clone(),
        };
        let proxy = Arc::new(
            Proxy::new(Arc::new(pipeline), upstreams, index, journal, activity)
                .with_scanner(scanner.clone().map(|s| s as Arc<dyn ToolScanner>))
                .with_metrics(metrics)
                .with_scopes(crate::scoping::Scopes::new(config.scopes.clone()))
                .with_rate_limits(crate::proxy::RateLimits::new(
                    config.rate_limits.clone(),
                    buckets
                        .unwrap_or_else(|| Arc::new(mcpproxy_rate_limit::MemoryBuckets::default())),
                ))
                .with_guards(mcpproxy_policy::Guards::new(plugin::result_guards(&guards)))
                .with_approvals(Arc::new(crate::proxy::Approvals::new(
                    config.approvals.clone(),
                )))
                .with_code_execution(config.code_execution.enabled.then(|| {
                    crate::proxy::CodeExecutor::start(
                        config.code_execution,
                        Some(data_dir.join("cache").join("plugins")),
                    )
                })),
        );
        if let Some(changes) = changes {
            proxy.record_tool_changes(changes);
        }
        if let Some(egress) = egress {
            proxy.record_egress(egress);
        }
        record_unapproved_launches(&proxy);
        Ok(Self {
            config,
            proxy,
            annotators,
            validators,
            sinks,
            scanner,
            guards,
        })
    }

    /// The proxy for a one-shot command: only `server`'s upstream (or all, if `None`) is
    /// started, calls an earlier run left pending are closed, and this waits until the
    /// upstream has connected or failed once.
    pub async fn build_for_one(
        mut config: Config,
        data_dir: &Path,
        config_file: Option<&Path>,
        server: Option<&str>,
    ) -> Result<Self> {
        if let Some(server) = server {
            // Approvals are bound to the whole config at the data dir's first start, not to
            // the one server this command starts.
            open_trust(data_dir, &config.servers)?;
            config.servers.retain(|s| s.name == server);
        }
        let runtime = Self::build(config, data_dir, config_file, None)?;
        runtime.close_interrupted().await;
        runtime.proxy.upstreams().settle(ONE_SHOT_SETTLE).await;
        Ok(runtime)
    }

    /// Starts feeding the journal to the configured sinks.
    pub fn start_delivery(&self) -> Result<Delivery> {
        Delivery::start(
            self.proxy.journal().clone(),
            self.sinks
                .iter()
                .map(|p| p.clone() as Arc<dyn Sink>)
                .collect(),
            self.config.activity.delivery,
        )
        .map_err(Error::Delivery)
    }

    /// Closes the calls an earlier process left pending (see [`Journal::close_interrupted`]).
    pub async fn close_interrupted(&self) {
        match self.proxy.journal().close_interrupted().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                "{n} calls were still running when mcpproxy last stopped; their records are now closed as errors (outcome unknown)"
            ),
            Err(e) => tracing::error!("cannot close the calls left pending by the last run: {e}"),
        }
    }

    /// Counts each upstream's connection attempts into the metrics (`upstream_connects`,
    /// `upstream_reconnects`) until `shutdown`; upstreams added later are watched from the
    /// next look (every second).
    pub fn watch_upstream_metrics(&self, shutdown: tokio_util::sync::CancellationToken) {
        let proxy = self.proxy.clone();
        tokio::spawn(async move {
            // By the upstream itself: a restart or a config change makes a new one of the
            // same name, whose first connection is then a reconnect.
            let mut watched = std::collections::HashSet::new();
            let mut names = std::collections::HashSet::new();
            loop {
                for upstream in proxy.upstreams().all() {
                    if !watched.insert(Arc::as_ptr(&upstream) as usize) {
                        continue;
                    }
                    let metrics = proxy.metrics().clone();
                    let mut states = upstream.subscribe();
                    let name = upstream.name().to_owned();
                    let seen_before = !names.insert(name.clone());
                    let stop = shutdown.clone();
                    tokio::spawn(async move {
                        use mcpproxy_upstream::State;
                        let mut connected_before = seen_before;
                        let mut was_connecting = false;
                        let mut first = true;
                        loop {
                            let state = states.borrow_and_update().clone();
                            let connecting = state == State::Connecting;
                            // Found past its first attempt (watched up to a second late):
                            // that attempt counts too.
                            let attempted =
                                first && matches!(state, State::Ready | State::Error(_));
                            if (connecting && !was_connecting) || attempted {
                                metrics.upstream_connecting(&name, connected_before);
                            }
                            first = false;
                            was_connecting = connecting;
                            connected_before |= state == State::Ready;
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                changed = states.changed() => if changed.is_err() { return },
                            }
                        }
                    });
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }

    /// Closes the upstream sessions and flushes the journal.
    pub async fn shutdown(&self) {
        self.proxy.upstreams().shutdown().await;
        if let Err(e) = self.proxy.journal().flush().await {
            tracing::error!("cannot flush the activity journal: {e}");
        }
    }
}

/// The limits and settings each plugin gets from the config: its `plugin_limits` entry
/// (sinks default to a 30 s deadline, scanners to 5 s), and its settings merged over the
/// intent settings.
pub fn plugin_settings(config: &Config, name: &str, kind: PluginKind) -> plugin::PluginSettings {
    let limits = match kind {
        // A delivery waits on a remote store, a scan reads a whole server's tools: the
        // validators' 50 ms would not do, and neither is on the path of a call.
        PluginKind::Sink | PluginKind::Scanner => config
            .plugins
            .limits_with_timeout(name, kind.default_timeout()),
        PluginKind::Annotator | PluginKind::Validator | PluginKind::ResultGuard => {
            config.plugins.limits_for(name)
        }
    };
    let mut settings = config.intent.as_settings();
    if let (Some(merged), serde_json::Value::Object(own)) =
        (settings.as_object_mut(), config.plugins.settings_for(name))
    {
        merged.extend(own);
    }
    plugin::PluginSettings {
        limits,
        settings,
        reuse_chosen: config.plugins.reuse_chosen(name),
    }
}

/// The engine (sized for the largest memory cap configured, caching compiled components in
/// the data dir) and every plugin, embedded and from `dir`, configured.
pub fn load_plugins(
    config: &Config,
    data_dir: &Path,
    dir: Option<&Path>,
) -> Result<PluginSet, plugin::Error> {
    let max_memory = std::iter::once(&config.plugins.limits)
        .chain(config.plugins.plugin_limits.values())
        .map(|l| l.memory_bytes)
        .max()
        .unwrap_or(Limits::default().memory_bytes);
    let engine = plugin_engine(data_dir, max_memory)?;
    PluginSet::load(&engine, dir, &|name, kind| {
        plugin_settings(config, name, kind)
    })
}

/// The WebAssembly engine, caching compiled components in the data dir, with memory slots
/// for instances of up to `max_memory_bytes`.
pub fn plugin_engine(
    data_dir: &Path,
    max_memory_bytes: usize,
) -> Result<PluginEngine, plugin::Error> {
    PluginEngine::new(EngineOptions {
        cache_dir: Some(data_dir.join("cache").join("plugins")),
        max_memory_bytes,
        ..Default::default()
    })
}

/// Opens (or creates) the journal with the config's durability and retention.
/// Opens the journal of `data_dir` with the config's durability and retention; with
/// `metrics`, each group commit is timed and each fsync counted into them.
pub fn open_journal(
    config: &Config,
    data_dir: &Path,
    metrics: Option<&Arc<Metrics>>,
) -> Result<Arc<Journal>> {
    let on_commit = metrics.map(|metrics| {
        let metrics = metrics.clone();
        activity::CommitObserver(Arc::new(move |took| metrics.journal_commit(took)))
    });
    let on_fsync = metrics.map(|metrics| {
        let metrics = metrics.clone();
        activity::FsyncObserver(Arc::new(move || metrics.journal_fsync()))
    });
    let options = JournalOptions {
        durability: config.activity.durability,
        retention: config.activity.retention.clone(),
        on_commit,
        on_fsync,
        replica: config.cluster.replica.clone(),
        chain: activity::ChainOptions {
            checkpoint_every: config.activity.checkpoints.every_records,
            checkpoint_interval: config.activity.checkpoints.every,
            key_seed: signing_key_seed(config, data_dir)?,
            ..Default::default()
        },
        ..Default::default()
    };
    let path = journal_path(data_dir);
    Journal::open(&path, options).map_err(|source| match source {
        activity::Error::Locked { .. } => Error::Held {
            data_dir: data_dir.to_owned(),
            holder: crate::control::holder::find(&path),
        },
        error => Error::Journal { path, error },
    })
}

/// The signing key `activity.checkpoints.signing_key` names, resolved from the environment
/// or the credential store of `data_dir`; `None` when the config names none (the key file).
pub fn signing_key_seed(config: &Config, data_dir: &Path) -> Result<Option<activity::KeySeed>> {
    let Some(reference) = &config.activity.checkpoints.signing_key else {
        return Ok(None);
    };
    let credentials = mcpproxy_auth::credentials::CredentialStore::open(data_dir)?;
    let seed = mcpproxy_auth::credentials::references::resolve(reference, &credentials)
        .map_err(Error::SigningKey)?;
    Ok(Some(activity::KeySeed {
        hex: seed.expose().to_owned(),
        source: reference.clone(),
    }))
}

/// The active plugins of a kind: the configured list in its order, or every loaded one
/// except the embedded opt-in ones.
fn select(
    plugins: &PluginSet,
    kind: PluginKind,
    names: Option<&[String]>,
    key: &'static str,
) -> Result<Vec<Arc<Plugin>>> {
    let Some(names) = names else {
        return Ok(plugins
            .of_kind(kind)
            .filter(|p| !p.info().opt_in)
            .cloned()
            .collect());
    };
    names
        .iter()
        .map(|name| match plugins.get(name) {
            Some(p) if p.kind() == kind => Ok(p.clone()),
            Some(p) => Err(Error::WrongKind {
                key,
                name: name.clone(),
                actual: p.kind().with_article(),
                wanted: kind.with_article(),
            }),
            None => Err(Error::NotLoaded {
                key,
                name: name.clone(),
                kind,
                loaded: plugins
                    .of_kind(kind)
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reuse_of(config: &str) -> Vec<(String, bool)> {
        let config = Config::from_json(config, "t.json").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let set = load_plugins(&config, dir.path(), None).unwrap();
        set.plugins()
            .iter()
            .filter(|p| matches!(p.kind(), PluginKind::Annotator | PluginKind::Validator))
            .map(|p| (p.name().to_owned(), p.limits().reuse_instance))
            .collect()
    }

    #[test]
    fn result_guards_default_to_the_secret_redactor_and_are_checked_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_json("{}", "t.json").unwrap();
        let set = load_plugins(&config, dir.path(), None).unwrap();
        let chosen = select(&set, PluginKind::ResultGuard, None, "plugins.guards").unwrap();
        let names: Vec<&str> = chosen.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["secret-redactor"], "injection-marker is opt-in");
        let named = ["injection-marker".to_owned()];
        let chosen = select(
            &set,
            PluginKind::ResultGuard,
            Some(&named),
            "plugins.guards",
        );
        assert_eq!(chosen.unwrap()[0].name(), "injection-marker");
        let wrong = ["intent-matrix".to_owned()];
        let err = select(
            &set,
            PluginKind::ResultGuard,
            Some(&wrong),
            "plugins.guards",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "plugins.guards names 'intent-matrix', which is a validator plugin, not a result guard"
        );
    }

    #[test]
    fn the_stateless_embedded_plugins_reuse_instances_unless_the_config_says() {
        // By default: the embedded policy plugins keep nothing between calls, so reuse.
        assert!(
            reuse_of("{}").iter().all(|(_, reuse)| *reuse),
            "{:?}",
            reuse_of("{}")
        );
        // The operator's choice wins, per plugin or for all.
        let one = reuse_of(
            r#"{"plugins": {"plugin_limits": {"intent-matrix": {"reuse_instance": false}}}}"#,
        );
        assert!(
            one.contains(&("intent-matrix".to_owned(), false)),
            "{one:?}"
        );
        assert!(
            one.contains(&("prefix-annotator".to_owned(), true)),
            "{one:?}"
        );
        let all = reuse_of(r#"{"plugins": {"limits": {"reuse_instance": false}}}"#);
        assert!(all.iter().all(|(_, reuse)| !*reuse), "{all:?}");
    }
}

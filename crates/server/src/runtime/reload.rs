//! Plugins live: the policy plugins (annotators, validators and result guards) loaded again
//! from the embedded set and `--plugins DIR`, checked, and put in force in the running
//! proxy whole, never half: a set that fails to load, names a plugin that is not there, or
//! faults on a probe call is refused, and the set in force keeps judging. A call already
//! being judged finishes on the set it started with (the proxy hands each call the pipeline
//! in force when it arrives, and each answer the guards in force when it comes back).
//!
//! The scanner and the sinks are not swapped: they take a restart.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mcpproxy_plugin_host::PluginKind;
use mcpproxy_policy::{OperationType, Pipeline, Tool};

use crate::proxy::Proxy;
use mcpproxy_config::Config;

/// What a reload put in force.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Reloaded {
    /// `name version` of each annotator, in order.
    pub annotators: Vec<String>,
    /// `name version` of each validator, in order.
    pub validators: Vec<String>,
    /// `name version` of each result guard, in order.
    pub guards: Vec<String>,
}

/// Why a reload was refused (the set in force keeps judging).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the new plugin set did not load: {0}; the plugins in force keep judging")]
    Load(#[source] Box<super::Error>),
    #[error(
        "the new plugin set faulted on a probe call ({0}); it was not put in force and the plugins in force keep judging"
    )]
    Probe(String),
    /// The config file, read again for its `plugins` lists, is not valid.
    #[error("{0}; nothing was reloaded and the plugins in force keep judging")]
    Config(String),
}

impl Reloaded {
    /// What `annotators`, `validators` and `guards` are, as a reload reports them.
    pub fn of(
        annotators: &[Arc<mcpproxy_plugin_host::Plugin>],
        validators: &[Arc<mcpproxy_plugin_host::Plugin>],
        guards: &[Arc<mcpproxy_plugin_host::Plugin>],
    ) -> Self {
        let names = |ps: &[Arc<mcpproxy_plugin_host::Plugin>]| {
            ps.iter()
                .map(|p| format!("{} {}", p.name(), p.info().version))
                .collect()
        };
        Self {
            annotators: names(annotators),
            validators: names(validators),
            guards: names(guards),
        }
    }
}

/// Reloads the policy plugins of one running proxy.
pub struct Reloader {
    config: Config,
    data_dir: PathBuf,
    plugins_dir: Option<PathBuf>,
    proxy: Arc<Proxy>,
    /// One reload at a time (a watch and a person may ask at once).
    running: Mutex<()>,
    /// The config file (and the home for its `~`), read again at each reload for its
    /// `plugins` lists: an edit of `plugins.validators` takes effect at the next reload.
    config_file: Option<(PathBuf, Option<PathBuf>)>,
    /// The plugins in force: what the proxy started with, then what each reload put in
    /// force (`GET /api/v1/plugins`).
    in_force: Mutex<Reloaded>,
}

impl Reloader {
    pub fn new(
        config: Config,
        data_dir: PathBuf,
        plugins_dir: Option<PathBuf>,
        proxy: Arc<Proxy>,
    ) -> Self {
        let plugins_dir = plugins_dir.or_else(|| config.plugins.dir.clone());
        Self {
            config,
            data_dir,
            plugins_dir,
            proxy,
            running: Mutex::new(()),
            config_file: None,
            in_force: Mutex::new(Reloaded {
                annotators: Vec::new(),
                validators: Vec::new(),
                guards: Vec::new(),
            }),
        }
    }

    /// Reads `path` again at each reload for its `plugins` lists (`home` expands its `~`).
    #[must_use]
    pub fn following(mut self, path: Option<PathBuf>, home: Option<PathBuf>) -> Self {
        self.config_file = path.map(|path| (path, home));
        self
    }

    /// The plugins the proxy started with.
    #[must_use]
    pub fn starting_with(self, in_force: Reloaded) -> Self {
        *mcpproxy_support::lock(&self.in_force) = in_force;
        self
    }

    /// The plugins in force now.
    pub fn in_force(&self) -> Reloaded {
        mcpproxy_support::lock(&self.in_force).clone()
    }

    /// The plugins dir this reloader loads from, if any (what a watch follows).
    pub fn plugins_dir(&self) -> Option<&std::path::Path> {
        self.plugins_dir.as_deref()
    }

    /// Loads, checks and puts in force the policy plugins (blocking: compiles what changed).
    pub fn reload(&self) -> Result<Reloaded, ReloadError> {
        let _one = mcpproxy_support::lock(&self.running);
        let failed = |e: super::Error| ReloadError::Load(Box::new(e));
        let plugins =
            super::load_plugins(&self.config, &self.data_dir, self.plugins_dir.as_deref())
                .map_err(|e| failed(e.into()))?;
        // The lists as the file says them now (an edit since the start included); the
        // plugins dir and the settings stay as the proxy started with.
        let reread;
        let picks = match &self.config_file {
            Some((path, home)) => {
                reread = mcpproxy_config::load(Some(path), home.as_deref())
                    .map_err(|e| ReloadError::Config(e.to_string()))?
                    .config
                    .plugins;
                &reread
            }
            None => &self.config.plugins,
        };
        let annotators = super::select(
            &plugins,
            PluginKind::Annotator,
            picks.annotators.as_deref(),
            "plugins.annotators",
        )
        .map_err(failed)?;
        let validators = super::select(
            &plugins,
            PluginKind::Validator,
            picks.validators.as_deref(),
            "plugins.validators",
        )
        .map_err(failed)?;
        let guards = super::select(
            &plugins,
            PluginKind::ResultGuard,
            picks.guards.as_deref(),
            "plugins.guards",
        )
        .map_err(failed)?;
        let result_guards =
            mcpproxy_policy::Guards::new(mcpproxy_plugin_host::result_guards(&guards));
        probe_guards(&result_guards)?;
        let metrics = self.proxy.metrics();
        let pipeline = Pipeline::new(
            crate::metrics::timed_annotators(
                mcpproxy_plugin_host::annotators(&annotators),
                metrics,
            ),
            crate::metrics::timed_validators(
                mcpproxy_plugin_host::validators(&validators),
                metrics,
            ),
        );
        probe(&pipeline)?;
        self.proxy.replace_pipeline(Arc::new(pipeline));
        self.proxy.replace_guards(Arc::new(result_guards));
        let reloaded = Reloaded::of(&annotators, &validators, &guards);
        *mcpproxy_support::lock(&self.in_force) = reloaded.clone();
        tracing::info!(
            "plugins reloaded: annotators {:?}, validators {:?}, result guards {:?}",
            reloaded.annotators,
            reloaded.validators,
            reloaded.guards
        );
        Ok(reloaded)
    }
}

/// One call of a harmless made-up tool through every stage: a stage that traps, runs past
/// its deadline or fails to start faults here, before it judges a real call.
fn probe(pipeline: &Pipeline) -> Result<(), ReloadError> {
    let tool: Tool = serde_json::from_value(serde_json::json!({
        "server": "mcpproxy",
        "name": "reload_probe",
        "description": "Returns the server's status.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true},
    }))
    .map_err(|e| ReloadError::Probe(e.to_string()))?;
    let evaluation = pipeline.evaluate(OperationType::Read, tool, None, serde_json::json!({}));
    match evaluation.fault {
        Some(fault) => Err(ReloadError::Probe(fault.detail)),
        None => Ok(()),
    }
}

/// A harmless made-up answer through every result guard: a guard that traps or runs past
/// its deadline faults here, before it guards a real answer.
fn probe_guards(guards: &mcpproxy_policy::Guards) -> Result<(), ReloadError> {
    let context = mcpproxy_policy::GuardContext {
        kind: mcpproxy_policy::ResultKind::ToolResult,
        server: "mcpproxy".to_owned(),
        name: "reload_probe".to_owned(),
        variant: Some(OperationType::Read),
        intent: None,
        annotations: None,
    };
    let guarded = guards.run(
        &context,
        vec![mcpproxy_policy::GuardItem::text("status: ok")],
    );
    match guarded.withheld {
        Some(withheld) if withheld.fault.is_some() => Err(ReloadError::Probe(withheld.message)),
        _ => Ok(()),
    }
}

/// How long the plugins dir must be quiet before a watch reloads (a copy is several events).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// Reloads whenever a `*.wasm` file in the plugins dir changes, until `shutdown`; a refused
/// set is logged and the plugins in force keep judging. No plugins dir: nothing to watch.
pub fn watch(
    reloader: Arc<Reloader>,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), notify::Error> {
    let Some(dir) = reloader.plugins_dir().map(std::path::Path::to_owned) else {
        return Ok(());
    };
    let wasm = |p: &std::path::Path| p.extension().is_some_and(|e| e == "wasm");
    let watched = dir.clone();
    crate::watch::watch_dir(&watched, wasm, SETTLE, shutdown, move || {
        let reloader = reloader.clone();
        let dir = dir.clone();
        async move {
            match tokio::task::spawn_blocking(move || reloader.reload()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!("{} changed: {e}", dir.display()),
                Err(e) => tracing::error!("the plugin reload failed: {e}"),
            }
        }
    })
}

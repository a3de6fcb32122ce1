//! Loading plugins and calling them.
//!
//! `Plugin::load` turns component bytes into a ready template: compile (or hit the cache),
//! tell the world from the exports, type-check it against that world, ask it who it is.
//! Each call then instantiates the template in a fresh store under the plugin's limits,
//! so calls never share state and a faulted instance is simply dropped. A plugin whose
//! settings ask for [`PluginSettings::reuse_instance`] keeps warm instances instead (see
//! [`WarmPool`]). `PluginSet::load` gathers the embedded defaults and a `--plugins` directory.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{Component, InstancePre};
use wasmtime::{Store, Trap};

use mcpproxy_activity::SinkBatch;
use mcpproxy_policy::Grant;
use mcpproxy_policy::is_plugin_name;
use mcpproxy_policy::{CallRequest, Caller, Inference, Tool, Verdict};

use super::bindings::{
    ANNOTATOR_EXPORT, AnnotatorPlugin, AnnotatorPluginPre, METADATA_EXPORT, NDJSON_SINK_EXPORT,
    SCANNER_EXPORT, SINK_EXPORT, ScannerPlugin, ScannerPluginPre, VALIDATOR_EXPORT,
    ValidatorPlugin, ValidatorPluginPre, wit_metadata, wit_scanner, wit_types,
};
use super::embedded::EMBEDDED;
use super::engine::PluginEngine;
use super::host::PluginCtx;
use super::limits::MemoryCapExceeded;
use super::sink::{SinkRunner, SinkWorld, WarmSink};
use super::slots::{SLOT_WAIT, is_pool_exhausted};
use super::warm_pool::{Warm, WarmPool};
use super::{CacheOutcome, CallFault, Error, PluginFault, PluginInfo, PluginKind, PluginSource};
use mcpproxy_policy::Limits;

/// The deadline of the `metadata.info()` call that identifies a plugin at load. Loading is
/// once per start, on no call's path: a heavy guest (a Python or JavaScript runtime) may
/// take longer to start than a call's deadline allows, more so in a debug build.
pub(crate) const LOAD_INFO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What the operator configured for one plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSettings {
    /// Deadline, memory cap and instance reuse ([`Limits::reuse_instance`]).
    pub limits: Limits,
    /// The JSON object the plugin's `config()` import returns.
    pub settings: serde_json::Value,
    /// The operator chose `limits.reuse_instance` for this plugin; when false, an embedded
    /// plugin that keeps no state between calls reuses its instances.
    pub reuse_chosen: bool,
}

impl Default for PluginSettings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            settings: serde_json::Value::Object(Default::default()),
            reuse_chosen: false,
        }
    }
}

enum Runner {
    Validator(ValidatorPluginPre<PluginCtx>, WarmPool<ValidatorPlugin>),
    Annotator(AnnotatorPluginPre<PluginCtx>, WarmPool<AnnotatorPlugin>),
    Scanner(ScannerPluginPre<PluginCtx>, WarmPool<ScannerPlugin>),
    Guard(guard::GuardPre, WarmPool<guard::GuardBindings>),
    /// Sinks run with their own linker (WASI and `wasi:http`), see `sink`.
    Sink(SinkRunner),
}

/// A loaded plugin: a pre-instantiated template plus its limits and settings.
pub struct Plugin {
    info: PluginInfo,
    name: Arc<str>,
    engine: PluginEngine,
    runner: Runner,
    limits: Limits,
    settings: Arc<str>,
    /// An embedded plugin that keeps no state between calls.
    stateless_embedded: bool,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("info", &self.info)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A component compiled and identified as a plugin of some world, on its way to being a
/// [`Plugin`]: what loading any world carries along.
struct Compiled<'e> {
    engine: &'e PluginEngine,
    compile: CacheOutcome,
    size_bytes: usize,
    source: PluginSource,
    /// The file (or "the embedded plugin"), for messages.
    origin: String,
    /// The limits of the `metadata.info()` call made while loading, and of later calls
    /// until the plugin is configured.
    limits: Limits,
}

impl Plugin {
    /// Loads one component. `limits` bound the `metadata.info()` call made here.
    pub fn load(
        engine: &PluginEngine,
        bytes: &[u8],
        source: PluginSource,
        limits: Limits,
    ) -> Result<Self, Error> {
        let origin = match &source {
            PluginSource::Embedded => "the embedded plugin".to_owned(),
            PluginSource::File(path) => path.display().to_string(),
        };
        check_header(bytes, &origin)?;
        let (component, compile) = engine.compile(bytes).map_err(|e| Error::Compile {
            origin: origin.clone(),
            reason: format!("{e:#}"),
        })?;
        let exports = exports(engine, &component);
        let kind = kind_from_exports(&exports, &origin)?;
        let compiled = Compiled {
            engine,
            compile,
            size_bytes: bytes.len(),
            source,
            origin: origin.clone(),
            limits,
        };
        if kind == PluginKind::Sink {
            // A component exporting both sink interfaces is run in the faster form.
            let world = if exports
                .iter()
                .any(|name| same_interface(name, NDJSON_SINK_EXPORT))
            {
                SinkWorld::Lines
            } else {
                SinkWorld::Records
            };
            return Self::load_sink(compiled, &component, world);
        }

        let mismatch = |world: &'static str| {
            let origin = origin.clone();
            move |e: wasmtime::Error| Error::WorldMismatch {
                origin,
                world,
                reason: format!("{e:#}"),
            }
        };
        let world = world_name(kind);
        let pre: InstancePre<PluginCtx> = engine
            .linker_for(&component)
            .and_then(|linker| linker.instantiate_pre(&component))
            .map_err(mismatch(world))?;
        let metadata = wit_metadata::GuestIndices::new(&pre).map_err(|e| Error::WorldMismatch {
            origin: origin.clone(),
            world,
            reason: format!("it does not export {METADATA_EXPORT}: {e:#}"),
        })?;
        let runner = match kind {
            PluginKind::Validator => Runner::Validator(
                ValidatorPluginPre::new(pre.clone()).map_err(mismatch(world))?,
                WarmPool::new(),
            ),
            PluginKind::Annotator => Runner::Annotator(
                AnnotatorPluginPre::new(pre.clone()).map_err(mismatch(world))?,
                WarmPool::new(),
            ),
            PluginKind::Scanner => Runner::Scanner(
                ScannerPluginPre::new(pre.clone()).map_err(mismatch(world))?,
                WarmPool::new(),
            ),
            PluginKind::ResultGuard => guard::runner(&pre).map_err(mismatch(world))?,
            PluginKind::Sink => unreachable!("sinks are loaded by load_sink"),
        };

        // Ask the plugin who it is, under the same limits as any call.
        let mut store = engine.new_store(
            PluginCtx::new(
                Arc::from(origin.as_str()),
                Arc::from("{}"),
                limits.memory_bytes,
            ),
            &limits,
        );
        let info = pre
            .instantiate(&mut store)
            .and_then(|instance| metadata.load(&mut store, &instance))
            .and_then(|guest| guest.call_info(&mut store))
            .map_err(|e| Error::Info {
                origin: origin.clone(),
                fault: classify(e, &limits),
            })?;
        Self::assemble(compiled, runner, kind, info)
    }

    /// Loads a sink: type-checked against its sink `world` with the sink linker (WASI and
    /// `wasi:http`), asked who it is with no host granted.
    fn load_sink(
        compiled: Compiled<'_>,
        component: &Component,
        world: SinkWorld,
    ) -> Result<Self, Error> {
        let Compiled {
            engine,
            ref origin,
            limits,
            ..
        } = compiled;
        let runner = SinkRunner::new(engine.sink_linker(), component, world).map_err(|e| {
            Error::WorldMismatch {
                origin: origin.clone(),
                world: world.name(),
                reason: format!("{e:#}"),
            }
        })?;
        let name: Arc<str> = Arc::from(origin.as_str());
        let ctx = runner.store_data(
            PluginCtx::new(name.clone(), Arc::from("{}"), limits.memory_bytes),
            name,
            &limits,
        );
        let mut store = engine.new_sink_store(ctx, &limits);
        let info = runner.info(&mut store).map_err(|e| Error::Info {
            origin: origin.clone(),
            fault: classify(e, &limits),
        })?;
        Self::assemble(compiled, Runner::Sink(runner), PluginKind::Sink, info)
    }

    /// The plugin, once its world is known and it said who it is.
    fn assemble(
        compiled: Compiled<'_>,
        runner: Runner,
        kind: PluginKind,
        info: wit_metadata::PluginInfo,
    ) -> Result<Self, Error> {
        let Compiled {
            engine,
            compile,
            size_bytes,
            source,
            origin,
            limits,
        } = compiled;
        if !is_plugin_name(&info.name) {
            return Err(Error::BadName {
                origin,
                name: info.name,
            });
        }
        Ok(Self {
            name: Arc::from(info.name.as_str()),
            info: PluginInfo {
                name: info.name,
                kind,
                version: info.version,
                description: info.description,
                source,
                size_bytes,
                compile,
                opt_in: false,
            },
            engine: engine.clone(),
            runner,
            limits,
            settings: Arc::from("{}"),
            stateless_embedded: false,
        })
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> PluginKind {
        self.info.kind
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The world the component implements, e.g. `validator-plugin` or `ndjson-sink-plugin`.
    pub fn world(&self) -> &'static str {
        match &self.runner {
            Runner::Sink(sink) => sink.world(),
            _ => world_name(self.kind()),
        }
    }

    /// Whether a call is always cheap: an embedded plugin of ours, which keeps nothing between
    /// calls, on a warm instance (a few microseconds; its deadline bounds even a bug). A
    /// plugin from `--plugins` (any language, any cost) or on fresh instances is not.
    pub fn is_quick(&self) -> bool {
        self.stateless_embedded && self.reuses_instances()
    }

    /// Whether its answers depend only on what it is asked (and its settings, fixed for the
    /// life of this `Plugin`): an embedded plugin of ours that keeps nothing between calls.
    /// Its annotations may be remembered per tool. A plugin from `--plugins` may keep state
    /// (or be random), so it is asked every time.
    pub fn keeps_no_state(&self) -> bool {
        self.stateless_embedded
    }

    /// Whether calls reuse warm instances ([`Limits::reuse_instance`]; never for sinks).
    pub fn reuses_instances(&self) -> bool {
        self.limits.reuse_instance && self.kind() != PluginKind::Sink
    }

    /// Sets the limits, the settings (`config()`) and instance reuse for every later call.
    /// Warm instances made under the old limits are dropped.
    pub fn configure(&mut self, settings: &PluginSettings) {
        self.limits = settings.limits;
        if self.stateless_embedded && !settings.reuse_chosen {
            self.limits.reuse_instance = true;
        }
        self.settings = Arc::from(settings.settings.to_string());
        match &mut self.runner {
            Runner::Validator(_, warm) => warm.clear(),
            Runner::Annotator(_, warm) => warm.clear(),
            Runner::Scanner(_, warm) => warm.clear(),
            Runner::Guard(_, warm) => warm.clear(),
            Runner::Sink(sink) => {
                let (grant, problems) = Grant::from_settings(&settings.settings);
                for problem in problems {
                    tracing::warn!(plugin = %self.name, "sink settings: {problem}");
                }
                sink.set_grant(grant);
            }
        }
    }

    /// The hosts a sink may reach (`None` for other kinds).
    pub fn granted_hosts(&self) -> Option<Vec<String>> {
        match &self.runner {
            Runner::Sink(sink) => Some(sink.grant().authorities().map(str::to_owned).collect()),
            _ => None,
        }
    }

    /// Delivers a batch through a sink plugin under its limits (the deadline bounds the whole
    /// call, HTTP waits included). `Ok(Err(reason))` is the sink saying the batch is not
    /// stored; `Err` is a fault (trap, deadline, memory). A batch gets a fresh instance,
    /// except while a backlog drains: after a stored batch with more records behind it
    /// ([`SinkBatch::more`]) the instance is kept for the next one; a caught-up sink, a
    /// refusal or a fault drops it. Blocking: call it from a blocking thread inside a tokio
    /// runtime (wasi-http's I/O runs on that runtime).
    pub fn deliver(&self, batch: &SinkBatch) -> Result<Result<(), String>, PluginFault> {
        let Runner::Sink(sink) = &self.runner else {
            return Err(self.not_a("a sink"));
        };
        let fault = |e| self.fault(classify(e, &self.limits));
        let mut instance = match sink.take_warm() {
            Some(mut instance) => {
                instance
                    .store
                    .data_mut()
                    .plugin
                    .begin_call(self.settings.clone());
                self.engine.arm_deadline(&mut instance.store, &self.limits);
                instance
            }
            None => {
                let ctx = sink.store_data(
                    PluginCtx::new(
                        self.name.clone(),
                        self.settings.clone(),
                        self.limits.memory_bytes,
                    ),
                    self.name.clone(),
                    &self.limits,
                );
                let mut store = self.engine.new_sink_store(ctx, &self.limits);
                let bindings = sink.instantiate(&mut store).map_err(fault)?;
                WarmSink {
                    store,
                    bindings,
                    lines: Vec::new(),
                }
            }
        };
        let outcome = SinkRunner::deliver(&mut instance, batch).map_err(fault)?;
        if outcome.is_ok() && batch.more {
            instance.store.data_mut().end_call();
            sink.keep_warm(instance);
        }
        Ok(outcome)
    }

    /// Whether a sink holds an instance kept for its next batch.
    #[cfg(test)]
    pub(crate) fn holds_warm_sink(&self) -> bool {
        matches!(&self.runner, Runner::Sink(sink) if sink.has_warm())
    }

    /// Runs the validator on one call with its configured settings.
    pub fn validate(&self, request: &CallRequest) -> Result<Verdict, PluginFault> {
        self.validate_with_settings(request, &self.settings)
    }

    /// Runs the validator with settings given for this call only (used by check suites).
    pub fn validate_with_settings(
        &self,
        request: &CallRequest,
        settings: &str,
    ) -> Result<Verdict, PluginFault> {
        let Runner::Validator(pre, warm) = &self.runner else {
            return Err(self.not_a("a validator"));
        };
        let wit_request = wit_types::CallRequest::from(request);
        self.run(
            Arc::from(settings),
            mcpproxy_policy::current_caller(),
            |store| pre.instantiate(store),
            warm,
            |plugin, store| {
                plugin
                    .mcpproxy_plugin_validator()
                    .call_validate(store, &wit_request)
            },
        )
        .map(Verdict::from)
    }

    /// Asks the annotator about one tool.
    pub fn infer(&self, tool: &Tool) -> Result<Option<Inference>, PluginFault> {
        let Runner::Annotator(pre, warm) = &self.runner else {
            return Err(self.not_a("an annotator"));
        };
        let wit_tool = wit_types::Tool::from(tool);
        self.run(
            self.settings.clone(),
            None,
            |store| pre.instantiate(store),
            warm,
            |plugin, store| {
                plugin
                    .mcpproxy_plugin_annotator()
                    .call_infer(store, &wit_tool)
            },
        )
        .map(|inference| inference.map(Inference::from))
    }

    /// Asks the scanner about one server's tools (`other_tools`: the other servers' tools
    /// as `server:tool`).
    pub fn scan(
        &self,
        tools: &[Tool],
        other_tools: &[String],
    ) -> Result<Vec<wit_scanner::Finding>, PluginFault> {
        let Runner::Scanner(pre, warm) = &self.runner else {
            return Err(self.not_a("a scanner"));
        };
        let wit_tools: Vec<wit_types::Tool> = tools.iter().map(Into::into).collect();
        self.run(
            self.settings.clone(),
            None,
            |store| pre.instantiate(store),
            warm,
            |plugin, store| {
                plugin
                    .mcpproxy_plugin_scanner()
                    .call_scan(store, &wit_tools, other_tools)
            },
        )
    }

    /// Runs one call: in a fresh instance, or, when the plugin reuses instances, in a warm
    /// one (made fresh if none is idle) that goes back to the pool unless the call faulted.
    fn run<B, R>(
        &self,
        settings: Arc<str>,
        caller: Option<Arc<Caller>>,
        instantiate: impl Fn(&mut Store<PluginCtx>) -> wasmtime::Result<B>,
        warm: &WarmPool<B>,
        call: impl FnOnce(&B, &mut Store<PluginCtx>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginFault> {
        let classify = |e| self.fault(classify(e, &self.limits));
        if !self.reuses_instances() {
            let (bindings, mut store) = self.instantiate(settings, &instantiate)?;
            store.data_mut().caller = caller;
            return call(&bindings, &mut store).map_err(classify);
        }
        let mut instance = match warm.take() {
            Some(mut instance) => {
                instance.store.data_mut().begin_call(settings);
                self.engine.arm_deadline(&mut instance.store, &self.limits);
                instance
            }
            None => {
                let (bindings, store) = self.instantiate(settings, &instantiate)?;
                Warm { store, bindings }
            }
        };
        instance.store.data_mut().caller = caller;
        // On a fault `instance` is dropped here, never returned to the pool.
        let result = call(&instance.bindings, &mut instance.store).map_err(classify)?;
        instance.store.data_mut().end_call();
        warm.put(instance);
        Ok(result)
    }

    /// A fresh instance in a fresh store. When every instance slot of the engine is in use,
    /// waits for one (up to [`SLOT_WAIT`]) instead of failing the call at once; the deadline
    /// starts once the instance is being made.
    fn instantiate<B>(
        &self,
        settings: Arc<str>,
        instantiate: &impl Fn(&mut Store<PluginCtx>) -> wasmtime::Result<B>,
    ) -> Result<(B, Store<PluginCtx>), PluginFault> {
        let give_up = Instant::now() + SLOT_WAIT;
        loop {
            let mut store = self.store(settings.clone());
            match instantiate(&mut store) {
                Ok(bindings) => {
                    // Holds a slot now: its drop gives it back and wakes whoever waits for one.
                    let signal = self.engine.slot_signal();
                    signal.taken();
                    store.data_mut().slot_signal = Some(signal.clone());
                    return Ok((bindings, store));
                }
                Err(e) if is_pool_exhausted(&e) => {
                    drop(store);
                    if !self.engine.slot_signal().wait_until(give_up) {
                        return Err(self.fault(CallFault::Overloaded {
                            slots: self.engine.max_instances(),
                            wait: SLOT_WAIT,
                        }));
                    }
                }
                Err(e) => return Err(self.fault(classify(e, &self.limits))),
            }
        }
    }

    fn store(&self, settings: Arc<str>) -> Store<PluginCtx> {
        self.engine.new_store(
            PluginCtx::new(self.name.clone(), settings, self.limits.memory_bytes),
            &self.limits,
        )
    }

    /// The fault of a call made to the wrong kind of plugin.
    fn not_a(&self, kind: &str) -> PluginFault {
        self.fault(CallFault::Instantiate(format!(
            "it is {} plugin, not {kind}",
            self.kind().with_article()
        )))
    }

    fn fault(&self, fault: CallFault) -> PluginFault {
        PluginFault {
            plugin: self.info.name.clone(),
            kind: self.info.kind,
            fault,
        }
    }
}

/// Every loaded plugin: the embedded defaults, then `--plugins DIR`, where a plugin with an
/// embedded plugin's name replaces it.
#[derive(Debug, Default)]
pub struct PluginSet {
    plugins: Vec<Arc<Plugin>>,
}

impl PluginSet {
    /// Loads the embedded plugins and every `*.wasm` in `dir` (in file-name order).
    /// `settings_for` gives each plugin, by name and kind, its limits and settings.
    pub fn load(
        engine: &PluginEngine,
        dir: Option<&Path>,
        settings_for: &dyn Fn(&str, PluginKind) -> PluginSettings,
    ) -> Result<Self, Error> {
        let mut loaded: Vec<Plugin> = Vec::new();
        for embedded in EMBEDDED {
            let mut plugin = Plugin::load(
                engine,
                &embedded.bytes(),
                PluginSource::Embedded,
                // Asking who it is happens once, at load: a loaded machine must not fail it.
                Limits {
                    timeout: LOAD_INFO_TIMEOUT,
                    ..Limits::default()
                },
            )?;
            plugin.info.opt_in = embedded.opt_in;
            plugin.stateless_embedded = embedded.stateless;
            loaded.push(plugin);
        }
        if let Some(dir) = dir {
            let embedded_count = loaded.len();
            for path in wasm_files(dir)? {
                let bytes = std::fs::read(&path).map_err(|source| Error::Read {
                    path: path.clone(),
                    source,
                })?;
                let plugin = Plugin::load(
                    engine,
                    &bytes,
                    PluginSource::File(path.clone()),
                    Limits {
                        timeout: LOAD_INFO_TIMEOUT,
                        ..Limits::default()
                    },
                )?;
                if let Some(pos) = loaded.iter().position(|p| p.name() == plugin.name()) {
                    if pos >= embedded_count {
                        return Err(Error::DuplicateName {
                            name: plugin.info.name.clone(),
                            first: loaded[pos].info.source.to_string(),
                            second: path.display().to_string(),
                        });
                    }
                    tracing::info!(
                        plugin = plugin.name(),
                        path = %path.display(),
                        "replaces the embedded plugin of the same name"
                    );
                    loaded[pos] = plugin;
                } else {
                    loaded.push(plugin);
                }
            }
        }
        let plugins = loaded
            .into_iter()
            .map(|mut plugin| {
                plugin.configure(&settings_for(plugin.name(), plugin.kind()));
                Arc::new(plugin)
            })
            .collect();
        crate::memory::release_freed();
        Ok(Self { plugins })
    }

    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    pub fn of_kind(&self, kind: PluginKind) -> impl Iterator<Item = &Arc<Plugin>> {
        self.plugins.iter().filter(move |p| p.kind() == kind)
    }
}

fn wasm_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, Error> {
    let read_dir_err = |source| Error::ReadDir {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_dir_err)? {
        let path = entry.map_err(read_dir_err)?.path();
        if path.extension().is_some_and(|ext| ext == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Refuses files that are not WebAssembly components before handing them to the compiler,
/// so the message says what the file is.
fn check_header(bytes: &[u8], origin: &str) -> Result<(), Error> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(Error::NotWasm {
            origin: origin.to_owned(),
        });
    }
    // Core modules have layer 0 (version 1); components have layer 1.
    if bytes[6..8] == [0, 0] {
        return Err(Error::CoreModule {
            origin: origin.to_owned(),
        });
    }
    Ok(())
}

/// The names of the component's exports.
fn exports(engine: &PluginEngine, component: &Component) -> Vec<String> {
    component
        .component_type()
        .exports(engine.engine())
        .map(|(name, _)| name.to_owned())
        .collect()
}

fn kind_from_exports(exports: &[String], origin: &str) -> Result<PluginKind, Error> {
    let mut kinds: Vec<PluginKind> = exports
        .iter()
        .filter_map(|name| {
            [
                (VALIDATOR_EXPORT, PluginKind::Validator),
                (ANNOTATOR_EXPORT, PluginKind::Annotator),
                (SINK_EXPORT, PluginKind::Sink),
                (NDJSON_SINK_EXPORT, PluginKind::Sink),
                (SCANNER_EXPORT, PluginKind::Scanner),
                (guard::EXPORT, PluginKind::ResultGuard),
            ]
            .into_iter()
            .find(|(export, _)| same_interface(name, export))
            .map(|(_, kind)| kind)
        })
        .collect();
    // Both sink forms are one kind.
    kinds.sort_by_key(|kind| kind.as_str());
    kinds.dedup();
    match kinds.as_slice() {
        [kind] => Ok(*kind),
        [] => Err(Error::NoWorld {
            origin: origin.to_owned(),
            exports: if exports.is_empty() {
                "nothing".to_owned()
            } else {
                exports.join(", ")
            },
        }),
        several => Err(Error::SeveralWorlds {
            origin: origin.to_owned(),
            kinds: several
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Whether the export `name` is the interface `ours` in a compatible version: the same
/// `package/interface` and the same `0.minor` line, any patch (the contract's versioning
/// rule, docs/plugins.md: `0.1.x` only grows).
fn same_interface(name: &str, ours: &str) -> bool {
    let line = |s: &str| -> Option<(String, String)> {
        let (iface, version) = s.split_once('@')?;
        let mut parts = version.split('.');
        let (major, minor) = (parts.next()?, parts.next()?);
        let line = if major == "0" {
            format!("0.{minor}")
        } else {
            major.to_owned()
        };
        Some((iface.to_owned(), line))
    };
    match (line(name), line(ours)) {
        (Some(a), Some(b)) => a == b,
        _ => name == ours,
    }
}

fn world_name(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Validator => "validator-plugin",
        PluginKind::Annotator => "annotator-plugin",
        PluginKind::Sink => "sink-plugin",
        PluginKind::Scanner => "scanner-plugin",
        PluginKind::ResultGuard => "result-guard-plugin",
    }
}

/// Turns a wasmtime error from instantiation or a call into what a user needs to know.
fn classify(err: wasmtime::Error, limits: &Limits) -> CallFault {
    for cause in err.chain() {
        if let Some(cap) = cause.downcast_ref::<MemoryCapExceeded>() {
            return CallFault::Memory(cap.clone());
        }
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallFault::Deadline(limits.timeout),
        Some(trap) => {
            let text = trap.to_string();
            CallFault::Trap(text.strip_prefix("wasm trap: ").unwrap_or(&text).to_owned())
        }
        None => CallFault::Instantiate(format!("{err:#}")),
    }
}

mod guard;
#[cfg(test)]
mod tests;

//! The wasmtime engine every plugin runs on: component model, pooling allocator, epoch
//! interruption driven by the deadlines of running calls (see `deadline`), and an on-disk
//! cache of compiled components.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, HasSelf, Linker, LinkerInstance, ResourceType};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use super::Error;
use super::bindings::validator_world::ValidatorPlugin;
use super::deadline::{DeadlineTicker, HoldsDeadline};
use super::host::PluginCtx;
use super::sink::{SinkCtx, sink_linker};
use super::slots::SlotSignal;
use mcpproxy_policy::Limits;

/// Instances that may be alive at once across all plugins (one per in-flight plugin call).
/// Each memory slot reserves 4 GiB of address space (no physical memory), so this bounds
/// the engine's virtual footprint at about 2 TiB.
pub(crate) const DEFAULT_MAX_INSTANCES: u32 = 256;

/// What the engine is built with.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Where compiled components are cached; `None` compiles on every start.
    pub cache_dir: Option<PathBuf>,
    /// The largest memory cap any plugin will get (sizes the pooling allocator's slots).
    pub max_memory_bytes: usize,
    /// Concurrent instances the pool holds.
    pub max_instances: u32,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            cache_dir: None,
            max_memory_bytes: Limits::DEFAULT_MEMORY_BYTES,
            max_instances: DEFAULT_MAX_INSTANCES,
        }
    }
}

/// Whether a component came from the compile cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheOutcome {
    /// Loaded precompiled from the cache: no compilation.
    Hit,
    /// Compiled now (and stored, if a cache directory is set).
    Compiled,
}

/// The engine, the base linker, and the compile cache.
#[derive(Clone)]
pub struct PluginEngine {
    engine: Engine,
    /// The engine's configuration, for the throwaway engines that compile (see `precompile`).
    config: Config,
    /// Advances the epoch when a running call's deadline comes.
    ticker: Arc<DeadlineTicker>,
    linker: Linker<PluginCtx>,
    /// Sinks' linker: the host interfaces plus WASI (empty) and `wasi:http`.
    sink_linker: Linker<SinkCtx>,
    cache_dir: Option<PathBuf>,
    engine_hash: u64,
    /// Instances the pool holds at once.
    max_instances: u32,
    /// Wakes calls waiting for an instance slot.
    slot_signal: Arc<SlotSignal>,
}

impl PluginEngine {
    /// Builds the engine and starts its deadline thread (which stops when the engine is
    /// dropped).
    pub fn new(options: EngineOptions) -> Result<Self, Error> {
        let mut pool = PoolingAllocationConfig::default();
        let instances = options.max_instances.max(1);
        pool.total_component_instances(instances)
            .total_core_instances(instances.saturating_mul(8))
            .total_memories(instances.saturating_mul(2))
            .total_tables(instances.saturating_mul(8))
            .max_core_instances_per_component(32)
            .max_memories_per_component(4)
            .max_tables_per_component(16)
            .max_memory_size(options.max_memory_bytes.max(1 << 16));

        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| Error::Engine(format!("{e:#}")))?;

        let mut linker = Linker::new(&engine);
        ValidatorPlugin::add_to_linker::<PluginCtx, HasSelf<PluginCtx>>(&mut linker, |ctx| ctx)
            .map_err(|e| Error::Engine(format!("{e:#}")))?;
        // WASI 0.2 with nothing granted (see `wasi`): language runtimes that import it load.
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| Error::Engine(format!("{e:#}")))?;

        let sink_linker = sink_linker(&engine).map_err(|e| Error::Engine(format!("{e:#}")))?;

        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_hash = hasher.finish();

        let ticker = DeadlineTicker::start(&engine);
        Ok(Self {
            ticker,
            engine,
            config,
            linker,
            sink_linker,
            cache_dir: options.cache_dir,
            engine_hash,
            max_instances: instances,
            slot_signal: Arc::default(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The linker for one component: the host interface and WASI 0.2 with an empty context
    /// (no files, environment or sockets; see `wasi`), plus every other import the
    /// component names (`wasi:http`, say) defined as a function that traps.
    ///
    /// Not `Linker::define_unknown_imports_as_traps`: it looks names up exactly, so a guest
    /// importing `wasi:cli/environment@0.2.6` would get traps in place of the 0.2.x WASI
    /// the linker holds under another patch version.
    pub(crate) fn linker_for(&self, component: &Component) -> wasmtime::Result<Linker<PluginCtx>> {
        let mut linker = self.linker.clone();
        let ty = component.component_type();
        let mut root = linker.root();
        for (name, import) in ty.imports(&self.engine) {
            if !is_linked_interface(name) {
                stub_as_trap(&mut root, name, &import.ty, &self.engine, None)?;
            }
        }
        Ok(linker)
    }

    pub(crate) fn sink_linker(&self) -> &Linker<SinkCtx> {
        &self.sink_linker
    }

    /// Compiles a component, or loads it precompiled from the cache.
    #[allow(
        unsafe_code,
        reason = "wasmtime's deserialisation is unsafe: it trusts the artifact's bytes; \
                  each call below says why these are ours"
    )]
    pub fn compile(&self, bytes: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
        let path = self.cache_path(bytes);
        // Read into memory rather than mapping the file: a mapped file that someone truncates
        // or rewrites in place would crash the process.
        if let Some(path) = &path
            && let Ok(compiled) = std::fs::read(path)
        {
            // SAFETY: the bytes come from our own cache directory (created 0700), from a file
            // named by the SHA-256 of the source component and this engine's compatibility
            // hash, written by `write_cache_entry` and renamed into place atomically.
            // wasmtime checks the header and refuses an artifact of an incompatible engine.
            match unsafe { Component::deserialize(&self.engine, &compiled) } {
                Ok(component) => return Ok((component, CacheOutcome::Hit)),
                Err(e) => tracing::warn!(
                    path = %path.display(),
                    "ignoring unusable compiled-plugin cache entry: {e:#}"
                ),
            }
        }
        let compiled = self.precompile(bytes)?;
        if let Some(path) = &path
            && let Err(e) = write_cache_entry(path, &compiled)
        {
            tracing::warn!(path = %path.display(), "cannot cache compiled plugin: {e}");
        }
        // SAFETY: made just now by an engine of this engine's configuration.
        let component = unsafe { Component::deserialize(&self.engine, &compiled) }?;
        Ok((component, CacheOutcome::Compiled))
    }

    /// Compiles `bytes` on an engine of the same configuration made for it and dropped
    /// after: an engine keeps cranelift's per-function contexts (register allocator buffers
    /// among them) for its whole life, ~10 MiB after compiling the embedded plugins, which a
    /// proxy that compiles only when it loads plugins would hold for nothing.
    fn precompile(&self, bytes: &[u8]) -> wasmtime::Result<Vec<u8>> {
        let compiler = Engine::new(&self.config)?;
        compiler.precompile_component(bytes)
    }

    fn cache_path(&self, bytes: &[u8]) -> Option<PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        let digest = Sha256::digest(bytes);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Some(dir.join(format!("{hex}-{:016x}.cwasm", self.engine_hash)))
    }

    /// Instances the pool holds at once.
    pub fn max_instances(&self) -> u32 {
        self.max_instances
    }

    /// Instances that hold a slot of the pool now: calls running and warm instances kept
    /// for reuse.
    pub fn instances_in_use(&self) -> usize {
        self.slot_signal.held()
    }

    pub(crate) fn slot_signal(&self) -> &Arc<SlotSignal> {
        &self.slot_signal
    }

    /// A store for one call: the plugin's context, its memory cap and its deadline (armed
    /// now: instantiating runs guest code too). End the call with [`PluginCtx::end_call`].
    pub(crate) fn new_store(&self, ctx: PluginCtx, limits: &Limits) -> Store<PluginCtx> {
        let mut store = Store::new(&self.engine, ctx);
        store.limiter(|ctx| &mut ctx.limiter);
        self.arm_deadline(&mut store, limits);
        store
    }

    /// A store for one sink call: its memory cap and its deadline (which, for a sink, also
    /// bounds the time spent waiting on HTTP).
    pub(crate) fn new_sink_store(&self, ctx: SinkCtx, limits: &Limits) -> Store<SinkCtx> {
        let mut store = Store::new(&self.engine, ctx);
        store.limiter(|ctx| &mut ctx.plugin.limiter);
        self.arm_deadline(&mut store, limits);
        store
    }

    /// Starts a new deadline, counted from now: once per call, also on a reused store. The
    /// store's data holds it, watched, until the call ends (`end_call`) or the next one is
    /// armed.
    pub(crate) fn arm_deadline<T: HoldsDeadline + 'static>(
        &self,
        store: &mut Store<T>,
        limits: &Limits,
    ) {
        let armed = self.ticker.arm(store, limits.timeout);
        store.data_mut().hold_deadline(armed);
    }
}

/// Whether `name` (`pkg:ns/interface@version`) is one the plugin linker provides, in any
/// semver-compatible version: the `mcpproxy:plugin` interfaces and WASI 0.2's cli, clocks,
/// filesystem, io, random and sockets.
fn is_linked_interface(name: &str) -> bool {
    if name.starts_with("mcpproxy:plugin/") {
        return true;
    }
    let Some(rest) = name.strip_prefix("wasi:") else {
        return false;
    };
    let Some((package, version)) = rest.split_once('@') else {
        return false;
    };
    let namespace = package.split('/').next().unwrap_or_default();
    matches!(
        namespace,
        "cli" | "clocks" | "filesystem" | "io" | "random" | "sockets"
    ) && version.starts_with("0.2.")
}

/// Defines `name` in `linker` as something that exists and traps when called: a function,
/// an instance of such functions, or a resource type no function can make.
fn stub_as_trap(
    linker: &mut LinkerInstance<'_, PluginCtx>,
    name: &str,
    item: &ComponentItem,
    engine: &Engine,
    parent: Option<&str>,
) -> wasmtime::Result<()> {
    match item {
        ComponentItem::ComponentFunc(_) => {
            let full = match parent {
                Some(parent) => format!("{parent}#{name}"),
                None => name.to_owned(),
            };
            linker.func_new(name, move |_, _, _, _| {
                wasmtime::bail!("`{full}` is not available to plugins")
            })
        }
        ComponentItem::ComponentInstance(instance) => {
            let mut inner = linker.instance(name)?;
            for (export, item) in instance.exports(engine) {
                stub_as_trap(&mut inner, export, &item.ty, engine, Some(name))?;
            }
            Ok(())
        }
        ComponentItem::Resource(_) => {
            linker.resource(name, ResourceType::host::<()>(), |_, _| Ok(()))
        }
        _ => Ok(()),
    }
}

/// Writes a compiled component into the cache: only its owner may read or change it (it is
/// native code this process runs), 0700 directories and 0600 files whatever the umask.
fn write_cache_entry(path: &Path, compiled: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        mcpproxy_support::create_private_dir(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    mcpproxy_support::create_private_file(&tmp)?.write_all(compiled)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linked_interfaces_are_recognised_in_any_compatible_version() {
        assert!(is_linked_interface("wasi:cli/environment@0.2.6"));
        assert!(is_linked_interface("wasi:filesystem/preopens@0.2.0"));
        assert!(is_linked_interface("mcpproxy:plugin/host@0.1.0"));
        assert!(is_linked_interface("mcpproxy:plugin/host@0.1.1"));
        assert!(!is_linked_interface("wasi:http/outgoing-handler@0.2.6"));
        assert!(!is_linked_interface("wasi:cli/environment@0.3.0"));
        assert!(!is_linked_interface("wasi:keyvalue/store@0.2.0-draft"));
        assert!(!is_linked_interface("other:pkg/iface"));
    }
}
